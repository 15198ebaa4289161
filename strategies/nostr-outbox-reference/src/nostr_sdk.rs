//! `nostr_sdk`: what a nostr-sdk `Client` with its in-memory gossip engine
//! (`nostr-gossip-memory` 0.45.1) asks when it reads a feed of `authors`.
//!
//! For a filter naming authors, the client asks the engine per author for its best `Write`
//! relays (limit 3: `GossipRelayLimits::write_relays_per_user`), `Hints` (limit 1) and
//! `MostReceived` (limit 1), and sends the author to every relay in the union. The engine:
//!
//! - keeps, per author, the relays of the first seven valid entries of the author's kind:10002
//!   list (`MAX_NIP65_SIZE`), flagged read, write or both;
//! - ranks a flag's relays by the events received from that relay for the author (most
//!   first), then by the last time one was received (most recent first; never received last),
//!   then in the order the relays became known (list order);
//! - `Hints` are relays named in `p` tags of events it processed (a kind:3 list's, for one);
//!   `MostReceived` are relays that delivered any of the author's events.
//!
//! Reproduced here per follow: its declared write relays (the first seven), ranked by learned
//! delivery of the follow's notes (the pair's hits in [`DeliveryStats`](nostr_outbox_core::DeliveryStats),
//! summed shares of its notes per run: the per-follow order of received counts) then in list
//! order, the first `write`; plus the first `hints` of its hinted relays in the table (only a
//! router with `hints = true` has any); plus the `most_received` candidates that delivered most.
//!
//! Differences, each a consequence of what a plan can say:
//!
//! - nostr-sdk has no connection budget. Here, when the union of the follows' relays exceeds
//!   it, the relays given to the most follows are kept (ties by URL), as `direct` cuts;
//!   follows left with none are the residual.
//! - The engine's seven-entry cut counts read-only entries too; a route table keeps write
//!   entries only, so a list with read-only entries among its first seven keeps up to that
//!   many more write relays here than there.
//! - The engine counts the kind:10002 list itself as an event received from the relay it came
//!   from, so `MostReceived` names that relay (the reader's or an indexer) for a follow with
//!   nothing else received. A plan asks the reader's relays only about the residual, and a
//!   routed relay must be one the follow lists or was hinted at, so `most_received` is
//!   taken among the follow's candidates only.
//! - Ties of equal learned delivery go to list order, not to the most recent delivery.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{AuthorId, PlanInput, RelayId, Selection, Selector};
use rand::RngCore;

/// nostr-sdk's default write relays per author (`GossipRelayLimits::write_relays_per_user`).
pub const DEFAULT_NOSTR_SDK_WRITE: usize = 3;
/// nostr-sdk's default hinted relays per author (`hint_relays_per_user`).
pub const DEFAULT_NOSTR_SDK_HINTS: usize = 1;
/// nostr-sdk's default most-received relays per author (`most_used_relays_per_user`).
pub const DEFAULT_NOSTR_SDK_MOST_RECEIVED: usize = 1;
/// The list entries the in-memory engine keeps per author (`MAX_NIP65_SIZE`).
pub const NOSTR_SDK_LIST_ENTRIES: usize = 7;

/// The largest per-author limit accepted (nostr-sdk's limits are `u8`).
const MAX_LIMIT: usize = 255;

/// `[strategy] type = "nostr_sdk"`: nostr-sdk's per-author limits.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", default, deny_unknown_fields)]
pub struct NostrSdkConfig {
    /// Write relays per follow (`write_relays_per_user`).
    pub write: usize,
    /// Hinted relays per follow (`hint_relays_per_user`).
    pub hints: usize,
    /// Relays that delivered most per follow (`most_used_relays_per_user`).
    pub most_received: usize,
}

impl Default for NostrSdkConfig {
    fn default() -> Self {
        Self {
            write: DEFAULT_NOSTR_SDK_WRITE,
            hints: DEFAULT_NOSTR_SDK_HINTS,
            most_received: DEFAULT_NOSTR_SDK_MOST_RECEIVED,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "nostr_sdk",
    summary: "nostr-sdk 0.45's gossip read with its in-memory engine: per follow, 3 write relays by delivery then list order, a hint, the most received",
    impl StrategyConfig for NostrSdkConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            let mut issues = Vec::new();
            for (key, value) in [
                ("write", self.write),
                ("hints", self.hints),
                ("most_received", self.most_received),
            ] {
                if value > MAX_LIMIT {
                    issues.push(ConfigIssue::new(
                        key,
                        format!("must be at most {MAX_LIMIT}, got {value}"),
                    ));
                }
            }
            if self.write + self.hints + self.most_received == 0 {
                issues.push(ConfigIssue::new(
                    "write",
                    "write, hints and most_received are all 0: nobody would be routed",
                ));
            }
            issues
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(NostrSdk::new(self))
        }
    }
}

/// The `nostr_sdk` strategy's selector.
#[derive(Clone, Copy, Debug)]
pub struct NostrSdk {
    write: usize,
    hints: usize,
    most_received: usize,
}

impl NostrSdk {
    /// The selector for `config` (limits above nostr-sdk's `u8` are cut to 255).
    pub fn new(config: &NostrSdkConfig) -> Self {
        Self {
            write: config.write.min(MAX_LIMIT),
            hints: config.hints.min(MAX_LIMIT),
            most_received: config.most_received.min(MAX_LIMIT),
        }
    }

    /// The relays nostr-sdk gives `author` (before any budget): write, hinted and most
    /// received, without repeats, in that order.
    pub fn author_relays(&self, input: &PlanInput<'_>, author: AuthorId) -> Vec<RelayId> {
        let table = input.table;
        let delivered = |relay: RelayId| -> f64 {
            input
                .stats
                .author(table.pubkey(author))
                .and_then(|a| a.relays.get(table.url(relay)))
                .map_or(0.0, |p| p.hits)
        };
        // Most delivered first; the sort is stable, so list order breaks ties.
        let ranked = |relays: &[RelayId]| -> Vec<RelayId> {
            let mut ranked: Vec<(f64, RelayId)> =
                relays.iter().map(|&r| (delivered(r), r)).collect();
            ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
            ranked.into_iter().map(|(_, r)| r).collect()
        };
        let declared = table.write_relays(author);
        let declared = &declared[..declared.len().min(NOSTR_SDK_LIST_ENTRIES)];
        let mut out: Vec<RelayId> = ranked(declared).into_iter().take(self.write).collect();
        for relay in ranked(table.hint_relays(author))
            .into_iter()
            .take(self.hints)
        {
            if !out.contains(&relay) {
                out.push(relay);
            }
        }
        if self.most_received > 0 {
            let mut candidates: Vec<RelayId> = declared.to_vec();
            candidates.extend_from_slice(table.hint_relays(author));
            let received = ranked(&candidates)
                .into_iter()
                .filter(|&r| delivered(r) > 0.0)
                .take(self.most_received);
            for relay in received {
                if !out.contains(&relay) {
                    out.push(relay);
                }
            }
        }
        out
    }
}

impl Selector for NostrSdk {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.write + self.hints + self.most_received)
    }

    /// Plans read learned delivery, but say they do not learn: nostr-sdk counts only what
    /// the relays it asked sent, so a session is not probed for (probes would rank relays
    /// nostr-sdk never asks).
    fn learns(&self) -> bool {
        false
    }

    fn select(&mut self, input: &PlanInput<'_>, _rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let mut given: Vec<Vec<AuthorId>> = vec![Vec::new(); table.relay_count()];
        for author in table.authors() {
            for relay in self.author_relays(input, author) {
                given[relay.index()].push(author);
            }
        }
        Selection::busiest_first(table, given, input.max_connections)
    }
}

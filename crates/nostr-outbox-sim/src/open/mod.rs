//! The feed left open: after a session's fetch a client keeps its feed open (an hour by
//! default) while notes arrive, relays drop and come back, and follows move to new relays.
//! Every client meets the same hour ([`OpenWorld`], drawn from a stream of its own) and is
//! scored on what it delivered of it and when ([`OpenScore`]), beside the live ceiling.
//!
//! Two behaviours are modelled. This library's strategies run as the runtime's continuing
//! feed is meant to (`feed`): the plan's relays kept subscribed, a dropped relay dialled
//! again with backoff and asked `since` the newest note it delivered, a relay that keeps
//! failing set aside and its follows planned elsewhere after the debounce, every set-aside
//! expiring, a new relay list planned for within seconds, and relays beyond the socket budget
//! polled in turns. The peers' clients ([`PEERS`]) keep the relays they selected open, select
//! again when a list changes, and neither dial a dropped relay again before that nor fill its
//! gap (`peer`).
//!
//! What the feed learns goes through a [`RoundRecorder`] into
//! [`DeliveryStats::record_round`] once it closes: a relay still down then as a failure (a
//! drop it came back from is not one: each session's fetch learns how often a relay answers,
//! and counting blips again would turn the next fetch away from relays that serve it), and
//! each catch-up's answer compare-only (a `since`-bounded answer says the relay answers, not
//! how complete it is).

mod feed;
mod peer;
mod score;
#[cfg(test)]
mod tests;
mod world;

use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::{DeliveryStats, PlanContext, RawRelayList, Router};
use serde::{Deserialize, Serialize};

use crate::asks::Asks;
use crate::clock::ClientTiming;
use crate::sim_world::SimWorld;

pub use score::{ceiling, OpenScore};
pub use world::{FollowChange, LiveNote, Move, OpenModel, OpenWorld};

/// The peers' clients, by registered strategy name: they keep their selection and do not
/// back-fill (`peer`). Every other strategy runs as the runtime's feed.
pub const PEERS: &[&str] = &[
    "applesauce",
    "welshman",
    "nostr_sdk",
    "ndk_priority",
    "direct",
];

/// The window a continuing feed plans its subscriptions for, seconds: the notes to come are
/// written where a follow writes now, which its newest notes show, not its oldest.
pub const LIVE_WINDOW_SECS: u64 = 30 * 86_400;

/// One hour, the default time a feed stays open.
pub const DEFAULT_OPEN_SECS: u64 = 3_600;

/// How long the feed stays open after each session's fetch, and how the network behaves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenConfig {
    /// Seconds the feed stays open.
    pub secs: u64,
    /// The network while it is open.
    #[serde(default)]
    pub model: OpenModel,
    /// Sockets the feed may hold at once; relays beyond are polled in turns. The runtime's
    /// desktop budget less its reserve by default.
    pub sockets: usize,
    /// How often a polled relay gets its turn, seconds.
    pub poll_secs: f64,
    /// From a new list's publication to a client holding it, seconds.
    pub list_secs: f64,
}

impl OpenConfig {
    /// Open for `secs` with the default network and client.
    pub fn for_secs(secs: u64) -> Self {
        Self {
            secs,
            model: OpenModel::default(),
            sockets: ClientTiming::default().lasting_sockets.unwrap_or(28),
            poll_secs: 30.0,
            list_secs: 2.0,
        }
    }
}

impl Default for OpenConfig {
    fn default() -> Self {
        Self::for_secs(DEFAULT_OPEN_SECS)
    }
}

/// Whether a strategy (its label) is one of the peers' clients.
pub fn is_peer(label: &str) -> bool {
    let name = label.split('+').next().unwrap_or(label);
    PEERS.contains(&name)
}

/// One subscription's life on one relay: notes of `authors` that landed there in
/// `[since, start)` arrive at `backfill_at` (when `answered`), those in `[start, end)` as they
/// land.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Segment {
    pub relay: u32,
    /// Sorted follow indices.
    pub authors: Vec<u32>,
    pub since: f64,
    pub start: f64,
    pub backfill_at: f64,
    pub end: f64,
    /// The relay stayed up until the catch-up's answer.
    pub answered: bool,
    /// A poll: a connection for the catch-up only, closed at once.
    pub poll: bool,
}

/// What a client did while the feed was open.
#[derive(Clone, Debug, Default)]
pub(crate) struct Feed {
    pub segments: Vec<Segment>,
    /// REQs sent (subscriptions, catch-ups, polls).
    pub reqs: u64,
    /// Connect attempts, failed ones included.
    pub dials: u64,
    /// Plans made while open.
    pub plans: u64,
}

/// What the open feed needs of its session.
pub(crate) struct Session<'a> {
    pub sim: &'a SimWorld,
    pub open: &'a OpenWorld,
    pub session: u32,
    /// When the feed opened, unix seconds.
    pub now: u64,
    pub ctx: PlanContext,
    pub timing: &'a ClientTiming,
    pub cfg: &'a OpenConfig,
    /// What the session's fetch asked: where the feed starts.
    pub asks: &'a Asks,
    /// What the client knows when it plans again.
    pub stats: &'a DeliveryStats,
}

impl Session<'_> {
    /// Connect time of attempt `n` on `relay`, seconds.
    fn connect(&self, relay: u32, n: u64) -> f64 {
        let url = &self.sim.world.relays()[relay as usize].url;
        self.sim
            .world
            .timing(relay)
            .connect_ms(url, self.session, n)
            / 1_000.0
    }

    /// Query time of REQ `n` on `relay`, seconds.
    fn query(&self, relay: u32, n: u64) -> f64 {
        let url = &self.sim.world.relays()[relay as usize].url;
        let ms = self.sim.world.timing(relay).query_ms(url, self.session, n);
        ms.min(self.timing.eose_timeout_ms) / 1_000.0
    }

    /// What a failed connect attempt costs, seconds.
    fn failure(&self, relay: Option<u32>, n: u64) -> f64 {
        match relay {
            Some(r) if self.sim.world.timing(r).hangs => self.timing.connect_timeout_ms / 1_000.0,
            Some(r) => {
                let url = &self.sim.world.relays()[r as usize].url;
                self.sim.world.timing(r).refuse_ms(url, self.session, n) / 1_000.0
            }
            None => 0.1,
        }
    }

    /// The follows' relay lists as the client holds them `t` seconds after opening: the
    /// world's, with every move published by `t - list_secs` in place.
    fn lists_at(&self, moves_seen: usize) -> Vec<RawRelayList> {
        let mut lists: Vec<RawRelayList> = self.sim.world.raw_lists().collect();
        for m in self.open.moves.iter().take(moves_seen) {
            let Some(&author) = self.sim.world.follows.get(m.author as usize) else {
                continue;
            };
            let tags = (m.relays.iter())
                .map(|&r| {
                    vec![
                        "r".to_string(),
                        self.sim.world.relays()[r as usize].url.clone(),
                    ]
                })
                .collect();
            let created_at = self.now + m.t as u64 + 1;
            lists.retain(|l| l.author != author);
            lists.push(RawRelayList {
                author,
                created_at,
                tags,
            });
        }
        lists
    }

    /// A plan on the lists with `moves_seen` moves known and `aside` relays left out.
    fn plan(
        &self,
        router: &mut Router,
        moves_seen: usize,
        aside: &std::collections::HashSet<&str>,
        t: f64,
    ) -> Option<Asks> {
        let lists = self.lists_at(moves_seen);
        let refs: Vec<&RawRelayList> = lists.iter().collect();
        // The reader's follows at `t`: the table's author ids index this list.
        let followed: Vec<u32> = (0..self.sim.world.follows.len() as u32)
            .filter(|&a| self.open.follows(a, t))
            .collect();
        let keys: Vec<nostr::key::PublicKey> = (followed.iter())
            .map(|&a| self.sim.world.follows[a as usize])
            .collect();
        let network = nostr_outbox_client::Network {
            policy: &self.sim.policy,
            follows: &keys,
            readers: &self.sim.world.reader_relays,
            fallback: &[],
            lists: &refs,
            routed_carriers: 2,
        };
        let hints = if router.hints() {
            self.sim.client_hints(self.stats)
        } else {
            Vec::new()
        };
        let at = self.now + t as u64;
        let (table, _) = network.table_with_hints(aside, self.stats, at, &hints);
        let ctx = PlanContext {
            now: at,
            ..self.ctx
        };
        let plan = router.try_plan_with(&table, self.stats, ctx).ok()?;
        let mut asks = Asks::from_table_plan(self.sim, &table, &plan);
        for ask in &mut asks.entries {
            for a in &mut ask.authors {
                *a = followed[*a as usize];
            }
            ask.authors.sort_unstable();
        }
        Some(asks)
    }

    /// `asks` with the follows the reader does not follow at `t` left out (relays left asking
    /// about no one dropped).
    fn followed_only(&self, asks: &Asks, t: f64) -> Asks {
        let mut out = asks.clone();
        for ask in &mut out.entries {
            ask.authors.retain(|&a| self.open.follows(a, t));
        }
        out.entries.retain(|a| !a.authors.is_empty());
        out
    }

    /// When the client learns of a list change, in order: a follow's new relay list
    /// `list_secs` after it was published, the reader's own follow list at once.
    fn list_changes(&self) -> Vec<f64> {
        let mut at: Vec<f64> = (self.open.moves.iter())
            .map(|m| m.t + self.cfg.list_secs)
            .chain(self.open.follow_changes.iter().map(|c| c.t))
            .filter(|&t| t < self.open.secs)
            .collect();
        at.sort_by(f64::total_cmp);
        at
    }

    /// The moves a client holds at `t`.
    fn moves_seen(&self, t: f64) -> usize {
        (self.open.moves.iter())
            .take_while(|m| m.t + self.cfg.list_secs <= t)
            .count()
    }
}

/// Keeps the feed open after `session`'s fetch, which asked `asks`: the client behaves as
/// `router`'s strategy does ([`is_peer`]), plans again with `router` and `stats` as it needs,
/// and what it learned is recorded into `stats` at `learn_at`, when it closes. Returns its
/// score on `open`.
#[allow(clippy::too_many_arguments)]
pub fn keep_open(
    sim: &SimWorld,
    open: &OpenWorld,
    session: u32,
    ctx: PlanContext,
    asks: &Asks,
    router: &mut Router,
    stats: &mut DeliveryStats,
    cfg: &OpenConfig,
    timing: &ClientTiming,
    learn_at: u64,
) -> OpenScore {
    let s = Session {
        sim,
        open,
        session,
        now: ctx.now,
        ctx: ctx.window(LIVE_WINDOW_SECS),
        timing,
        cfg,
        asks,
        stats,
    };
    let mut recorder = RoundRecorder::new();
    let peer = is_peer(router.strategy());
    let feed = if peer {
        peer::run(&s, router, &mut recorder)
    } else {
        feed::run(&s, router, &mut recorder)
    };
    if let Some(round) = recorder.take_final_round() {
        stats.record_round(&round, learn_at);
    }
    score::score(open, &feed)
}

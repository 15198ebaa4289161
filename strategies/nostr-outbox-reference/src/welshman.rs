//! `welshman`: the author routing of @welshman/router 0.8.15 as shipped (`getFilterSelections`
//! with its default rules).
//!
//! The follows are dealt round-robin into `round(n / 30)` chunks (at least 1, at most 30), so a
//! chunk holds about 30 follows until there are more than 900. Per chunk, every write relay of
//! its follows gets a weight (how many of the chunk's follows list it), plain `ws://` relays are
//! skipped, and the relays are sorted by `(1 + ln weight) · U(0,1)`, highest first — a fresh
//! draw at every comparison — keeping the first 3 (`getLimit` unset). With a single chunk its
//! filter is the whole author filter, which the shipped code merges with the reader's own read
//! relays at weight 0.2 — those take part in the ordering too.
//!
//! Differences, all forced by the plan model or the bench:
//! - welshman asks each chosen relay about the whole chunk; a plan asks a routed relay only
//!   about follows who write there, so the others of the chunk go unasked there.
//! - welshman also sends the whole filter to up to 3 of the reader's read relays and, when a
//!   chunk finds no relay, to a default relay; here the core's residual on the reader's relays
//!   stands in for both.
//! - The shipped sort draws a fresh `Math.random()` at every comparison; the draws come from
//!   the handed RNG and the comparisons are V8's (exact below 64 relays in a chunk, see
//!   `noisy_sort`).
//! - welshman has no connection budget. Here a chunk's relay that is not routed yet is dropped
//!   once the budget is spent, chunk by chunk in order (no substitute is taken).

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{Assignment, AuthorId, PlanInput, RelayId, Selection, Selector};
use rand::{Rng, RngCore};

use crate::noisy_sort::noisy_sort;

/// welshman's target follows per chunk (`round(n / 30)` chunks).
pub const DEFAULT_WELSHMAN_AUTHORS_PER_CHUNK: usize = 30;
/// welshman's most chunks.
pub const DEFAULT_WELSHMAN_MAX_CHUNKS: usize = 30;
/// welshman's relays per chunk (a scenario's default limit).
pub const DEFAULT_WELSHMAN_RELAYS_PER_CHUNK: usize = 3;
/// The weight of the reader's read relays in the merged single-chunk scenario.
const READER_WEIGHT: f64 = 0.2;
/// Upper bound of every count in the config.
const MAX_SETTING: usize = 10_000;

/// `[strategy] type = "welshman"`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", default, deny_unknown_fields)]
pub struct WelshmanConfig {
    /// Target follows per chunk: `round(follows / authors_per_chunk)` chunks.
    pub authors_per_chunk: usize,
    /// The most chunks.
    pub max_chunks: usize,
    /// Relays chosen per chunk (also the per-author cap).
    pub relays_per_chunk: usize,
}

impl Default for WelshmanConfig {
    fn default() -> Self {
        Self {
            authors_per_chunk: DEFAULT_WELSHMAN_AUTHORS_PER_CHUNK,
            max_chunks: DEFAULT_WELSHMAN_MAX_CHUNKS,
            relays_per_chunk: DEFAULT_WELSHMAN_RELAYS_PER_CHUNK,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "welshman",
    summary: "@welshman/router 0.8.15 as shipped: follows in ~30-author chunks, 3 relays per chunk by (1 + ln weight) · random",
    impl StrategyConfig for WelshmanConfig {
        fn validate(&self) -> Vec<ConfigIssue> {
            [
                ("authors_per_chunk", self.authors_per_chunk),
                ("max_chunks", self.max_chunks),
                ("relays_per_chunk", self.relays_per_chunk),
            ]
            .into_iter()
            .filter_map(|(key, value)| ConfigIssue::unless_within(key, value, MAX_SETTING))
            .collect()
        }

        fn build(&self) -> Box<dyn Selector> {
            Box::new(Welshman {
                authors_per_chunk: self.authors_per_chunk.max(1),
                max_chunks: self.max_chunks.max(1),
                relays_per_chunk: self.relays_per_chunk.max(1),
            })
        }
    }
}

/// The `welshman` strategy's selector.
#[derive(Clone, Copy, Debug)]
pub struct Welshman {
    authors_per_chunk: usize,
    max_chunks: usize,
    relays_per_chunk: usize,
}

/// welshman's weight of a relay: `1 + ln weight`, since the weight is a plain count and would
/// over-weight hubs.
fn damped(weight: f64) -> f64 {
    1.0 + weight.ln()
}

impl Welshman {
    /// How many chunks `follows` are dealt into: JavaScript's `Math.round(follows / per)`,
    /// clamped to `1..=max_chunks`.
    fn chunk_count(&self, follows: usize) -> usize {
        let per = self.authors_per_chunk;
        // round half up of follows / per, in integers.
        let rounded = (2 * follows + per) / (2 * per);
        rounded.clamp(1, self.max_chunks)
    }
}

impl Selector for Welshman {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.relays_per_chunk)
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        let chunks = self.chunk_count(table.follow_count());
        let mut slot: Vec<Option<usize>> = vec![None; table.relay_count()];
        let mut assignments: Vec<Assignment> = Vec::new();
        // Per chunk: relay weights in the order first seen (scratch reused across chunks).
        let mut weight = vec![0f64; table.relay_count()];
        let mut seen: Vec<RelayId> = Vec::new();
        let mut kept: Vec<RelayId> = Vec::new();
        let mut members: Vec<AuthorId> = Vec::new();

        for chunk in 0..chunks {
            for &relay in &seen {
                weight[relay.index()] = 0.0;
            }
            seen.clear();
            members.clear();
            members.extend(table.authors().skip(chunk).step_by(chunks));
            let mut add = |relay: RelayId, w: f64, seen: &mut Vec<RelayId>| {
                if table.url(relay).starts_with("ws://") {
                    return;
                }
                if weight[relay.index()] == 0.0 {
                    seen.push(relay);
                }
                weight[relay.index()] += w;
            };
            for &author in &members {
                for &relay in table.write_relays(author) {
                    add(relay, 1.0, &mut seen);
                }
            }
            if chunks == 1 {
                for &relay in table.reader_relays() {
                    add(relay, READER_WEIGHT, &mut seen);
                }
            }

            // The shipped filter draws once per relay, in the order first seen, and drops
            // those whose score is 0 (or not a number); the sort then draws afresh at every
            // comparison.
            kept.clear();
            for &relay in &seen {
                let draw: f64 = rng.random();
                let score = damped(weight[relay.index()]) * draw;
                if score != 0.0 && !score.is_nan() {
                    kept.push(relay);
                }
            }
            noisy_sort(&mut kept, |r: RelayId| damped(weight[r.index()]), rng);

            for &relay in kept.iter().take(self.relays_per_chunk) {
                // A relay picked only for the reader's weight has no writer in the chunk: the
                // residual on the reader's relays covers what welshman would ask there.
                let writers = members
                    .iter()
                    .copied()
                    .filter(|&a| table.writes_to(a, relay));
                let index = match slot[relay.index()] {
                    Some(i) => i,
                    None if assignments.len() < input.max_connections => {
                        let authors: Vec<AuthorId> = writers.collect();
                        if authors.is_empty() {
                            continue;
                        }
                        assignments.push(Assignment { relay, authors });
                        slot[relay.index()] = Some(assignments.len() - 1);
                        continue;
                    }
                    None => continue,
                };
                assignments[index].authors.extend(writers);
            }
        }
        for a in &mut assignments {
            a.authors.sort_unstable();
        }
        Selection { assignments }
    }
}

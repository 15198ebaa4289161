//! What one planning run believes: per relay and per (relay, author) delivery chances, and per
//! author a weight, drawn or averaged from the learned stats.

use std::collections::HashMap;
use std::sync::Arc;

use nostr_outbox_core::stats::share_younger;
use nostr_outbox_core::{AuthorId, AuthorStats, DeliveryStats, PlanInput, RelayId, RouteTable};
use nostr_outbox_kit::sample_beta;
use rand::RngCore;

use crate::RecallConfig;

/// Evidence below this many (fractional) observations leaves a pair to the relay-wide prior.
const MIN_PAIR_EVIDENCE: f64 = 0.5;

/// Summed misses at or below which a pair seen answering is taken to hold every note its
/// follow's other relays returned beside it (misses are shares of what the round's relays
/// returned together, so one round missing a twentieth of them is enough to say otherwise).
const COMPLETE_MISSES: f64 = 0.05;

/// What a follow's relay was seen to hold of its notes, against the follow's other relays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proof {
    /// Never seen answering about the follow.
    #[default]
    Unseen,
    /// Seen, and lacking notes another relay returned.
    Partial,
    /// Seen, and lacking none of the notes the relays asked beside it returned.
    Complete,
}

/// One run's beliefs, indexed by route-table ids. Rebuilt every run (tables change between
/// runs); allocation is reused.
#[derive(Debug, Default)]
pub struct Model {
    /// Per author: what its notes of each age are worth.
    worth: Vec<Worth>,
    /// Per author: how much its notes are worth.
    weight: Vec<f64>,
    /// Per author: answering relays were asked about it and returned none of its notes.
    silent: Vec<bool>,
    /// Per author: whether any relay it may be routed to was ever asked (pair or relay
    /// evidence for it).
    learned_author: Vec<bool>,
    /// Per relay: what it would add to a plan holding nothing.
    alone: Vec<f64>,
    /// The same chances in relay order, parallel to `RouteTable::writers(relay)`.
    relay_offsets: Vec<u32>,
    relay_q: Vec<f64>,
    relay_u: Vec<f64>,
    /// What each pair was seen to hold, parallel to `relay_q`.
    relay_proof: Vec<Proof>,
    /// Scratch, kept between runs so large buffers are not mapped afresh every plan: per relay,
    /// the learned (live α, live β, kept α, kept β) if the relay was ever asked.
    learned: Vec<Option<[f64; 4]>>,
    /// Scratch: per relay never asked, the pseudo-observations (live α − 1, live β − 1) a
    /// liveness prior seeded it with (a relay monitor's report), if any.
    seeded: Vec<Option<[f64; 2]>>,
    live: Vec<f64>,
    kept: Vec<f64>,
    /// Per relay: how far back its history reaches, seconds (infinite: not known yet).
    depth: Vec<f64>,
    /// Scratch: one author's (q, u) per write relay while its chances are worked out.
    chances: Vec<(f64, f64)>,
    /// Scratch: one author's proof per write relay, parallel to `chances`.
    proofs: Vec<Proof>,
    /// Scratch: per relay, the next free slot in `relay_q` while laying chances out.
    cursor: Vec<u32>,
    /// Scratch: per pair URL (by the address of its shared string), its relay in the table
    /// (`u32::MAX`: none). Pairs share one string per relay, so each URL is hashed and looked
    /// up once per plan rather than once per pair.
    pair_relay: HashMap<usize, u32, foldhash::fast::RandomState>,
}

/// One author's notes as the planner sees them: spread evenly over the ages `[young, old]`,
/// of which the share `window` lies within the planned window.
///
/// `old` is the oldest note seen, unless no relay asked about the author reaches further back
/// than that (only pruning relays were asked): then its history is taken to go back as far as
/// the deepest relay known (`horizon`), at the rate seen, and `scale` says how many more notes
/// that is than were seen. A prolific author seen only on a relay that keeps a month is
/// worth probing a deep relay for.
#[derive(Clone, Copy, Debug)]
struct Reach {
    young: f64,
    old: f64,
    /// Share of the author's notes within the planned window (1 when the ages are unknown).
    window: f64,
    /// The author's notes over `[young, old]` per note seen.
    scale: f64,
    /// The author posted within the last week (or nothing is known yet).
    active: bool,
}

/// What one author's notes are worth, by age (share of its notes, youngest first).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Worth {
    /// Share of the author's notes within the planned window (each counts 1).
    pub window: f64,
    /// What each older note counts.
    pub beyond: f64,
    /// What the author's newest notes count on top, as a share of the author's notes: a feed
    /// shows this week first, so an author whose relays all miss this run costs that much.
    pub recent: f64,
}

impl Worth {
    /// What the author's notes with age shares in `[lo, hi]` are worth together.
    pub(crate) fn weigh(&self, lo: f64, hi: f64) -> f64 {
        let w = self.window;
        (hi.min(w) - lo.min(w)) + self.beyond * (hi.max(w) - lo.max(w))
    }

    /// What a relay with chance `q` of returning the author's notes up to age share `u` adds
    /// alone.
    #[inline]
    pub(crate) fn alone(&self, q: f64, u: f64) -> f64 {
        if q <= 0.0 || u <= 0.0 {
            return 0.0;
        }
        q * (self.weigh(0.0, u) + self.recent)
    }
}

/// The age, seconds, of the oldest notes the plan is for: the fetch's own window when the
/// input says it (and `windowed`), else `window_days` (0: any age).
pub fn planned_window(input: &PlanInput<'_>, config: &RecallConfig) -> f64 {
    match input.window_secs.filter(|_| config.windowed) {
        Some(secs) => secs as f64,
        None => config.window_days * 86_400.0,
    }
}

/// The shortest span a posting rate is measured over (the one learning reads a capped page's
/// rate over too).
const MIN_SPAN_SECS: f64 = nostr_outbox_core::stats::MIN_RATE_SPAN_SECS;

impl Reach {
    const UNKNOWN: Reach = Reach {
        young: 0.0,
        old: 0.0,
        window: 1.0,
        scale: 1.0,
        active: true,
    };

    fn new(stats: &AuthorStats, now: u64, window_secs: f64, horizon: f64) -> Self {
        if stats.last == 0 || stats.first > stats.last {
            return Self::UNKNOWN;
        }
        let young = now.saturating_sub(stats.last) as f64;
        let seen_old = now.saturating_sub(stats.first) as f64;
        // Cut off by the relays asked, not by the author's start.
        let old = if stats.censored(now) {
            seen_old.max(horizon)
        } else {
            seen_old
        };
        let seen_span = (seen_old - young).max(MIN_SPAN_SECS);
        let mut reach = Self {
            young,
            old,
            window: 1.0,
            scale: ((old - young).max(MIN_SPAN_SECS) / seen_span).max(1.0),
            active: young <= MIN_SPAN_SECS,
        };
        if window_secs > 0.0 {
            reach.window = reach.share(window_secs);
        }
        reach
    }

    /// The share of the author's notes younger than `age` seconds.
    fn share(&self, age: f64) -> f64 {
        share_younger(age, self.young, self.old)
    }
}

impl Model {
    /// Builds the beliefs for `input`. Draws come from `rng` in relay-id order, once per relay.
    ///
    /// One pass over the follows reads all it needs of each one's stats (reach, volume, pair
    /// evidence) while they are in cache, lays the chances out relay by relay, and sums what
    /// each relay would add alone ([`alone`](Self::alone)).
    pub fn build(&mut self, input: &PlanInput<'_>, config: &RecallConfig, rng: &mut dyn RngCore) {
        let table = input.table;
        let stats = input.stats;
        self.relay_beliefs(table, stats, input.now, config, rng);
        let (live, kept) = (
            std::mem::take(&mut self.live),
            std::mem::take(&mut self.kept),
        );
        let window_secs = planned_window(input, config);
        // Notes older than the fetch asks for are never fetched.
        let beyond = if input.window_secs.is_some() && config.windowed {
            0.0
        } else {
            config.beyond_weight
        };
        // As far back as any relay was seen to keep notes: what a fetch can reach.
        let horizon = self
            .depth
            .iter()
            .copied()
            .filter(|d| d.is_finite())
            .fold(0.0, f64::max);
        self.lay_out_relays(table);
        let mut cursor = std::mem::take(&mut self.cursor);
        let mut pair_relay = std::mem::take(&mut self.pair_relay);
        pair_relay.clear();
        let mut chances = std::mem::take(&mut self.chances);
        let mut proofs = std::mem::take(&mut self.proofs);
        self.worth.clear();
        self.weight.clear();
        self.silent.clear();
        self.learned_author.clear();
        self.alone.clear();
        self.alone.resize(table.relay_count(), 0.0);

        // Every follow's stats looked up first, in a loop with little else in it, so the
        // processor overlaps the lookups' cache misses instead of taking them one by one; the
        // average volume (summed in author order) is known before any weight is needed.
        let (mut volume_sum, mut volumes) = (0.0, 0usize);
        let found: Vec<Option<&AuthorStats>> = table
            .authors()
            .map(|author| {
                let learned = stats.author(table.pubkey(author));
                if let Some(s) = learned.filter(|s| s.volume > 0.0) {
                    volume_sum += s.volume;
                    volumes += 1;
                }
                learned
            })
            .collect();
        let average = if volumes == 0 {
            1.0
        } else {
            volume_sum / volumes as f64
        };
        for (author, learned) in table.authors().zip(found) {
            let reach = match learned {
                Some(s) if config.depth => Reach::new(s, input.now, window_secs, horizon),
                _ => Reach::UNKNOWN,
            };
            let worth = Worth {
                window: reach.window,
                beyond,
                recent: if reach.active {
                    config.recent_weight * reach.window
                } else {
                    0.0
                },
            };
            self.worth.push(worth);
            let weight = match learned {
                _ if !config.volume => 1.0,
                Some(s) if s.volume > 0.0 => s.volume * reach.scale,
                Some(_) => config.silent_weight * average,
                None => average,
            };
            self.weight.push(weight);
            self.silent.push(learned.is_some_and(|s| s.volume <= 0.0));

            // Declared write relays, then hinted ones, each hint worth its source's prior
            // until the pair is learned.
            let relays = table.candidates(author);
            let declared = table.write_relays(author).len();
            let hinted = table.hint_sources(author);
            self.learned_author
                .push(relays.iter().any(|r| self.learned[r.index()].is_some()));
            chances.clear();
            chances.extend(relays.iter().enumerate().map(|(i, relay)| {
                let prior = match i.checked_sub(declared) {
                    None => 1.0,
                    Some(h) => hinted.get(h).map_or(0.0, |s| s.prior()),
                };
                (
                    live[relay.index()] * kept[relay.index()] * prior,
                    reach.share(self.depth[relay.index()]),
                )
            }));
            proofs.clear();
            proofs.resize(relays.len(), Proof::Unseen);
            // Pair evidence replaces the relay-wide completeness where there is enough of it.
            if let Some(a) = learned.filter(|_| config.pairs) {
                for (url, pair) in a.relays.shared() {
                    if pair.hits + pair.misses < MIN_PAIR_EVIDENCE {
                        continue;
                    }
                    // `stats` is borrowed for the whole build, so no address is reused.
                    let id = *pair_relay
                        .entry(Arc::as_ptr(url) as *const u8 as usize)
                        .or_insert_with(|| table.relay_id(url).map_or(u32::MAX, |r| r.0));
                    if id == u32::MAX {
                        continue;
                    }
                    let relay = RelayId(id);
                    if let Some(i) = relays.iter().position(|&r| r == relay) {
                        chances[i].0 = live[relay.index()] * pair.mean();
                        proofs[i] = if pair.hits >= 1.0 && pair.misses <= COMPLETE_MISSES {
                            Proof::Complete
                        } else {
                            Proof::Partial
                        };
                    }
                }
            }
            // A follow left unrouted is asked of the reader's relays anyway (the residual): a
            // hint there (notes seen arriving for the residual) says only that the residual
            // works, and is never a reason to route.
            for (i, relay) in relays.iter().enumerate().skip(declared) {
                if table.is_reader_relay(*relay) {
                    chances[i].0 = 0.0;
                }
            }
            // Authors in id order are each relay's candidate writers in order, so this fills
            // every relay's column in `RouteTable::candidate_writers` order.
            for ((&relay, &(q, u)), &proof) in relays.iter().zip(chances.iter()).zip(&proofs) {
                let at = &mut cursor[relay.index()];
                debug_assert_eq!(
                    table.candidate_writers(relay)
                        [(*at - self.relay_offsets[relay.index()]) as usize],
                    author
                );
                self.relay_q[*at as usize] = q;
                self.relay_u[*at as usize] = u;
                self.relay_proof[*at as usize] = proof;
                *at += 1;
                self.alone[relay.index()] += weight * worth.alone(q, u);
            }
        }
        self.chances = chances;
        self.proofs = proofs;
        self.pair_relay = pair_relay;
        self.cursor = cursor;
        self.live = live;
        self.kept = kept;
    }

    /// Sizes the relay-ordered chances (`relay_offsets`, `relay_q`, `relay_u`) and points
    /// `cursor` at each relay's first slot, so gains are computed without searching lists.
    fn lay_out_relays(&mut self, table: &RouteTable) {
        self.relay_offsets.clear();
        let mut end = 0u32;
        for relay in table.relays() {
            self.relay_offsets.push(end);
            end += table.candidate_popularity(relay);
        }
        self.relay_offsets.push(end);
        self.relay_q.clear();
        self.relay_q.resize(end as usize, 0.0);
        self.relay_u.clear();
        self.relay_u.resize(end as usize, 0.0);
        self.relay_proof.clear();
        self.relay_proof.resize(end as usize, Proof::Unseen);
        self.cursor.clear();
        self.cursor
            .extend_from_slice(&self.relay_offsets[..table.relay_count()]);
    }

    /// Per candidate writer of `relay` (parallel to `RouteTable::candidate_writers(relay)`: the
    /// follows that declare it or were hinted there): the chance it returns the writer's notes
    /// within its history, and the share of them its history reaches.
    pub fn writer_chances(&self, relay: RelayId) -> impl Iterator<Item = (f64, f64)> + '_ {
        let i = relay.index();
        let range = self.relay_offsets[i] as usize..self.relay_offsets[i + 1] as usize;
        self.relay_q[range.clone()]
            .iter()
            .copied()
            .zip(self.relay_u[range].iter().copied())
    }

    /// Per candidate writer of `relay` (parallel to `RouteTable::candidate_writers(relay)`): what
    /// the pair was seen to hold.
    pub fn writer_proofs(&self, relay: RelayId) -> &[Proof] {
        let i = relay.index();
        &self.relay_proof[self.relay_offsets[i] as usize..self.relay_offsets[i + 1] as usize]
    }

    /// What `relay` would add to a plan holding nothing: its first gain in the greedy loop,
    /// summed author by author while the chances are laid out.
    pub fn alone(&self, relay: RelayId) -> f64 {
        self.alone[relay.index()]
    }

    /// Whether `relay` may hold notes at all: not one seen answering, run after run, with none
    /// about anyone (an indexer).
    pub fn keeps_notes(&self, relay: RelayId) -> bool {
        self.depth[relay.index()] > 0.0
    }

    /// What `author`'s notes of each age are worth.
    pub(crate) fn worth(&self, author: AuthorId) -> Worth {
        self.worth[author.index()]
    }

    /// Whether anything was learned about where `author`'s notes are: a relay it may be
    /// routed to was asked before.
    pub fn is_learned(&self, author: AuthorId) -> bool {
        self.learned_author[author.index()]
    }

    /// Whether `author` was asked of answering relays and none returned a note of it: no relay
    /// holds more of its notes than another.
    pub fn is_silent(&self, author: AuthorId) -> bool {
        self.silent[author.index()]
    }

    /// How much `author`'s notes are worth.
    pub fn weight(&self, author: AuthorId) -> f64 {
        self.weight[author.index()]
    }
}

/// Answers after which a relay that never returned a note is taken to keep none: one empty
/// answer may be about follows that are silent, two seldom are (a widely listed indexer is).
const EMPTY_ANSWERS: u64 = 2;

/// Popularity buckets for pooled priors: 1 follow, 2–3, 4–15, 16+.
const BUCKETS: usize = 4;

fn bucket(popularity: u32) -> usize {
    match popularity {
        0..=1 => 0,
        2..=3 => 1,
        4..=15 => 2,
        _ => 3,
    }
}

/// Strength (pseudo-observations) of a pooled prior: enough to start an untried relay near what
/// similar relays did, weak enough that its own first answer dominates.
const POOLED_STRENGTH: f64 = 2.0;

/// Per relay: liveness and completeness, drawn (exploring) or averaged, or 1 when switched off.
///
/// A relay never asked starts from what relays of similar popularity did (a pooled prior over
/// the relays that were asked: how often they answered, how complete they were), or from the
/// uniform prior when nothing similar was asked yet. On the real network a relay in one list is
/// usually someone's own small relay (often dead, complete when alive), a relay in hundreds of
/// lists a hub (alive, pruning); the pooled prior lets the first session's answers say so.
///
/// A relay never asked whose stats carry a liveness prior (`nostr_outbox_client::monitor`: a relay
/// monitor's report) adds those pseudo-observations to its liveness prior, pooled or uniform.
impl Model {
    fn relay_beliefs(
        &mut self,
        table: &RouteTable,
        stats: &DeliveryStats,
        now: u64,
        config: &RecallConfig,
        rng: &mut dyn RngCore,
    ) {
        // Walk the relays with recorded stats (the few ever asked) rather than hash every
        // relay of the table.
        self.learned.clear();
        self.learned.resize(table.relay_count(), None);
        self.seeded.clear();
        self.seeded.resize(table.relay_count(), None);
        self.depth.clear();
        self.depth.resize(table.relay_count(), f64::INFINITY);
        // Relays that answered and returned notes, pooled in relay order after the loop (the
        // stats' own order changes from process to process, and sums with it).
        let mut proven: Vec<(u32, Prior)> = Vec::new();
        for (url, _) in stats.iter() {
            let Some(relay) = table.relay_id(url) else {
                continue;
            };
            let s = stats.get_at(url, now);
            if table.candidate_popularity(relay) == 0 {
                continue;
            }
            if s.depth_secs > 0.0 {
                self.depth[relay.index()] = s.depth_secs;
            } else if s.asked.saturating_sub(s.failures) >= EMPTY_ANSWERS {
                // Answered, and never returned a note about anyone: an indexer or an
                // aggregator that keeps no history.
                self.depth[relay.index()] = 0.0;
            }
            if s.asked > 0 {
                let learned = [s.live_alpha, s.live_beta, s.kept_alpha, s.kept_beta];
                self.learned[relay.index()] = Some(learned);
                if config.empirical_priors && returned_notes(learned, self.depth[relay.index()]) {
                    proven.push((relay.0, learned));
                }
            } else if s.live_alpha != 1.0 || s.live_beta != 1.0 {
                self.seeded[relay.index()] = Some([s.live_alpha - 1.0, s.live_beta - 1.0]);
            }
        }
        let pooled = if config.pooled_priors {
            pooled_priors(table, &self.learned)
        } else {
            [None; BUCKETS]
        };
        self.live.clear();
        self.live.resize(table.relay_count(), 1.0);
        self.kept.clear();
        self.kept.resize(table.relay_count(), 1.0);
        let prior = |b: usize| pooled[b].unwrap_or([1.0, 1.0, 1.0 + config.optimism, 1.0]);
        // Planning with means, every relay nothing is known of believes its bucket's prior:
        // worked out once, not per relay (most of a large table was never asked).
        let fresh: Option<[(f64, f64); BUCKETS]> = (!config.explore).then(|| {
            std::array::from_fn(|b| {
                let [la, lb, ka, kb] = prior(b);
                (
                    if config.liveness { la / (la + lb) } else { 1.0 },
                    if config.completeness {
                        ka / (ka + kb)
                    } else {
                        1.0
                    },
                )
            })
        });
        let proven = config.empirical_priors.then(|| {
            proven.sort_unstable_by_key(|&(relay, _)| relay);
            EmpiricalPrior::pooled(proven.iter().map(|&(_, learned)| learned))
        });
        for relay in table.relays() {
            let popularity = table.candidate_popularity(relay);
            if popularity == 0 {
                continue;
            }
            let i = relay.index();
            if let Some(fresh) = &fresh {
                if self.learned[i].is_none() && self.seeded[i].is_none() {
                    (self.live[i], self.kept[i]) = fresh[bucket(popularity)];
                    continue;
                }
            }
            let [la, lb, ka, kb] = match self.learned[i] {
                Some(ab) => match &proven {
                    Some(prior) if returned_notes(ab, self.depth[i]) => prior.rebase(ab),
                    _ => ab,
                },
                None => {
                    let [la, lb, ka, kb] = prior(bucket(popularity));
                    let [sa, sb] = self.seeded[relay.index()].unwrap_or([0.0, 0.0]);
                    [la + sa, lb + sb, ka, kb]
                }
            };
            if config.liveness {
                let failed = lb - 1.0;
                self.live[relay.index()] = if la <= 1.0 && failed > 0.0 && config.dead_share > 0.0 {
                    never_answered(failed, config.dead_share, config.explore, rng)
                } else {
                    belief(la, lb, config, rng)
                };
            }
            if config.completeness {
                self.kept[relay.index()] = belief(ka, kb, config, rng);
            }
        }
    }
}

type Prior = [f64; 4];

/// Whether a relay with posterior `ab` and learned `depth` answered at least once and returned
/// a note (an indexer that answers empty is judged by its own runs alone).
fn returned_notes(ab: Prior, depth: f64) -> bool {
    ab[0] > 1.0 && depth.is_finite() && depth > 0.0
}

/// The liveness and completeness of the relays that answered and returned notes, pooled over
/// their runs: the prior a relay of that kind is judged from instead of the uniform one.
struct EmpiricalPrior {
    live: f64,
    kept: f64,
}

impl EmpiricalPrior {
    /// Pools `posteriors` without the uniform prior's pseudo-observations: answered runs over
    /// runs, returned shares over answered runs, kept within [0.02, 0.98]; one half each when
    /// there is nothing to pool.
    fn pooled(posteriors: impl Iterator<Item = Prior>) -> Self {
        let (mut live, mut runs, mut kept, mut answered) = (0.0, 0.0, 0.0, 0.0);
        for [la, lb, ka, kb] in posteriors {
            live += la - 1.0;
            runs += la + lb - 2.0;
            kept += ka - 1.0;
            answered += ka + kb - 2.0;
        }
        let mean = |x: f64, n: f64| {
            if n > 0.0 {
                (x / n).clamp(0.02, 0.98)
            } else {
                0.5
            }
        };
        Self {
            live: mean(live, runs),
            kept: mean(kept, answered),
        }
    }

    /// A posterior with the uniform prior's pseudo-observation replaced by this prior's
    /// [`POOLED_STRENGTH`] ones.
    fn rebase(&self, [la, lb, ka, kb]: Prior) -> Prior {
        [
            la - 1.0 + POOLED_STRENGTH * self.live,
            lb - 1.0 + POOLED_STRENGTH * (1.0 - self.live),
            ka - 1.0 + POOLED_STRENGTH * self.kept,
            kb - 1.0 + POOLED_STRENGTH * (1.0 - self.kept),
        ]
    }
}

/// Per popularity bucket, Beta priors for liveness and completeness with the mean of the asked
/// relays' posterior means and [`POOLED_STRENGTH`] pseudo-observations.
fn pooled_priors(table: &RouteTable, learned: &[Option<[f64; 4]>]) -> [Option<Prior>; BUCKETS] {
    let mut sums = [(0.0f64, 0.0f64, 0usize); BUCKETS];
    for relay in table.relays() {
        if let Some([la, lb, ka, kb]) = learned[relay.index()] {
            let b = &mut sums[bucket(table.candidate_popularity(relay))];
            b.0 += la / (la + lb);
            b.1 += ka / (ka + kb);
            b.2 += 1;
        }
    }
    sums.map(|(live, kept, n)| {
        (n > 0).then(|| {
            let m = |sum: f64| (sum / n as f64).clamp(0.02, 0.98);
            let (l, k) = (m(live), m(kept));
            [
                1.0 + POOLED_STRENGTH * l,
                1.0 + POOLED_STRENGTH * (1.0 - l),
                1.0 + POOLED_STRENGTH * k,
                1.0 + POOLED_STRENGTH * (1.0 - k),
            ]
        })
    })
}

/// How often a live relay answers a run, for judging a relay that never did: most live
/// relays answer 70–90% of runs.
const TYPICAL_UPTIME: f64 = 0.8;

/// Liveness of a relay that failed `failed` runs and never answered one. Most listed relays are
/// dead for good (`dead_share` of them), so each failure makes "dead" likelier than "down this
/// time": alive with probability `(1 − d)(1 − u)^k / ((1 − d)(1 − u)^k + d)`. A Beta posterior
/// would keep a popular dead relay's draws high for many runs and spend connections on it.
fn never_answered(failed: f64, dead_share: f64, explore: bool, rng: &mut dyn RngCore) -> f64 {
    let alive = (1.0 - dead_share) * (1.0 - TYPICAL_UPTIME).powf(failed);
    let alive = alive / (alive + dead_share);
    if !explore {
        return alive * TYPICAL_UPTIME;
    }
    let draw = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    if draw < alive {
        TYPICAL_UPTIME
    } else {
        0.0
    }
}

/// A Thompson draw from Beta(α, β), or its mean when not exploring. Parameters the sampler
/// rejects (stats are sanitised, so this means a bug upstream) read as the uniform prior.
fn belief(alpha: f64, beta: f64, config: &RecallConfig, rng: &mut dyn RngCore) -> f64 {
    if !config.explore {
        return alpha / (alpha + beta);
    }
    match sample_beta(alpha, beta, rng) {
        Ok(x) => x,
        Err(err) => {
            tracing::debug!(%err, "invalid prior; drawing from the uniform one");
            sample_beta(1.0, 1.0, rng).unwrap_or(0.5)
        }
    }
}

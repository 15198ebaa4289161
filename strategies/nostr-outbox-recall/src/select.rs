//! Greedy maximisation of expected notes fetched, under the connection budget.

use std::collections::BinaryHeap;

use nostr_outbox_core::{
    Assignment, AuthorId, PlanInput, RelayId, RouteTable, Selection, Selector,
};
use nostr_outbox_kit::LazyCandidate;
use rand::RngCore;

use crate::model::{Model, Proof, Worth};
use crate::RecallConfig;

/// The `recall` strategy's selector (see the crate docs).
#[derive(Debug)]
pub struct Recall {
    config: RecallConfig,
    model: Model,
    /// Per follow, kept between runs (large buffers mapped afresh each plan cost more than the
    /// planning itself).
    held: Vec<Held>,
    heap: BinaryHeap<LazyCandidate>,
    /// Per relay, how many follows hold it while the plan is built.
    serving: Vec<u32>,
    /// Per relay, its assignment's index in the selection being built (`u32::MAX`: none).
    slot_of: Vec<u32>,
}

impl Recall {
    /// A selector with `config`.
    pub fn new(config: RecallConfig) -> Self {
        Self {
            config,
            model: Model::default(),
            held: Vec::new(),
            heap: BinaryHeap::new(),
            serving: Vec::new(),
            slot_of: Vec::new(),
        }
    }
}

/// One held relay of an author: its chance of returning the author's notes within its
/// history (`q`) and the share of the author's notes that history reaches (`u`).
#[derive(Clone, Copy, Debug)]
struct Slot {
    q: f64,
    u: f64,
    relay: RelayId,
}

/// Per author: the relays it is currently assigned (at most `per_author`, deepest first), and
/// what they are worth together, kept current so a gain costs one pass over them.
///
/// A note of age share `x` (0 youngest, 1 oldest) comes back unless every held relay whose
/// history reaches `x` misses it: `P(x) = 1 − Π_{u_r ≥ x} (1 − q_r)`. The value is the
/// integral of `P` over the author's notes, those within the window (`x ≤ window`) counting
/// 1 and older ones `beyond`, plus `recent · P(0)`. Relays that prune at the same age
/// therefore overlap instead of counting as independent chances.
#[derive(Clone, Debug)]
struct Held {
    slots: Vec<Slot>,
    worth: Worth,
    value: f64,
    /// The slot whose loss costs least, and the value without it (when `slots` is not empty).
    weakest: usize,
    without_weakest: f64,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            worth: Worth {
                window: 1.0,
                beyond: 0.0,
                recent: 0.0,
            },
            value: 0.0,
            weakest: 0,
            without_weakest: 0.0,
        }
    }
}

/// The value of `slots` (deepest first) without slot `skip`, with `extra` added: see [`Held`].
///
/// Summed by parts, `Σ_j q_j · miss_{j−1} · W(u_j)` over the relays deepest first, where
/// `miss_{j−1}` is the chance every deeper relay misses and `W(u)` the worth of the notes up to
/// age share `u`: one pass, no buffer.
fn value(slots: &[Slot], skip: Option<usize>, extra: Option<(f64, f64)>, worth: &Worth) -> f64 {
    let mut miss = 1.0;
    let mut total = 0.0;
    let mut add = |q: f64, u: f64| {
        total += q * miss * worth.weigh(0.0, u);
        miss *= 1.0 - q;
    };
    let mut extra = extra;
    for (i, s) in slots.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        if let Some((q, u)) = extra.filter(|&(_, u)| u > s.u) {
            add(q, u);
            extra = None;
        }
        add(s.q, s.u);
    }
    if let Some((q, u)) = extra {
        add(q, u);
    }
    total + worth.recent * (1.0 - miss)
}

impl Held {
    fn reset(&mut self, worth: Worth) {
        self.slots.clear();
        self.worth = worth;
        self.value = 0.0;
        self.weakest = 0;
        self.without_weakest = 0.0;
    }

    /// Expected gain (in weighted notes' share) of holding a relay with chance `q` reaching `u`,
    /// replacing the weakest held relay when full.
    fn gain(&self, q: f64, u: f64, cap: usize) -> f64 {
        if q <= 0.0 || u <= 0.0 {
            return 0.0;
        }
        if self.slots.is_empty() {
            return self.worth.alone(q, u);
        }
        let skip = (self.slots.len() >= cap).then_some(self.weakest);
        (value(&self.slots, skip, Some((q, u)), &self.worth) - self.value).max(0.0)
    }

    /// Holds a relay, letting go of the weakest held relay when full; returns the one let go.
    fn hold(&mut self, q: f64, u: f64, relay: RelayId, cap: usize) -> Option<RelayId> {
        let let_go = (self.slots.len() >= cap).then(|| self.slots.remove(self.weakest).relay);
        let at = self.slots.partition_point(|s| s.u >= u);
        self.slots.insert(at, Slot { q, u, relay });
        self.refresh();
        let_go
    }

    fn drop_weakest(&mut self) {
        if !self.slots.is_empty() {
            self.slots.remove(self.weakest);
            self.refresh();
        }
    }

    fn refresh(&mut self) {
        self.value = value(&self.slots, None, None, &self.worth);
        self.weakest = 0;
        self.without_weakest = 0.0;
        let mut best = f64::NEG_INFINITY;
        for i in 0..self.slots.len() {
            let without = value(&self.slots, Some(i), None, &self.worth);
            if without > best {
                best = without;
                self.weakest = i;
                self.without_weakest = without;
            }
        }
    }
}

impl Recall {
    fn relay_gain(&self, table: &RouteTable, relay: RelayId, held: &[Held]) -> f64 {
        let cap = self.config.per_author;
        table
            .candidate_writers(relay)
            .iter()
            .zip(self.model.writer_chances(relay))
            .map(|(&a, (q, u))| self.model.weight(a) * held[a.index()].gain(q, u, cap))
            .sum()
    }
}

impl Recall {
    /// What `author`'s pair with `relay` was seen to hold.
    fn proof(&self, table: &RouteTable, author: AuthorId, relay: RelayId) -> Proof {
        table
            .candidate_writers(relay)
            .binary_search(&author)
            .ok()
            .and_then(|i| self.model.writer_proofs(relay).get(i).copied())
            .unwrap_or_default()
    }

    /// Whether what was learned says `slots[w]` adds nothing to the other slots of `author`: the
    /// relay was seen to return next to nothing of it, the follow was seen silent, or it was
    /// seen answering about the follow and another slot reaching as far back was seen to hold every note returned
    /// beside it.
    fn adds_nothing(&self, table: &RouteTable, author: AuthorId, slots: &[Slot], w: usize) -> bool {
        let weak = slots[w];
        if weak.q < NOTHING_CHANCE || self.model.is_silent(author) {
            return true;
        }
        self.proof(table, author, weak.relay) != Proof::Unseen
            && slots.iter().enumerate().any(|(k, s)| {
                k != w && s.u >= weak.u && self.proof(table, author, s.relay) == Proof::Complete
            })
    }

    /// The relays `author` holding `slots` keeps through the trim whatever the budget: all of
    /// them (at most `per_author` are held), one fewer where what was learned says the weakest
    /// adds nothing to the others.
    fn kept_through_trim(&self, table: &RouteTable, author: AuthorId, h: &Held) -> usize {
        if h.slots.len() > 1 && self.adds_nothing(table, author, &h.slots, h.weakest) {
            h.slots.len() - 1
        } else {
            h.slots.len()
        }
    }

    /// Drops the (follow, relay) pairs worth least until the plan names at most
    /// `disclosure × listed follows` pairs (a follow hinted a relay it may be routed to counts
    /// as listed), or none is left that may go. Only a pair learned to add nothing may go: a
    /// follow whose relays were never asked side by side keeps them all until they are, so a
    /// budget with room never costs a note a plan asking every listed relay would fetch.
    fn trim_to_disclosure(&self, table: &RouteTable, held: &mut [Held]) {
        // Hints at the reader's relays are never routed to (see `Model::build`).
        let listed = table
            .authors()
            .filter(|&a| {
                !table.write_relays(a).is_empty()
                    || table
                        .hint_relays(a)
                        .iter()
                        .any(|&r| !table.is_reader_relay(r))
            })
            .count();
        let allowed = (self.config.disclosure * listed as f64).floor() as usize;
        let total: usize = held.iter().map(|h| h.slots.len()).sum();
        if total <= allowed {
            return;
        }
        // What losing each relay that may go costs, weakest first.
        let mut extras: Vec<(f64, usize)> = Vec::new();
        let mut h = Held::default();
        for (a, held) in held.iter().enumerate() {
            let author = AuthorId(a as u32);
            if held.slots.len() <= 1 {
                continue;
            }
            h.slots.clear();
            h.slots.extend_from_slice(&held.slots);
            h.worth = held.worth;
            h.refresh();
            while h.slots.len() > self.kept_through_trim(table, author, &h) {
                let loss = h.value - h.without_weakest;
                extras.push((self.model.weight(author) * loss, a));
                h.drop_weakest();
            }
        }
        // Only which pairs are the weakest matters, not their order: an author loses its
        // weakest relay once per pair of it among them.
        let drop = (total - allowed).min(extras.len());
        if drop < extras.len() {
            extras.select_nth_unstable_by(drop, |x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        }
        for &(_, a) in extras.iter().take(drop) {
            held[a].drop_weakest();
        }
    }
}

/// Of `candidates` (value, relay, chance, reach), the one worth most among those worth
/// anything; ties go to the better-ranked URL, so plans do not depend on iteration order.
fn most_worth(
    table: &RouteTable,
    candidates: impl Iterator<Item = (f64, RelayId, f64, f64)>,
) -> Option<(f64, RelayId, f64, f64)> {
    candidates.filter(|x| x.0 > 0.0).max_by(|x, y| {
        x.0.total_cmp(&y.0)
            .then(table.url_rank(y.1).cmp(&table.url_rank(x.1)))
    })
}

/// A relay whose chance of returning a follow's notes was learned to be below this (dead, or
/// seen holding none of them) adds nothing to the follow's other relays.
const NOTHING_CHANCE: f64 = 0.05;

/// How a spare connection is valued: by what the model expects a follow's notes there to be
/// worth, or, once nothing has model value, by the chance its notes are there at all.
#[derive(Clone, Copy, PartialEq)]
enum Spare {
    Model,
    Chance,
}

impl Recall {
    /// What holding `relay` (with chance `q` reaching `u`) is worth to a follow left without a
    /// relay, under `how`.
    fn spare_value(&self, how: Spare, a: AuthorId, relay: RelayId, q: f64, u: f64) -> f64 {
        match how {
            Spare::Model => self.model.weight(a) * self.model.worth(a).alone(q, u),
            // The model may be wrong about a follow it expects nothing from (seen silent, or its
            // newest note just past the window): its own relays, where they are alive and keep
            // notes, can only add to what the reader's relays return.
            Spare::Chance if q > 0.0 && self.model.keeps_notes(relay) => {
                self.model.weight(a).max(f64::MIN_POSITIVE) * q
            }
            Spare::Chance => 0.0,
        }
    }

    /// Gives the follows left without a relay (by the model, or by the disclosure trim) one of
    /// their own, within the connection budget: first a relay already connected to (no
    /// connection spent), then new relays chosen greedily, by model value and then by chance. A
    /// follow is thus never left to the reader's relays while the budget has room for a relay it
    /// lists; a plan knowing what was learned asks at least what a plan knowing nothing would.
    fn fill_spare(
        &self,
        input: &PlanInput<'_>,
        held: &mut [Held],
        serving: &mut [u32],
        chosen: &mut Vec<RelayId>,
    ) {
        let (table, budget) = (input.table, input.max_connections);
        let cap = self.config.per_author;
        serving.fill(0);
        for h in held.iter() {
            for slot in &h.slots {
                serving[slot.relay.index()] += 1;
            }
        }
        let mut open = table
            .relays()
            .filter(|&r| serving[r.index()] > 0 && !input.in_pool(r))
            .count();
        // Already connected relays first: the best a follow lists, by model value, then chance.
        for a in table.authors() {
            if !held[a.index()].slots.is_empty() {
                continue;
            }
            let best = [Spare::Model, Spare::Chance].into_iter().find_map(|how| {
                most_worth(
                    table,
                    self.chances_of(table, a)
                        .filter(|&(relay, _, _)| serving[relay.index()] > 0)
                        .map(|(relay, q, u)| (self.spare_value(how, a, relay, q, u), relay, q, u)),
                )
            });
            if let Some((_, relay, q, u)) = best {
                held[a.index()].hold(q, u, relay, cap);
                serving[relay.index()] += 1;
            }
        }
        // A follow asked of one relay is asked of a second it lists where one is already
        // connected to (no connection spent), unless what was learned says it adds nothing.
        for a in table.authors() {
            let h = &held[a.index()];
            if h.slots.len() != 1 || self.config.per_author < 2 {
                continue;
            }
            let best = most_worth(
                table,
                self.chances_of(table, a)
                    .filter(|&(relay, _, _)| serving[relay.index()] > 0)
                    .filter(|&(relay, _, _)| h.slots[0].relay != relay)
                    .filter(|&(relay, q, u)| {
                        let pair = [h.slots[0], Slot { q, u, relay }];
                        !self.adds_nothing(table, a, &pair, 1)
                    })
                    .map(|(relay, q, u)| (h.gain(q, u, cap), relay, q, u)),
            );
            if let Some((_, relay, q, u)) = best {
                held[a.index()].hold(q, u, relay, cap);
                serving[relay.index()] += 1;
            }
        }
        for how in [Spare::Model, Spare::Chance] {
            if open >= budget {
                return;
            }
            let gain = |relay: RelayId, held: &[Held]| -> f64 {
                table
                    .candidate_writers(relay)
                    .iter()
                    .zip(self.model.writer_chances(relay))
                    .filter(|(a, _)| held[a.index()].slots.is_empty())
                    .map(|(&a, (q, u))| self.spare_value(how, a, relay, q, u))
                    .sum()
            };
            let mut heap: BinaryHeap<LazyCandidate> = table
                .relays()
                .filter(|r| serving[r.index()] == 0)
                .filter_map(|relay| {
                    let value = gain(relay, held);
                    (value > 0.0).then(|| LazyCandidate {
                        value,
                        url_rank: table.url_rank(relay),
                        relay,
                        round: 0,
                    })
                })
                .collect();
            let mut round = 0;
            while open < budget {
                let Some(top) = heap.pop() else { break };
                if top.round != round {
                    let value = gain(top.relay, held);
                    if value > 0.0 {
                        heap.push(LazyCandidate {
                            value,
                            round,
                            ..top
                        });
                    }
                    continue;
                }
                for (&a, (q, u)) in table
                    .candidate_writers(top.relay)
                    .iter()
                    .zip(self.model.writer_chances(top.relay))
                {
                    if held[a.index()].slots.is_empty()
                        && self.spare_value(how, a, top.relay, q, u) > 0.0
                    {
                        held[a.index()].hold(q, u, top.relay, cap);
                    }
                }
                open += usize::from(!input.in_pool(top.relay));
                round += 1;
                chosen.push(top.relay);
            }
        }
    }

    /// `author`'s candidate relays with the chance each returns its notes and the share of them
    /// it reaches, as the model laid them out.
    fn chances_of<'a>(
        &'a self,
        table: &'a RouteTable,
        author: AuthorId,
    ) -> impl Iterator<Item = (RelayId, f64, f64)> + 'a {
        table.candidates(author).iter().filter_map(move |&relay| {
            let writers = table.candidate_writers(relay);
            let i = writers.binary_search(&author).ok()?;
            let (q, u) = self.model.writer_chances(relay).nth(i)?;
            Some((relay, q, u))
        })
    }
}

impl Selector for Recall {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.config.per_author)
    }

    fn reads_window(&self) -> bool {
        self.config.windowed
    }

    fn learns(&self) -> bool {
        true
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        self.model.build(input, &self.config, rng);
        if input.max_connections == 0 {
            return Selection::default();
        }
        let cap = self.config.per_author;
        let mut held = std::mem::take(&mut self.held);
        held.resize(table.follow_count(), Held::default());
        for (a, h) in held.iter_mut().enumerate() {
            h.reset(self.model.worth(AuthorId(a as u32)));
        }
        let heap = std::mem::take(&mut self.heap);

        // Heapified at once (linear) rather than pushed one by one.
        let mut candidates = heap.into_vec();
        candidates.clear();
        candidates.extend(
            table
                .relays()
                .filter(|&relay| self.model.alone(relay) > 0.0)
                .map(|relay| LazyCandidate {
                    value: self.model.alone(relay),
                    url_rank: table.url_rank(relay),
                    relay,
                    round: 0,
                }),
        );
        let mut heap = BinaryHeap::from(candidates);

        // A connection counts while it serves a follow: a relay whose every follow moved to
        // better ones frees its connection for another, and may be picked again later.
        let mut serving = std::mem::take(&mut self.serving);
        serving.clear();
        serving.resize(table.relay_count(), 0);
        let mut chosen: Vec<RelayId> = Vec::new();
        let mut open = 0usize;
        // Every pick raises the plan's value, so picks cannot cycle; the bound is a guard.
        let most_picks = input.max_connections + 4 * table.relay_count();
        let mut picks = 0usize;
        while open < input.max_connections && picks < most_picks {
            let Some(top) = heap.pop() else { break };
            if top.round != picks {
                let gain = self.relay_gain(table, top.relay, &held);
                if gain > 0.0 {
                    heap.push(LazyCandidate {
                        value: gain,
                        round: picks,
                        ..top
                    });
                }
                continue;
            }
            picks += 1;
            for (&a, (q, u)) in table
                .candidate_writers(top.relay)
                .iter()
                .zip(self.model.writer_chances(top.relay))
            {
                let h = &mut held[a.index()];
                if h.gain(q, u, cap) <= 0.0 {
                    continue;
                }
                serving[top.relay.index()] += 1;
                if let Some(gone) = h.hold(q, u, top.relay, cap) {
                    serving[gone.index()] -= 1;
                    if serving[gone.index()] == 0 {
                        open -= usize::from(!input.in_pool(gone));
                        heap.push(LazyCandidate {
                            value: self.model.alone(gone),
                            url_rank: table.url_rank(gone),
                            relay: gone,
                            round: usize::MAX,
                        });
                    }
                }
            }
            if serving[top.relay.index()] > 0 {
                open += usize::from(!input.in_pool(top.relay));
                chosen.push(top.relay);
            }
        }

        self.trim_to_disclosure(table, &mut held);
        self.fill_spare(input, &mut held, &mut serving, &mut chosen);
        self.serving = serving;
        chosen.sort_unstable();
        chosen.dedup();

        // Each follow is asked of the chosen relays it holds; a chosen relay that lost every
        // follow to better ones is not connected to.
        let mut assignments: Vec<Assignment> = chosen
            .into_iter()
            .map(|relay| Assignment {
                relay,
                authors: Vec::new(),
            })
            .collect();
        let mut slot_of = std::mem::take(&mut self.slot_of);
        slot_of.clear();
        slot_of.resize(table.relay_count(), u32::MAX);
        for (i, to) in assignments.iter().enumerate() {
            slot_of[to.relay.index()] = i as u32;
        }
        for (a, h) in held.iter().enumerate() {
            for slot in &h.slots {
                if let Some(to) = assignments.get_mut(slot_of[slot.relay.index()] as usize) {
                    to.authors.push(AuthorId(a as u32));
                }
            }
        }
        self.slot_of = slot_of;
        assignments.retain(|a| !a.authors.is_empty());
        let selection = Selection { assignments };
        self.held = held;
        self.heap = heap;
        selection
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(q: f64, u: f64) -> Slot {
        Slot {
            q,
            u,
            relay: RelayId(0),
        }
    }

    const YEAR: Worth = Worth {
        window: 1.0,
        beyond: 0.0,
        recent: 0.0,
    };

    #[test]
    fn relays_that_reach_equally_far_overlap_and_a_deeper_one_adds_its_reach() {
        // Two sure relays keeping the newest tenth: together still a tenth.
        let month = [slot(1.0, 0.1), slot(1.0, 0.1)];
        assert!((value(&month, None, None, &YEAR) - 0.1).abs() < 1e-12);
        // A half-sure relay keeping everything adds half of the other nine tenths.
        let with_deep = value(&month, None, Some((0.5, 1.0)), &YEAR);
        assert!((with_deep - (0.1 + 0.45)).abs() < 1e-12, "{with_deep}");
        // Independent chances where both reach: 1 − 0.5 · 0.5.
        let two_halves = [slot(0.5, 1.0), slot(0.5, 1.0)];
        assert!((value(&two_halves, None, None, &YEAR) - 0.75).abs() < 1e-12);
        assert!((value(&two_halves, Some(0), None, &YEAR) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn notes_beyond_the_window_count_less_and_this_weeks_count_more() {
        let deep = [slot(1.0, 1.0)];
        let worth = Worth {
            window: 0.25,
            beyond: 0.5,
            recent: 2.0,
        };
        // A quarter at 1, three quarters at 0.5, and this week's notes on top.
        assert!((value(&deep, None, None, &worth) - (0.25 + 0.375 + 2.0)).abs() < 1e-12);
        let mut held = Held::default();
        held.reset(worth);
        held.hold(0.5, 0.25, RelayId(1), 3);
        // A second relay reaching as far is worth its chance of this week's notes too.
        assert!(held.gain(0.5, 0.25, 3) > 0.5 * 0.5 * 2.0);
    }
}

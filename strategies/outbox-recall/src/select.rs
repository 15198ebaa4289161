//! Greedy maximisation of expected notes fetched, under the connection budget.

use std::collections::BinaryHeap;

use outbox_core::{Assignment, AuthorId, PlanInput, RelayId, RouteTable, Selection, Selector};
use outbox_kit::LazyCandidate;
use rand::RngCore;

use crate::model::Model;
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
}

impl Recall {
    /// A selector with `config`.
    pub fn new(config: RecallConfig) -> Self {
        Self {
            config,
            model: Model::default(),
            held: Vec::new(),
            heap: BinaryHeap::new(),
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
/// 1 and older ones `beyond`. Relays that prune at the same age therefore overlap instead of
/// counting as independent chances.
#[derive(Clone, Debug)]
struct Held {
    slots: Vec<Slot>,
    /// Share of the author's notes within the planned window.
    window: f64,
    value: f64,
    /// The slot whose loss costs least, and the value without it (when `slots` is not empty).
    weakest: usize,
    without_weakest: f64,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            window: 1.0,
            value: 0.0,
            weakest: 0,
            without_weakest: 0.0,
        }
    }
}

/// The most slots [`value`] takes at once (`per_author` is at most 16, plus one candidate).
const MAX_SLOTS: usize = 17;

/// The value of `slots` (deepest first) without slot `skip`, with `extra` added: see [`Held`].
fn value(
    slots: &[Slot],
    skip: Option<usize>,
    extra: Option<(f64, f64)>,
    window: f64,
    beyond: f64,
) -> f64 {
    let mut set = [(0.0f64, 0.0f64); MAX_SLOTS];
    let mut n = 0;
    let mut extra = extra;
    for (i, s) in slots.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        if let Some((q, u)) = extra.filter(|&(_, u)| u > s.u) {
            set[n] = (q, u);
            n += 1;
            extra = None;
        }
        set[n] = (s.q, s.u);
        n += 1;
    }
    if let Some(e) = extra {
        set[n] = e;
        n += 1;
    }
    let weigh = |lo: f64, hi: f64| {
        (hi.min(window) - lo.min(window)) + beyond * (hi.max(window) - lo.max(window))
    };
    let mut miss = 1.0;
    let mut total = 0.0;
    for j in 0..n {
        miss *= 1.0 - set[j].0;
        let lo = if j + 1 < n { set[j + 1].1 } else { 0.0 };
        total += (1.0 - miss) * weigh(lo, set[j].1);
    }
    total
}

impl Held {
    fn reset(&mut self, window: f64) {
        self.slots.clear();
        self.window = window;
        self.value = 0.0;
        self.weakest = 0;
        self.without_weakest = 0.0;
    }

    /// Expected gain (in weighted notes' share) of holding a relay with chance `q` reaching `u`,
    /// replacing the weakest held relay when full.
    fn gain(&self, q: f64, u: f64, cap: usize, beyond: f64) -> f64 {
        if q <= 0.0 || u <= 0.0 {
            return 0.0;
        }
        let skip = (self.slots.len() >= cap).then_some(self.weakest);
        (value(&self.slots, skip, Some((q, u)), self.window, beyond) - self.value).max(0.0)
    }

    /// Holds a relay, letting go of the weakest held relay when full.
    fn hold(&mut self, q: f64, u: f64, relay: RelayId, cap: usize, beyond: f64) {
        if self.slots.len() >= cap {
            self.slots.remove(self.weakest);
        }
        let at = self.slots.partition_point(|s| s.u >= u);
        self.slots.insert(at, Slot { q, u, relay });
        self.refresh(beyond);
    }

    fn drop_weakest(&mut self, beyond: f64) {
        if !self.slots.is_empty() {
            self.slots.remove(self.weakest);
            self.refresh(beyond);
        }
    }

    fn refresh(&mut self, beyond: f64) {
        self.value = value(&self.slots, None, None, self.window, beyond);
        self.weakest = 0;
        self.without_weakest = 0.0;
        let mut best = f64::NEG_INFINITY;
        for i in 0..self.slots.len() {
            let without = value(&self.slots, Some(i), None, self.window, beyond);
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
        let (cap, beyond) = (self.config.per_author, self.config.beyond_weight);
        table
            .writers(relay)
            .iter()
            .zip(self.model.writer_chances(relay))
            .map(|(&a, (q, u))| self.model.weight(a) * held[a.index()].gain(q, u, cap, beyond))
            .sum()
    }
}

impl Recall {
    /// Drops the (follow, relay) pairs worth least until the plan names at most
    /// `disclosure × listed follows` pairs. A follow always keeps its best relay.
    fn trim_to_disclosure(&self, table: &RouteTable, held: &mut [Held]) {
        let listed = table
            .authors()
            .filter(|&a| !table.write_relays(a).is_empty())
            .count();
        let allowed = (self.config.disclosure * listed as f64).floor() as usize;
        let total: usize = held.iter().map(|h| h.slots.len()).sum();
        if total <= allowed {
            return;
        }
        // What losing each relay beyond a follow's last costs, weakest first.
        let beyond = self.config.beyond_weight;
        let mut extras: Vec<(f64, usize)> = Vec::new();
        for (a, h) in held.iter().enumerate() {
            let mut h = h.clone();
            while h.slots.len() > 1 {
                let loss = h.value - h.without_weakest;
                extras.push((self.model.weight(AuthorId(a as u32)) * loss, a));
                h.drop_weakest(beyond);
            }
        }
        extras.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        for &(_, a) in extras.iter().take(total - allowed) {
            held[a].drop_weakest(beyond);
        }
    }
}

impl Selector for Recall {
    fn name(&self) -> &str {
        "recall"
    }

    fn per_author_cap(&self) -> Option<usize> {
        Some(self.config.per_author)
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let _span = tracing::debug_span!("select", strategy = "recall").entered();
        let table = input.table;
        self.model.build(input, &self.config, rng);
        if input.max_connections == 0 {
            return Selection::default();
        }
        let (cap, beyond) = (self.config.per_author, self.config.beyond_weight);
        let mut held = std::mem::take(&mut self.held);
        held.resize(table.follow_count(), Held::default());
        held.truncate(table.follow_count());
        for (a, h) in held.iter_mut().enumerate() {
            h.reset(self.model.reach(AuthorId(a as u32)).window);
        }
        let mut heap = std::mem::take(&mut self.heap);
        heap.clear();

        heap.extend(
            table
                .relays()
                .filter(|&r| table.popularity(r) > 0)
                .map(|relay| LazyCandidate {
                    value: self.relay_gain(table, relay, &held),
                    url_rank: table.url_rank(relay),
                    relay,
                    round: 0,
                })
                .filter(|c| c.value > 0.0),
        );

        let mut chosen: Vec<RelayId> = Vec::new();
        while chosen.len() < input.max_connections {
            let Some(top) = heap.pop() else { break };
            let round = chosen.len();
            if top.round != round {
                let gain = self.relay_gain(table, top.relay, &held);
                if gain > 0.0 {
                    heap.push(LazyCandidate {
                        value: gain,
                        round,
                        ..top
                    });
                }
                continue;
            }
            for (&a, (q, u)) in table
                .writers(top.relay)
                .iter()
                .zip(self.model.writer_chances(top.relay))
            {
                let h = &mut held[a.index()];
                if h.gain(q, u, cap, beyond) > 0.0 {
                    h.hold(q, u, top.relay, cap, beyond);
                }
            }
            chosen.push(top.relay);
        }

        self.trim_to_disclosure(table, &mut held);

        // Each follow is asked of the chosen relays it holds; a chosen relay that lost every
        // follow to better ones is not connected to.
        let mut per_relay: Vec<Vec<AuthorId>> = vec![Vec::new(); table.relay_count()];
        for (a, h) in held.iter().enumerate() {
            for slot in &h.slots {
                per_relay[slot.relay.index()].push(AuthorId(a as u32));
            }
        }
        let selection = Selection {
            assignments: chosen
                .into_iter()
                .map(|relay| Assignment {
                    relay,
                    authors: std::mem::take(&mut per_relay[relay.index()]),
                })
                .filter(|a| !a.authors.is_empty())
                .collect(),
        };
        self.held = held;
        self.heap = heap;
        selection
    }
}

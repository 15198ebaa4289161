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

/// Per author: the relays it is currently assigned (at most `per_author`) with their chances,
/// and the two numbers every gain needs, kept current so a gain costs O(1).
#[derive(Clone, Debug)]
struct Held {
    relays: Vec<(f64, RelayId)>,
    /// Chance that none of the held relays delivers: Π (1 − q).
    miss: f64,
    /// The smallest held chance (meaningful when `relays` is not empty).
    weakest: f64,
}

impl Default for Held {
    fn default() -> Self {
        Self {
            relays: Vec::new(),
            miss: 1.0,
            weakest: 0.0,
        }
    }
}

impl Held {
    /// Expected gain (in delivery probability) of holding a relay with chance `q`, replacing the
    /// weakest held relay when full.
    fn gain(&self, q: f64, cap: usize) -> f64 {
        if self.relays.len() < cap {
            return q * self.miss;
        }
        if q <= self.weakest {
            return 0.0;
        }
        let others = if self.weakest < 1.0 {
            self.miss / (1.0 - self.weakest)
        } else {
            self.product_without_weakest()
        };
        others * (q - self.weakest)
    }

    fn product_without_weakest(&self) -> f64 {
        let i = self.weakest_index();
        self.relays
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, (q, _))| 1.0 - q)
            .product()
    }

    fn weakest_index(&self) -> usize {
        self.relays
            .iter()
            .enumerate()
            .min_by(|x, y| x.1 .0.total_cmp(&y.1 .0))
            .map_or(0, |(i, _)| i)
    }

    /// Holds `relay`, letting go of the weakest held relay when full.
    fn hold(&mut self, q: f64, relay: RelayId, cap: usize) {
        if self.relays.len() >= cap {
            self.drop_weakest();
        }
        self.relays.push((q, relay));
        self.refresh();
    }

    fn drop_weakest(&mut self) {
        if !self.relays.is_empty() {
            let i = self.weakest_index();
            self.relays.swap_remove(i);
            self.refresh();
        }
    }

    fn clear(&mut self) {
        self.relays.clear();
        self.refresh();
    }

    fn refresh(&mut self) {
        self.miss = self.relays.iter().map(|(q, _)| 1.0 - q).product();
        self.weakest = self
            .relays
            .iter()
            .map(|(q, _)| *q)
            .fold(f64::INFINITY, f64::min);
    }
}

impl Recall {
    fn relay_gain(&self, table: &RouteTable, relay: RelayId, held: &[Held]) -> f64 {
        let cap = self.config.per_author;
        table
            .writers(relay)
            .iter()
            .zip(self.model.writer_q(relay))
            .map(|(&a, &q)| self.model.weight(a) * held[a.index()].gain(q, cap))
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
        let total: usize = held.iter().map(|h| h.relays.len()).sum();
        if total <= allowed {
            return;
        }
        // What losing each relay beyond a follow's best costs, removing weakest-first: the i-th
        // (i ≥ 1, strongest first) costs w · q_i · Π_{j<i} (1 − q_j).
        let mut extras: Vec<(f64, usize)> = Vec::new();
        for (a, h) in held.iter().enumerate() {
            let mut qs: Vec<f64> = h.relays.iter().map(|(q, _)| *q).collect();
            qs.sort_by(|x, y| y.total_cmp(x));
            let mut miss = 1.0 - qs.first().copied().unwrap_or(0.0);
            for &q in qs.iter().skip(1) {
                extras.push((self.model.weight(AuthorId(a as u32)) * q * miss, a));
                miss *= 1.0 - q;
            }
        }
        extras.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        for &(_, a) in extras.iter().take(total - allowed) {
            held[a].drop_weakest();
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
        let cap = self.config.per_author;
        let mut held = std::mem::take(&mut self.held);
        held.iter_mut().for_each(Held::clear);
        held.resize(table.follow_count(), Held::default());
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
            for (&a, &q) in table
                .writers(top.relay)
                .iter()
                .zip(self.model.writer_q(top.relay))
            {
                let h = &mut held[a.index()];
                if h.gain(q, cap) > 0.0 {
                    h.hold(q, top.relay, cap);
                }
            }
            chosen.push(top.relay);
        }

        self.trim_to_disclosure(table, &mut held);

        // Each follow is asked of the chosen relays it holds; a chosen relay that lost every
        // follow to better ones is not connected to.
        let mut per_relay: Vec<Vec<AuthorId>> = vec![Vec::new(); table.relay_count()];
        for (a, h) in held.iter().enumerate() {
            for (_, r) in &h.relays {
                per_relay[r.index()].push(AuthorId(a as u32));
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

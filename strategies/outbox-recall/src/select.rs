//! Greedy maximisation of expected notes fetched, under the connection budget.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use outbox_core::{Assignment, AuthorId, PlanInput, RelayId, RouteTable, Selection, Selector};
use rand::RngCore;

use crate::model::Model;
use crate::RecallConfig;

/// The `recall` selector (see the crate docs).
#[derive(Debug)]
pub struct Recall {
    config: RecallConfig,
    model: Model,
}

impl Recall {
    /// A selector with `config`.
    pub fn new(config: RecallConfig) -> Self {
        Self {
            config,
            model: Model::default(),
        }
    }
}

/// Per author: the chances of the relays it is currently assigned (at most `per_author`).
#[derive(Clone, Debug, Default)]
struct Held {
    q: Vec<f64>,
}

impl Held {
    /// Chance that none of the held relays delivers.
    fn miss(&self) -> f64 {
        self.q.iter().map(|q| 1.0 - q).product()
    }

    /// Expected gain (in delivery probability) of holding a relay with chance `q`, replacing the
    /// weakest held relay when full.
    fn gain(&self, q: f64, cap: usize) -> f64 {
        if self.q.len() < cap {
            return q * self.miss();
        }
        let (weakest, &min) = match self.q.iter().enumerate().min_by(|a, b| a.1.total_cmp(b.1)) {
            Some(x) => x,
            None => return 0.0,
        };
        if q <= min {
            return 0.0;
        }
        let others: f64 = self
            .q
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != weakest)
            .map(|(_, q)| 1.0 - q)
            .product();
        others * (q - min)
    }
}

struct Candidate {
    gain: f64,
    url_rank: u32,
    relay: RelayId,
    round: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// Larger gain first; ties go to the smaller URL.
    fn cmp(&self, other: &Self) -> Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then_with(|| other.url_rank.cmp(&self.url_rank))
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
    fn trim_to_disclosure(
        &self,
        table: &RouteTable,
        held: &mut [Held],
        held_relays: &mut [Vec<RelayId>],
    ) {
        let listed = table
            .authors()
            .filter(|&a| !table.write_relays(a).is_empty())
            .count();
        let allowed = (self.config.disclosure * listed as f64).floor() as usize;
        let total: usize = held_relays.iter().map(Vec::len).sum();
        if total <= allowed {
            return;
        }
        // The value of a follow's weakest held relay: what losing it costs.
        let mut extras: Vec<(f64, usize)> = Vec::new();
        for (a, h) in held.iter().enumerate() {
            let mut qs = h.q.clone();
            qs.sort_by(|x, y| y.total_cmp(x));
            // Removing relays weakest-first: the i-th (i ≥ 1) costs q_i · Π_{j<i} (1 − q_j).
            let mut miss = 1.0 - qs.first().copied().unwrap_or(0.0);
            for &q in qs.iter().skip(1) {
                extras.push((self.model.weight(AuthorId(a as u32)) * q * miss, a));
                miss *= 1.0 - q;
            }
        }
        extras.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let mut drop_count = vec![0usize; held.len()];
        for &(_, a) in extras.iter().take(total - allowed) {
            drop_count[a] += 1;
        }
        for (a, n) in drop_count.into_iter().enumerate() {
            for _ in 0..n {
                let h = &mut held[a];
                let weakest =
                    h.q.iter()
                        .enumerate()
                        .min_by(|x, y| x.1.total_cmp(y.1))
                        .map(|(i, _)| i)
                        .expect("only follows holding extra relays lose one");
                h.q.swap_remove(weakest);
                held_relays[a].swap_remove(weakest);
            }
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
        let mut held = vec![Held::default(); table.follow_count()];
        // Per author, the relays held, parallel to `held[a].q`.
        let mut held_relays: Vec<Vec<RelayId>> = vec![Vec::new(); table.follow_count()];

        let mut heap: BinaryHeap<Candidate> = table
            .relays()
            .filter(|&r| table.popularity(r) > 0)
            .map(|relay| Candidate {
                gain: self.relay_gain(table, relay, &held),
                url_rank: table.url_rank(relay),
                relay,
                round: 0,
            })
            .filter(|c| c.gain > 0.0)
            .collect();

        let mut chosen: Vec<RelayId> = Vec::new();
        while chosen.len() < input.max_connections {
            let Some(top) = heap.pop() else { break };
            let round = chosen.len();
            if top.round != round {
                let gain = self.relay_gain(table, top.relay, &held);
                if gain > 0.0 {
                    heap.push(Candidate { gain, round, ..top });
                }
                continue;
            }
            for (&a, &q) in table
                .writers(top.relay)
                .iter()
                .zip(self.model.writer_q(top.relay))
            {
                let h = &mut held[a.index()];
                if h.gain(q, cap) <= 0.0 {
                    continue;
                }
                let relays = &mut held_relays[a.index()];
                if h.q.len() >= cap {
                    let weakest =
                        h.q.iter()
                            .enumerate()
                            .min_by(|x, y| x.1.total_cmp(y.1))
                            .map(|(i, _)| i)
                            .expect("a full hold is not empty");
                    h.q.swap_remove(weakest);
                    relays.swap_remove(weakest);
                }
                h.q.push(q);
                relays.push(top.relay);
            }
            chosen.push(top.relay);
        }

        self.trim_to_disclosure(table, &mut held, &mut held_relays);

        // Each follow is asked of the chosen relays it holds; a chosen relay that lost every
        // follow to better ones is not connected to.
        let mut per_relay: Vec<Vec<AuthorId>> = vec![Vec::new(); table.relay_count()];
        for (a, relays) in held_relays.iter().enumerate() {
            for r in relays {
                per_relay[r.index()].push(AuthorId(a as u32));
            }
        }
        Selection {
            assignments: chosen
                .into_iter()
                .map(|relay| Assignment {
                    relay,
                    authors: std::mem::take(&mut per_relay[relay.index()]),
                })
                .filter(|a| !a.authors.is_empty())
                .collect(),
        }
    }
}

//! Greedy set cover: repeatedly connect to the relay that serves the most follows still short of
//! their coverage target, until the connection budget is spent.
//!
//! Each follow wants `coverage_target` routed relays (default 2) and is assigned to at most that
//! many. Gains are evaluated lazily: a max-heap holds possibly stale scores, and since a relay's
//! gain only shrinks as others are chosen, a popped entry that was scored in the current round
//! is the true best. Scores come from a [`Scorer`] (default: coverage), computed once per
//! evaluation and never inside a comparator; ties break by URL so plans are deterministic.
//! Only scorers fit for lazy evaluation ([`Scorer::supports_lazy_greedy`]) are accepted: a cached score must bound the next.

use std::collections::BinaryHeap;

use nostr_outbox_core::scorer::CoverageScorer;
use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{
    Assignment, AuthorId, PlanInput, RelayId, RelayView, RouteTable, Scorer, ScorerConfig,
    Selection, Selector,
};
use nostr_outbox_kit::LazyCandidate;
use rand::RngCore;

/// The default per-author coverage target.
pub const DEFAULT_COVERAGE_TARGET: usize = 2;

/// `[strategy] type = "greedy"`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct GreedyConfig {
    /// Routed relays wanted per follow (also the per-author cap).
    #[serde(default = "default_coverage_target")]
    pub coverage_target: usize,
    /// How relays are scored; coverage when absent. Must support lazy greedy
    /// ([`Scorer::supports_lazy_greedy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorer: Option<Box<dyn ScorerConfig>>,
}

fn default_coverage_target() -> usize {
    DEFAULT_COVERAGE_TARGET
}

impl Default for GreedyConfig {
    fn default() -> Self {
        Self {
            coverage_target: DEFAULT_COVERAGE_TARGET,
            scorer: None,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "greedy",
    summary: "set cover: most uncovered follows first, per-author coverage target, lazy gains",
    impl StrategyConfig for GreedyConfig {
        fn label(&self) -> String {
            match self.scorer.as_ref().map(|s| s.build()) {
                Some(scorer) if scorer.name() != "coverage" => {
                    format!("{}+{}", self.name(), scorer.name())
                }
                _ => self.name().to_string(),
            }
        }

        fn validate(&self) -> Vec<ConfigIssue> {
            let mut issues: Vec<ConfigIssue> =
                ConfigIssue::unless_within("coverage_target", self.coverage_target, 64)
                    .into_iter()
                    .collect();
            if let Some(scorer) = &self.scorer {
                let own = scorer.validate();
                if own.is_empty() {
                    // Lazy evaluation trusts a cached score to be an upper bound of the next one; a
                    // score redrawn on every call breaks that, so the relay picked is arbitrary.
                    let built = scorer.build();
                    if !built.supports_lazy_greedy() {
                        issues.push(ConfigIssue::new(
                            "scorer",
                            format!(
                                "scorer `{}` gives a new score on every call, which greedy's lazy \
                                 evaluation cannot use; use a scorer that draws once per relay per \
                                 run, such as `fixed_thompson`",
                                built.name()
                            ),
                        ));
                    }
                }
                issues.extend(own.into_iter().map(|i| i.under("scorer")));
            }
            issues
        }

        fn build(&self) -> Box<dyn Selector> {
            let scorer = match &self.scorer {
                Some(config) => config.build(),
                None => Box::new(CoverageScorer),
            };
            Box::new(Greedy::new(self.coverage_target, scorer))
        }
    }
}

/// The `greedy` strategy's selector.
#[derive(Debug)]
pub struct Greedy {
    coverage_target: usize,
    scorer: Box<dyn Scorer>,
}

impl Greedy {
    /// Greedy with a coverage target and a scorer.
    pub fn new(coverage_target: usize, scorer: Box<dyn Scorer>) -> Self {
        Self {
            coverage_target: coverage_target.max(1),
            scorer,
        }
    }
}

impl Greedy {
    fn view<'t>(&self, table: &'t RouteTable, relay: RelayId, coverage: u32) -> RelayView<'t> {
        RelayView {
            relay,
            url: table.url(relay),
            popularity: table.popularity(relay),
            coverage,
        }
    }
}

impl Selector for Greedy {
    fn per_author_cap(&self) -> Option<usize> {
        Some(self.coverage_target)
    }

    fn learns(&self) -> bool {
        self.scorer.learns()
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let table = input.table;
        self.scorer.prepare(input, rng);
        if input.max_connections == 0 {
            return Selection::default();
        }
        let mut need: Vec<u32> = table
            .authors()
            .map(|a| table.write_relays(a).len().min(self.coverage_target) as u32)
            .collect();
        // gain[r] = writers of r still short of their target, kept current as needs drop, so
        // re-scoring a stale candidate is O(1).
        let mut gain: Vec<u32> = table.relays().map(|r| table.popularity(r)).collect();

        let mut heap = BinaryHeap::with_capacity(table.relay_count());
        for relay in table.relays() {
            let coverage = gain[relay.index()];
            if coverage == 0 {
                continue;
            }
            let score = self.scorer.score(self.view(table, relay, coverage), rng);
            if score > 0.0 {
                heap.push(LazyCandidate {
                    value: score,
                    url_rank: table.url_rank(relay),
                    relay,
                    round: 0,
                });
            }
        }

        let mut assignments: Vec<Assignment> = Vec::new();
        while assignments.len() < input.max_connections {
            let Some(top) = heap.pop() else { break };
            let round = assignments.len();
            let coverage = gain[top.relay.index()];
            if coverage == 0 {
                continue;
            }
            if top.round != round {
                // Stale: re-score with the current gain and put it back.
                let score = self
                    .scorer
                    .score(self.view(table, top.relay, coverage), rng);
                if score > 0.0 {
                    heap.push(LazyCandidate {
                        value: score,
                        round,
                        ..top
                    });
                }
                continue;
            }
            let authors: Vec<AuthorId> = table
                .writers(top.relay)
                .iter()
                .copied()
                .filter(|a| need[a.index()] > 0)
                .collect();
            // This relay cannot serve anyone again.
            gain[top.relay.index()] = 0;
            for a in &authors {
                need[a.index()] -= 1;
                if need[a.index()] == 0 {
                    for r in table.write_relays(*a) {
                        // Chosen relays are already at 0 and stay there.
                        gain[r.index()] = gain[r.index()].saturating_sub(1);
                    }
                }
            }
            assignments.push(Assignment {
                relay: top.relay,
                authors,
            });
        }
        Selection { assignments }
    }
}

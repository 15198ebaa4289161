//! `stochastic`: per follow, the top N write relays by `(1 + ln popularity) · scorer`.

use outbox_core::config::ConfigIssue;
use outbox_core::{
    PlanInput, RelayView, Scorer, ScorerConfig, Selection, Selector, StrategyConfig,
};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::uniform::UniformScorer;
use crate::{default_per_author, per_author, validate_per_author, DEFAULT_PER_AUTHOR};

/// `[strategy] type = "stochastic"`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StochasticConfig {
    /// Relays each follow keeps (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
    /// The random factor; `uniform` (`U(0,1)`) when absent.
    #[serde(default)]
    pub scorer: Option<Box<dyn ScorerConfig>>,
}

impl Default for StochasticConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
            scorer: None,
        }
    }
}

#[typetag::serde(name = "stochastic")]
impl StrategyConfig for StochasticConfig {
    fn validate(&self) -> Vec<ConfigIssue> {
        let mut issues: Vec<ConfigIssue> =
            validate_per_author(self.per_author).into_iter().collect();
        if let Some(scorer) = &self.scorer {
            issues.extend(scorer.validate().into_iter().map(|i| i.under("scorer")));
        }
        issues
    }

    fn build(&self) -> Box<dyn Selector> {
        let scorer = match &self.scorer {
            Some(config) => config.build(),
            None => Box::new(UniformScorer),
        };
        Box::new(Stochastic::new(self.per_author, scorer))
    }
}

outbox_core::register_strategy! {
    name: "stochastic",
    summary: "per follow, top N write relays by (1 + ln popularity) · random factor (welshman)",
    example: "type = \"stochastic\"\nper_author = 3\n",
}

/// The stochastic selector.
#[derive(Debug)]
pub struct Stochastic {
    per_author: usize,
    scorer: Box<dyn Scorer>,
    name: String,
    scores: Vec<f64>,
}

impl Stochastic {
    /// Keeps `per_author` relays per follow, scoring with `scorer` as the random factor.
    pub fn new(per_author: usize, scorer: Box<dyn Scorer>) -> Self {
        let name = match scorer.name() {
            "uniform" => "stochastic".to_string(),
            other => format!("stochastic+{other}"),
        };
        Self {
            per_author: per_author.max(1),
            scorer,
            name,
            scores: Vec::new(),
        }
    }
}

/// Welshman's popularity weight `1 + ln popularity` (0 for a relay nobody writes to).
pub fn popularity_weight(popularity: u32) -> f64 {
    if popularity == 0 {
        0.0
    } else {
        1.0 + f64::from(popularity).ln()
    }
}

impl Selector for Stochastic {
    fn name(&self) -> &str {
        &self.name
    }

    fn per_author_cap(&self) -> Option<usize> {
        Some(self.per_author)
    }

    fn select(&mut self, input: &PlanInput<'_>, rng: &mut dyn RngCore) -> Selection {
        let _span = tracing::debug_span!("select", strategy = %self.name).entered();
        let table = input.table;
        self.scorer.prepare(input, rng);
        // One draw per relay per run, in relay-id order, before any ranking.
        self.scores.clear();
        self.scores.resize(table.relay_count(), 0.0);
        for relay in table.relays() {
            let popularity = table.popularity(relay);
            if popularity == 0 {
                continue;
            }
            let view = RelayView {
                relay,
                url: table.url(relay),
                popularity,
                coverage: 1,
            };
            self.scores[relay.index()] =
                popularity_weight(popularity) * self.scorer.score(view, rng);
        }
        let url_rank = per_author::url_ranks(table);
        let scores = &self.scores;
        per_author::select(
            table,
            self.per_author,
            input.max_connections,
            &url_rank,
            |author, out| {
                out.extend_from_slice(table.write_relays(author));
                per_author::rank_by_score(out, scores, &url_rank);
            },
        )
    }
}

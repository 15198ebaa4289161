//! `per_author`: per follow, the top N relays by score, for bounded lookups.

use outbox_core::config::ConfigIssue;
use outbox_core::{
    PlanInput, RelayView, Scorer, ScorerConfig, Selection, Selector, StrategyConfig,
};
use outbox_stochastic::{per_author, validate_per_author, DEFAULT_PER_AUTHOR};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::scorer::{Thompson, ThompsonOptions};

/// `[strategy] type = "per_author"`.
///
/// Meant for bounded lookups (a profile view, one event): each follow in the table gets its own
/// top N relays, with no set-cover trade-off between follows. **Budget:** it still respects the
/// router's `max_connections` with the same rule as `stochastic` (keep the relays serving the
/// most picks, refill from them), because the plan invariants hold for every strategy; a caller
/// doing a lookup that should not be bounded builds its router with a budget at least
/// `per_author` × follows, and then nothing is trimmed.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerAuthorConfig {
    /// Relays each follow keeps (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
    /// How relays are scored; `thompson` with default options when absent.
    #[serde(default)]
    pub scorer: Option<Box<dyn ScorerConfig>>,
}

fn default_per_author() -> usize {
    DEFAULT_PER_AUTHOR
}

impl Default for PerAuthorConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
            scorer: None,
        }
    }
}

#[typetag::serde(name = "per_author")]
impl StrategyConfig for PerAuthorConfig {
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
            None => Box::new(Thompson::new(ThompsonOptions::default())),
        };
        Box::new(PerAuthor::new(self.per_author, scorer))
    }
}

outbox_core::register_strategy! {
    name: "per_author",
    summary: "per follow, top N relays by score (thompson by default), for bounded lookups",
    example: "type = \"per_author\"\nper_author = 2\nscorer = { type = \"thompson\", popularity_weight = true }\n",
}

/// The per-author top-N selector.
#[derive(Debug)]
pub struct PerAuthor {
    per_author: usize,
    scorer: Box<dyn Scorer>,
    name: String,
    scores: Vec<f64>,
}

impl PerAuthor {
    /// Keeps `per_author` relays per follow, ranked by `scorer`.
    pub fn new(per_author: usize, scorer: Box<dyn Scorer>) -> Self {
        let name = match scorer.name() {
            "thompson" => "per_author".to_string(),
            other => format!("per_author+{other}"),
        };
        Self {
            per_author: per_author.max(1),
            scorer,
            name,
            scores: Vec::new(),
        }
    }
}

impl Selector for PerAuthor {
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
        // One score per relay per run (coverage 1: a pick serves one follow), before ranking.
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
            self.scores[relay.index()] = self.scorer.score(view, rng);
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

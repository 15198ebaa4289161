//! `filter_decomposition`: per follow, the first N write relays in list order (rust-nostr), or,
//! with a scorer, the top N by the scorer's per-relay draw.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{Scorer, ScorerConfig};

use nostr_outbox_kit::{default_per_author, PerAuthorKind, PerAuthorSelector, DEFAULT_PER_AUTHOR};

/// `[strategy] type = "filter_decomposition"`.
///
/// Without `[strategy.scorer]` this is rust-nostr's rule: list order, no randomness. With one,
/// each follow's write relays are ranked by the scorer's draw for each relay (one draw per
/// relay per run, no popularity weight) instead of list order. That is how the published
/// "filter decomposition + Thompson" row works: filter decomposition's per-author fan-out with
/// a learned ranking (`[strategy.scorer] type = "thompson"`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct FilterDecompositionConfig {
    /// Relays each follow keeps, from the front of its ranking (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
    /// Ranks each list by this scorer's draws instead of list order; list order when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorer: Option<Box<dyn ScorerConfig>>,
}

impl Default for FilterDecompositionConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
            scorer: None,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "filter_decomposition",
    summary: "per follow, the first N write relays in list order (rust-nostr), or top N by an optional scorer",
    impl StrategyConfig for FilterDecompositionConfig {
        nostr_outbox_kit::per_author_config!(FilterDecompositionKind, FilterDecomposition);
    }
}

/// rust-nostr's rule: list order unless a scorer is given, never a popularity weight.
#[derive(Debug)]
pub enum FilterDecompositionKind {}

impl PerAuthorKind for FilterDecompositionKind {
    const POPULARITY_WEIGHT: bool = false;

    fn default_scorer() -> Option<Box<dyn Scorer>> {
        None
    }
}

/// The `filter_decomposition` strategy's selector. Without a scorer it uses no randomness and no learned
/// stats; with one it is named `filter_decomposition+<scorer>`.
pub type FilterDecomposition = PerAuthorSelector<FilterDecompositionKind>;

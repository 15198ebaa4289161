//! `stochastic`: per follow, the top N write relays by `(1 + ln popularity) · scorer`.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{Scorer, ScorerConfig, Selector};

use crate::uniform::UniformScorer;
use nostr_outbox_kit::{
    default_per_author, PerAuthorKind, PerAuthorSelector, Rules, DEFAULT_PER_AUTHOR,
};

/// `[strategy] type = "stochastic"`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct StochasticConfig {
    /// Relays each follow keeps (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
    /// The random factor; `uniform` (`U(0,1)`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorer: Option<Box<dyn ScorerConfig>>,
    /// `client` (default) or `study`: the published benchmark's draws and cap, for checking
    /// its figures like for like (see [`Rules`]).
    #[serde(default, skip_serializing_if = "Rules::is_client")]
    pub rules: Rules,
}

impl Default for StochasticConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
            scorer: None,
            rules: Rules::Client,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "stochastic",
    summary: "per follow, top N write relays by (1 + ln popularity) · random factor (welshman)",
    impl StrategyConfig for StochasticConfig {
        nostr_outbox_kit::per_author_config!(StochasticKind);

        fn build(&self) -> Box<dyn Selector> {
            Box::new(
                Stochastic::from_config(self.per_author, self.scorer.as_deref())
                    .with_rules(self.rules),
            )
        }
    }
}

/// Welshman's rule: popularity-weighted draws, `uniform` by default.
#[derive(Debug)]
pub enum StochasticKind {}

impl PerAuthorKind for StochasticKind {
    const POPULARITY_WEIGHT: bool = true;

    fn default_scorer() -> Option<Box<dyn Scorer>> {
        Some(Box::new(UniformScorer))
    }
}

/// The `stochastic` strategy's selector: `Stochastic::new(n, None)` is welshman's choice, and a scorer
/// replaces the `U(0,1)` factor (the popularity weight stays).
pub type Stochastic = PerAuthorSelector<StochasticKind>;

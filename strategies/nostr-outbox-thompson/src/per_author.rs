//! `per_author`: per follow, the top N relays by score, for bounded lookups.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{Scorer, ScorerConfig};
use nostr_outbox_kit::{default_per_author, PerAuthorKind, PerAuthorSelector, DEFAULT_PER_AUTHOR};

use crate::scorer::{Thompson, ThompsonConfig, ThompsonOptions};

/// `[strategy] type = "per_author"`.
///
/// Meant for bounded lookups (a profile view, one event): each follow in the table gets its own
/// top N relays, with no set-cover trade-off between follows. **Budget:** it still respects the
/// router's `max_connections` with the same rule as `stochastic` (keep the relays serving the
/// most picks, refill from them), because the plan invariants hold for every strategy; a caller
/// doing a lookup that should not be bounded builds its router with a budget at least
/// `per_author` × follows, and then nothing is trimmed.
#[derive(Debug, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct PerAuthorConfig {
    /// Relays each follow keeps (also the per-author cap).
    #[serde(default = "default_per_author")]
    pub per_author: usize,
    /// How relays are scored; `thompson` with default options when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scorer: Option<Box<dyn ScorerConfig>>,
}

impl Default for PerAuthorConfig {
    fn default() -> Self {
        Self {
            per_author: DEFAULT_PER_AUTHOR,
            scorer: None,
        }
    }
}

nostr_outbox_core::register_strategy! {
    name: "per_author",
    summary: "per follow, top N relays by score (thompson by default), for bounded lookups",
    example: Ok(PerAuthorConfig {
        per_author: 2,
        scorer: Some(Box::new(ThompsonConfig {
            popularity_weight: true,
            ..ThompsonConfig::default()
        })),
    }),
    impl StrategyConfig for PerAuthorConfig {
        nostr_outbox_kit::per_author_config!(PerAuthorThompsonKind, PerAuthor);
    }
}

/// Plain scores (no popularity weight of its own: the `thompson` scorer's `popularity_weight`
/// option adds it), `thompson` with default options by default.
#[derive(Debug)]
pub enum PerAuthorThompsonKind {}

impl PerAuthorKind for PerAuthorThompsonKind {
    const POPULARITY_WEIGHT: bool = false;

    fn default_scorer() -> Option<Box<dyn Scorer>> {
        Some(Box::new(Thompson::new(ThompsonOptions::default())))
    }
}

/// The `per_author` strategy's selector: `PerAuthor::new(n, None)` ranks by a default `thompson`
/// scorer.
pub type PerAuthor = PerAuthorSelector<PerAuthorThompsonKind>;

//! The `uniform` scorer: a fresh `U(0,1)` draw, scaled by coverage.

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::{RelayView, Scorer};
use rand::{Rng, RngCore};

/// Scores `coverage · U(0,1)`, a fresh draw per call. Per-author selectors score each relay
/// once per run with `coverage = 1`, so this is welshman's plain `U(0,1)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformScorer;

impl Scorer for UniformScorer {
    fn name(&self) -> &str {
        "uniform"
    }

    fn score(&mut self, relay: RelayView<'_>, rng: &mut dyn RngCore) -> f64 {
        let u: f64 = rng.random();
        u * f64::from(relay.coverage)
    }

    /// Every call is a new draw.
    fn supports_lazy_greedy(&self) -> bool {
        false
    }
}

/// `[strategy.scorer] type = "uniform"`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
pub struct UniformScorerConfig {}

nostr_outbox_core::register_scorer! {
    name: "uniform",
    summary: "coverage · U(0,1), a fresh draw per call (welshman's random factor)",
    impl ScorerConfig for UniformScorerConfig {
        fn build(&self) -> Box<dyn Scorer> {
            Box::new(UniformScorer)
        }
    }
}

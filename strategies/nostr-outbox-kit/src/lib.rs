//! Building blocks shared by strategy crates, so that strategy crates depend on `nostr-outbox-core`
//! and this crate, never on each other. It registers nothing.
//!
//! - [`lazy`]: the heap entry of lazy greedy selection (`greedy`, `recall`);
//! - [`per_author`]: the generic per-author selector and its budget rule (`stochastic`,
//!   `filter_decomposition`, `per_author`);
//! - [`beta`]: Beta draws that fail softly (the Thompson scorers, `recall`);
//! - [`popularity_weight`]: welshman's `1 + ln popularity`.

pub mod beta;
pub mod lazy;
pub mod per_author;

pub use beta::{draw_or_uniform, sample_beta, BetaError};
pub use lazy::LazyCandidate;
pub use per_author::{
    default_per_author, label as per_author_label, validate_config, validate_per_author,
    PerAuthorKind, PerAuthorSelector, Rules, DEFAULT_PER_AUTHOR, MAX_PER_AUTHOR,
};

#[doc(hidden)]
pub use nostr_outbox_core as __core;

/// The methods every per-author strategy's config (fields `per_author` and `scorer`) has alike,
/// for the body of its `impl StrategyConfig` in
/// [`register_strategy!`](nostr_outbox_core::register_strategy): `label` of [`PerAuthorKind`]
/// `$kind` ([`per_author_label`]) and `validate` ([`validate_config`]); given a `$selector` with
/// `from_config(per_author, scorer)`, `build` too.
#[macro_export]
macro_rules! per_author_config {
    ($kind:ty) => {
        fn label(&self) -> String {
            $crate::per_author_label::<$kind>(self.name(), self.scorer.as_deref())
        }

        fn validate(&self) -> Vec<$crate::__core::ConfigIssue> {
            $crate::validate_config(self.per_author, self.scorer.as_deref())
        }
    };
    ($kind:ty, $selector:ty) => {
        $crate::per_author_config!($kind);

        fn build(&self) -> Box<dyn $crate::__core::Selector> {
            Box::new(<$selector>::from_config(
                self.per_author,
                self.scorer.as_deref(),
            ))
        }
    };
}

/// Welshman's popularity weight `1 + ln popularity` (0 for a relay nobody writes to).
pub fn popularity_weight(popularity: u32) -> f64 {
    if popularity == 0 {
        0.0
    } else {
        1.0 + f64::from(popularity).ln()
    }
}

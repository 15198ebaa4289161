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

/// Welshman's popularity weight `1 + ln popularity` (0 for a relay nobody writes to).
pub fn popularity_weight(popularity: u32) -> f64 {
    if popularity == 0 {
        0.0
    } else {
        1.0 + f64::from(popularity).ln()
    }
}

//! Per-author strategies: each follow picks its own top N write relays, then a global budget is
//! enforced.
//!
//! - `stochastic` (welshman's choice): every write relay gets one score per planning run,
//!   `(1 + ln popularity) · s`, where `s` comes from a pluggable scorer (`uniform` = `U(0,1)` by
//!   default; `thompson` from `outbox-thompson` swaps in a learned Beta draw), and each follow
//!   keeps its top N relays.
//! - `filter_decomposition` (rust-nostr's choice): each follow keeps the first N write relays of
//!   its list, in list order.
//!
//! Both share [`per_author::select`], which applies the connection budget the same way: see its
//! docs for the trimming rule.

pub mod per_author;

mod filter_decomposition;
mod stochastic;
mod uniform;

pub use filter_decomposition::{FilterDecomposition, FilterDecompositionConfig};
pub use stochastic::{popularity_weight, Stochastic, StochasticConfig};
pub use uniform::{UniformScorer, UniformScorerConfig};

/// The default number of relays each follow keeps.
pub const DEFAULT_PER_AUTHOR: usize = 3;

/// The largest `per_author` a config may ask for (lists are capped well below this anyway).
pub const MAX_PER_AUTHOR: usize = 64;

pub(crate) fn default_per_author() -> usize {
    DEFAULT_PER_AUTHOR
}

/// Checks a `per_author` value, naming the key.
pub fn validate_per_author(n: usize) -> Option<outbox_core::ConfigIssue> {
    (!(1..=MAX_PER_AUTHOR).contains(&n)).then(|| {
        outbox_core::ConfigIssue::new(
            "per_author",
            format!("must be between 1 and {MAX_PER_AUTHOR}, got {n}"),
        )
    })
}

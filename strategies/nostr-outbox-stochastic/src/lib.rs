//! Per-author strategies: each follow picks its own top N write relays, then a global budget is
//! enforced.
//!
//! - `stochastic` (welshman's choice): every write relay gets one score per planning run,
//!   `(1 + ln popularity) · s`, where `s` comes from a pluggable scorer (`uniform` = `U(0,1)` by
//!   default; `thompson` from `nostr-outbox-thompson` swaps in a learned Beta draw), and each follow
//!   keeps its top N relays.
//! - `filter_decomposition` (rust-nostr's choice): each follow keeps the first N write relays of
//!   its list, in list order; with an optional scorer (e.g. `thompson`), the top N by the
//!   scorer's draw instead.
//!
//! Both are `nostr-outbox-kit`'s generic per-author selector, told apart by a
//! [`PerAuthorKind`](nostr_outbox_kit::PerAuthorKind) marker (`nostr-outbox-thompson`'s `per_author` is a
//! third); all apply the connection budget the same way: see [`nostr_outbox_kit::per_author::select`]
//! for the trimming rule.

mod filter_decomposition;
mod stochastic;
mod uniform;

pub use filter_decomposition::{
    FilterDecomposition, FilterDecompositionConfig, FilterDecompositionKind,
};
pub use nostr_outbox_kit::{DEFAULT_PER_AUTHOR, MAX_PER_AUTHOR};
pub use stochastic::{Stochastic, StochasticConfig, StochasticKind};
pub use uniform::{UniformScorer, UniformScorerConfig};

//! Thompson sampling: relays scored by a draw from their learned Beta(α, β) delivery prior.
//!
//! - `thompson` scorer: a fresh Beta draw per call (for per-author selectors, which score each
//!   relay once per run; greedy refuses it, as its lazy evaluation needs a score that bounds the next). Cold
//!   start, Beta(1, 1), *is* `U(0,1)`: it draws exactly as the `uniform` scorer does, so
//!   `stochastic + thompson` with no history plans exactly like `stochastic`.
//! - `fixed_thompson` scorer: one draw per relay per planning run, cached, so greedy's repeated
//!   re-evaluation sees a fixed, coverage-monotone score (`supports_lazy_greedy() == true`).
//! - `per_author` strategy: per follow, the top N relays by score, for bounded lookups.
//!
//! Both scorers multiply the draw by the relay's `coverage` and optionally by welshman's
//! popularity weight `1 + ln popularity` and a latency discount `1 / (1 + latency_ms / 1000)`.
//! Combinations are config: `[strategy] type = "greedy"` with `[strategy.scorer] type =
//! "fixed_thompson"`, `type = "stochastic"` with `type = "thompson"`, and so on.

mod per_author;
mod scorer;

pub use per_author::{PerAuthor, PerAuthorConfig, PerAuthorThompsonKind};
pub use scorer::{FixedThompson, FixedThompsonConfig, Thompson, ThompsonConfig, ThompsonOptions};

//! Every built-in strategy, linked.
//!
//! Strategies register themselves with `inventory`, but the linker drops a crate nobody names.
//! This facade names each built-in strategy crate once, so depending on it (or calling
//! [`link`]) makes every built-in strategy available by name. It is the one place that knows
//! the list. `tests/registry.rs` checks that every crate under `strategies/` that registers
//! something is linked here.

pub use nostr_outbox_greedy;
pub use nostr_outbox_hysteresis;
pub use nostr_outbox_recall;
pub use nostr_outbox_reference;
pub use nostr_outbox_stochastic;
pub use nostr_outbox_thompson;

/// Forces the registrations of every built-in strategy into the final binary. Call once before
/// looking strategies up by name (cheap; does nothing at run time).
pub fn link() {
    let _ = std::hint::black_box(nostr_outbox_greedy::DEFAULT_COVERAGE_TARGET);
    let _ = std::hint::black_box(nostr_outbox_hysteresis::DEFAULT_MARGIN);
    let _ = std::hint::black_box(nostr_outbox_recall::RecallConfig::default);
    let _ = std::hint::black_box(nostr_outbox_reference::DEFAULT_NDK_PER_AUTHOR);
    let _ = std::hint::black_box(nostr_outbox_stochastic::StochasticConfig::default);
    let _ = std::hint::black_box(nostr_outbox_thompson::ThompsonConfig::default);
}

/// The README's code blocks, compiled and run as doctests so the embedding it shows stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

//! The strategy registry: every strategy crate submits a descriptor with `inventory`.
//!
//! The descriptors are for listing and docs (`outbox strategies`); the actual config types are
//! registered with `typetag` through [`StrategyConfig`](crate::StrategyConfig) and
//! [`ScorerConfig`](crate::ScorerConfig). The registry audit checks that the two agree.

/// Describes a registered strategy (a selector).
#[derive(Debug)]
pub struct StrategyDescriptor {
    /// The `type` name used in config; snake_case and unique.
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// An example `[strategy]` table body (TOML) that deserialises and builds.
    pub example: &'static str,
}

/// Describes a registered scorer.
#[derive(Debug)]
pub struct ScorerDescriptor {
    /// The `type` name used in a `[strategy.scorer]` table; snake_case and unique.
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// An example `[strategy.scorer]` table body (TOML).
    pub example: &'static str,
}

inventory::collect!(StrategyDescriptor);
inventory::collect!(ScorerDescriptor);

/// Every registered strategy, sorted by name.
pub fn strategies() -> Vec<&'static StrategyDescriptor> {
    let mut all: Vec<_> = inventory::iter::<StrategyDescriptor>().collect();
    all.sort_by_key(|d| d.name);
    all
}

/// Every registered scorer, sorted by name.
pub fn scorers() -> Vec<&'static ScorerDescriptor> {
    let mut all: Vec<_> = inventory::iter::<ScorerDescriptor>().collect();
    all.sort_by_key(|d| d.name);
    all
}

/// The descriptor of a registered strategy.
pub fn strategy(name: &str) -> Option<&'static StrategyDescriptor> {
    inventory::iter::<StrategyDescriptor>().find(|d| d.name == name)
}

/// Whether `name` is snake_case: lower-case ASCII letters, digits and single underscores,
/// starting with a letter.
pub fn is_snake_case(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_')
}

/// Registers a strategy descriptor from a strategy crate.
///
/// ```ignore
/// outbox_core::register_strategy! {
///     name: "greedy",
///     summary: "set cover with a per-author coverage target",
///     example: "type = \"greedy\"\ncoverage_target = 2\n",
/// }
/// ```
#[macro_export]
macro_rules! register_strategy {
    (name: $name:expr, summary: $summary:expr, example: $example:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StrategyDescriptor { name: $name, summary: $summary, example: $example }
        }
    };
}

/// Registers a scorer descriptor from a strategy crate (same shape as [`register_strategy!`]).
#[macro_export]
macro_rules! register_scorer {
    (name: $name:expr, summary: $summary:expr, example: $example:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::ScorerDescriptor { name: $name, summary: $summary, example: $example }
        }
    };
}

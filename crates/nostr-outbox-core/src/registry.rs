//! The registry of strategies and scorers.
//!
//! Vocabulary: a **strategy** is a config type implementing [`StrategyConfig`], registered under
//! a snake_case name with [`register_strategy!`](crate::register_strategy); `[strategy] type = "<name>"` picks it, and
//! building it gives a [`Selector`](crate::Selector), the object that picks relays on each run.
//! A **scorer** is the same for [`ScorerConfig`] and [`register_scorer!`](crate::register_scorer), building a
//! [`Scorer`](crate::Scorer). One macro call per strategy or scorer writes its name once: it
//! registers the config type with `typetag` (what TOML is deserialised through) and submits the
//! descriptor listed here (name, summary, example config), so the two cannot disagree. The same
//! name is what [`StrategyConfig::name`] returns (the macro writes
//! it) and what starts the label a router's plans carry.
//!
//! The example config is the config type's `Default`, unless the registration gives one.

use crate::issue::{ConfigError, ConfigIssue};
use crate::scorer::ScorerConfig;
use crate::selector::StrategyConfig;

/// Builds a registered strategy's example config.
pub type StrategyExample = fn() -> Result<Box<dyn StrategyConfig>, ConfigError>;

/// Builds a registered scorer's example config.
pub type ScorerExample = fn() -> Result<Box<dyn ScorerConfig>, ConfigError>;

/// Describes a registered strategy; submitted by [`register_strategy!`](crate::register_strategy).
#[derive(Debug)]
pub struct StrategyDescriptor {
    /// The `type` name used in config; snake_case and unique.
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// The package that registered it (for telling which crates are linked).
    pub package: &'static str,
    /// Builds the example config; read it through [`StrategyDescriptor::example`].
    pub make_example: StrategyExample,
}

/// Describes a registered scorer; submitted by [`register_scorer!`](crate::register_scorer).
#[derive(Debug)]
pub struct ScorerDescriptor {
    /// The `type` name used in a `[strategy.scorer]` table; snake_case and unique.
    pub name: &'static str,
    /// One line for listings.
    pub summary: &'static str,
    /// The package that registered it.
    pub package: &'static str,
    /// Builds the example config; read it through [`ScorerDescriptor::example`].
    pub make_example: ScorerExample,
}

inventory::collect!(StrategyDescriptor);
inventory::collect!(ScorerDescriptor);

impl StrategyDescriptor {
    /// The example config.
    pub fn example(&self) -> Result<Box<dyn StrategyConfig>, ConfigError> {
        (self.make_example)()
    }

    /// The example as a `[strategy]` table (with its `type`).
    pub fn example_table(&self) -> Result<toml::Table, ConfigError> {
        to_table(&*self.example()?)
    }

    /// A whole router config (TOML) with the example as its strategy.
    pub fn example_router_toml(&self, max_connections: usize) -> Result<String, ConfigError> {
        router_toml(max_connections, self.example_table()?)
    }
}

impl ScorerDescriptor {
    /// The example config.
    pub fn example(&self) -> Result<Box<dyn ScorerConfig>, ConfigError> {
        (self.make_example)()
    }

    /// The example as a `[strategy.scorer]` table (with its `type`).
    pub fn example_table(&self) -> Result<toml::Table, ConfigError> {
        to_table(&*self.example()?)
    }
}

/// A router config (TOML) with `strategy` as its `[strategy]` table.
pub fn router_toml(max_connections: usize, strategy: toml::Table) -> Result<String, ConfigError> {
    let mut root = toml::Table::new();
    root.insert(
        "max_connections".into(),
        toml::Value::Integer(i64::try_from(max_connections).unwrap_or(i64::MAX)),
    );
    root.insert("strategy".into(), toml::Value::Table(strategy));
    toml::to_string(&root).map_err(|e| example_error(format!("does not serialise: {e}")))
}

fn to_table<T: serde::Serialize + ?Sized>(config: &T) -> Result<toml::Table, ConfigError> {
    toml::Table::try_from(config)
        .map_err(|e| example_error(format!("does not serialise to a toml table: {e}")))
}

fn example_error(message: String) -> ConfigError {
    ConfigError {
        issues: vec![ConfigIssue::new("", format!("example config {message}"))],
    }
}

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

/// The descriptor of a registered scorer.
pub fn scorer(name: &str) -> Option<&'static ScorerDescriptor> {
    inventory::iter::<ScorerDescriptor>().find(|d| d.name == name)
}

/// Whether `name` is snake_case: lower-case ASCII letters, digits and single underscores,
/// starting with a letter. A `const fn` so the registration macros reject a bad name at compile
/// time.
pub const fn is_snake_case(name: &str) -> bool {
    let b = name.as_bytes();
    if b.is_empty() || !b[0].is_ascii_lowercase() || b[b.len() - 1] == b'_' {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_') {
            return false;
        }
        if c == b'_' && i + 1 < b.len() && b[i + 1] == b'_' {
            return false;
        }
        i += 1;
    }
    true
}

/// Registers a strategy: its config type with `typetag` under `name`, and its descriptor.
///
/// The name is written once: it is the `type` in config, the descriptor's name and
/// [`StrategyConfig::name`] (which the macro writes), so plans, which carry
/// [`StrategyConfig::label`], name the strategy as registered. The example config is the type's
/// `Default` unless `example:`
/// gives an expression of type `Result<Config, ConfigError>`. The caller needs no `serde`,
/// `typetag` or `inventory` dependency: config types derive through the re-export with
/// `#[serde(crate = "nostr_outbox_core::serde")]`.
///
/// ```ignore
/// nostr_outbox_core::register_strategy! {
///     name: "greedy",
///     summary: "set cover with a per-author coverage target",
///     impl StrategyConfig for GreedyConfig {
///         fn build(&self) -> Box<dyn Selector> { Box::new(Greedy::new(self.coverage_target)) }
///     }
/// }
/// ```
#[macro_export]
macro_rules! register_strategy {
    (
        name: $name:literal,
        summary: $summary:expr,
        $(example: $example:expr,)?
        impl StrategyConfig for $ty:ty { $($body:tt)* }
    ) => {
        const _: () = {
            // `#[typetag::serde]` names its crate as `typetag`; this import is that name.
            use $crate::__private::typetag;

            #[typetag::serde(name = $name)]
            impl $crate::StrategyConfig for $ty {
                fn name(&self) -> &'static str {
                    $name
                }

                $($body)*
            }

            $crate::__register_descriptor!(
                StrategyConfig, StrategyDescriptor, "strategy", $name, $summary, $ty $(, $example)?
            );
        };
    };
}

/// Registers a scorer: its config type with `typetag` under `name`, and its descriptor (same
/// shape as [`register_strategy!`](crate::register_strategy), with `impl ScorerConfig for ...`).
#[macro_export]
macro_rules! register_scorer {
    (
        name: $name:literal,
        summary: $summary:expr,
        $(example: $example:expr,)?
        impl ScorerConfig for $ty:ty { $($body:tt)* }
    ) => {
        const _: () = {
            use $crate::__private::typetag;

            #[typetag::serde(name = $name)]
            impl $crate::ScorerConfig for $ty {
                $($body)*
            }

            $crate::__register_descriptor!(
                ScorerConfig, ScorerDescriptor, "scorer", $name, $summary, $ty $(, $example)?
            );
        };
    };
}

/// What both registrations submit: the name checked, an example maker, the descriptor.
#[doc(hidden)]
#[macro_export]
macro_rules! __register_descriptor {
    (
        $config:ident, $descriptor:ident, $what:literal, $name:literal, $summary:expr,
        $ty:ty $(, $example:expr)?
    ) => {
        const _: () = ::core::assert!(
            $crate::registry::is_snake_case($name),
            ::core::concat!("a ", $what, " name must be snake_case")
        );

        fn make_example() -> ::core::result::Result<
            $crate::__private::Box<dyn $crate::$config>,
            $crate::ConfigError,
        > {
            let config: ::core::result::Result<$ty, $crate::ConfigError> =
                $crate::__register_example!($ty $(, $example)?);
            config.map(|c| $crate::__private::Box::new(c) as _)
        }

        $crate::__private::inventory::submit! {
            $crate::registry::$descriptor {
                name: $name,
                summary: $summary,
                package: ::core::env!("CARGO_PKG_NAME"),
                make_example,
            }
        }
    };
}

/// The example expression of a registration: the given one, else the type's `Default`.
#[doc(hidden)]
#[macro_export]
macro_rules! __register_example {
    ($ty:ty) => {
        ::core::result::Result::Ok(<$ty as ::core::default::Default>::default())
    };
    ($ty:ty, $example:expr) => {
        $example
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case() {
        assert!(is_snake_case("greedy"));
        assert!(is_snake_case("greedy_set_cover2"));
        assert!(is_snake_case("a"));
        for bad in [
            "",
            "Greedy",
            "greedy-cover",
            "_greedy",
            "greedy__x",
            "greedy_",
            "2greedy",
            "grée",
        ] {
            assert!(!is_snake_case(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_core_scorer_is_registered_with_a_default_example() {
        let d = scorer("coverage").expect("registered by nostr-outbox-core");
        assert_eq!(d.package, "nostr-outbox-core");
        let table = d.example_table().expect("example serialises");
        assert_eq!(table.get("type").and_then(|t| t.as_str()), Some("coverage"));
        assert_eq!(table.len(), 1, "{table:?}");
    }
}

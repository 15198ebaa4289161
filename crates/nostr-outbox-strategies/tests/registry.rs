//! The registry, checked as ordinary tests: names, examples, and that every strategy crate of
//! the workspace is linked by this facade.

use std::collections::BTreeSet;
use std::path::Path;

use nostr_outbox_core::config::parse_strategy;
use nostr_outbox_core::registry;
use nostr_outbox_core::RouterConfig;

/// Crates under `strategies/` that register nothing by design.
const NOT_STRATEGY_CRATES: &[&str] = &["nostr-outbox-kit"];

/// Largest manifest read while listing the workspace's strategy crates.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

#[test]
fn names_are_snake_case_and_unique_across_strategies_and_scorers() {
    nostr_outbox_strategies::link();
    let strategies = registry::strategies().into_iter().map(|d| d.name);
    let scorers = registry::scorers().into_iter().map(|d| d.name);
    let all: Vec<&str> = strategies.chain(scorers).collect();
    let mut seen = BTreeSet::new();
    for name in &all {
        assert!(registry::is_snake_case(name), "`{name}` is not snake_case");
        assert!(seen.insert(*name), "`{name}` is registered twice");
    }
}

/// The example table of the registration `name`, which must have one.
fn example<E: std::fmt::Display>(name: &str, table: Result<toml::Table, E>) -> toml::Table {
    table.unwrap_or_else(|e| panic!("`{name}`: example: {e}"))
}

#[test]
fn every_strategy_example_parses_builds_and_round_trips_through_toml() {
    nostr_outbox_strategies::link();
    for d in registry::strategies() {
        let table = example(d.name, d.example_table());
        assert_eq!(
            table.get("type").and_then(|t| t.as_str()),
            Some(d.name),
            "`{}`: the example's type is not its name",
            d.name
        );
        let mut issues = Vec::new();
        let parsed = parse_strategy(&toml::Value::Table(table.clone()), "strategy", &mut issues)
            .unwrap_or_else(|| panic!("`{}`: example does not parse: {issues:?}", d.name));
        let again = toml::Table::try_from(&*parsed).unwrap();
        assert_eq!(
            again, table,
            "`{}`: TOML round trip changed the example",
            d.name
        );
        let text = d.example_router_toml(8).unwrap();
        RouterConfig::from_toml(&text).unwrap_or_else(|e| panic!("`{}`: {e}\n{text}", d.name));
    }
}

/// Plans name their strategy as it is registered: the label a router's plans carry starts with
/// the registered name, and whatever follows it (`+scorer`, `+inner`) names registered things
/// too, with every scorer a strategy accepts.
#[test]
fn every_strategy_plans_under_its_registered_name() {
    nostr_outbox_strategies::link();
    let registered: BTreeSet<&str> = registry::strategies()
        .iter()
        .map(|d| d.name)
        .chain(registry::scorers().iter().map(|d| d.name))
        .collect();
    let table = nostr_outbox_core::RouteTable::without_lists(
        nostr_outbox_core::UrlPolicy::default(),
        [nostr_outbox_core::testkit::test_key(1)],
        ["wss://home.example"],
    );
    for d in registry::strategies() {
        let mut configs = vec![d.example_router_toml(8).unwrap()];
        for scorer in registry::scorers() {
            let mut strategy = d.example_table().unwrap();
            strategy.insert("scorer".into(), scorer.example_table().unwrap().into());
            configs.push(registry::router_toml(8, strategy).unwrap());
        }
        for text in configs {
            // Strategies that take no scorer, or not this one, refuse the table.
            let Ok(config) = RouterConfig::from_toml(&text) else {
                continue;
            };
            assert_eq!(config.strategy.name(), d.name, "{text}");
            let mut router = nostr_outbox_core::Router::from_config(&config);
            let label = router.strategy().to_string();
            let mut parts = label.split('+');
            assert_eq!(parts.next(), Some(d.name), "`{label}` from\n{text}");
            for part in parts {
                assert!(
                    registered.contains(part),
                    "`{label}`: `{part}` is not registered"
                );
            }
            assert_eq!(router.plan(&table, 0).strategy(), label);
        }
    }
}

#[test]
fn every_scorer_example_parses_inside_a_strategy_and_round_trips() {
    nostr_outbox_strategies::link();
    for d in registry::scorers() {
        let table = example(d.name, d.example_table());
        assert_eq!(table.get("type").and_then(|t| t.as_str()), Some(d.name));
        let parsed: Box<dyn nostr_outbox_core::ScorerConfig> = toml::Value::Table(table.clone())
            .try_into()
            .unwrap_or_else(|e| panic!("`{}`: example does not deserialise: {e}", d.name));
        assert!(parsed.validate().is_empty(), "`{}`", d.name);
        assert_eq!(parsed.build().name(), d.name);
        assert_eq!(
            toml::Table::try_from(&*parsed).unwrap(),
            table,
            "`{}`",
            d.name
        );
    }
}

/// The package names of the crates under `strategies/` that should register something.
fn workspace_strategy_crates() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../strategies");
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("strategies/ exists") {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(meta) = std::fs::metadata(&manifest) else {
            continue;
        };
        assert!(meta.len() <= MAX_MANIFEST_BYTES, "{}", manifest.display());
        let text = std::fs::read_to_string(&manifest).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let name = table["package"]["name"].as_str().unwrap().to_string();
        if !NOT_STRATEGY_CRATES.contains(&name.as_str()) {
            out.insert(name);
        }
    }
    out
}

/// A strategy crate the facade forgets would vanish from every binary without an error: the
/// crates whose registrations are present after `link()` must be exactly those in the tree.
#[test]
fn the_facade_links_every_strategy_crate_in_the_workspace() {
    nostr_outbox_strategies::link();
    let registered: BTreeSet<String> = registry::strategies()
        .iter()
        .map(|d| d.package)
        .chain(registry::scorers().iter().map(|d| d.package))
        .filter(|p| *p != "nostr-outbox-core")
        .map(str::to_string)
        .collect();
    let expected = workspace_strategy_crates();
    assert!(!expected.is_empty());
    assert_eq!(registered, expected);
}

//! Every registered strategy, and every strategy × scorer pairing its config accepts, passes the
//! conformance suite. Adding a strategy or scorer crate to the facade puts it under this test.

use nostr_outbox_core::registry;
use nostr_outbox_core::testkit::check_config_toml;
use nostr_outbox_core::RouterConfig;

/// Every name of `expected` is among the registered `names`.
fn assert_registered<'a>(names: impl Iterator<Item = &'a str>, expected: &[&str]) {
    let names: Vec<&str> = names.collect();
    for expected in expected {
        assert!(names.contains(expected), "`{expected}` is not registered");
    }
}

#[test]
fn every_registered_strategy_passes_the_suite() {
    nostr_outbox_strategies::link();
    let strategies = registry::strategies();
    assert_registered(
        strategies.iter().map(|d| d.name),
        &["greedy", "stochastic", "filter_decomposition", "per_author"],
    );
    for d in &strategies {
        let failures = check_config_toml(&d.example_router_toml(8).unwrap());
        assert!(failures.is_empty(), "`{}`: {failures:#?}", d.name);
    }
}

#[test]
fn every_scorer_pairing_a_strategy_accepts_passes_the_suite() {
    nostr_outbox_strategies::link();
    let scorers = registry::scorers();
    assert_registered(
        scorers.iter().map(|d| d.name),
        &["coverage", "uniform", "thompson", "fixed_thompson"],
    );
    let mut accepted = Vec::new();
    for strategy in registry::strategies() {
        for scorer in &scorers {
            // Strategies that take no scorer reject the table (deny_unknown_fields), and lazy ones
            // reject a scorer unfit for lazy evaluation; skip those.
            let mut table = toml::Table::new();
            table.insert("type".into(), strategy.name.into());
            table.insert("scorer".into(), scorer.example_table().unwrap().into());
            let toml = registry::router_toml(8, table).unwrap();
            if RouterConfig::from_toml(&toml).is_err() {
                continue;
            }
            let failures = check_config_toml(&toml);
            assert!(
                failures.is_empty(),
                "{} + {}: {failures:#?}",
                strategy.name,
                scorer.name
            );
            accepted.push(format!("{}+{}", strategy.name, scorer.name));
        }
    }
    // The combinations `docs/design.md` promises (Strategies) must be among the accepted ones.
    for must in [
        "greedy+fixed_thompson",
        "stochastic+thompson",
        "stochastic+uniform",
        "per_author+thompson",
        "per_author+fixed_thompson",
    ] {
        assert!(
            accepted.iter().any(|a| a == must),
            "{must} not accepted: {accepted:?}"
        );
    }
    // Lazy greedy needs a scorer that supports it: per-call draws are refused.
    for refused in ["greedy+thompson", "greedy+uniform"] {
        assert!(
            !accepted.iter().any(|a| a == refused),
            "{refused} accepted: {accepted:?}"
        );
    }
}

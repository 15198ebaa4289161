//! Every registered strategy, and every strategy × scorer pairing its config accepts, passes the
//! conformance suite. Adding a strategy or scorer crate to the facade puts it under this test.

use outbox_core::registry;
use outbox_core::testkit::check_config_toml;
use outbox_core::RouterConfig;

/// Wraps a registered `[strategy]` example in a router config.
fn router_toml(strategy_body: &str) -> String {
    format!("max_connections = 8\n[strategy]\n{strategy_body}")
}

#[test]
fn every_registered_strategy_passes_the_suite() {
    outbox_strategies::link();
    let strategies = registry::strategies();
    for expected in ["greedy", "stochastic", "filter_decomposition", "per_author"] {
        assert!(
            strategies.iter().any(|d| d.name == expected),
            "`{expected}` is not registered"
        );
    }
    let mut names: Vec<&str> = strategies.iter().map(|d| d.name).collect();
    names.dedup();
    assert_eq!(
        names.len(),
        strategies.len(),
        "strategy names must be unique"
    );
    for d in &strategies {
        assert!(registry::is_snake_case(d.name), "{}", d.name);
        let failures = check_config_toml(&router_toml(d.example));
        assert!(failures.is_empty(), "`{}`: {failures:#?}", d.name);
    }
}

#[test]
fn every_scorer_pairing_a_strategy_accepts_passes_the_suite() {
    outbox_strategies::link();
    let scorers = registry::scorers();
    for expected in ["coverage", "uniform", "thompson", "fixed_thompson"] {
        assert!(
            scorers.iter().any(|d| d.name == expected),
            "`{expected}` is not registered"
        );
    }
    let mut accepted = Vec::new();
    for strategy in registry::strategies() {
        for scorer in &scorers {
            // Strategies that take no scorer reject the table (deny_unknown_fields), and lazy ones
            // reject an unstable scorer; skip those.
            let toml = router_toml(&format!(
                "type = \"{}\"\n[strategy.scorer]\n{}",
                strategy.name, scorer.example
            ));
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
    // The combinations the design promises must be among the accepted ones.
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
    // Lazy greedy needs stable scores: per-call draws are refused.
    for refused in ["greedy+thompson", "greedy+uniform"] {
        assert!(
            !accepted.iter().any(|a| a == refused),
            "{refused} accepted: {accepted:?}"
        );
    }
}

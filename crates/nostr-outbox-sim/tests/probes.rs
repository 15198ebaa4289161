//! Probes in the session loop: a session that probes learns about relays its plans never asked,
//! within its probe budget, and a learning strategy then plans with them.

use nostr_outbox_core::default_probes;
use nostr_outbox_core::Router;
use nostr_outbox_sim::{run_sessions, LoopConfig, SimWorld, Window};
use nostr_outbox_world::{generate_in, Family, Profile};

/// `recall` at `budget` connections over three sessions of a small `family` world, probing
/// `probes` relays a session (`None`: the config's default).
fn run_in(family: Family, budget: usize, probes: Option<usize>) -> nostr_outbox_sim::StrategyRun {
    nostr_outbox_strategies::link();
    let sim = SimWorld::new(generate_in(family, Profile::Small, 1));
    let mut router = Router::from_toml(&format!(
        "max_connections = {budget}\n[strategy]\ntype = \"recall\"\n"
    ))
    .expect("valid config");
    if let Some(probes) = probes {
        router = router.with_probes(probes);
    }
    let cfg = LoopConfig {
        sessions: 3,
        windows: vec![Window::Y1],
        timing_repeats: 0,
        ..LoopConfig::default()
    };
    run_sessions(&sim, &mut router, &cfg, |_, _, _| {})
}

/// A `sparse` world (most follows list one or two relays, and a few prolific ones list a
/// relay only they use) at 8 connections.
fn run(probes: usize) -> nostr_outbox_sim::StrategyRun {
    run_in(Family::Sparse, 8, Some(probes))
}

fn last_year(run: &nostr_outbox_sim::StrategyRun) -> f64 {
    let last = run.sessions.last().expect("sessions ran");
    last.score
        .window(Window::Y1)
        .and_then(|w| w.declared())
        .expect("declared notes exist")
}

#[test]
fn probing_finds_the_relays_plans_never_asked_and_recall_plans_with_them() {
    let without = run(0);
    let with = run(8);
    for s in &without.sessions {
        assert_eq!(s.score.probe, Default::default(), "nothing probed at 0");
    }
    for s in &with.sessions {
        let p = &s.score.probe;
        assert!(p.connections > 0 && p.connections <= 8, "{p:?}");
        assert!(p.reqs <= p.connections && p.filters <= 10 * p.reqs, "{p:?}");
    }
    // Relays with learned stats: every probe that answered or failed adds one.
    assert!(
        with.stats.len() > without.stats.len(),
        "{} relays known with probes, {} without",
        with.stats.len(),
        without.stats.len()
    );
    let (a, b) = (last_year(&without), last_year(&with));
    assert!(
        b > a + 0.2,
        "1-year recall {a:.3} without probes, {b:.3} with"
    );
}

/// On a long tail (a few prolific follows on relays of their own, most listed relays dead),
/// four probes a session seldom meet a live relay; the default probes as many as it would at a
/// budget of 20 however small the routed budget, and finds them.
#[test]
fn a_small_budget_still_probes_enough_to_find_a_long_tails_own_relays() {
    nostr_outbox_strategies::link();
    let router = Router::from_toml("max_connections = 4\n[strategy]\ntype = \"recall\"\n")
        .expect("valid config");
    assert_eq!(router.probe_budget().connections, default_probes(20));
    let default = run_in(Family::Tail, 4, None);
    let four = run_in(Family::Tail, 4, Some(4));
    for s in &default.sessions {
        assert_eq!(s.score.probe.connections, default_probes(20) as u64);
    }
    let (a, b) = (last_year(&four), last_year(&default));
    assert!(
        b > a + 0.3,
        "1-year recall {a:.3} with 4 probes, {b:.3} with the default"
    );
}

/// What the probes returned beyond the plan's fetch (a client delivers it after the fetch) is
/// counted apart from the plan's recall: never a note the plan fetched or one that was not
/// available, nothing without probes, and on a sparse world some first-session notes only the
/// probes reached.
#[test]
fn notes_only_the_probes_returned_are_counted_apart_from_the_plans() {
    let year = |s: &nostr_outbox_sim::SessionOutcome| s.score.window(Window::Y1).cloned().unwrap();
    for s in &run(0).sessions {
        assert_eq!(year(s).found, 0, "nothing probed, nothing found");
    }
    let with = run(8);
    for s in &with.sessions {
        let w = year(s);
        assert!(
            w.declared_fetched + w.found <= w.declared_available,
            "{w:?}"
        );
        assert!(w.declared_with_found() >= w.declared(), "{w:?}");
    }
    assert!(
        year(&with.sessions[0]).found > 0,
        "{:?}",
        year(&with.sessions[0])
    );
}

#[test]
fn a_strategy_that_does_not_learn_is_never_probed_for() {
    nostr_outbox_strategies::link();
    let router = Router::from_toml("max_connections = 8\n[strategy]\ntype = \"greedy\"\n")
        .expect("valid config")
        .with_probes(8);
    assert_eq!(router.probe_budget().connections, 0);
    let thompson = Router::from_toml(
        "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\n",
    )
    .expect("valid config");
    assert_eq!(
        thompson.probe_budget().connections,
        default_probes(thompson.max_connections())
    );
}

//! Relay hints in the session loop: a router that takes hints plans each session on a table
//! holding the world's hints and the relays the stats saw notes arrive on; any other router
//! plans as if the world had no hints.

use nostr_outbox_core::{check_plan, HintSource, Router};
use nostr_outbox_sim::{run_sessions_with, LoopConfig, SimWorld, StrategyRun, Window};
use nostr_outbox_world::{generate_in, Family, Profile, World};

fn cfg() -> LoopConfig {
    LoopConfig {
        sessions: 3,
        windows: vec![Window::D7, Window::Y1],
        timing_repeats: 0,
        ..LoopConfig::default()
    }
}

fn router(hints: bool) -> Router {
    nostr_outbox_strategies::link();
    Router::from_toml(&format!(
        "max_connections = 8\nhints = {hints}\n[strategy]\ntype = \"recall\"\n"
    ))
    .expect("valid config")
}

/// Runs `router` on `sim`; per session, the table's hint count and its seen-on hints at a
/// reader relay.
fn run(sim: &SimWorld, mut router: Router) -> (StrategyRun, Vec<(usize, usize)>) {
    let mut seen = Vec::new();
    let run = run_sessions_with(sim, &mut router, &cfg(), |v| {
        assert!(check_plan(v.plan, v.table, router_limits()).is_empty());
        let t = v.table;
        let at_readers = t
            .authors()
            .map(|a| {
                (t.hint_relays(a).iter().zip(t.hint_sources(a)))
                    .filter(|(r, s)| **s == HintSource::SeenOn && t.is_reader_relay(**r))
                    .count()
            })
            .sum();
        seen.push((t.hint_count(), at_readers));
    });
    (run, seen)
}

fn router_limits() -> nostr_outbox_core::Limits {
    router(false).limits()
}

#[test]
fn hints_reach_the_table_each_session_and_residual_deliveries_become_seen_on_hints() {
    let sim = SimWorld::new(generate_in(Family::Hinted, Profile::Small, 1));
    assert!(!sim.world.hints().is_empty());
    let (_, with) = run(&sim, router(true));
    // Session 0: the world's hints; later sessions also where the stats saw notes arrive,
    // among them the reader's relays answering for the residual.
    assert!(with[0].0 > 0, "{with:?}");
    assert_eq!(
        with[0].1, 0,
        "nothing seen before the first fetch: {with:?}"
    );
    assert!(with[1].0 > with[0].0 && with[1].1 > 0, "{with:?}");
    let (_, without) = run(&sim, router(false));
    assert!(without.iter().all(|&(n, _)| n == 0), "{without:?}");
}

#[test]
fn a_router_without_hints_ignores_the_worlds_hints() {
    let hinted = generate_in(Family::Hinted, Profile::Small, 2);
    let mut plain = hinted.clone();
    plain.set_hints(Vec::new());
    let a = run(&SimWorld::new(hinted.clone()), router(false)).0;
    let b = run(&SimWorld::new(plain), router(false)).0;
    let scores = |r: &StrategyRun| {
        r.sessions
            .iter()
            .map(|s| s.score.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(scores(&a), scores(&b));
    // With hints the plans differ.
    let c = run(&SimWorld::new(hinted), router(true)).0;
    assert_ne!(scores(&a), scores(&c));
}

/// A world file written before hints existed reads as a world without them, and is written
/// back without them, byte for byte.
#[test]
fn an_old_world_file_reads_without_hints() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/world.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("\"hints\""));
    let world = World::from_json(&text).unwrap();
    assert!(world.hints().is_empty());
    let written = world.to_json();
    assert!(!written.contains("\"hints\""));
    assert_eq!(World::from_json(&written).unwrap(), world);
    let sim = SimWorld::new(world);
    let hinted = sim.hinted_table(&nostr_outbox_core::DeliveryStats::new());
    assert_eq!(hinted.hint_count(), 0);
    assert_eq!(hinted.relay_count(), sim.table.relay_count());
}

//! The session loop applies a world's monitor data before session 0 only when asked.

use nostr_outbox_sim::{run_sessions, LoopConfig, SimWorld, Window};
use nostr_outbox_world::{generate, Profile};

#[test]
fn the_monitor_prior_is_applied_before_session_0_only_when_asked() {
    nostr_outbox_strategies::link();
    let sim = SimWorld::new(generate(Profile::Small, 3));
    assert!(!sim.world.monitor().is_empty());
    let run = |monitor_prior: bool| {
        let cfg = LoopConfig {
            sessions: 1,
            windows: vec![Window::Y1],
            timing_repeats: 0,
            monitor_prior,
            ..LoopConfig::default()
        };
        let mut router = nostr_outbox_core::Router::from_toml(
            "max_connections = 20\n[strategy]\ntype = \"recall\"\n",
        )
        .unwrap();
        run_sessions(&sim, &mut router, &cfg, |_, _, _| {}).stats
    };
    // A relay never asked keeps its prior: leaning dead or alive, with no trial of its own.
    let seeded = |stats: &nostr_outbox_core::DeliveryStats| {
        stats
            .iter()
            .filter(|(_, s)| s.asked == 0 && (s.live_alpha > 1.0 || s.live_beta > 1.0))
            .count()
    };
    assert_eq!(seeded(&run(false)), 0);
    let with = run(true);
    assert!(seeded(&with) > 10, "{}", seeded(&with));
    // Relays asked in session 0 were learned from their own round, not the prior.
    for (url, s) in with.iter().filter(|(_, s)| s.asked > 0) {
        assert_eq!(s.live_alpha + s.live_beta, 3.0, "{url}: {s:?}");
    }
}

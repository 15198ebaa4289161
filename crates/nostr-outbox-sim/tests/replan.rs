//! In-session re-planning (`LoopConfig::replan_on_failure`): relays that do not answer are set
//! aside and their follows asked elsewhere within the same session, as the live runtime does.

use nostr_outbox_sim::{generate, run_sessions, LoopConfig, Profile, SimWorld, Window};

fn recall_per_session(sim: &SimWorld, replan: bool) -> Vec<f64> {
    nostr_outbox_strategies::link();
    let mut router = nostr_outbox_core::Router::from_toml(
        "max_connections = 20\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n",
    )
    .expect("valid config");
    let cfg = LoopConfig {
        windows: vec![Window::Y1],
        replan_on_failure: replan,
        ..LoopConfig::default()
    };
    run_sessions(sim, &mut router, &cfg, |_, _, _| {})
        .sessions
        .iter()
        .map(|o| o.score.window(Window::Y1).expect("scored").declared_recall)
        .collect()
}

#[test]
fn re_planning_around_dead_relays_finds_more_and_never_less() {
    let sim = SimWorld::new(generate(Profile::Small, 1));
    let once = recall_per_session(&sim, false);
    let replanned = recall_per_session(&sim, true);
    for (s, (a, b)) in once.iter().zip(&replanned).enumerate() {
        assert!(b + 1e-9 >= *a, "session {s}: re-planned {b} < one plan {a}");
    }
    assert!(
        once.iter().zip(&replanned).any(|(a, b)| b > a),
        "re-planning changed nothing: {once:?} vs {replanned:?}"
    );
}

//! In-session re-planning (`LoopConfig::replan_on_failure`): relays that do not answer are set
//! aside and their follows asked elsewhere within the same session, as the live runtime does.

use nostr_outbox_sim::{run_sessions, LoopConfig, SimWorld, Window};
use nostr_outbox_world::{generate, Profile};

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

/// Twelve follows all list an indexer (answers, keeps nothing); the first also lists its own
/// relay, which holds its one note of the week.
fn indexed_world() -> SimWorld {
    const NOW: u64 = 100_000_000;
    let key = |n: u8| {
        let mut sk = [7u8; 32];
        sk[31] = n;
        let secret = nostr::key::SecretKey::from_slice(&sk).expect("valid key");
        nostr::key::Keys::new(secret).public_key().to_hex()
    };
    let follows: Vec<String> = (1..=12).map(key).collect();
    let lists: Vec<String> = (follows.iter().enumerate())
        .map(|(i, f)| {
            let own = if i == 0 { r#", ["r", "wss://own.example"]"# } else { "" };
            format!(
                r#"{{"author": "{f}", "created_at": 1, "tags": [["r", "wss://index.example"]{own}]}}"#
            )
        })
        .collect();
    let json = format!(
        r#"{{"format": "outbox-world/1", "name": "indexed", "now": {NOW}, "sessions": 1,
  "reader": {{"pubkey": "{}", "follows": [{}], "relays": ["wss://home.example"]}},
  "relay_lists": [{}],
  "relays": {{"wss://index.example": {{"up": [true]}}, "wss://own.example": {{"up": [true]}}, "wss://home.example": {{"up": [true]}}}},
  "events": [{{"id": "{:064x}", "author": "{}", "created_at": {}, "kind": 1, "on": ["wss://own.example"]}}]}}"#,
        key(99),
        follows
            .iter()
            .map(|f| format!("\"{f}\""))
            .collect::<Vec<_>>()
            .join(", "),
        lists.join(",\n"),
        1,
        follows[0],
        NOW - 3_600,
    );
    SimWorld::new(nostr_outbox_world::World::from_json(&json).expect("valid world"))
}

#[test]
fn follows_of_a_relay_that_answered_empty_are_asked_elsewhere_in_the_same_session() {
    let sim = indexed_world();
    // Set cover asks the indexer about everyone: one plan fetches nothing.
    assert_eq!(recall_per_session(&sim, false)[0], 0.0);
    // Re-planned, the indexer's empty answer sends the first follow to its own relay.
    assert_eq!(recall_per_session(&sim, true)[0], 1.0);
}

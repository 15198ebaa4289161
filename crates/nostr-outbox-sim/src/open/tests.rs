use nostr_outbox_core::{DeliveryStats, PlanContext, Router};

use super::*;
use crate::window::Window;
use nostr_outbox_world::{generate, Profile};

fn key(n: u8) -> String {
    let mut sk = [9u8; 32];
    sk[31] = n;
    let secret = nostr::key::SecretKey::from_slice(&sk).expect("valid key");
    nostr::key::Keys::new(secret).public_key().to_hex()
}

/// One follow listing `listed`, every relay of `relays` up; the reader on its own relay.
fn world(listed: &[&str], relays: &[&str]) -> SimWorld {
    let tags: Vec<String> = listed.iter().map(|u| format!(r#"["r", "{u}"]"#)).collect();
    let mut all: Vec<String> = relays
        .iter()
        .map(|u| format!(r#""{u}": {{"up": [true]}}"#))
        .collect();
    all.push(r#""wss://home.example": {"up": [true]}"#.to_string());
    let json = format!(
        r#"{{"format": "outbox-world/1", "name": "open", "now": 100000000, "sessions": 1,
  "reader": {{"pubkey": "{}", "follows": ["{}"], "relays": ["wss://home.example"]}},
  "relay_lists": [{{"author": "{}", "created_at": 1, "tags": [{}]}}],
  "relays": {{{}}},
  "events": []}}"#,
        key(99),
        key(1),
        key(1),
        tags.join(", "),
        all.join(", "),
    );
    SimWorld::new(nostr_outbox_world::World::from_json(&json).expect("valid world"))
}

/// An hour on `sim` with `down` per relay URL and notes of follow 0 at `(t, relay urls)`.
fn hour(
    sim: &SimWorld,
    down: &[(&str, f64, f64)],
    notes: &[(f64, &[&str])],
    moves: Vec<Move>,
) -> OpenWorld {
    let id = |u: &str| sim.world.relay_id(u).expect("a world relay");
    let mut spans = vec![Vec::new(); sim.world.relays().len()];
    for &(u, a, b) in down {
        spans[id(u) as usize].push((a, b));
    }
    let notes: Vec<LiveNote> = notes
        .iter()
        .map(|&(t, on)| LiveNote {
            t,
            author: 0,
            on: on.iter().map(|u| id(u)).collect(),
            counted: true,
            sampled: true,
        })
        .collect();
    let mut on_relay = vec![Vec::new(); spans.len()];
    for (i, n) in (0u32..).zip(&notes) {
        for &r in &n.on {
            on_relay[r as usize].push(i);
        }
    }
    OpenWorld {
        secs: 3_600.0,
        down: spans,
        notes,
        on_relay,
        moves,
        follow_changes: Vec::new(),
        rate_scale: 1.0,
        seed: 1,
    }
}

fn router(strategy: &str) -> Router {
    nostr_outbox_strategies::link();
    let extra = if strategy == "greedy" {
        "coverage_target = 1\n"
    } else {
        ""
    };
    Router::from_toml(&format!(
        "max_connections = 20\n[strategy]\ntype = \"{strategy}\"\n{extra}"
    ))
    .expect("valid config")
}

/// Plans session 0 with `strategy` and keeps the feed open on `open`.
fn run(sim: &SimWorld, open: &OpenWorld, strategy: &str) -> OpenScore {
    let mut router = router(strategy);
    let mut stats = DeliveryStats::new();
    let ctx = PlanContext::at(sim.world.now).window(Window::D7.secs());
    let plan = router.plan_with(&sim.table, &stats, ctx);
    let asks = Asks::from_plan(sim, &plan);
    let cfg = OpenConfig::default();
    let timing = ClientTiming::default();
    keep_open(
        sim,
        open,
        0,
        ctx,
        &asks,
        &mut router,
        &mut stats,
        &cfg,
        &timing,
        sim.world.now,
    )
}

/// A relay that blips loses nothing for the runtime's feed: a note that lands between its
/// return and the reconnect comes with the catch-up. The peers' feed drops the relay.
#[test]
fn a_blip_loses_nothing_for_the_runtime() {
    let sim = world(&["wss://a.example"], &["wss://a.example"]);
    let open = hour(
        &sim,
        &[("wss://a.example", 100.0, 110.0)],
        &[
            (50.0, &["wss://a.example"]),
            (110.001, &["wss://a.example"]),
            (900.0, &["wss://a.example"]),
        ],
        Vec::new(),
    );
    let ours = run(&sim, &open, "greedy");
    assert_eq!((ours.notes, ours.delivered), (3, 3), "{ours:?}");
    assert_eq!((ours.gaps, ours.gaps_filled), (1, 1), "{ours:?}");
    // Three attempts fail within the blip, so the relay sits out its first set-aside (a minute).
    assert!(ours.catch_up_p50.is_some_and(|s| s < 90.0), "{ours:?}");
    // A one-second blip is over before the attempts are: the relay is dialled again, asked
    // `since` the drop, and its gap is delivered within seconds of its return.
    let short = hour(
        &sim,
        &[("wss://a.example", 100.0, 101.0)],
        &[(101.001, &["wss://a.example"])],
        Vec::new(),
    );
    let ours = run(&sim, &short, "greedy");
    assert_eq!((ours.notes, ours.delivered), (1, 1), "{ours:?}");
    assert_eq!((ours.gaps, ours.gaps_filled), (1, 1), "{ours:?}");
    assert!(ours.catch_up_p50.is_some_and(|s| s < 5.0), "{ours:?}");
    let peer = run(&sim, &open, "direct");
    assert_eq!((peer.notes, peer.delivered), (3, 1), "{peer:?}");
    assert_eq!(peer.gaps_filled, 0, "{peer:?}");
}

/// A relay that goes down for good is set aside and its follow planned on its other relay.
#[test]
fn a_relay_that_does_not_return_is_re_planned() {
    let relays = ["wss://a.example", "wss://b.example"];
    let sim = world(&relays, &relays);
    let mut router = router("greedy");
    let ctx = PlanContext::at(sim.world.now).window(Window::D7.secs());
    let plan = router.plan_with(&sim.table, &DeliveryStats::new(), ctx);
    let asks = Asks::from_plan(&sim, &plan);
    let chosen: Vec<&str> = (asks.entries.iter())
        .map(|a| a.url.as_str())
        .filter(|u| relays.contains(u))
        .collect();
    assert_eq!(chosen.len(), 1, "{asks:?}");
    let other = relays
        .iter()
        .find(|u| **u != chosen[0])
        .expect("two relays");
    let open = hour(
        &sim,
        &[(chosen[0], 100.0, f64::INFINITY)],
        &[(50.0, &relays), (500.0, &[other]), (3_000.0, &[other])],
        Vec::new(),
    );
    let ours = run(&sim, &open, "greedy");
    assert_eq!((ours.notes, ours.delivered), (3, 3), "{ours:?}");
    assert!(ours.plans >= 1, "{ours:?}");
    assert!(ours.delay_p99.is_some_and(|s| s < 1.0), "{ours:?}");
}

/// A follow that moves to a relay it never listed is read there within seconds of the new
/// list, its notes from before the re-plan back-filled; the peers' feed reads it there from
/// its new selection on.
#[test]
fn a_moved_follows_notes_are_caught() {
    let sim = world(
        &["wss://a.example"],
        &["wss://a.example", "wss://new.example"],
    );
    let new = sim.world.relay_id("wss://new.example").expect("a relay");
    let moved = Move {
        t: 200.0,
        author: 0,
        relays: vec![new],
    };
    let open = hour(
        &sim,
        &[],
        &[
            (201.0, &["wss://new.example"]),
            (600.0, &["wss://new.example"]),
        ],
        vec![moved],
    );
    let ours = run(&sim, &open, "greedy");
    assert_eq!((ours.notes, ours.delivered), (2, 2), "{ours:?}");
    assert!(ours.delay_p99.is_some_and(|s| s < 10.0), "{ours:?}");
    let peer = run(&sim, &open, "direct");
    assert_eq!((peer.notes, peer.delivered), (2, 1), "{peer:?}");
}

/// On a generated world, the live ceiling delivers at least what any client does; the hour
/// and every score are the same from the same seed.
#[test]
fn the_ceiling_bounds_every_client_and_draws_repeat() {
    let sim = SimWorld::new(generate(Profile::Small, 7));
    let model = OpenModel::default();
    let open = OpenWorld::draw(&sim, 0, 3_600.0, &model);
    assert_eq!(open, OpenWorld::draw(&sim, 0, 3_600.0, &model));
    assert_ne!(open, OpenWorld::draw(&sim, 1, 3_600.0, &model));
    assert!(open.notes.iter().any(|n| n.counted), "no note counted");
    assert!(open
        .down
        .iter()
        .any(|d| d.iter().any(|&(a, b)| a > 0.0 && b < 3_600.0)));
    let top = ceiling(&open, 20);
    assert!(top.at_budget <= top.delivered, "{top:?}");
    assert!(top.at_budget >= ceiling(&open, 4).at_budget, "{top:?}");
    for strategy in ["recall", "greedy", "applesauce", "welshman", "nostr_sdk"] {
        let first = run(&sim, &open, strategy);
        assert_eq!(first, run(&sim, &open, strategy), "{strategy}");
        assert_eq!(first.notes, top.notes, "{strategy}");
        assert!(first.delivered <= top.delivered, "{strategy}: {first:?}");
        assert!(first.delivered > 0, "{strategy}: {first:?}");
    }
}

/// Relays beyond the socket budget are polled in turns: nothing is lost, only later.
#[test]
fn relays_beyond_the_sockets_are_polled() {
    let sim = world(&["wss://a.example"], &["wss://a.example"]);
    let open = hour(&sim, &[], &[(100.0, &["wss://a.example"])], Vec::new());
    let mut router = router("greedy");
    let mut stats = DeliveryStats::new();
    let ctx = PlanContext::at(sim.world.now).window(Window::D7.secs());
    let plan = router.plan_with(&sim.table, &stats, ctx);
    let asks = Asks::from_plan(&sim, &plan);
    let cfg = OpenConfig {
        sockets: 0,
        ..OpenConfig::default()
    };
    let score = keep_open(
        &sim,
        &open,
        0,
        ctx,
        &asks,
        &mut router,
        &mut stats,
        &cfg,
        &ClientTiming::default(),
        sim.world.now,
    );
    assert_eq!((score.notes, score.delivered), (1, 1), "{score:?}");
    assert!(
        score
            .delay_p50
            .is_some_and(|s| s > 0.0 && s <= cfg.poll_secs + 10.0),
        "{score:?}"
    );
}

/// A follow the reader adds while the feed is open is planned for at once: its notes from
/// then on arrive, those from before it was followed are not counted.
#[test]
fn a_follow_added_while_open_is_read() {
    let sim = world(&["wss://a.example"], &["wss://a.example"]);
    let mut open = hour(
        &sim,
        &[],
        &[(100.0, &["wss://a.example"]), (400.0, &["wss://a.example"])],
        Vec::new(),
    );
    open.notes[0].counted = false;
    open.follow_changes = vec![FollowChange {
        t: 300.0,
        author: 0,
        follows: true,
    }];
    assert!(!open.follows(0, 299.0) && open.follows(0, 300.0));
    let ours = run(&sim, &open, "greedy");
    assert_eq!((ours.notes, ours.delivered), (1, 1), "{ours:?}");
    assert!(ours.plans >= 1, "{ours:?}");
    let peer = run(&sim, &open, "applesauce");
    assert_eq!((peer.notes, peer.delivered), (1, 1), "{peer:?}");
}

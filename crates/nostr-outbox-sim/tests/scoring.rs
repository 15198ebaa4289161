//! Scoring on a tiny hand-made world, checked against hand-computed numbers.

use nostr_outbox_core::stats::Decay;
use nostr_outbox_core::DeliveryStats;
use nostr_outbox_sim::{observe, score, Asks, PlanFile, PlanFileEntry, SimWorld, Window};
use nostr_outbox_world::World;

const READER: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const ALICE: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const BOB: &str = "e493dbf1c10d80f3581e4904930b1404cc6c13900ee0758474fa94abe8c4cd13";
const CAROL: &str = "2f8bde4d1a07209355b4a7250a5c5128e88b84bddc619ab7cba8d569b240efe4";
const NOW: u64 = 100_000_000;
const DAY: u64 = 86_400;

fn id(n: u8) -> String {
    format!("{:064x}", n)
}

/// Alice writes to a and b; Bob to b (and c, which is dead); Carol has no list.
/// Session 0: a and b up, home up. Session 1: a down.
fn world() -> World {
    let ev = |n: u8, author: &str, age_days: u64, on: &[&str]| {
        let on: Vec<String> = on
            .iter()
            .map(|u| format!("\"wss://{u}.example\""))
            .collect();
        format!(
            r#"{{"id": "{}", "author": "{author}", "created_at": {}, "kind": 1, "on": [{}]}}"#,
            id(n),
            NOW - age_days * DAY,
            on.join(", ")
        )
    };
    let events = [
        ev(1, ALICE, 1, &["a", "b"]),
        ev(2, ALICE, 2, &["a"]),
        ev(3, ALICE, 100, &["a"]),
        ev(4, ALICE, 200, &["x"]), // only on a relay she does not list
        ev(5, BOB, 3, &["b"]),
        ev(6, BOB, 400, &["b"]),
        ev(7, CAROL, 1, &["home"]),
        ev(8, CAROL, 2, &["nowhere"]), // no relay serves it
    ];
    let json = format!(
        r#"{{"format": "outbox-world/1", "name": "tiny", "now": {NOW}, "sessions": 2,
  "reader": {{"pubkey": "{READER}", "follows": ["{ALICE}", "{BOB}", "{CAROL}"], "relays": ["wss://home.example"]}},
  "relay_lists": [
    {{"author": "{ALICE}", "created_at": 1, "tags": [["r", "WSS://A.example/"], ["r", "wss://b.example", "write"], ["r", "wss://home.example", "read"]]}},
    {{"author": "{BOB}", "created_at": 1, "tags": [["r", "wss://b.example"], ["r", "wss://c.example"], ["r", "http://junk"]]}}
  ],
  "relays": {{
    "wss://a.example": {{"up": [true, false]}},
    "wss://b.example": {{"up": [true, true]}},
    "wss://x.example": {{"up": [true, true]}},
    "wss://home.example": {{"up": [true, true]}}
  }},
  "events": [{}]}}"#,
        events.join(",\n")
    );
    World::from_json(&json).unwrap()
}

fn plan(entries: &[(&str, &[&str])]) -> PlanFile {
    let relays = entries
        .iter()
        .map(|(url, authors)| PlanFileEntry::new(*url, authors.to_vec()));
    PlanFile::new("hand", 0, relays.collect())
}

#[test]
fn recall_matches_hand_computation() {
    let sim = SimWorld::new(world());
    // Ask a about Alice, home about Carol. Bob is asked nowhere.
    let file = plan(&[
        ("wss://a.example", &[ALICE]),
        ("wss://home.example", &[CAROL]),
    ]);
    let asks = Asks::from_plan_file(&sim, &file).unwrap();
    let s0 = score(&sim, &asks, 0, &Window::ALL);
    // Session 0, 7d: available = e1 e2 (Alice) e5 (Bob) e7 (Carol) = 4 (e8 is nowhere).
    // Declared (Alice a,b; Bob b; Carol none): e1 e2 e5 = 3. Fetched: e1 e2 (a), e7 (home) = 3.
    // Declared fetched: e1 e2 = 2.
    let w7 = s0.window(Window::D7).unwrap();
    assert_eq!(
        (
            w7.available,
            w7.declared_available,
            w7.fetched,
            w7.declared_fetched
        ),
        (4, 3, 3, 2)
    );
    assert!((w7.declared_recall - 2.0 / 3.0).abs() < 1e-12);
    assert!((w7.total_recall - 3.0 / 4.0).abs() < 1e-12);
    // 1yr adds e3 (a, declared, fetched) and e4 (x: available, not declared, not fetched).
    let y1 = s0.window(Window::Y1).unwrap();
    assert_eq!(
        (
            y1.available,
            y1.declared_available,
            y1.fetched,
            y1.declared_fetched
        ),
        (6, 4, 4, 3)
    );
    // 3yr adds e6 (Bob on b: declared, not fetched).
    let y3 = s0.window(Window::Y3).unwrap();
    assert_eq!(
        (
            y3.available,
            y3.declared_available,
            y3.fetched,
            y3.declared_fetched
        ),
        (7, 5, 4, 3)
    );
    assert_eq!(s0.connections, 2);
    assert_eq!(s0.disclosure, 2);
    assert!((s0.author_coverage - 2.0 / 3.0).abs() < 1e-12);
    assert!((s0.load_concentration - 0.5).abs() < 1e-12);

    // Session 1: a is down. 7d available: e1 (b) e5 e7 = 3; declared e1 e5 = 2; fetched e7 only.
    let s1 = score(&sim, &asks, 1, &[Window::D7]);
    let w = s1.window(Window::D7).unwrap();
    assert_eq!(
        (
            w.available,
            w.declared_available,
            w.fetched,
            w.declared_fetched
        ),
        (3, 2, 1, 0)
    );
}

#[test]
fn observation_feeds_delivery_stats_as_defined() {
    let sim = SimWorld::new(world());
    // a and b both asked about Alice; b also about Bob; home about Carol.
    let file = plan(&[
        ("wss://a.example", &[ALICE]),
        ("wss://b.example", &[ALICE, BOB]),
        ("wss://c.example", &[BOB]),
        ("wss://home.example", &[CAROL]),
    ]);
    let asks = Asks::from_plan_file(&sim, &file).unwrap();
    let since = NOW - 7 * DAY;
    let obs = observe(&sim, &asks, 1, since);
    let a = &obs.relays[0];
    assert!(!a.up && a.returned.is_empty(), "a is down in session 1");
    let b = &obs.relays[1];
    assert!(b.up);
    assert_eq!(b.returned.len(), 2);
    assert_eq!(b.returned[0].events, 1);
    assert_eq!(b.returned[0].newest, NOW - DAY);
    assert!(!obs.relays[2].up, "c is not in the world: never answers");
    let mut stats = DeliveryStats::with_decay(Decay::Hourly { factor: 1.0 });
    obs.record(&sim, &mut stats, NOW);
    // b: asked Alice and Bob, both returned by someone, b returned all of each → two trials,
    // both full successes.
    let sb = stats.get("wss://b.example");
    assert_eq!((sb.alpha, sb.beta), (3.0, 1.0));
    // a and c: failures, one trial each (the one author someone returned notes of).
    for url in ["wss://a.example", "wss://c.example"] {
        let s = stats.get(url);
        assert_eq!((s.failures, s.alpha, s.beta), (1, 1.0, 2.0), "{url}");
    }
}

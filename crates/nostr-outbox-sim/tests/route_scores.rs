//! Inbox recall and publish reach on hand-made worlds whose answers are known exactly.

use nostr_outbox_client::RouteBudget;
use nostr_outbox_core::UrlPolicy;
use nostr_outbox_sim::{score_routes, RouteLoopConfig, Window};
use nostr_outbox_world::World;

const R: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const B: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const C: &str = "e493dbf1c10d80f3581e4904930b1404cc6c13900ee0758474fa94abe8c4cd13";
const D: &str = "2f8bde4d1a07209355b4a7250a5c5128e88b84bddc619ab7cba8d569b240efe4";
const NOW: u64 = 100_000_000;

fn id(n: u8) -> String {
    format!("{:064x}", n)
}

/// The reader R reads on `home` (also its configured relay) and `inbox`; B writes and reads on
/// `bw`; C writes on `cw` and `bw` and reads on `cr`; D has no list. `inbox` and `cr` fail in
/// session 1, `down` never answers.
fn world() -> World {
    let mention = |n: u8, age: u64, on: &str| {
        format!(
            r#"{{"id": "{}", "author": "{D}", "created_at": {}, "kind": 1, "on": [{on}]}}"#,
            id(n),
            NOW - age
        )
    };
    let json = format!(
        r#"{{"format": "outbox-world/1", "now": {NOW}, "sessions": 2,
  "reader": {{"pubkey": "{R}", "follows": ["{B}", "{C}"], "relays": ["wss://home.example"]}},
  "relay_lists": [
    {{"author": "{R}", "created_at": 1, "tags": [["r", "wss://home.example"], ["r", "wss://inbox.example", "read"]]}},
    {{"author": "{B}", "created_at": 1, "tags": [["r", "wss://bw.example"]]}},
    {{"author": "{C}", "created_at": 1, "tags": [["r", "wss://cw.example", "write"], ["r", "wss://bw.example", "write"], ["r", "wss://cr.example", "read"]]}}
  ],
  "relays": {{
    "wss://home.example": {{"up": [true, true]}},
    "wss://inbox.example": {{"up": [true, false]}},
    "wss://bw.example": {{"up": [true, true]}},
    "wss://cw.example": {{"up": [true, true]}},
    "wss://cr.example": {{"up": [true, false]}},
    "wss://down.example": {{"up": [false, false]}}
  }},
  "mentions": [{}, {}, {}, {}, {}],
  "events": [
    {{"id": "{}", "author": "{B}", "created_at": 10, "kind": 1, "on": [], "p": ["{C}", "{D}"]}},
    {{"id": "{}", "author": "{C}", "created_at": 10, "kind": 1, "on": [], "p": ["{B}", "{C}"]}},
    {{"id": "{}", "author": "{C}", "created_at": 10, "kind": 1, "on": []}}
  ]}}"#,
        mention(1, 1_000, r#""wss://home.example""#),
        mention(2, 1_000, r#""wss://inbox.example""#),
        mention(3, 1_000, r#""wss://bw.example""#),
        mention(4, 1_000, r#""wss://down.example""#),
        mention(
            5,
            30 * 86_400,
            r#""wss://inbox.example", "wss://nowhere.example""#
        ),
        id(11),
        id(12),
        id(13),
    );
    World::from_json(&json).unwrap()
}

#[test]
fn inbox_recall_and_publish_reach_are_exact() {
    let w = world();
    let cfg = RouteLoopConfig {
        sessions: 2,
        windows: vec![Window::Y1, Window::D7],
        ..RouteLoopConfig::default()
    };
    let scores = score_routes(&w, &UrlPolicy::default(), &cfg);
    assert_eq!(scores.len(), 2);
    let (s0, s1) = (&scores[0], &scores[1]);
    for s in &scores {
        assert_eq!(s.violations, 0);
        assert_eq!((s.inbox_relays, s.naive_inbox_relays), (2, 1));
    }
    // Session 0: every relay but `down` answers. In a week: mentions 1-3 are available (4 only
    // on `down`); the route finds 1 (home) and 2 (inbox), the naive inbox only 1.
    let d7 = s0.inbox(Window::D7).unwrap();
    assert_eq!((d7.available, d7.routed, d7.naive), (3, 2, 1));
    // In a year mention 5 (on inbox) counts too.
    let y1 = s0.inbox(Window::Y1).unwrap();
    assert_eq!((y1.available, y1.routed, y1.naive), (4, 3, 1));
    assert_eq!(y1.recall(), Some(0.75));
    assert_eq!(y1.naive_recall(), Some(0.25));
    // Session 1: `inbox` fails, so mentions 2 and 5 are not available.
    let y1 = s1.inbox(Window::Y1).unwrap();
    assert_eq!((y1.available, y1.routed, y1.naive), (2, 1, 1));

    // Publishing: note 1 (B tags C and D): C reads on cr, D has no list. Note 2 (C tags B and
    // itself): B reads on bw, where C writes. Note 3 tags nobody.
    let p = s0.publish;
    assert_eq!((p.notes, p.tagged, p.no_read_relays), (2, 2, 1));
    // The route sends note 1 to bw and cr (C reached), note 2 to cw and bw (B reached); the
    // naive client sends note 1 only to bw (C missed).
    assert_eq!((p.routed, p.naive), (2, 1));
    assert_eq!((p.routed_targets, p.naive_targets), (4, 3));
    assert_eq!(p.reach(), Some(1.0));
    assert_eq!(p.naive_reach(), Some(0.5));
    // Session 1: cr fails, so C is not reached by note 1.
    assert_eq!((s1.publish.routed, s1.publish.naive), (1, 1));
}

#[test]
fn the_route_loop_learns_which_relays_answer() {
    // B reads on two relays; `a` (first by URL) never answers. With one relay per person, the
    // first session picks `a` (nothing learned, ties by URL) and misses; the second has learned
    // that `a` failed and picks `b`.
    let json = format!(
        r#"{{"format": "outbox-world/1", "now": {NOW}, "sessions": 2,
  "reader": {{"pubkey": "{R}", "follows": ["{C}"], "relays": []}},
  "relay_lists": [
    {{"author": "{B}", "created_at": 1, "tags": [["r", "wss://a.example", "read"], ["r", "wss://b.example", "read"]]}}
  ],
  "relays": {{"wss://a.example": {{"up": [false, false]}}, "wss://b.example": {{"up": [true, true]}}}},
  "events": [{{"id": "{}", "author": "{C}", "created_at": 10, "kind": 1, "on": [], "p": ["{B}"]}}]}}"#,
        id(1)
    );
    let w = World::from_json(&json).unwrap();
    let cfg = RouteLoopConfig {
        sessions: 2,
        windows: vec![Window::Y1],
        budget: RouteBudget {
            per_person: 1,
            ..RouteBudget::default()
        },
        ..RouteLoopConfig::default()
    };
    let scores = score_routes(&w, &UrlPolicy::default(), &cfg);
    let reached: Vec<u64> = scores.iter().map(|s| s.publish.routed).collect();
    assert_eq!(reached, [0, 1]);
    // No mention in the world: inbox recall does not apply.
    assert_eq!(scores[0].inbox(Window::Y1).unwrap().recall(), None);
}

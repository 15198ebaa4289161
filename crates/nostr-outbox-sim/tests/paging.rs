//! Relays that cap each REQ: the simulated client pages through them as the runtime does,
//! and the bench counts what that costs.

use nostr::key::PublicKey;
use nostr_outbox_client::paging::Paging;
use nostr_outbox_sim::{fetch, observe, score, Ask, Asks, SimWorld, Window};
use nostr_outbox_world::world::{PartEvent, WorldParts};
use nostr_outbox_world::{generate, Profile, World};

const READER: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const ALICE: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const BOB: &str = "e493dbf1c10d80f3581e4904930b1404cc6c13900ee0758474fa94abe8c4cd13";
const NOW: u64 = 100_000_000;
const HOUR: u64 = 3_600;
const CAPPED: &str = "wss://capped.example";
const OPEN: &str = "wss://open.example";

fn key(hex: &str) -> PublicKey {
    PublicKey::from_hex(hex).unwrap()
}

fn event(n: u32, author: u32, created_at: u64, on: &[&str]) -> PartEvent {
    let mut id = [0u8; 32];
    id[28..].copy_from_slice(&n.to_be_bytes());
    PartEvent {
        id,
        author,
        created_at,
        kind: 1,
        on: on.iter().map(|u| (*u).to_string()).collect(),
    }
}

/// Alice has `alice` notes on the capped relay, `per_second` to a second, newest at `NOW`;
/// Bob has 40 notes on the uncapped relay. Both relays answer in the one session.
fn world(alice: u32, per_second: u32, cap: u32) -> SimWorld {
    let mut events: Vec<PartEvent> = (0..alice)
        .map(|n| event(n, 0, NOW - u64::from(n / per_second), &[CAPPED]))
        .collect();
    events.extend((0..40).map(|n| event(1_000_000 + n, 1, NOW - u64::from(n) * HOUR, &[OPEN])));
    let mut world = World::from_parts(WorldParts {
        name: "deep".into(),
        now: NOW,
        sessions: 1,
        reader: Some(key(READER)),
        follows: vec![key(ALICE), key(BOB)],
        reader_relays: vec![OPEN.into()],
        relay_lists: Vec::new(),
        relays: vec![(CAPPED.into(), vec![true]), (OPEN.into(), vec![true])],
        events,
    })
    .unwrap();
    assert!(world.set_max_limit(CAPPED, Some(cap)));
    SimWorld::new(world)
}

fn asks(sim: &SimWorld) -> Asks {
    let ask = |url: &str, authors: Vec<u32>| Ask {
        url: url.into(),
        relay: sim.world.relay_id(url),
        authors,
    };
    Asks {
        entries: vec![ask(CAPPED, vec![0]), ask(OPEN, vec![1])],
        orphans: None,
        foreign_authors: 0,
    }
}

#[test]
fn a_capped_relay_with_a_deep_history_is_fetched_completely() {
    // 1,234 notes a second apart, all inside a year, on a relay that serves 100 a page.
    let sim = world(1_234, 1, 100);
    let asks = asks(&sim);
    let s = score(&sim, &asks, 0, &[Window::Y1]);
    let y1 = s.window(Window::Y1).unwrap();
    assert_eq!((y1.available, y1.fetched), (1_274, 1_274));
    assert_eq!(y1.total_recall, 1.0);
    let cost = s.cost(Window::Y1).unwrap();
    // The client asks 500 and gets 100 a page; each later page repeats the edge note, so page
    // k ends at note 100 + 99(k-1): 13 pages for Alice (the last returns 46), 1 for Bob.
    assert_eq!(cost.round_trips, 13 + 1);
    assert_eq!(cost.events, 12 * 100 + 46 + 40);
    assert_eq!(cost.cut_chunks, 0);
    // Per relay, and what the client learns: distinct notes per author.
    let obs = observe(&sim, &asks, 0, NOW - Window::Y1.secs());
    assert_eq!(obs.relays[0].cost.round_trips, 13);
    assert_eq!(obs.relays[0].returned[0].events, 1_234);
    assert_eq!(obs.relays[0].returned[0].oldest, NOW - 1_233);
    assert_eq!(obs.relays[1].cost.round_trips, 1);
    assert_eq!(obs.relays[1].returned[0].events, 40);
}

#[test]
fn notes_sharing_a_second_across_page_edges_are_not_lost() {
    // Three notes a second: page edges fall inside seconds.
    let sim = world(1_234, 3, 100);
    let f = fetch(&sim, &asks(&sim), 0, NOW - Window::Y1.secs(), false);
    assert_eq!(f.delivered.iter().filter(|&&d| d).count(), 1_274);
    assert_eq!(f.cost.cut_chunks, 0);
    // An uncapped relay is paged by the client's own limit (500): three pages and a last.
    let sim = world(1_234, 1, u32::MAX);
    let f = fetch(&sim, &asks(&sim), 0, NOW - Window::Y1.secs(), false);
    assert_eq!(f.delivered.iter().filter(|&&d| d).count(), 1_274);
    assert_eq!(f.relays[0].cost.round_trips, 3);
}

#[test]
fn the_page_budget_cuts_the_fetch_and_recall_counts_what_came() {
    let pages = Paging::default().max_pages;
    let alice = 100 * pages + 5_000;
    let sim = world(alice, 1, 100);
    let s = score(&sim, &asks(&sim), 0, &[Window::Y1]);
    let cost = s.cost(Window::Y1).unwrap();
    assert_eq!(cost.cut_chunks, 1);
    assert_eq!(cost.round_trips, u64::from(pages) + 1);
    let y1 = s.window(Window::Y1).unwrap();
    let got = 100 + 99 * (u64::from(pages) - 1);
    assert_eq!(y1.fetched, got + 40);
    assert_eq!(y1.available, u64::from(alice) + 40);
    assert!(y1.total_recall < 1.0);
}

#[test]
fn a_window_fetches_only_its_own_span() {
    // Alice's notes are a second apart: a 7-day window holds all 1,234, so it costs the same;
    // Bob's 40 hourly notes are all inside 7 days too.
    let sim = world(1_234, 1, 100);
    let s = score(&sim, &asks(&sim), 0, &[Window::D7, Window::Y1]);
    assert_eq!(s.cost(Window::D7), s.cost(Window::Y1));
    // With notes older than the window, the window stops at `since`.
    let f = fetch(&sim, &asks(&sim), 0, NOW - 500, false);
    assert_eq!(f.delivered.iter().filter(|&&d| d).count(), 501 + 1);
    assert_eq!(f.relays[0].cost.round_trips, 6);
}

/// With complete paging, a generated world's recall is the definition's: an event is fetched
/// when an asked relay that answers stores it.
#[test]
fn complete_paging_leaves_recall_as_defined() {
    nostr_outbox_strategies::link();
    let sim = SimWorld::new(generate(Profile::Small, 5));
    let world = &sim.world;
    let mut router =
        nostr_outbox_core::Router::from_toml("[strategy]\ntype = \"greedy\"\n").expect("config");
    let asks = Asks::from_plan(&sim, &router.plan(&sim.table, 1));
    for session in 0..world.sessions {
        let s = score(&sim, &asks, session, &Window::ALL);
        for w in Window::ALL {
            let since = world.now - w.secs();
            let mut want = 0u64;
            for e in world.events().iter().filter(|e| e.created_at >= since) {
                let asked = asks.entries.iter().any(|x| {
                    x.relay.is_some_and(|r| {
                        world.is_up(r, session)
                            && x.authors.contains(&e.author)
                            && world.event_relays(e).contains(&r)
                    })
                });
                want += u64::from(asked);
            }
            assert_eq!(s.window(w).unwrap().fetched, want, "session {session} {w}");
            let cost = s.cost(w).unwrap();
            assert_eq!(cost.cut_chunks, 0);
            assert!(cost.events >= want, "every fetched event came in some page");
            assert!(cost.round_trips > 0);
        }
    }
}

//! The live bench on the world's clock: each local relay behind a delay proxy, the live
//! timeline measured beside the simulator's replay. Only what load cannot change is asserted:
//! what arrives, which relay's notes come first when one relay is many times slower than the
//! others, and that no note comes sooner than its relay's timing allows (waits only ever grow
//! on a busy machine). No time figure is compared with the simulator's.

use std::time::Duration;

use nostr::key::{Keys, SecretKey};
use nostr_outbox_live::{run_live, LiveConfig, LiveReport, LiveStrategy, Progress};
use nostr_outbox_sim::World;
use serde_json::json;

const NOW: u64 = 1_767_225_600;
const SESSIONS: u32 = 3;
const NOTES_PER_FOLLOW: u64 = 30;

const READER: &str = "wss://reader.example";
const FAST: [&str; 4] = [
    "wss://fast1.example",
    "wss://fast2.example",
    "wss://fast3.example",
    "wss://fast4.example",
];
const SLOW: &str = "wss://slow.example";
const HOLE: &str = "wss://hole.example";

/// The slow relay: its first note cannot arrive sooner than one connect and one page.
const SLOW_CONNECT_MS: u32 = 80;
const SLOW_QUERY_MS: u32 = 1_500;

/// The black hole is down in these sessions (up in the others).
const HOLE_UP: [bool; SESSIONS as usize] = [false, true, false];

fn key(i: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[i + 1; 32]).expect("a valid secret key"))
}

fn timing(connect_ms: u32, query_ms: u32, hangs: bool) -> serde_json::Value {
    // No per-session or per-request noise and no tail: every draw is the median.
    json!({"connect_ms": connect_ms, "query_ms": query_ms, "jitter": 0.0, "spread": 0.0,
           "tail": 0.0, "hangs": hangs})
}

/// Twelve follows: six write to two fast relays each, three only to the slow relay, three only
/// to the black hole; thirty notes each over the last year. Every relay is uncapped, so each
/// relay answers its follows in one page.
fn world() -> World {
    let up = vec![true; SESSIONS as usize];
    let mut relays = serde_json::Map::new();
    relays.insert(
        READER.into(),
        json!({"up": up, "timing": timing(20, 30, false)}),
    );
    for (i, url) in FAST.iter().enumerate() {
        let (connect, query) = [(20, 30), (40, 60), (60, 100), (80, 150)][i];
        relays.insert(
            (*url).into(),
            json!({"up": up, "timing": timing(connect, query, false)}),
        );
    }
    relays.insert(
        SLOW.into(),
        json!({"up": up, "timing": timing(SLOW_CONNECT_MS, SLOW_QUERY_MS, false)}),
    );
    relays.insert(
        HOLE.into(),
        json!({"up": HOLE_UP, "timing": timing(30, 50, true)}),
    );
    let mut follows = Vec::new();
    let mut lists = Vec::new();
    let mut events = Vec::new();
    for f in 0..12u8 {
        let pubkey = key(f).public_key().to_hex();
        let writes: Vec<&str> = match f {
            0..=5 => vec![FAST[f as usize % 4], FAST[(f as usize + 1) % 4]],
            6..=8 => vec![SLOW],
            _ => vec![HOLE],
        };
        let tags: Vec<[&str; 2]> = writes.iter().map(|u| ["r", *u]).collect();
        lists.push(json!({"author": pubkey, "created_at": NOW - 86_400, "tags": tags}));
        for n in 0..NOTES_PER_FOLLOW {
            events.push(json!({
                "id": format!("{:064x}", u64::from(f) * 1_000 + n + 1),
                "author": pubkey,
                "created_at": NOW - 3_600 - n * 10 * 86_400 - u64::from(f),
                "kind": 1,
                "on": writes,
            }));
        }
        follows.push(pubkey);
    }
    let text = json!({
        "format": "outbox-world/1",
        "name": "clock-test",
        "now": NOW,
        "sessions": SESSIONS,
        "reader": {"pubkey": key(200).public_key().to_hex(), "follows": follows,
                   "relays": [READER]},
        "relay_lists": lists,
        "relays": relays,
        "events": events,
    })
    .to_string();
    World::from_json(&text).expect("a valid world")
}

async fn bench(world: World) -> LiveReport {
    bench_with(world, false).await
}

/// [`bench`], the first session looking the lists up when `lookup_first`.
async fn bench_with(world: World, lookup_first: bool) -> LiveReport {
    nostr_outbox_strategies::link();
    let greedy = LiveStrategy::from_toml(
        "greedy",
        "max_connections = 20\nprobe_connections = 0\n[strategy]\ntype = \"greedy\"\n",
    )
    .expect("greedy");
    let mut cfg = LiveConfig {
        sessions: SESSIONS,
        // Apart from the other test's ports: the tests run at once.
        port_hint: if lookup_first { 23_200 } else { 23_000 },
        lookup_first,
        ..LiveConfig::timed()
    };
    // A black hole costs three connect timeouts: short ones keep the test quick, with room
    // for a loaded machine above the slowest connect here (80 ms).
    cfg.runtime.connect_timeout = Duration::from_secs(1);
    cfg.runtime.eose_timeout = Duration::from_secs(4);
    cfg.runtime.backoff.initial = Duration::from_millis(50);
    cfg.runtime.lookup_grace = Duration::from_millis(200);
    cfg.runtime.replan_debounce = Duration::from_millis(50);
    cfg.runtime.deadline = Some(Duration::from_secs(30));
    run_live(world, &[greedy], &cfg, |p| {
        if let Progress::Session { result: r, .. } = p {
            let t = r.time.as_ref().expect("timed");
            eprintln!(
                "s{}: fetched {}/{} live/sim, set aside {}; screen {:?}/{:?} ms, 90% {:?}/{:?} ms",
                r.session,
                r.live.fetched,
                r.simulated.fetched,
                r.set_aside,
                t.screen.live_ms,
                t.screen.simulated_ms,
                t.p90.live_ms,
                t.p90.simulated_ms,
            );
        }
    })
    .await
    .expect("the live bench runs")
}

/// The world events held only by `url`.
fn only_on(world: &World, url: &str) -> Vec<u32> {
    let relay = world.relay_id(url).expect("a world relay");
    (world.events().iter().enumerate())
        .filter(|(_, e)| world.event_relays(e) == [relay])
        .map(|(i, _)| i as u32)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_relays_deliver_in_the_order_of_their_timing() {
    let world = world();
    let slow: Vec<u32> = only_on(&world, SLOW);
    let hole: Vec<u32> = only_on(&world, HOLE);
    let fast: Vec<u32> = (0..world.events().len() as u32)
        .filter(|e| !slow.contains(e) && !hole.contains(e))
        .collect();
    assert_eq!(
        (slow.len(), hole.len(), fast.len()),
        (90, 90, 180),
        "the world's notes"
    );
    let report = bench(world).await;
    let sessions = &report.strategies[0].sessions;
    assert_eq!(sessions.len(), SESSIONS as usize);
    for r in sessions {
        let s = r.session;
        let time = r.time.as_ref().expect("timed");
        // What arrived is what the simulator fetched (the world is small enough that every
        // relay answers in one page and nothing is lost to a cap).
        assert_eq!(
            (r.live.fetched, r.live.declared_fetched),
            (r.simulated.fetched, r.simulated.declared_fetched),
            "session {s}: live vs simulated fetch"
        );
        assert_eq!(
            time.live.fetched, time.simulated.fetched,
            "session {s}: notes timed live vs simulated"
        );
        assert_eq!(time.arrivals.len() as u64, r.live.fetched, "session {s}");
        let at = |set: &[u32]| -> Vec<f64> {
            (time.arrivals.iter())
                .filter(|(e, _)| set.contains(e))
                .map(|&(_, t)| t)
                .collect()
        };
        // The black hole: never a note while it is down; every one while it is up.
        let from_hole = at(&hole).len();
        if HOLE_UP[s as usize] {
            assert_eq!(from_hole, hole.len(), "session {s}: the relay is up");
        } else {
            assert_eq!(from_hole, 0, "session {s}: a black hole delivered notes");
            assert!(
                r.set_aside >= 1,
                "session {s}: the black hole was set aside"
            );
        }
        // The slow relay: every note, none sooner than a connect and a page after the start,
        // and only after every note of the fast relays (each answering in a sixth of its time or
        // less).
        let (fast_at, slow_at) = (at(&fast), at(&slow));
        assert_eq!(
            (fast_at.len(), slow_at.len()),
            (fast.len(), slow.len()),
            "session {s}: every fast and slow note arrives"
        );
        let first_slow = slow_at.iter().copied().fold(f64::INFINITY, f64::min);
        let last_fast = fast_at.iter().copied().fold(0.0, f64::max);
        assert!(
            first_slow >= f64::from(SLOW_CONNECT_MS + SLOW_QUERY_MS),
            "session {s}: the slow relay's first note at {first_slow:.0} ms, before its \
             connect and first page"
        );
        assert!(
            last_fast < first_slow,
            "session {s}: a fast relay's note at {last_fast:.0} ms, after the slow relay's \
             first at {first_slow:.0} ms"
        );
    }
}

/// A first run that looks the lists up on the reader's relay: no note comes before that relay
/// answered (one connect and one page) and a routed relay then connected and answered, and it
/// fetches what the simulator's first session fetches; handed the lists, a note comes sooner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_run_that_looks_the_lists_up_waits_for_them() {
    let lookup = 20.0 + 30.0;
    let routed = 20.0 + 30.0;
    let report = bench_with(world(), true).await;
    let first = &report.strategies[0].sessions[0];
    assert_eq!(
        (first.live.fetched, first.live.declared_fetched),
        (first.simulated.fetched, first.simulated.declared_fetched),
        "live vs simulated fetch"
    );
    let time = first.time.as_ref().expect("timed");
    let earliest = (time.arrivals.iter().map(|&(_, t)| t)).fold(f64::INFINITY, f64::min);
    assert!(
        earliest >= lookup + routed,
        "a note at {earliest:.0} ms, before the lookup and a routed page"
    );
}

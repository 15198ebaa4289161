//! What one black hole costs a `--once` run: seven local relays that answer and one that
//! accepts a socket and never answers (the only relay a few follows list), at the runtime's default timeouts (connect 10 s, EOSE
//! 15 s), with and without the runtime's schedule (`RuntimeConfig::schedule`). Prints, per run,
//! when the first note came, when every note of the run's fetch was in, and when the run
//! ended. Then the same world behind real-relay latencies (each relay behind the live bench's
//! delay proxy, medians spanning the published connect and query times), beside the same
//! world whose eighth relay refuses at once instead of hanging: the ideal a black hole is
//! measured against. A measurement, not a test: run it a few times on a quiet machine.
//!
//! ```sh
//! cargo run --release -p nostr-outbox-fleet --example black_hole
//! ```

use std::time::{Duration, Instant};

use nostr_outbox_fleet::{
    drain, keys, local_input, note, now, relay_list, router, run_once, BlackHole, RealRelay,
};
use nostr_outbox_live::delay::{DelayCaps, DelayProxy, Mode};
use nostr_outbox_runtime::{Client, RuntimeConfig, Schedule};
use nostr_outbox_sim::RelayTiming;

const RELAYS: usize = 7;
const FOLLOWS: u8 = 28;
/// Follows whose only relay is the black hole (their notes are nowhere else).
const HOLE_FOLLOWS: usize = 4;

/// One run: seconds to the first note and to the last, the run's end, and notes delivered.
async fn run(relays: &[String], hole: &str, schedule: Schedule) -> (f64, f64, f64, usize) {
    let now = now();
    let follows: Vec<_> = (1..=FOLLOWS).map(keys).collect();
    let mut input = local_input(
        router("max_connections = 20\n[strategy]\ntype = \"recall\"\n"),
        follows.iter().map(|k| k.public_key()).collect(),
        [&relays[0]],
    );
    for (i, f) in follows.iter().enumerate() {
        // The first few list only the black hole: every plan asks it about them.
        let list = if i < HOLE_FOLLOWS {
            relay_list(f, now - 1000, &[(hole, None)])
        } else {
            let (a, b) = (&relays[i % RELAYS], &relays[(i + 1) % RELAYS]);
            relay_list(f, now - 1000, &[(a, None), (b, None)])
        };
        input.add_relay_list_event(&list);
    }
    let config = RuntimeConfig {
        once: true,
        discover_lists: false,
        since: Some(nostr::types::Timestamp::from(now - 7 * 86_400)),
        schedule,
        ..RuntimeConfig::default()
    };
    let started = Instant::now();
    let (handle, rx) = nostr_outbox_runtime::start(input, &Client::new(config)).await;
    let collected = drain(rx);
    let summary = run_once(handle, &collected, Duration::from_secs(300)).await;
    let ended = started.elapsed().as_secs_f64();
    let secs = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    let notes = collected.lock().map(|c| c.notes.len()).unwrap_or(0);
    (
        secs(summary.time_to_first_event),
        secs(summary.time_to_full_eose),
        ended,
        notes,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut relays = Vec::new();
    for _ in 0..RELAYS {
        relays.push(RealRelay::start().await);
    }
    let now = now();
    for (i, f) in (1..=FOLLOWS).map(keys).enumerate().skip(HOLE_FOLLOWS) {
        for n in 0..3u64 {
            let held = note(&f, now - 100 - n * 60, &format!("note {i}.{n}"));
            relays[i % RELAYS].store(&held).await;
            relays[(i + 1) % RELAYS].store(&held).await;
        }
    }
    let hole = BlackHole::start().await;
    let before = Schedule {
        aside_on_connect_timeout: false,
        early_waves: false,
        slow_dial: Duration::from_secs(3600),
        ..Schedule::default()
    };
    println!(
        "{RELAYS} relays and one black hole ({HOLE_FOLLOWS} of {FOLLOWS} follows list only it), \
         default timeouts; seconds after the start:"
    );
    println!(
        "{:<22} {:>10} {:>12} {:>10} {:>6}",
        "schedule", "first note", "all settled", "run ends", "notes"
    );
    // Every dial waited on up to its connect timeout, as before `slow_dial`.
    let patient = Schedule {
        slow_dial: Duration::from_secs(3600),
        ..Schedule::default()
    };
    let urls: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();
    for (name, schedule) in [
        ("none", before),
        ("no slow dial", patient),
        ("runtime", Schedule::default()),
    ] {
        let (first, settled, ended, notes) = run(&urls, &hole.url, schedule).await;
        println!("{name:<22} {first:>10.2} {settled:>12.2} {ended:>10.2} {notes:>6}");
    }

    // Behind real-relay latencies: connect and query medians spanning the published ones
    // (connect p50 about 0.65 s, p95 about 1.6 s; a page 0.5-2 s), with their noise and tail.
    const TIMED: [(u32, u32); RELAYS] = [
        (450, 520),
        (550, 640),
        (650, 760),
        (700, 850),
        (820, 980),
        (1000, 1300),
        (1500, 1900),
    ];
    let defaults = RuntimeConfig::default();
    let caps = DelayCaps::of_timeouts(defaults.connect_timeout, defaults.eose_timeout);
    let mut proxies = Vec::new();
    let mut timed = Vec::new();
    for (i, (relay, (connect_ms, query_ms))) in relays.iter().zip(TIMED).enumerate() {
        let timing = RelayTiming {
            connect_ms,
            query_ms,
            jitter: 0.25,
            spread: 0.35,
            tail: 0.01,
            hangs: false,
        };
        let upstream = port(&relay.url);
        let port = free_port().await;
        let mut proxy = DelayProxy::new(
            &format!("wss://relay-{i}.example"),
            timing,
            port,
            upstream,
            caps,
        );
        proxy
            .listen(Mode::Forward { session: 1 })
            .await
            .expect("the proxy listens");
        proxies.push(proxy);
        timed.push(format!("ws://127.0.0.1:{port}"));
    }
    // The ideal: the eighth relay down but refusing at once.
    let refusing = format!("ws://127.0.0.1:{}", free_port().await);
    println!();
    println!("behind real-relay latencies (runtime schedule), seconds after the start:");
    println!(
        "{:<22} {:>10} {:>12} {:>10} {:>6}",
        "eighth relay", "first note", "all settled", "run ends", "notes"
    );
    let mut rows = Vec::new();
    for round in 0..3 {
        for (name, eighth) in [("refuses (ideal)", &refusing), ("black hole", &hole.url)] {
            let (first, settled, ended, notes) = run(&timed, eighth, Schedule::default()).await;
            println!("{name:<22} {first:>10.2} {settled:>12.2} {ended:>10.2} {notes:>6}");
            rows.push((round, name, first, ended));
        }
    }
    for pair in rows.chunks(2) {
        if let [(_, _, ideal, _), (round, _, first, ended)] = pair {
            println!(
                "round {round}: first note {:.2}x the ideal, run ends at {ended:.2} s",
                first / ideal
            );
        }
    }
    for proxy in &mut proxies {
        proxy.stop().await;
    }
}

/// The port of a `ws://127.0.0.1:port` URL.
fn port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a local relay's URL ends in its port")
}

/// A port nothing listens on now.
async fn free_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port");
    listener.local_addr().expect("bound").port()
}

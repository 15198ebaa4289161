//! What one black hole costs a `--once` run: seven local relays that answer and one that
//! accepts a socket and never answers (the only relay a few follows list), at the runtime's default timeouts (connect 10 s, EOSE
//! 15 s), with and without the runtime's schedule (`RuntimeConfig::schedule`). Prints, per run,
//! when the first note came, when every note of the run's fetch was in, and when the run
//! ended. A measurement, not a test: run it a few times on a quiet machine.
//!
//! ```sh
//! cargo run --release -p nostr-outbox-fleet --example black_hole
//! ```

use std::time::{Duration, Instant};

use nostr_outbox_core::UrlPolicy;
use nostr_outbox_fleet::{
    drain, keys, note, now, relay_list, router, run_once, BlackHole, RealRelay,
};
use nostr_outbox_runtime::{Client, FeedInput, RuntimeConfig, Schedule};

const RELAYS: usize = 7;
const FOLLOWS: u8 = 28;
/// Follows whose only relay is the black hole (their notes are nowhere else).
const HOLE_FOLLOWS: usize = 4;

/// One run: seconds to the first note and to the last, the run's end, and notes delivered.
async fn run(relays: &[RealRelay], hole: &str, schedule: Schedule) -> (f64, f64, f64, usize) {
    let now = now();
    let follows: Vec<_> = (1..=FOLLOWS).map(keys).collect();
    let mut input = FeedInput::new(
        router("max_connections = 20\n[strategy]\ntype = \"recall\"\n"),
        follows.iter().map(|k| k.public_key()).collect(),
        [&relays[0].url],
    );
    input.router = input.router.with_policy(UrlPolicy::allow_local());
    for (i, f) in follows.iter().enumerate() {
        // The first few list only the black hole: every plan asks it about them.
        let list = if i < HOLE_FOLLOWS {
            relay_list(f, now - 1000, &[(hole, None)])
        } else {
            let (a, b) = (&relays[i % RELAYS].url, &relays[(i + 1) % RELAYS].url);
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
    for (name, schedule) in [
        ("none", before),
        ("no slow dial", patient),
        ("runtime", Schedule::default()),
    ] {
        let (first, settled, ended, notes) = run(&relays, &hole.url, schedule).await;
        println!("{name:<22} {first:>10.2} {settled:>12.2} {ended:>10.2} {notes:>6}");
    }
}

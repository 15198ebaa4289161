//! What a restarted feed costs: six local relays (behind byte-counting proxies) hold a week of
//! notes of 40 follows; `outbox feed --once` with a store runs first, then ten new notes are
//! published and a continuing `outbox feed` starts on the same store. Prints how soon the
//! restarted feed printed what it kept, how soon every new note came, and the bytes its
//! catch-up moved beside the first run's full window. A measurement, not a test.
//!
//! ```sh
//! cargo build --release -p nostr-outbox
//! cargo run --release -p nostr-outbox-fleet --example kept_restart -- target/release/outbox
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nostr_outbox_fleet::{keys, note, now, proxy, relay_list, Gauge, RealRelay};

const RELAYS: usize = 6;
const FOLLOWS: u8 = 40;
const NOTES_EACH: u64 = 15;
const NEW: usize = 10;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let program = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/release/outbox".into());
    let dir = tempfile::tempdir().unwrap();
    let mut relays = Vec::new();
    for _ in 0..RELAYS {
        relays.push(RealRelay::start().await);
    }
    let now = now();
    let follows: Vec<_> = (1..=FOLLOWS).map(keys).collect();
    let mut hexes = Vec::new();
    for (i, f) in follows.iter().enumerate() {
        let home = &relays[1 + i % (RELAYS - 1)];
        relays[0]
            .store(&relay_list(f, now - 10_000, &[(&home.url, None)]))
            .await;
        for n in 0..NOTES_EACH {
            let at = now - 600 - n * 40_000;
            home.store(&note(f, at, &format!("f{i} n{n}"))).await;
        }
        hexes.push(f.public_key().to_hex());
    }
    let follows_file = dir.path().join("follows.txt");
    std::fs::write(&follows_file, hexes.join("\n")).unwrap();
    let store = format!("sqlite:{}", dir.path().join("kept.sqlite").display());

    // Every run goes through proxies of its own, so its bytes are its own.
    let proxied = |gauge: Gauge| {
        let urls: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();
        async move {
            let mut out = Vec::new();
            for url in urls {
                out.push(proxy(&url, gauge.clone()).await);
            }
            out
        }
    };
    let command = |reader: &str, once: bool| {
        let mut cmd = Command::new(&program);
        cmd.args(["feed", "--allow-local", "--json", "--since", "7d"])
            .args(["--relays", reader, "--store", &store])
            .arg("--follows")
            .arg(&follows_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if once {
            cmd.arg("--once");
        }
        cmd
    };

    let first = Gauge::default();
    let urls = proxied(first.clone()).await;
    let started = Instant::now();
    let out = command(&urls[0], true).output().unwrap();
    let fetched = String::from_utf8_lossy(&out.stdout).lines().count();
    let full = first.bytes.load(Ordering::SeqCst);
    println!(
        "first run (--once, 7 days): {fetched} notes, {full} bytes, {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let mut new = Vec::new();
    for (i, f) in follows.iter().enumerate().take(NEW) {
        let home = &relays[1 + i % (RELAYS - 1)];
        let n = note(f, now + 1, &format!("f{i} new"));
        home.store(&n).await;
        new.push(n.id.to_hex());
    }

    let second = Gauge::default();
    let urls = proxied(second.clone()).await;
    let started = Instant::now();
    let mut child = command(&urls[0], false).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (kept_at, new_at, kept) = tokio::task::spawn_blocking(move || {
        let mut kept_at = None;
        let mut kept = 0usize;
        let mut seen = 0usize;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["kept"] == true {
                kept += 1;
                kept_at.get_or_insert(started.elapsed());
            } else if new.iter().any(|id| v["id"] == id.as_str()) {
                seen += 1;
                if seen == new.len() {
                    return (kept_at, Some(started.elapsed()), kept);
                }
            }
            if started.elapsed() > Duration::from_secs(60) {
                break;
            }
        }
        (kept_at, None, kept)
    })
    .await
    .unwrap();
    let catch_up = second.bytes.load(Ordering::SeqCst);
    let _ = child.kill();
    let _ = child.wait();
    let secs =
        |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.3} s", d.as_secs_f64()));
    println!(
        "restarted (continuing): {kept} kept notes, the first printed at {}; all {NEW} new notes at {}",
        secs(kept_at),
        secs(new_at)
    );
    println!(
        "catch-up bytes: {catch_up} ({:.1}% of the first run's full window)",
        100.0 * catch_up as f64 / full.max(1) as f64
    );
}

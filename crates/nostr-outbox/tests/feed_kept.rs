//! `outbox feed` picks up where it left off: a second run prints the notes the first kept at
//! once, marked as kept, and asks the relay only since the newest it delivered; `--forget-notes`
//! and `--no-stats` keep nothing.

use std::path::Path;
use std::process::Output;

use nostr::event::Kind;
use nostr::key::{Keys, SecretKey};

use nostr_outbox_fleet::{cli, signed, RealRelay};

/// Runs `outbox feed --once` on `relay` for the follows in `follows`, with `extra` arguments.
async fn feed(relay: &str, follows: &Path, extra: Vec<String>) -> Output {
    cli::feed_once(env!("CARGO_BIN_EXE_outbox"), relay, follows, extra).await
}

/// Runs a continuing `outbox feed` (no `--once`) until it printed `until` lines, then ends it
/// with SIGTERM (saving what it keeps, as a normal end does).
#[cfg(unix)]
async fn open_feed(relay: &str, follows: &Path, extra: Vec<String>, until: usize) -> Output {
    use std::io::BufRead;
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["feed", "--allow-local", "--seed", "1"])
        .args(["--relays", relay])
        .arg("--follows")
        .arg(follows)
        .args(["--connect-timeout", "2s", "--eose-timeout", "2s"])
        .args(extra);
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut printed = String::new();
        for _ in 0..until {
            if reader.read_line(&mut printed).unwrap_or(0) == 0 {
                break;
            }
        }
        cli::signal("-TERM", child.id());
        while reader.read_line(&mut printed).unwrap_or(0) > 0 {}
        let mut out = child.wait_with_output().unwrap();
        out.stdout = printed.into_bytes();
        out
    })
    .await
    .unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The `since` of the relay's feed REQs (kind 1 alone) from the `from`th REQ on.
fn feed_since(relay: &RealRelay, from: usize) -> Vec<Option<u64>> {
    relay.counter.reqs()[from..]
        .iter()
        .filter(|r| r.kinds == [1])
        .map(|r| r.since)
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_prints_what_the_first_kept_and_asks_only_since_its_mark() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let author = Keys::new(SecretKey::from_slice(&[0x41; 32]).unwrap());
    // Two old notes, one with terminal controls in it.
    relay
        .store(&signed(
            &author,
            Kind::TextNote,
            "old\u{1b}[2J",
            vec![],
            3_000,
        ))
        .await;
    relay
        .store(&signed(&author, Kind::TextNote, "older", vec![], 3_001))
        .await;
    let follows = dir.path().join("follows.txt");
    std::fs::write(&follows, author.public_key().to_hex()).unwrap();
    let stats = dir.path().join("stats.json");
    let store = vec!["--stats".to_string(), stats.display().to_string()];
    let window = now() - 7 * 24 * 3600;

    let first = feed(&relay.url, &follows, store.clone()).await;
    assert!(first.status.success(), "{first:?}");
    let printed = lines(&first);
    assert_eq!(printed.len(), 2, "{printed:?}");
    assert!(printed.iter().all(|l| !l.contains("[kept]")), "{printed:?}");
    assert!(dir.path().join("stats.json.notes.sqlite").exists());
    let since = feed_since(&relay, 0);
    assert!(
        since.iter().all(|s| s.is_some_and(|s| s <= window + 60)),
        "the first run asks the window: {since:?}"
    );

    let started = now();
    let new = signed(&author, Kind::TextNote, "new", vec![], 0);
    relay.store(&new).await;
    let asked = relay.counter.reqs().len();
    // Started again as a continuing feed, ended once it printed three notes.
    let second = open_feed(&relay.url, &follows, store.clone(), 3).await;
    assert!(second.status.success(), "{second:?}");
    let printed = lines(&second);
    assert_eq!(printed.len(), 3, "each note once: {printed:?}");
    // The kept notes first, oldest first, escaped; then what the relay had that was new.
    // A kept note's code (`nevent1…`) names no relay: `[kept]`, the code, then the content.
    let kept = |line: &str, content: &str| {
        line.contains("[kept] nevent1") && line.ends_with(&format!(" {content}"))
    };
    assert!(kept(&printed[0], "older"), "{printed:?}");
    assert!(kept(&printed[1], "old\\u{1b}[2J"), "{printed:?}");
    assert!(!printed[2].contains("[kept]") && printed[2].ends_with("new"));
    let since = feed_since(&relay, asked);
    assert!(
        !since.is_empty() && since.iter().all(|s| s.is_some_and(|s| s + 120 >= started)),
        "asked only since the newest it delivered (less a minute), not the window: {since:?}"
    );

    // In JSON, the kept notes are the events with `"kept": true`.
    let mut json = store.clone();
    json.push("--json".into());
    let third = feed(&relay.url, &follows, json).await;
    assert!(third.status.success(), "{third:?}");
    let kept: Vec<serde_json::Value> = lines(&third)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(kept.iter().all(|e| e["kept"] == true), "{kept:?}");
    assert_eq!(kept[2]["id"], new.id.to_hex());

    // Forgotten: nothing printed as kept, and the window is asked again.
    let mut forget = store.clone();
    forget.push("--forget-notes".into());
    let asked = relay.counter.reqs().len();
    let fourth = feed(&relay.url, &follows, forget).await;
    assert!(fourth.status.success(), "{fourth:?}");
    let printed = lines(&fourth);
    assert_eq!(printed.len(), 3, "{printed:?}");
    assert!(printed.iter().all(|l| !l.contains("[kept]")), "{printed:?}");
    let since = feed_since(&relay, asked);
    assert!(
        since.iter().all(|s| s.is_some_and(|s| s <= window + 120)),
        "{since:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_stats_nothing_is_kept_and_nothing_printed_as_kept() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let author = Keys::new(SecretKey::from_slice(&[0x42; 32]).unwrap());
    relay
        .store(&signed(&author, Kind::TextNote, "n", vec![], 60))
        .await;
    let follows = dir.path().join("follows.txt");
    std::fs::write(&follows, author.public_key().to_hex()).unwrap();
    let data = vec![
        "--data-dir".to_string(),
        dir.path().display().to_string(),
        "--no-stats".to_string(),
    ];
    for _ in 0..2 {
        let out = feed(&relay.url, &follows, data.clone()).await;
        assert!(out.status.success(), "{out:?}");
        let printed = lines(&out);
        assert_eq!(printed.len(), 1, "{printed:?}");
        assert!(!printed[0].contains("[kept]"), "{printed:?}");
    }
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, vec![std::ffi::OsString::from("follows.txt")]);
}

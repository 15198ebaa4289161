//! `outbox feed` and the store it keeps learning in: an unwritable store is found before
//! anything is fetched, a save that fails still shows the run's summary and fails the run, and
//! kept set-asides are never believed beyond the longest one.

use std::path::Path;
use std::process::Output;

use nostr::event::Kind;
use nostr::key::{Keys, SecretKey};

use nostr_outbox_fleet::{assert_says, cli, follows_file, now, relay_list, signed, RealRelay};

/// Runs `outbox feed --once` on `relay` for the follows in `follows`, with `extra` arguments.
async fn feed(relay: &str, follows: &Path, extra: Vec<String>) -> Output {
    cli::feed_once(env!("CARGO_BIN_EXE_outbox"), relay, follows, extra).await
}

/// `--stats path`.
fn keeping_stats(path: &Path) -> Vec<String> {
    vec!["--stats".into(), path.display().to_string()]
}

/// Runs a feed keeping `stats`, which must stop before anything is fetched, saying `says`.
async fn refused_before_fetching(relay: &RealRelay, follows: &Path, stats: &Path, says: &str) {
    let out = feed(&relay.url, follows, keeping_stats(stats)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, says);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 0);
}

/// A relay holding two notes of one follow, and a follows file.
async fn relay_with_notes(dir: &Path) -> (RealRelay, std::path::PathBuf) {
    let relay = RealRelay::start().await;
    let author = Keys::new(SecretKey::from_slice(&[0x41; 32]).unwrap());
    relay.store_notes(&author, 2, "n").await;
    (relay, follows_file(dir, &[author.public_key()]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_store_is_refused_before_anything_is_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, follows) = relay_with_notes(dir.path()).await;
    let missing = dir.path().join("no-such-dir").join("stats.json");
    let out = feed(&relay.url, &follows, keeping_stats(&missing)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing fetched");
    assert_says(&stderr, "cannot be written");
    assert_says(&stderr, "no-such-dir");
    assert!(!stderr.contains("events:"), "no run: {stderr}");

    // A database another process holds locked for writing.
    let db = dir.path().join("outbox.sqlite");
    let store = nostr_outbox_stats::SqliteStore::new(&db);
    store.save(&Default::default()).unwrap();
    let holder = nostr_outbox_stats::sqlite::rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let out = feed(
        &relay.url,
        &follows,
        vec!["--store".into(), format!("sqlite:{}", db.display())],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing fetched");
    assert!(
        stderr.contains("cannot be written") && stderr.contains("outbox.sqlite"),
        "{stderr}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_is_a_directory_or_held_is_found_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let (relay, follows) = relay_with_notes(dir.path()).await;
    let stats = dir.path().join("stats.json");
    // A lock path that is a directory is found before the run: nothing is fetched.
    let lock = dir.path().join("stats.json.lock");
    std::fs::create_dir(&lock).unwrap();
    refused_before_fetching(&relay, &follows, &stats, "stats.json.lock").await;
    std::fs::remove_dir(&lock).unwrap();
    // A lock held by a live process (this one): found with the other checks, before the
    // network, rather than at the save.
    std::fs::write(&lock, format!("{}\n", std::process::id())).unwrap();
    refused_before_fetching(&relay, &follows, &stats, "held by process").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_aside_kept_far_into_the_future_is_shortened_and_explained() {
    let dir = tempfile::tempdir().unwrap();
    let follows = dir.path().join("follows.txt");
    let author = Keys::new(SecretKey::from_slice(&[0x41; 32]).unwrap());
    std::fs::write(&follows, author.public_key().to_hex()).unwrap();
    let url = "ws://127.0.0.1:9";
    let stats = dir.path().join("stats.json");
    let penalties = dir.path().join("stats.json.penalties.json");
    std::fs::write(
        &penalties,
        format!(
            r#"{{"relays": {{"{url}": {{"until": 99999999999, "times": 3,
                "last_reason": "blocked: go away\u001b[2J"}}}}}}"#
        ),
    )
    .unwrap();
    let out = feed(url, &follows, keeping_stats(&stats)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_says(&stderr, &format!("{url}: set aside until 20"));
    assert!(
        stderr.contains("blocked: go away\\u{1b}[2J"),
        "escaped: {stderr}"
    );
    assert!(!stderr.contains("go away\u{1b}"), "{stderr}");

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let kept: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&penalties).unwrap()).unwrap();
    let until = kept["relays"][url]["until"].as_u64().unwrap();
    assert!(
        until <= now + 6 * 3600 + 60,
        "kept until {until}, now {now}"
    );
}

/// A relay that never answers `NEG-OPEN` is waited on briefly once, when the kept lists are
/// first reconciled; the store remembers it, and the next run pages its lists at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_ignores_reconciliation_is_remembered_by_the_store() {
    use nostr_outbox_fleet::PlainRelay;
    let dir = tempfile::tempdir().unwrap();
    let author = Keys::new(SecretKey::from_slice(&[0x42; 32]).unwrap());
    let elsewhere = nostr_outbox_fleet::dead_url().await;
    let list = relay_list(&author, now() - 500, &[(&elsewhere, None)]);
    let note = signed(&author, Kind::TextNote, "n0", vec![], 60);
    // Its document is silent: nothing says whether it reconciles.
    let relay = PlainRelay::documented(vec![list, note], None).await;
    let follows = dir.path().join("follows.txt");
    std::fs::write(&follows, author.public_key().to_hex()).unwrap();
    let store = format!("sqlite:{}", dir.path().join("kept.sqlite").display());
    let mut asked = Vec::new();
    for _ in 0..3 {
        let out = feed(&relay.url, &follows, vec!["--store".into(), store.clone()]).await;
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        asked.push(relay.ignored());
    }
    // The first run pages the lists (nothing kept), the second reconciles them and is ignored,
    // the third does not ask.
    assert_eq!(asked, vec![0, 1, 1]);
}

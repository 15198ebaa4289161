//! `outbox stats`: what was learned, written through the store APIs, shown and edited by the
//! command on both stores (JSON files and SQLite).

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use nostr_outbox_client::StateStore;
use nostr_outbox_core::{DeliveryStats, RelayStats};
use nostr_outbox_fleet::{assert_says, cli};
use nostr_outbox_runtime::store::{load_kept, save_kept};
use nostr_outbox_runtime::{PenaltyBox, PenaltyPolicy};
use nostr_outbox_stats::{FileStore, SqliteStore};

const ALIVE: &str = "wss://alive.example";
const DEAD: &str = "wss://dead.example";
const LOCKED: &str = "wss://locked.example";

/// The two stores, each with its `--store` argument.
fn stores(dir: &Path) -> Vec<(Arc<dyn StateStore>, String)> {
    let file = dir.join("stats.json");
    let sqlite = dir.join("outbox.sqlite");
    vec![
        (
            Arc::new(FileStore::new(&file)),
            format!("file:{}", file.display()),
        ),
        (
            Arc::new(SqliteStore::new(&sqlite)),
            format!("sqlite:{}", sqlite.display()),
        ),
    ]
}

/// [`stores`], each holding what [`learn`] saved.
async fn learned(dir: &Path) -> Vec<(Arc<dyn StateStore>, String)> {
    let stores = stores(dir);
    for (store, _) in &stores {
        learn(store.as_ref()).await;
    }
    stores
}

/// [`stores`], each holding what [`learn_with_pair`] saved.
async fn learned_with_pair(dir: &Path) -> Vec<(Arc<dyn StateStore>, String)> {
    let stores = stores(dir);
    for (store, _) in &stores {
        learn_with_pair(store.as_ref()).await;
    }
    stores
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Two relays with stats (one alive, one dead) and two set aside, one for a reason holding an
/// escape sequence that would clear the screen.
async fn learn(store: &dyn StateStore) {
    let now = now();
    let mut stats = DeliveryStats::new();
    stats.set(
        ALIVE,
        RelayStats {
            live_alpha: 9.0,
            live_beta: 1.0,
            depth_secs: 30.0 * 86_400.0,
            updated_at: now,
            ..RelayStats::default()
        },
    );
    stats.set(
        DEAD,
        RelayStats {
            live_alpha: 1.0,
            live_beta: 9.0,
            updated_at: now,
            ..RelayStats::default()
        },
    );
    store.save(&stats).await.unwrap();
    let mut penalties = PenaltyBox::new();
    let policy = PenaltyPolicy::default();
    penalties.penalise(DEAD, "timeout \u{1b}[2J \u{9b}2J gone", now, &policy);
    penalties.needs_sign_in(LOCKED, "auth-required: members", now, &policy);
    save_kept(store, &[], &penalties, &Default::default())
        .await
        .unwrap();
}

async fn outbox(args: Vec<String>) -> Output {
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.arg("stats").args(args).env_remove("OUTBOX_DATA_DIR");
    cli::output_of(cmd).await
}

fn args(store: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec!["--store".to_string(), store.to_string()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[tokio::test]
async fn the_table_lists_every_relay_with_reasons_escaped() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned(dir.path()).await {
        let table = stdout(&outbox(args(&arg, &[])).await);
        for relay in [ALIVE, DEAD, LOCKED] {
            assert!(table.contains(relay), "{arg}: {table}");
        }
        assert!(!table.contains('\u{1b}'), "{arg}: raw escape in {table:?}");
        assert!(
            !table.contains('\u{9b}'),
            "{arg}: raw C1 control in {table:?}"
        );
        assert!(
            table.contains("timeout \\u{1b}[2J \\u{9b}2J gone"),
            "{arg}: {table}"
        );
        assert!(table.contains("30d"), "{arg}: depth missing in {table}");
        // By URL: alive, dead, locked; by liveness the alive relay leads and the dead one
        // (learned 0.10) follows the unlearned one.
        let order = |t: &str| {
            let mut at: Vec<(usize, &str)> = [ALIVE, DEAD, LOCKED]
                .iter()
                .map(|r| (t.find(r).unwrap(), *r))
                .collect();
            at.sort();
            at.into_iter().map(|(_, r)| r).collect::<Vec<_>>()
        };
        assert_eq!(order(&table), [ALIVE, DEAD, LOCKED], "{arg}");
        let by_live = stdout(&outbox(args(&arg, &["--sort", "liveness"])).await);
        assert_eq!(order(&by_live), [ALIVE, LOCKED, DEAD], "{arg}: {by_live}");

        let one = stdout(&outbox(args(&arg, &[DEAD])).await);
        assert!(
            one.contains("timeout \\u{1b}[2J \\u{9b}2J gone"),
            "{arg}: {one}"
        );
        assert!(!one.contains('\u{1b}') && one.contains("strikes"), "{one}");
    }
}

#[tokio::test]
async fn json_parses_and_keeps_the_reason_without_raw_controls() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned(dir.path()).await {
        let text = stdout(&outbox(args(&arg, &["--json"])).await);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{9b}'),
            "{arg}: {text:?}"
        );
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let relays = doc["relays"].as_array().unwrap();
        assert_eq!(relays.len(), 3, "{arg}: {text}");
        let dead = relays.iter().find(|r| r["relay"] == DEAD).unwrap();
        assert_eq!(
            dead["set_aside"]["reason"],
            "timeout \u{1b}[2J \u{9b}2J gone"
        );
        assert!((dead["stats"]["liveness"].as_f64().unwrap() - 0.1).abs() < 1e-9);
        let locked = relays.iter().find(|r| r["relay"] == LOCKED).unwrap();
        assert_eq!(locked["set_aside"]["needs_sign_in"], true);
        assert_eq!(locked["set_aside"]["needs_payment"], false);
        assert!(locked["stats"].is_null());
    }
}

#[tokio::test]
async fn forget_drops_a_relays_stats_and_set_aside_and_saves() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned(dir.path()).await {
        stdout(&outbox(args(&arg, &["--forget", DEAD, "--forget", LOCKED])).await);
        let (fresh, _) = stores(dir.path())
            .into_iter()
            .find(|(_, a)| *a == arg)
            .unwrap();
        let stats = fresh.load().await.unwrap().stats;
        let urls: Vec<&str> = stats.iter().map(|(u, _)| u).collect();
        assert_eq!(urls, [ALIVE], "{arg}");
        let kept = load_kept(fresh.as_ref()).await.unwrap();
        assert_eq!(kept.penalties.entries().count(), 0, "{arg}");
        let table = stdout(&outbox(args(&arg, &[])).await);
        assert!(
            table.contains(ALIVE) && !table.contains(DEAD),
            "{arg}: {table}"
        );
    }
}

#[tokio::test]
async fn clear_set_asides_empties_the_box_and_keeps_the_stats() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned(dir.path()).await {
        stdout(&outbox(args(&arg, &["--clear-set-asides"])).await);
        let (fresh, _) = stores(dir.path())
            .into_iter()
            .find(|(_, a)| *a == arg)
            .unwrap();
        let kept = load_kept(fresh.as_ref()).await.unwrap();
        assert_eq!(kept.penalties, PenaltyBox::new(), "{arg}");
        assert_eq!(fresh.load().await.unwrap().stats.len(), 2, "{arg}");
    }
}

#[tokio::test]
async fn a_missing_store_has_nothing_learned_yet() {
    let dir = tempfile::tempdir().unwrap();
    for arg in [
        format!("file:{}", dir.path().join("none.json").display()),
        format!("sqlite:{}", dir.path().join("none.sqlite").display()),
    ] {
        let out = stdout(&outbox(args(&arg, &[])).await);
        assert!(out.contains("nothing learned yet"), "{arg}: {out}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // The data directory is not created just to be looked at.
    let missing = dir.path().join("data");
    let out = outbox(vec!["--data-dir".into(), missing.display().to_string()]).await;
    assert!(stdout(&out).contains("nothing learned yet"));
    assert!(!missing.exists());
}

#[tokio::test]
async fn bad_input_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stats.json");
    std::fs::write(&file, "\u{1b}[2J not json").unwrap();
    std::fs::write(dir.path().join("stats.json.penalties.json"), "[1,").unwrap();
    let out = outbox(args(&format!("file:{}", file.display()), &[])).await;
    assert!(out.status.code().is_some(), "{:?}", out.status);
    assert!(!out.stderr.contains(&0x1b) && !out.stdout.contains(&0x1b));
    let sqlite = dir.path().join("outbox.sqlite");
    std::fs::write(&sqlite, "not a database").unwrap();
    let out = outbox(args(&format!("sqlite:{}", sqlite.display()), &["--json"])).await;
    assert!(out.status.code().is_some(), "{:?}", out.status);

    let (store, arg) = stores(dir.path()).remove(0);
    learn(store.as_ref()).await;
    let unknown = outbox(args(&arg, &["wss://x.example"])).await;
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nothing known"));
    let bad = outbox(args(&arg, &["--forget", "\u{1b}not a url"])).await;
    assert!(bad.status.success() && !bad.stderr.contains(&0x1b));
}

#[tokio::test]
async fn a_closed_stdout_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (store, arg) = stores(dir.path()).remove(1);
    learn(store.as_ref()).await;
    for extra in [&[][..], &["--json"], &[DEAD]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
        cmd.arg("stats")
            .args(args(&arg, extra))
            .stdout(std::process::Stdio::from(writer));
        let out = cli::output(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "{extra:?}: {:?} {stderr}",
            out.status
        );
    }
}

/// Showing what is kept never moves or writes a file, whatever it finds: an unreadable stats
/// file, penalty file or database stays where it is, byte for byte, and nothing is created.
#[tokio::test]
async fn showing_never_moves_or_writes_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes, not stats").unwrap();
    std::fs::write(dir.path().join("notes.txt.penalties.json"), "[1,").unwrap();
    let sqlite = dir.path().join("outbox.sqlite");
    std::fs::write(&sqlite, "not a database").unwrap();
    let before = names(dir.path());
    for arg in [
        format!("file:{}", notes.display()),
        format!("sqlite:{}", sqlite.display()),
    ] {
        for extra in [&[][..], &["--json"][..], &["wss://x.example"][..]] {
            let _ = outbox(args(&arg, extra)).await;
            assert_eq!(names(dir.path()), before, "{arg} {extra:?}");
        }
    }
    assert_eq!(std::fs::read(&notes).unwrap(), b"my notes, not stats");
}

/// Another program's JSON file given as the stats file is refused untouched by the viewer,
/// by `--forget` and by a store's load and save: no backup of it, no replacement.
#[tokio::test]
async fn a_foreign_json_file_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("package.json");
    let text = r#"{"name": "app", "version": "1.0.0", "dependencies": {}}"#;
    std::fs::write(&package, text).unwrap();
    let arg = format!("file:{}", package.display());
    for extra in [&[][..], &["--forget", DEAD][..]] {
        let out = outbox(args(&arg, extra)).await;
        assert!(!out.status.success(), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_says(&err, "not an outbox stats file");
    }
    let store = FileStore::new(&package);
    assert!(store.load().is_err());
    assert!(store.save(&DeliveryStats::new()).is_err());
    assert_eq!(std::fs::read_to_string(&package).unwrap(), text);
    assert_eq!(names(dir.path()), vec!["package.json".to_string()]);
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The store instance a test's `outbox stats` run opens, opened anew.
fn reopen(dir: &Path, arg: &str) -> Arc<dyn StateStore> {
    stores(dir)
        .into_iter()
        .find(|(_, a)| a == arg)
        .map(|(s, _)| s)
        .unwrap()
}

fn follow() -> nostr::key::PublicKey {
    nostr::key::Keys::new(nostr::key::SecretKey::from_slice(&[5u8; 32]).unwrap()).public_key()
}

/// `learn`, plus a follow's evidence about the dead relay.
async fn learn_with_pair(store: &dyn StateStore) {
    learn(store).await;
    let mut stats = store.load().await.unwrap().stats;
    let mut author = nostr_outbox_core::AuthorStats {
        updated_at: now(),
        ..Default::default()
    };
    for url in [ALIVE, DEAD] {
        author.relays.insert(
            url.to_string(),
            nostr_outbox_core::PairStats {
                hits: 2.0,
                misses: 1.0,
            },
        );
    }
    stats.set_author(follow(), author);
    store.save(&stats).await.unwrap();
}

#[tokio::test]
async fn forget_drops_the_follows_pairs_with_the_relay_too() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned_with_pair(dir.path()).await {
        stdout(&outbox(args(&arg, &["--forget", DEAD])).await);
        let stats = reopen(dir.path(), &arg).load().await.unwrap().stats;
        let pairs = &stats.author(&follow()).unwrap().relays;
        assert!(pairs.get(DEAD).is_none(), "{arg}: {pairs:?}");
        assert!(
            pairs.get(ALIVE).is_some(),
            "{arg}: the other relay's pair stays"
        );
    }
}

#[tokio::test]
async fn a_forget_sticks_against_a_feed_that_loaded_before_it() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned_with_pair(dir.path()).await {
        // A feed loads, the relay is forgotten, the feed saves what it learned before.
        let feed = reopen(dir.path(), &arg);
        let mut run = feed.load().await.unwrap().stats;
        stdout(&outbox(args(&arg, &["--forget", DEAD])).await);
        let mut dead = run.get(DEAD);
        dead.asked += 1;
        run.set(DEAD, dead);
        let mut alive = run.get(ALIVE);
        alive.asked += 1;
        run.set(ALIVE, alive);
        feed.save(&run).await.unwrap();
        let stats = reopen(dir.path(), &arg).load().await.unwrap().stats;
        let urls: Vec<&str> = stats.iter().map(|(u, _)| u).collect();
        assert_eq!(urls, [ALIVE], "{arg}: the forgotten relay stays forgotten");
        assert_eq!(
            stats.get(ALIVE).asked,
            1,
            "{arg}: the feed's learning is kept"
        );
        let pairs = &stats.author(&follow()).unwrap().relays;
        assert!(pairs.get(DEAD).is_none(), "{arg}: {pairs:?}");
    }
}

#[tokio::test]
async fn a_clear_sticks_against_a_feed_that_loaded_before_it() {
    let dir = tempfile::tempdir().unwrap();
    for (_, arg) in learned(dir.path()).await {
        let feed = reopen(dir.path(), &arg);
        let kept = load_kept(feed.as_ref()).await.unwrap();
        stdout(&outbox(args(&arg, &["--clear-set-asides"])).await);
        // The feed set one more relay aside and saves the box it held.
        let mut penalties = kept.penalties.clone();
        penalties.penalise(
            "wss://new.example",
            "timeout",
            now(),
            &PenaltyPolicy::default(),
        );
        save_kept(feed.as_ref(), &kept.lists, &penalties, &kept.extensions)
            .await
            .unwrap();
        let after = load_kept(reopen(dir.path(), &arg).as_ref()).await.unwrap();
        assert_eq!(
            after.penalties.entries().count(),
            0,
            "{arg}: {:?}",
            after.penalties
        );
    }
}

#[tokio::test]
async fn set_asides_past_their_deadline_show_as_expired() {
    let dir = tempfile::tempdir().unwrap();
    for (store, arg) in learned(dir.path()).await {
        let mut kept = load_kept(store.as_ref()).await.unwrap();
        let policy = PenaltyPolicy::default();
        // Set aside seven hours ago: its six hours are over.
        kept.penalties
            .penalise("wss://over.example", "timeout", now() - 7 * 3600, &policy);
        save_kept(
            store.as_ref(),
            &kept.lists,
            &kept.penalties,
            &kept.extensions,
        )
        .await
        .unwrap();
        let table = stdout(&outbox(args(&arg, &[])).await);
        let line = |relay: &str| {
            table
                .lines()
                .find(|l| l.starts_with(relay))
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            line("wss://over.example").contains("expired"),
            "{arg}: {table}"
        );
        assert!(!line(DEAD).contains("expired"), "{arg}: {table}");
        let one = stdout(&outbox(args(&arg, &["wss://over.example"])).await);
        assert!(one.contains("expired"), "{arg}: {one}");
        let doc: serde_json::Value =
            serde_json::from_str(&stdout(&outbox(args(&arg, &["--json"])).await)).unwrap();
        let relays = doc["relays"].as_array().unwrap();
        let over = relays
            .iter()
            .find(|r| r["relay"] == "wss://over.example")
            .unwrap();
        assert_eq!(over["set_aside"]["expired"], true, "{arg}");
        let dead = relays.iter().find(|r| r["relay"] == DEAD).unwrap();
        assert_eq!(dead["set_aside"]["expired"], false, "{arg}");
    }
}

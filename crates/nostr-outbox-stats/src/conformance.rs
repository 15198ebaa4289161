//! The conformance suite every store of this crate passes (feature `conformance`).
//!
//! A store's tests describe its medium with a [`Medium`] and run each case from a
//! `#[tokio::test(flavor = "multi_thread")]`. Every case works through the async
//! [`StateStore`] trait, the way the runtime and the CLI use a store, and reaches under it only
//! through the [`Medium`] to damage what is stored:
//!
//! - [`round_trip`]: stats, relay lists and the penalty box come back exactly; a save replaces.
//! - [`torn_write`]: a save interrupted midway fails and leaves the previous state readable.
//! - [`concurrent_writers`]: two stores on one path saving at once: no error, no corruption,
//!   one whole save wins when neither loaded.
//! - [`concurrent_runs`]: runs that loaded the same stats and save at once: every run's
//!   learning is kept (the session counter and counts add up).
//! - [`corrupt_data_set_aside`]: garbage loads as fresh stats with a warning, and is moved aside
//!   (byte for byte), never deleted or overwritten.
//! - [`versions`]: the oldest stored form loads; a newer version's data is refused or read
//!   without being modified, whatever this build saves.
//! - [`forget_sticks`]: a relay forgotten while a run that loaded before is under way stays
//!   forgotten when the run saves (its stats and the follows' pairs), but for what the run
//!   learned after the forget.
//! - [`base_seed_kept`]: the first base seed saved is kept and returned ever after, through
//!   saves of stores that never asked for it; older data without one takes the next run's.
//! - [`kept_state_merges`]: relay lists and set-asides saved by runs that loaded the same state
//!   are all kept; a clear of the set-asides sticks against a run that loaded before it.
//! - [`future_lists_dropped`]: a relay list dated in the future is dropped on load and never
//!   outranks a real list at save.

use std::fs;
use std::path::{Path, PathBuf};

use nostr::key::{Keys, PublicKey, SecretKey};
use nostr_outbox_client::{LoadWarning, StateStore, StatsStore, StatsStoreError};
use nostr_outbox_core::stats::{AuthorStats, Decay, PairStats};
use nostr_outbox_core::{DeliveryStats, RawRelayList, RelayStats};
use serde_json::{json, Value};

/// A store's medium, as the suite needs to see it.
pub trait Medium: Send + Sync {
    /// The store under test.
    type Store: StateStore + Clone + 'static;

    /// A new store instance on the medium kept in `dir` (two calls: two writers on one path).
    fn open(&self, dir: &Path) -> Self::Store;

    /// Makes `store`'s next stats save stop midway, as a crash or an abort would.
    fn interrupt_next_save(&self, store: &Self::Store);

    /// Overwrites the stored stats with garbage; returns the bytes that must be kept aside.
    fn garble(&self, dir: &Path) -> Vec<u8>;

    /// Writes the oldest form of stats this store reads; returns the stats it must load as.
    fn write_older(&self, dir: &Path) -> DeliveryStats;

    /// Writes stored data as a newer version of the store would.
    fn write_newer(&self, dir: &Path);

    /// What a newer version wrote under `dir`, to compare byte for byte.
    fn snapshot(&self, dir: &Path) -> Vec<(String, Vec<u8>)>;
}

/// Every regular file in `dir` with its bytes, by name.
pub fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| {
                    let bytes = fs::read(e.path()).ok()?;
                    Some((e.file_name().to_string_lossy().into_owned(), bytes))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The files a store set aside in `dir` (`*.corrupt-*`, without SQLite's side files).
pub fn set_aside(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = files(dir)
        .into_iter()
        .filter(|(name, _)| {
            name.contains(".corrupt-") && !name.ends_with("-wal") && !name.ends_with("-shm")
        })
        .map(|(name, _)| dir.join(name))
        .collect();
    out.sort();
    out
}

/// A valid public key (`n` > 0).
pub fn key(n: u8) -> PublicKey {
    let mut sk = [0x5au8; 32];
    sk[31] = n.max(1);
    Keys::new(SecretKey::from_slice(&sk).expect("a valid secret key")).public_key()
}

/// Learned-looking stats of `relays` relays and `authors` authors, distinct per `seed`:
/// every field away from its default, fractional values that must round-trip exactly.
pub fn sample(seed: u32, relays: u32, authors: u8) -> DeliveryStats {
    let mut s = DeliveryStats::with_decay(Decay::PerSession { factor: 0.9 });
    s.set_session(u64::from(seed) + 3);
    let x = f64::from(seed);
    for i in 0..relays {
        let y = f64::from(i);
        s.set(
            format!("wss://r{i}.s{seed}.example"),
            RelayStats {
                alpha: 1.0 + y / 3.0 + x,
                beta: 2.0 + y / 7.0,
                latency_ms: (i % 3 != 0).then_some(40.0 + y * 1.1),
                updated_at: 1_767_225_600 + u64::from(i),
                session: u64::from(seed) + 2,
                asked: u64::from(i) + 5,
                failures: u64::from(i % 4),
                live_alpha: 1.5 + y / 11.0,
                live_beta: 1.25,
                kept_alpha: 3.1,
                kept_beta: 1.0 + y / 13.0,
                depth_secs: 86_400.0 * (30.0 + y) + x / 4.0,
            },
        );
    }
    // A relay forgotten on purpose.
    s.note_forgotten(
        &format!("wss://gone.s{seed}.example"),
        1_767_225_300 + u64::from(seed),
    );
    for a in 1..=authors {
        let mut pairs = std::collections::HashMap::new();
        for i in 0..relays.min(3) {
            pairs.insert(
                format!("wss://r{i}.s{seed}.example"),
                PairStats {
                    hits: 0.1 + f64::from(a) / 9.0,
                    misses: f64::from(i) / 3.0,
                },
            );
        }
        s.set_author(
            key(a),
            AuthorStats {
                volume: f64::from(a) * 1.5 + x,
                updated_at: 1_767_225_000 + u64::from(a),
                first: 1_700_000_000 + u64::from(a),
                last: 1_767_000_000 + u64::from(seed),
                probed_secs: 86_400.0 * f64::from(a) + 0.5,
                relays: pairs.into_iter().collect(),
            },
        );
    }
    s
}

/// Relay lists of `n` authors.
pub fn lists(n: u8) -> Vec<RawRelayList> {
    (1..=n)
        .map(|a| RawRelayList {
            author: key(a),
            created_at: 1_767_000_000 + u64::from(a),
            tags: vec![
                vec!["r".into(), format!("wss://w{a}.example")],
                vec!["r".into(), "wss://read.example".into(), "read".into()],
            ],
        })
        .collect()
}

/// A penalty box as the runtime writes it.
pub fn penalties() -> Value {
    json!({"relays": {"wss://down.example": {
        "strikes": 0, "until": 1_767_225_700u64, "last_reason": "auth-required: pay",
        "times": 2, "misbehaved": false
    }}})
}

fn sorted(mut lists: Vec<RawRelayList>) -> Vec<RawRelayList> {
    lists.sort_by_key(|l| l.author);
    lists
}

/// Stats, lists and penalties come back exactly, and a save replaces what was there.
pub async fn round_trip<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = medium.open(dir.path());
    let fresh = store.load().await.expect("an empty medium loads");
    assert!(fresh.stats.is_empty(), "nothing stored yet");
    assert!(fresh.warnings.is_empty(), "{:?}", fresh.warnings);
    let empty = store.load_lists().await.expect("no lists yet");
    assert!(empty.value.is_empty() && empty.warnings.is_empty());
    assert_eq!(
        store.load_penalties().await.expect("no box yet").value,
        None
    );

    let first = sample(1, 12, 4);
    store.save(&first).await.expect("saves");
    let loaded = store.load().await.expect("loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.stats, first, "every field, exactly");

    let second = sample(2, 5, 2);
    store.save(&second).await.expect("saves again");
    let again = medium.open(dir.path()).load().await.expect("loads");
    assert_eq!(
        again.stats, second,
        "a save replaces, and another instance sees it"
    );

    store.save_lists(&lists(5)).await.expect("saves lists");
    store
        .save_penalties(&penalties())
        .await
        .expect("saves the box");
    let back = store.load_lists().await.expect("loads lists");
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    assert_eq!(sorted(back.value), sorted(lists(5)));
    store
        .save_lists(&lists(2))
        .await
        .expect("saves fewer lists");
    assert_eq!(
        sorted(store.load_lists().await.expect("loads").value),
        sorted(lists(2)),
        "lists are replaced, not merged"
    );
    let doc = store.load_penalties().await.expect("loads the box");
    assert_eq!(doc.value, Some(penalties()));
    assert_eq!(
        store.load().await.expect("loads").stats,
        second,
        "saving lists and penalties leaves the stats alone"
    );
}

/// A save interrupted midway fails and leaves the previous state readable.
pub async fn torn_write<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = medium.open(dir.path());
    let old = sample(3, 10, 3);
    store.save(&old).await.expect("saves");
    medium.interrupt_next_save(&store);
    let torn = store.save(&sample(4, 20, 5)).await;
    assert!(torn.is_err(), "an interrupted save reports it");
    let loaded = medium.open(dir.path()).load().await.expect("loads");
    assert_eq!(loaded.stats, old, "the previous save, whole");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(set_aside(dir.path()).is_empty(), "nothing was corrupt");
    // The store is usable afterwards.
    let next = sample(5, 4, 1);
    saves_whole(&store, &next, "saves after the interruption").await;
}

/// Two stores on one path saving at once: both succeed, the result is one whole save (stores
/// that loaded nothing have no base to merge from, so each save replaces; see
/// [`concurrent_runs`] for runs that loaded).
pub async fn concurrent_writers<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (a, b) = (medium.open(dir.path()), medium.open(dir.path()));
    let mine = [sample(6, 40, 6), sample(7, 25, 3)];
    for round in 0..12 {
        let (sa, sb) = (mine[0].clone(), mine[1].clone());
        let (ta, tb) = (medium.open(dir.path()), medium.open(dir.path()));
        let first = tokio::spawn(async move { ta.save(&sa).await });
        let second = tokio::spawn(async move { tb.save(&sb).await });
        let (ra, rb) = (first.await, second.await);
        ra.expect("no panic").expect("the first writer saves");
        rb.expect("no panic").expect("the second writer saves");
        let seen = a.load().await.expect("loads");
        assert!(
            seen.warnings.is_empty(),
            "round {round}: {:?}",
            seen.warnings
        );
        assert!(
            mine.contains(&seen.stats),
            "round {round}: one writer's whole save"
        );
    }
    // Lists too, and reads while writing.
    let (la, lb) = (a.clone(), b.clone());
    let write = tokio::spawn(async move { la.save_lists(&lists(9)).await });
    let read = tokio::spawn(async move { lb.load().await });
    write.await.expect("no panic").expect("saves lists");
    let seen = read.await.expect("no panic").expect("loads while writing");
    assert!(mine.contains(&seen.stats));
    assert_eq!(
        sorted(b.load_lists().await.expect("loads").value),
        sorted(lists(9))
    );
    assert!(
        set_aside(dir.path()).is_empty(),
        "nothing was taken for corrupt"
    );
}

/// Runs that each loaded the same stored stats, learned and saved at once: what is stored
/// holds every run's learning (sessions and counts add up), not the last writer's alone.
pub async fn concurrent_runs<M: Medium>(medium: &M) {
    const RUNS: u64 = 5;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = "wss://shared.example";
    let mut base = DeliveryStats::new();
    base.set_session(7);
    base.set(
        url,
        RelayStats {
            alpha: 4.0,
            asked: 10,
            failures: 2,
            updated_at: 1_767_225_600,
            ..RelayStats::default()
        },
    );
    medium
        .open(dir.path())
        .save(&base)
        .await
        .expect("saves the base");
    // Every run loads before any saves.
    let mut loaded = Vec::new();
    for _ in 0..RUNS {
        let store = medium.open(dir.path());
        let stats = store.load().await.expect("loads the base").stats;
        assert_eq!(stats, base);
        loaded.push((store, stats));
    }
    let mut runs = Vec::new();
    for (n, (store, mut stats)) in loaded.into_iter().enumerate() {
        // One run's learning: a session, one more ask of the shared relay, a relay of its own.
        stats.begin_session();
        let mut shared = stats.get(url);
        (shared.asked, shared.alpha) = (shared.asked + 1, shared.alpha + 1.0);
        stats.set(url, shared);
        stats.set(
            format!("wss://own{n}.example"),
            RelayStats {
                asked: 1,
                updated_at: 1_767_225_700,
                ..RelayStats::default()
            },
        );
        runs.push(tokio::spawn(async move { store.save(&stats).await }));
    }
    for run in runs {
        run.await.expect("no panic").expect("every run saves");
    }
    let stored = medium.open(dir.path()).load().await.expect("loads");
    assert!(stored.warnings.is_empty(), "{:?}", stored.warnings);
    let stats = stored.stats;
    assert_eq!(stats.session(), 7 + RUNS, "every run's session counted");
    let shared = stats.get(url);
    assert_eq!(shared.asked, 10 + RUNS, "every run's asks counted");
    assert_eq!(shared.alpha, 4.0 + RUNS as f64);
    assert_eq!(shared.failures, 2);
    for n in 0..RUNS {
        assert_eq!(stats.get(&format!("wss://own{n}.example")).asked, 1);
    }
    assert!(set_aside(dir.path()).is_empty(), "nothing was corrupt");
}

/// Garbage loads as fresh stats with a warning and is kept aside byte for byte.
pub async fn corrupt_data_set_aside<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = medium.open(dir.path());
    store.save(&sample(8, 6, 2)).await.expect("saves");
    let garbage = medium.garble(dir.path());

    let loaded = store
        .load()
        .await
        .expect("bad content is never a load error");
    let moved: Vec<&PathBuf> = loaded
        .warnings
        .iter()
        .filter_map(|w| match w {
            LoadWarning::Unreadable {
                moved_to: Some(to), ..
            } => Some(to),
            _ => None,
        })
        .collect();
    assert_eq!(moved.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.stats.is_empty(), "nothing readable: fresh stats");
    assert_eq!(set_aside(dir.path()), vec![moved[0].clone()]);
    assert_eq!(
        fs::read(moved[0]).expect("the set-aside data exists"),
        garbage,
        "kept whole for inspection"
    );
    for w in &loaded.warnings {
        assert!(!w.to_string().is_empty());
    }

    // The store starts fresh and works; what was set aside stays.
    let next = sample(9, 3, 1);
    store.save(&next).await.expect("saves after setting aside");
    let again = store.load().await.expect("loads");
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.stats, next);
    assert_eq!(fs::read(moved[0]).expect("still there"), garbage);

    // Garbage that appears before a save is set aside too, never overwritten.
    let garbage = medium.garble(dir.path());
    store
        .save(&sample(10, 2, 1))
        .await
        .expect("saves over garbage");
    let kept: Vec<Vec<u8>> = set_aside(dir.path())
        .iter()
        .filter_map(|p| fs::read(p).ok())
        .collect();
    assert!(kept.contains(&garbage), "the second garbage was kept aside");
    assert_eq!(store.load().await.expect("loads").stats, sample(10, 2, 1));
}

/// The oldest stored form loads; a newer version's data is never modified.
pub async fn versions<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let expected = medium.write_older(dir.path());
    let store = medium.open(dir.path());
    let loaded = store.load().await.expect("older data loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.stats, expected);
    let upgraded = sample(11, 3, 2);
    saves_whole(&store, &upgraded, "older data is saved over").await;

    let dir = tempfile::tempdir().expect("a temporary directory");
    medium.write_newer(dir.path());
    let before = medium.snapshot(dir.path());
    assert!(!before.is_empty(), "the newer version wrote something");
    let store = medium.open(dir.path());
    match store.load().await {
        Err(StatsStoreError::Newer {
            found, supported, ..
        }) => assert!(found > supported),
        Err(e) => panic!("a newer version is refused as such, not as {e}"),
        Ok(loaded) => assert!(
            loaded
                .warnings
                .iter()
                .any(|w| matches!(w, LoadWarning::NewerVersion { .. })),
            "a newer version read is said to be one: {:?}",
            loaded.warnings
        ),
    }
    // Whatever this build saves, the newer data stays as it was.
    let _ = store.save(&sample(12, 4, 2)).await;
    let _ = store.save_lists(&lists(3)).await;
    let _ = store.save_penalties(&penalties()).await;
    let _ = store.load().await;
    assert_eq!(
        medium.snapshot(dir.path()),
        before,
        "a newer version's data is never modified"
    );
    assert!(set_aside(dir.path()).is_empty(), "nor set aside");
}

/// One entry stamped in the future (400 days ahead, or at `u64::MAX`) forgets nothing: it is
/// clamped to the present, and a run's save keeps every relay, its own included. A long pause
/// forgets nothing either: days without a run do not count.
pub async fn future_stamps_and_pauses_forget_nothing<M: Medium>(medium: &M) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs();
    const DAY: u64 = 86_400;
    let relay = |at: u64| RelayStats {
        alpha: 2.0,
        asked: 1,
        updated_at: at,
        ..RelayStats::default()
    };
    for future in [now + 400 * DAY, u64::MAX] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut stored = DeliveryStats::new();
        stored.set("wss://recent.example", relay(now - 10 * DAY));
        // Learned before a pause of 200 days.
        stored.set("wss://paused.example", relay(now - 200 * DAY));
        stored.set("wss://ahead.example", relay(future));
        medium.open(dir.path()).save(&stored).await.expect("saves");
        let store = medium.open(dir.path());
        let mut run = store.load().await.expect("loads").stats;
        assert!(
            run.iter().all(|(_, s)| s.updated_at <= now + DAY),
            "future stamps clamped on load"
        );
        run.record_alive("wss://run.example", now);
        store.save(&run).await.expect("saves");
        let kept = medium.open(dir.path()).load().await.expect("loads").stats;
        let mut urls: Vec<&str> = kept.iter().map(|(u, _)| u).collect();
        urls.sort_unstable();
        assert_eq!(
            urls,
            [
                "wss://ahead.example",
                "wss://paused.example",
                "wss://recent.example",
                "wss://run.example"
            ],
            "{future}"
        );
        assert!(kept.days().all(|d| d <= now / DAY + 1));
    }
}

/// A relay list dated far ahead (2^62, or hours ahead) is dropped on load and is never kept
/// over a real list by a save's merge, so it cannot hide its author's later lists; one within
/// a few minutes ahead (clocks differ) is kept.
pub async fn future_lists_dropped<M: Medium>(medium: &M) {
    let now = now();
    let list = |a: u8, created_at: u64| RawRelayList {
        created_at,
        ..lists(a).pop().expect("one list")
    };
    for ahead in [1u64 << 62, now + 6 * 3600] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let stored = vec![list(1, ahead), list(2, now - 100), list(3, now + 60)];
        medium
            .open(dir.path())
            .save_lists(&stored)
            .await
            .expect("saves");
        let loaded = medium.open(dir.path()).load_lists().await.expect("loads");
        let dates: Vec<(PublicKey, u64)> = sorted(loaded.value)
            .iter()
            .map(|l| (l.author, l.created_at))
            .collect();
        assert_eq!(dates, [(key(2), now - 100), (key(3), now + 60)], "{ahead}");
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| matches!(w, LoadWarning::DroppedEntries { .. })),
            "{:?}",
            loaded.warnings
        );
        // A run that never loaded saves the author's real list: it is kept, not the one ahead.
        medium
            .open(dir.path())
            .save_lists(&[list(1, now - 50)])
            .await
            .expect("saves");
        let loaded = medium.open(dir.path()).load_lists().await.expect("loads");
        let first = loaded.value.iter().find(|l| l.author == key(1));
        assert_eq!(first.map(|l| l.created_at), Some(now - 50), "{ahead}");
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs()
}

/// `outbox stats --forget` while a run that loaded before it is under way: the run's save
/// keeps the relay forgotten (its stats and every follow's pair with it) but for what the run
/// learned after the forget; what it learned of other relays is kept.
pub async fn forget_sticks<M: Medium>(medium: &M) {
    let now = now();
    let (gone, other) = ("wss://gone.example", "wss://other.example");
    let relay = |asked: u64, at: u64| RelayStats {
        alpha: 1.0 + asked as f64,
        asked,
        updated_at: at,
        ..RelayStats::default()
    };
    let with_pair = |mut s: DeliveryStats, hits: f64, at: u64| {
        let mut a = s.author(&key(1)).cloned().unwrap_or_default();
        a.updated_at = at;
        let old = a.relays.get(gone).map_or(0.0, |p| p.hits);
        a.relays.insert(
            gone.to_string(),
            PairStats {
                hits: old + hits,
                misses: 0.0,
            },
        );
        s.set_author(key(1), a);
        s
    };
    for learned_after in [false, true] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut first = DeliveryStats::new();
        first.set(gone, relay(4, now - 3_600));
        first.set(other, relay(1, now - 3_600));
        let first = with_pair(first, 3.0, now - 3_600);
        medium.open(dir.path()).save(&first).await.expect("saves");
        // The run loads, then the relay is forgotten and saved by another process.
        let feed = medium.open(dir.path());
        let loaded = feed.load().await.expect("loads").stats;
        let cli = medium.open(dir.path());
        let mut forget = cli.load().await.expect("loads").stats;
        let forgotten_at = now - 60;
        assert!(forget.forget_at(gone, forgotten_at));
        cli.save(&forget).await.expect("the forget saves");
        // The run learned about both relays, before the forget or after it.
        let at = if learned_after { now } else { now - 120 };
        let mut run = loaded.clone();
        run.set(gone, relay(5, at));
        run.set(other, relay(2, at));
        let run = with_pair(run, 1.0, at);
        feed.save(&run).await.expect("the run saves");
        let kept = medium.open(dir.path()).load().await.expect("loads").stats;
        assert_eq!(kept.get(other).asked, 2, "the run's other learning is kept");
        assert_eq!(
            kept.forgotten_at(gone),
            Some(forgotten_at),
            "the tombstone is kept"
        );
        let pair = kept
            .author(&key(1))
            .and_then(|a| a.relays.get(gone))
            .map(|p| p.hits);
        if learned_after {
            assert_eq!(
                kept.get(gone).asked,
                1,
                "only what was learned after the forget"
            );
            assert_eq!(pair, Some(1.0));
        } else {
            assert!(
                kept.iter().all(|(u, _)| u != gone),
                "learning from before the forget is not brought back"
            );
            assert_eq!(pair, None, "nor the follows' pairs");
        }
    }
}

/// Runs that loaded the same lists and penalty box each save their own: every change is kept.
/// A clear of the set-asides sticks against a run that loaded before it.
pub async fn kept_state_merges<M: Medium>(medium: &M) {
    let entry =
        |until: u64| json!({"strikes": 0, "until": until, "last_reason": "timeout", "times": 1});
    let dir = tempfile::tempdir().expect("a temporary directory");
    let first = medium.open(dir.path());
    first.save_lists(&lists(1)).await.expect("saves lists");
    first
        .save_penalties(&json!({"relays": {}}))
        .await
        .expect("saves the box");
    let (a, b) = (medium.open(dir.path()), medium.open(dir.path()));
    for s in [&a, &b] {
        s.load_lists().await.expect("loads lists");
        s.load_penalties().await.expect("loads the box");
    }
    let mut mine = lists(1);
    mine.extend(lists(2).into_iter().skip(1));
    let mut theirs = lists(1);
    theirs.extend(lists(3).into_iter().skip(2));
    a.save_lists(&mine).await.expect("saves lists");
    b.save_lists(&theirs).await.expect("saves lists");
    assert_eq!(
        sorted(
            medium
                .open(dir.path())
                .load_lists()
                .await
                .expect("loads")
                .value
        ),
        sorted(lists(3)),
        "both runs' new lists are kept"
    );
    a.save_penalties(&json!({"relays": {"wss://a.example": entry(now() + 600)}}))
        .await
        .expect("saves the box");
    b.save_penalties(&json!({"relays": {"wss://b.example": entry(now() + 900)}}))
        .await
        .expect("saves the box");
    let doc = stored_box(medium, dir.path()).await;
    let mut set_aside: Vec<&String> = doc["relays"].as_object().expect("relays").keys().collect();
    set_aside.sort();
    assert_eq!(set_aside, ["wss://a.example", "wss://b.example"], "{doc}");

    // A run loads the box; the set-asides are cleared; the run saves what it held.
    let feed = medium.open(dir.path());
    feed.load_penalties().await.expect("loads the box");
    let cli = medium.open(dir.path());
    let mut cleared = cli
        .load_penalties()
        .await
        .expect("loads the box")
        .value
        .expect("a box");
    cleared["relays"] = json!({});
    crate::kept::mark_cleared(&mut cleared, now());
    cli.save_penalties(&cleared).await.expect("the clear saves");
    feed.save_penalties(&json!({"relays": {
        "wss://a.example": entry(now() + 600),
        "wss://b.example": entry(now() + 900),
        "wss://c.example": entry(now() + 60),
    }}))
    .await
    .expect("the run saves");
    let doc = stored_box(medium, dir.path()).await;
    assert_eq!(doc["relays"], json!({}), "the clear sticks: {doc}");
    // A run that loaded after the clear sets relays aside as before.
    let later = medium.open(dir.path());
    later.load_penalties().await.expect("loads the box");
    later
        .save_penalties(&json!({"relays": {"wss://d.example": entry(now() + 60)}}))
        .await
        .expect("saves");
    let doc = later
        .load_penalties()
        .await
        .expect("loads")
        .value
        .expect("a box");
    assert!(doc["relays"].get("wss://d.example").is_some(), "{doc}");
}

/// Saves `stats` with `store` (`why` it must succeed) and loads them back as they were.
async fn saves_whole(store: &impl StatsStore, stats: &DeliveryStats, why: &str) {
    store.save(stats).await.expect(why);
    assert_eq!(&store.load().await.expect("loads").stats, stats);
}

/// The penalty box a store opened afresh on `dir` loads.
async fn stored_box<M: Medium>(medium: &M, dir: &Path) -> Value {
    let store = medium.open(dir);
    let loaded = store.load_penalties().await.expect("loads");
    loaded.value.expect("a box")
}

/// The base seed: a store returns the drawn one until a save keeps it, then the kept one
/// forever, whatever later runs draw; the first of two runs to save wins. Older data (none
/// kept) loads as it did and keeps the next run's draw.
pub async fn base_seed_kept<M: Medium>(medium: &M) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let first = medium.open(dir.path());
    let second = medium.open(dir.path());
    assert_eq!(first.base_seed(7).await.expect("a seed"), 7);
    assert_eq!(
        second.base_seed(8).await.expect("a seed"),
        8,
        "nothing kept yet"
    );
    first.save(&sample(1, 3, 2)).await.expect("saved");
    second.save(&sample(2, 3, 2)).await.expect("saved");
    let later = medium.open(dir.path());
    assert_eq!(
        later.base_seed(9).await.expect("a seed"),
        7,
        "the first save's"
    );
    assert_eq!(
        second.base_seed(10).await.expect("a seed"),
        7,
        "also for the loser"
    );
    // A store that never asked for the seed (`outbox stats --forget`) keeps it when it saves.
    let other = medium.open(dir.path());
    other.save(&sample(3, 2, 1)).await.expect("saved");
    other.save_penalties(&penalties()).await.expect("saved");
    assert_eq!(
        medium.open(dir.path()).base_seed(11).await.expect("a seed"),
        7
    );

    let dir = tempfile::tempdir().expect("a temporary directory");
    let expected = medium.write_older(dir.path());
    let store = medium.open(dir.path());
    assert_eq!(store.base_seed(21).await.expect("a seed"), 21);
    let loaded = store.load().await.expect("older data loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.stats, expected);
    store.save(&loaded.stats).await.expect("saved");
    let reopened = medium.open(dir.path());
    assert_eq!(reopened.base_seed(22).await.expect("a seed"), 21);
    assert_eq!(reopened.load().await.expect("loads").stats, expected);
}

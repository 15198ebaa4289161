//! The file store: round trips, torn writes, garbage, concurrent writers, old and new versions,
//! absurd values.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use nostr::key::{Keys, PublicKey, SecretKey};
use nostr_outbox_client::{LoadWarning, StatsStore};
use nostr_outbox_core::stats::{AuthorRound, Decay, RelayRound, RoundReport};
use nostr_outbox_core::DeliveryStats;
use nostr_outbox_stats::{FileStore, STATS_VERSION};

fn key(n: u8) -> PublicKey {
    let mut sk = [7u8; 32];
    sk[31] = n;
    Keys::new(SecretKey::from_slice(&sk).unwrap()).public_key()
}

/// Stats learned from whole runs: relays with liveness and completeness, authors with volume
/// and per-relay pairs.
fn learned() -> DeliveryStats {
    let mut s = sample(3);
    let relay = |url: &str, answered, authors: &[(u8, u32)]| {
        let counted = authors
            .iter()
            .map(|&(k, n)| AuthorRound::counted(key(k), n));
        RelayRound::new(url, answered, counted.collect())
    };
    for t in 0..3 {
        s.record_round(
            &RoundReport {
                relays: vec![
                    relay("wss://deep.example", true, &[(1, 30), (2, 7)]),
                    relay("wss://prunes.example", true, &[(1, 3), (2, 1), (3, 0)]),
                    relay("wss://gone.example", false, &[(3, 0)]),
                ],
            },
            3_000 + t,
        );
    }
    s
}

fn sample(n: u32) -> DeliveryStats {
    let mut s = DeliveryStats::with_decay(Decay::PerSession { factor: 0.9 });
    s.begin_session();
    for i in 0..n {
        let url = format!("wss://r{i}.example");
        // Three follows asked; the relay returns notes of `i % 4` of them.
        let authors = (0..3u8)
            .map(|k| AuthorRound::counted(key(k + 1), u32::from(u32::from(k) < i % 4) * 2))
            .collect();
        let rounds = vec![
            RelayRound::new(url.clone(), true, authors),
            RelayRound {
                url: "wss://yardstick.example".into(),
                answered: true,
                authors: (1..=3).map(|k| AuthorRound::counted(key(k), 2)).collect(),
                compare_only: true,
            },
        ];
        s.record_round(&RoundReport { relays: rounds }, 1_000 + u64::from(i));
        s.record_latency(&url, 50.0 + f64::from(i), 1_000);
    }
    let down = RelayRound {
        url: "wss://down.example".into(),
        answered: false,
        authors: Vec::new(),
        compare_only: false,
    };
    s.record_round(&RoundReport { relays: vec![down] }, 2_000);
    s
}

/// One round in which `url` answered and returned a note of one follow.
fn one_answer(stats: &mut DeliveryStats, url: &str, now: u64) {
    let relay = RelayRound::new(url, true, vec![AuthorRound::counted(key(9), 1)]);
    stats.record_round(
        &RoundReport {
            relays: vec![relay],
        },
        now,
    );
}

fn corrupt_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".corrupt-"))
        .collect();
    v.sort();
    v
}

#[test]
fn round_trip_is_exact_and_versioned() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    let fresh = store.load().unwrap();
    assert!(fresh.stats.is_empty() && fresh.warnings.is_empty());
    let s = sample(20);
    store.save(&s).unwrap();
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.stats, s);
    let text = fs::read_to_string(store.path()).unwrap();
    assert!(text.contains("\"format\": \"outbox-stats\""));
    assert!(text.contains(&format!("\"version\": {STATS_VERSION}")));
    // Only the stats file (no backup yet, no temp files or lock left behind).
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn learned_authors_and_run_priors_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    let s = learned();
    assert_eq!(s.authors().count(), 3, "every asked author has a volume");
    assert_eq!(s.author(&key(1)).unwrap().volume, 30.0);
    let prunes = s.get("wss://prunes.example");
    assert!(prunes.kept_alpha != 1.0 && prunes.live_alpha != 1.0);
    store.save(&s).unwrap();
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.stats, s, "authors, pairs and run priors are exact");
    let text = fs::read_to_string(store.path()).unwrap();
    for field in [
        "\"live_alpha\"",
        "\"live_beta\"",
        "\"kept_alpha\"",
        "\"kept_beta\"",
        "\"authors\"",
        "\"volume\"",
        "\"hits\"",
        "\"misses\"",
    ] {
        assert!(text.contains(field), "{field} not written");
    }
    assert!(text.contains(&key(1).to_hex()));
    // Saving again writes the same bytes (sorted keys, no hash-map order).
    store.save(&loaded.stats).unwrap();
    let again = fs::read_to_string(store.path()).unwrap();
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("saved_at"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&again), strip(&text));
}

#[test]
fn a_version_1_file_loads_with_no_authors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    fs::write(
        &path,
        r#"{"format": "outbox-stats", "version": 1, "saved_at": 5, "session": 2,
            "decay": {"mode": "hourly", "factor": 0.95},
            "relays": {"wss://a.example": {"alpha": 3.5, "beta": 1.2, "latency_ms": 240.0,
                       "updated_at": 4, "session": 2, "asked": 5, "failures": 0}}}"#,
    )
    .unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = loaded.stats;
    assert_eq!(s.authors().count(), 0);
    assert_eq!(s.session(), 2);
    let a = s.get("wss://a.example");
    assert_eq!((a.alpha, a.beta, a.asked), (3.5, 1.2, 5));
    // Run priors a version 1 file never had start uniform.
    assert_eq!(
        (a.live_alpha, a.live_beta, a.kept_alpha, a.kept_beta),
        (1.0, 1.0, 1.0, 1.0)
    );
}

#[test]
fn corrupt_author_entries_are_dropped_and_the_rest_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let k = |n| key(n).to_hex();
    let text = format!(
        r#"{{"format": "outbox-stats", "version": 2,
            "relays": {{"wss://a.example": {{"alpha": 2.0, "kept_alpha": 4.0, "kept_beta": "x"}}}},
            "authors": {{
              "{ok}": {{"volume": 12.0, "updated_at": 9, "future": [1],
                        "relays": {{"wss://a.example": {{"hits": 2.5, "misses": 0.5}}}}}},
              "{bare}": {{}},
              "{str_volume}": {{"volume": "lots"}},
              "{neg}": {{"volume": -1.0}},
              "{null_hits}": {{"relays": {{"wss://a.example": {{"hits": null}}}}}},
              "{pair_junk}": {{"relays": {{"wss://a.example": 3}}}},
              "{relays_junk}": {{"relays": [1, 2]}},
              "{not_object}": 17,
              "npub-not-hex": {{"volume": 1.0}}
            }}}}"#,
        ok = k(1),
        bare = k(2),
        str_volume = k(3),
        neg = k(4),
        null_hits = k(5),
        pair_junk = k(6),
        relays_junk = k(7),
        not_object = k(8),
    );
    fs::write(&path, text).unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    let s = &loaded.stats;
    let ok = s.author(&key(1)).expect("the good author loads");
    assert_eq!((ok.volume, ok.updated_at), (12.0, 9));
    assert_eq!(s.pair(&key(1), "wss://a.example").hits, 2.5);
    assert!(s.author(&key(2)).is_some(), "missing fields take defaults");
    for n in 3..=8 {
        assert!(s.author(&key(n)).is_none(), "author {n} should be dropped");
    }
    assert_eq!(s.authors().count(), 2);
    // The relays load alongside; the wrong-typed kept_beta makes that relay corrupt (reset).
    assert!(s.get("wss://a.example").is_uniform());
    assert!(
        loaded
            .warnings
            .contains(&LoadWarning::Sanitised { count: 6 }),
        "one relay and five authors: {:?}",
        loaded.warnings
    );
    assert!(
        loaded.warnings.contains(&LoadWarning::DroppedEntries {
            urls: vec![k(8), "npub-not-hex".into()]
        }),
        "{:?}",
        loaded.warnings
    );
    // What loaded saves and reloads cleanly.
    let store = FileStore::new(&path);
    store.save(s).unwrap();
    let again = store.load().unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(&again.stats, s);
}

#[test]
fn an_author_key_off_the_curve_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    // x = 5 decodes as 32 bytes but is on no secp256k1 point: no follow can have it.
    let off = format!("{:064x}", 5);
    let text = format!(
        r#"{{"format": "outbox-stats", "version": 2,
            "authors": {{"{off}": {{"volume": 3.0}}, "{ok}": {{"volume": 4.0}}}}}}"#,
        ok = key(1).to_hex(),
    );
    fs::write(&path, text).unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    assert_eq!(loaded.stats.authors().count(), 1);
    assert_eq!(loaded.stats.author(&key(1)).map(|a| a.volume), Some(4.0));
    assert_eq!(
        loaded.warnings,
        vec![LoadWarning::DroppedEntries { urls: vec![off] }]
    );
}

#[test]
fn torn_write_is_reported_moved_aside_and_the_backup_used() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    let old = sample(5);
    store.save(&old).unwrap();
    let new = sample(9);
    store.save(&new).unwrap();
    assert!(
        store.backup_path().exists(),
        "the previous good file is kept"
    );
    // Tear the file in half, as a crash of a non-atomic writer would.
    let bytes = fs::read(store.path()).unwrap();
    fs::write(store.path(), &bytes[..bytes.len() / 2]).unwrap();

    let loaded = store.load().unwrap();
    assert!(
        matches!(
            &loaded.warnings[0],
            LoadWarning::Unreadable {
                moved_to: Some(_),
                ..
            }
        ),
        "{:?}",
        loaded.warnings
    );
    assert!(matches!(
        &loaded.warnings[1],
        LoadWarning::FromBackup { .. }
    ));
    assert_eq!(loaded.stats, old, "the last good save before the torn one");
    // The torn bytes were kept for inspection, not destroyed.
    let aside = corrupt_files(dir.path());
    assert_eq!(aside.len(), 1);
    assert_eq!(
        fs::read(dir.path().join(&aside[0])).unwrap(),
        &bytes[..bytes.len() / 2]
    );
}

#[test]
fn garbage_without_backup_gives_fresh_stats_and_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let garbage: Vec<u8> = (0..500u32).map(|i| (i * 37 % 251) as u8).collect();
    fs::write(&path, &garbage).unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    assert!(loaded.stats.is_empty());
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    for w in &loaded.warnings {
        assert!(!w.to_string().is_empty());
    }
    assert_eq!(corrupt_files(dir.path()).len(), 1);

    // A save over garbage that appeared since (another program wrote it) moves it aside too.
    fs::write(&path, b"{\"relays\": [1, 2").unwrap();
    store.save(&sample(3)).unwrap();
    assert_eq!(corrupt_files(dir.path()).len(), 2);
    assert!(
        !store.backup_path().exists(),
        "garbage is never kept as the good backup"
    );
    assert_eq!(store.load().unwrap().stats, sample(3));
    // Valid JSON that is not a stats file is another program's: refused, left as it is.
    for foreign in [
        &b"[1, 2, 3]"[..],
        br#"{"name": "app", "dependencies": {}}"#,
        br#"{"format": "other", "relays": {}}"#,
    ] {
        fs::write(&path, foreign).unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(err.contains("not an outbox stats file"), "{err}");
        assert!(store.save(&sample(3)).is_err());
        assert_eq!(fs::read(&path).unwrap(), foreign);
    }
    assert_eq!(corrupt_files(dir.path()).len(), 2);
    // A file of an old shape without the marker still loads.
    fs::write(
        &path,
        br#"{"session": 2, "relays": {"wss://a.example": {"alpha": 2.0}}}"#,
    )
    .unwrap();
    assert_eq!(store.load().unwrap().stats.len(), 1);
}

#[test]
fn concurrent_writers_from_two_threads_leave_a_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let shared = Arc::new(FileStore::new(&path));
    let versions: Vec<DeliveryStats> = (0..2).map(|t| sample(10 + t * 5)).collect();
    let handles: Vec<_> = (0..2)
        .map(|t| {
            // One thread shares a store, the other uses its own instance on the same path.
            let store = if t == 0 {
                shared.clone()
            } else {
                Arc::new(FileStore::new(&path))
            };
            let mine = versions[t].clone();
            std::thread::spawn(move || {
                for _ in 0..40 {
                    store.save(&mine).unwrap();
                    let seen = store.load().unwrap();
                    assert!(seen.warnings.is_empty(), "{:?}", seen.warnings);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let last = shared.load().unwrap();
    assert!(last.warnings.is_empty());
    assert!(
        versions.contains(&last.stats),
        "the file is one writer's whole save"
    );
    assert!(corrupt_files(dir.path()).is_empty());
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nostr-outbox-stats"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn a_file_from_an_older_version_loads_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    // No format, version, decay or session; relays missing latency, session, counters.
    fs::write(
        &path,
        r#"{"relays": {"wss://old.example": {"alpha": 4.0, "beta": 2.0, "updated_at": 10},
                        "wss://bare.example": {}}}"#,
    )
    .unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = loaded.stats;
    assert_eq!(s.decay, Decay::default());
    assert_eq!(s.session(), 0);
    let old = s.get("wss://old.example");
    assert_eq!(
        (old.alpha, old.beta, old.latency_ms, old.asked),
        (4.0, 2.0, None, 0)
    );
    assert!(s.get("wss://bare.example").is_uniform());
}

#[test]
fn a_file_from_a_newer_version_loads_what_it_knows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    fs::write(
        &path,
        r#"{"format": "outbox-stats", "version": 7, "per_depth": {"x": 1},
            "decay": {"mode": "hourly", "factor": 0.9},
            "relays": {"wss://a.example": {"alpha": 2.0, "beta": 3.0, "depth_alpha": [1, 2]}}}"#,
    )
    .unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    assert_eq!(
        loaded.warnings,
        vec![LoadWarning::NewerVersion {
            found: 7,
            supported: STATS_VERSION
        }]
    );
    assert_eq!(loaded.stats.decay, Decay::Hourly { factor: 0.9 });
    assert_eq!(loaded.stats.get("wss://a.example").beta, 3.0);
}

#[test]
fn a_newer_version_that_reshaped_relays_is_kept_not_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let newer =
        r#"{"format": "outbox-stats", "version": 9, "relays": [["wss://a.example", 2, 3]]}"#;
    fs::write(&path, newer).unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.contains(&LoadWarning::NewerVersion {
        found: 9,
        supported: STATS_VERSION
    }));
    assert!(
        !loaded
            .warnings
            .iter()
            .any(|w| matches!(w, LoadWarning::Unreadable { .. })),
        "{:?}",
        loaded.warnings
    );
    store.save(&loaded.stats).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        newer,
        "the newer file is untouched"
    );
    assert!(corrupt_files(dir.path()).is_empty());
    assert!(store.side_path().exists());
}

/// A file as a newer version would write it: fields this build does not know at every level.
fn newer_file(saved_at: u64) -> String {
    format!(
        r#"{{"format": "outbox-stats", "version": 9, "saved_at": {saved_at}, "per_depth": {{"x": 1}},
            "decay": {{"mode": "hourly", "factor": 0.9}},
            "relays": {{"wss://a.example": {{"alpha": 2.0, "beta": 3.0, "depth_alpha": [1, 2]}}}},
            "authors": {{"{author}": {{"volume": 4.0, "mood": "ok",
                          "relays": {{"wss://a.example": {{"hits": 1.0, "misses": 0.0, "late": 2}}}}}}}}}}
"#,
        author = key(1).to_hex()
    )
}

#[test]
fn a_newer_versions_file_and_its_backup_are_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let store = FileStore::new(&path);
    // Two saves by this version: the `.bak` holds the first, an older good file.
    store.save(&sample(2)).unwrap();
    store.save(&sample(3)).unwrap();
    let bak = fs::read(store.backup_path()).unwrap();
    // Then a newer version writes the file.
    let newer = newer_file(1_000);
    fs::write(&path, &newer).unwrap();

    // This version runs twice more, learning and saving each time.
    for run in 0..2 {
        let loaded = store.load().unwrap();
        assert!(
            loaded.warnings.contains(&LoadWarning::NewerVersion {
                found: 9,
                supported: STATS_VERSION
            }),
            "run {run}: {:?}",
            loaded.warnings
        );
        let mut stats = loaded.stats;
        one_answer(&mut stats, "wss://b.example", 5_000 + run);
        store.save(&stats).unwrap();
    }
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        newer,
        "the newer file is untouched"
    );
    assert_eq!(
        fs::read(store.backup_path()).unwrap(),
        bak,
        "the backup is untouched"
    );
    assert!(corrupt_files(dir.path()).is_empty());

    // What this version learned is in the side file, and the next load continues from it.
    let side = store.side_path();
    assert_eq!(
        side,
        dir.path().join(format!("stats.json.v{STATS_VERSION}"))
    );
    let loaded = store.load().unwrap();
    assert_eq!(
        loaded.warnings,
        vec![
            LoadWarning::NewerVersion {
                found: 9,
                supported: STATS_VERSION
            },
            LoadWarning::FromBackup { path: side.clone() },
        ]
    );
    assert_eq!(loaded.stats.get("wss://b.example").asked, 2);
    assert_eq!(loaded.stats.get("wss://a.example").beta, 3.0);

    // Once the newer version saves again, its file is the later one and is used.
    fs::write(&path, newer_file(u64::MAX / 2)).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(
        loaded.warnings,
        vec![LoadWarning::NewerVersion {
            found: 9,
            supported: STATS_VERSION
        }]
    );
    assert_eq!(loaded.stats.get("wss://b.example").asked, 0);
}

#[test]
fn absurd_values_are_sanitised_and_unreadable_entries_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    // serde_json writes NaN and ±inf as null; hand-edited files may hold anything.
    fs::write(
        &path,
        r#"{"decay": {"mode": "per_session", "factor": 7.5},
            "relays": {
              "wss://nan.example": {"alpha": null, "beta": 2.0, "asked": 3},
              "wss://neg.example": {"alpha": -5.0},
              "wss://huge.example": {"beta": 1e300},
              "wss://lat.example": {"alpha": 2.0, "latency_ms": -40},
              "wss://str.example": {"alpha": "lots"},
              "wss://junk.example": "not an object",
              "wss://ok.example": {"alpha": 3.0, "beta": 1.5}
            }}"#,
    )
    .unwrap();
    let loaded = FileStore::new(&path).load().unwrap();
    let s = &loaded.stats;
    for url in ["nan", "neg", "huge", "lat", "str"] {
        let r = s.get(&format!("wss://{url}.example"));
        assert!(
            r.is_sane() && r.is_uniform() && r.latency_ms.is_none(),
            "{url}: {r:?}"
        );
    }
    assert_eq!(
        s.get("wss://nan.example").asked,
        3,
        "counters survive a reset"
    );
    assert_eq!(s.get("wss://ok.example").alpha, 3.0);
    assert_eq!(s.decay, Decay::default());
    assert!(
        loaded
            .warnings
            .contains(&LoadWarning::Sanitised { count: 5 }),
        "{:?}",
        loaded.warnings
    );
    assert!(
        loaded
            .warnings
            .contains(&LoadWarning::Sanitised { count: 1 }),
        "decay: {:?}",
        loaded.warnings
    );
    assert!(loaded.warnings.contains(&LoadWarning::DroppedEntries {
        urls: vec!["wss://junk.example".into()]
    }));
    // Saving writes only sane values.
    let store = FileStore::new(&path);
    store.save(s).unwrap();
    let again = store.load().unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_is_object_safe_and_saves_sanitised_values() {
    let dir = tempfile::tempdir().unwrap();
    let store: Box<dyn StatsStore> = Box::new(FileStore::new(dir.path().join("s.json")));
    let s = sample(2);
    store.save(&s).await.unwrap();
    assert_eq!(store.load().await.unwrap().stats, s);
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("no/such/dir/stats.json"));
    assert!(store.load().unwrap().stats.is_empty());
    let err = store.save(&sample(1)).unwrap_err();
    assert!(err.to_string().contains("no/such/dir"), "{err}");
}

/// Reading a file for planning gives what `load` gives, and never moves, replaces or
/// substitutes anything: garbage, another format and a missing file are errors naming it.
#[test]
fn reading_a_file_without_a_store_checks_it_like_load_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let store = FileStore::new(&path);
    store.save(&learned()).unwrap();
    let read = nostr_outbox_stats::read_stats_file(&path).unwrap();
    assert_eq!(read.stats, store.load().unwrap().stats);
    assert!(read.warnings.is_empty(), "{:?}", read.warnings);

    // A good backup beside a bad file: `load` would fall back to it; reading does not.
    store.save(&learned()).unwrap();
    assert!(store.backup_path().exists());
    for bad in [
        &b"{\"format\": \"outbox-stats\", \"relays\": "[..],
        b"{\"format\": \"outbox-world/1\", \"relays\": {}}",
        b"[1, 2, 3]",
    ] {
        fs::write(&path, bad).unwrap();
        let err = nostr_outbox_stats::read_stats_file(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("stats.json"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), bad, "the file was touched");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.contains("corrupt")),
            "set aside: {names:?}"
        );
    }
    let missing = dir.path().join("none.json");
    let err = nostr_outbox_stats::read_stats_file(&missing)
        .unwrap_err()
        .to_string();
    assert!(err.contains("none.json"), "{err}");
    let err = nostr_outbox_stats::read_stats_file(Path::new("/dev/zero"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a regular file"), "{err}");

    // Absurd values get load's checks: sanitised, with a warning.
    fs::write(
        &path,
        br#"{"format": "outbox-stats", "version": 2, "relays": {"wss://a.example": {"alpha": -5.0}}}"#,
    )
    .unwrap();
    let read = nostr_outbox_stats::read_stats_file(&path).unwrap();
    assert!(
        read.warnings
            .iter()
            .any(|w| matches!(w, LoadWarning::Sanitised { .. })),
        "{:?}",
        read.warnings
    );
}

/// A file of far more relays than any reader's follows name (a bloated or hostile file) is
/// bounded: the long-unseen are forgotten and the rest capped, on load and in what is saved.
#[test]
fn a_stats_file_of_too_many_relays_is_bounded() {
    use nostr_outbox_core::stats::{FORGET_AFTER_SECS, MAX_STORED_RELAYS};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let now = 1_767_225_600u64;
    let mut relays = serde_json::Map::new();
    for i in 0..MAX_STORED_RELAYS + 3_000 {
        // The newest-seen relays have the highest numbers.
        let at = now - 3_000_000 + i as u64;
        relays.insert(
            format!("wss://r{i}.example"),
            serde_json::json!({"alpha": 2.0, "updated_at": at, "asked": 1}),
        );
    }
    relays.insert(
        "wss://long-gone.example".into(),
        serde_json::json!({"alpha": 2.0, "updated_at": now - FORGET_AFTER_SECS - 86_400}),
    );
    let doc = serde_json::json!({"format": "outbox-stats", "version": 2, "relays": relays});
    fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap().stats;
    assert_eq!(loaded.len(), MAX_STORED_RELAYS);
    assert_eq!(loaded.get("wss://long-gone.example").asked, 0, "forgotten");
    let newest = format!("wss://r{}.example", MAX_STORED_RELAYS + 2_999);
    assert_eq!(loaded.get(&newest).asked, 1, "the most recently seen stay");
    assert_eq!(loaded.get("wss://r0.example").asked, 0);
    store.save(&loaded).unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        saved["relays"].as_object().unwrap().len(),
        MAX_STORED_RELAYS
    );
}

/// Every file the JSON store writes (stats, backup, lists, penalties) is its owner's alone.
#[cfg(unix)]
#[test]
fn every_state_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    store.save(&learned()).unwrap();
    store.save(&learned()).unwrap();
    store.save_lists(&[]).unwrap();
    store.save_penalties(&serde_json::json!({})).unwrap();
    let mut names = Vec::new();
    for entry in fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
        names.push(name);
    }
    assert_eq!(names.len(), 4, "{names:?}");
}

/// A lock path that is a directory or a symlink is found by the check before a run, with an
/// error naming it, not at the save after the run.
#[test]
fn a_bad_lock_path_is_found_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    fs::create_dir(store.lock_path()).unwrap();
    let err = store.check_writable().unwrap_err().to_string();
    assert!(err.contains("stats.json.lock"), "{err}");
    fs::remove_dir(store.lock_path()).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), store.lock_path()).unwrap();
        let err = store.check_writable().unwrap_err().to_string();
        assert!(err.contains("stats.json.lock"), "{err}");
        fs::remove_file(store.lock_path()).unwrap();
    }
    store.check_writable().unwrap();
}

/// A lock left by a save that was killed (its process is gone) is taken over at once, however
/// young: the run's learning is saved.
#[cfg(target_os = "linux")]
#[test]
fn a_lock_whose_owner_is_gone_is_taken_over_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let ns = fs::read_link("/proc/self/ns/pid").unwrap();
    fs::write(store.lock_path(), format!("{pid} {}\n", ns.display())).unwrap();
    store.check_writable().unwrap();
    let started = std::time::Instant::now();
    store.save(&learned()).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(!store.lock_path().exists());
}

/// A lock file that looks held (naming this live process, or saying nothing yet, and young) is
/// found by the check before a run, with an error naming it, instead of making the save wait
/// for it after the run; a lock left over (old) is no obstacle.
#[test]
fn a_lock_that_looks_held_is_found_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("stats.json"));
    let ns = fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    for held in [format!("{} {ns}\n", std::process::id()), String::new()] {
        fs::write(store.lock_path(), &held).unwrap();
        let err = store.check_writable().unwrap_err().to_string();
        assert!(err.contains("stats.json.lock"), "{held:?}: {err}");
        assert!(err.contains("held"), "{held:?}: {err}");
        assert!(store.lock_path().exists(), "left where it is");
    }
    // Older than a save ever holds it: taken over by the save, so no obstacle.
    let old = std::time::SystemTime::now() - 2 * nostr_outbox_stats::STALE_LOCK;
    fs::File::options()
        .write(true)
        .open(store.lock_path())
        .unwrap()
        .set_modified(old)
        .unwrap();
    store.check_writable().unwrap();
}

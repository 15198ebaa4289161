//! Hostile stats files: arbitrary bytes, valid files with hostile values, paths that are not
//! regular files. Loading never panics or blocks, loaded stats are always sane, an unreadable
//! file is set aside (never deleted), and a newer version's file is never overwritten.

use nostr_outbox_core::testkit::{self, raw_json, RAW};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use nostr::key::{Keys, SecretKey};
use nostr_outbox_client::{LoadWarning, Loaded};
use nostr_outbox_core::DeliveryStats;
use nostr_outbox_stats::{FileStore, MAX_STATS_BYTES, STATS_VERSION};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// A valid public key in hex.
fn key_hex(n: u8) -> String {
    let mut sk = [9u8; 32];
    sk[31] = n;
    Keys::new(SecretKey::from_slice(&sk).unwrap())
        .public_key()
        .to_hex()
}

fn render(value: &Value) -> String {
    // `"@raw:1e400"` → `1e400`.
    raw_json(&serde_json::to_string_pretty(value).unwrap())
}

/// Numbers and non-numbers where a number belongs; rarely one JSON cannot hold (which makes
/// the whole file unreadable).
fn hostile_number() -> impl Strategy<Value = Value> {
    let plain = prop_oneof![
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(-1)),
        Just(json!(0.5)),
        Just(json!(3.5)),
        Just(json!(1.0e6)),
        Just(json!(1.000001e6)),
        Just(json!(1.0e308)),
        Just(json!(-1.0e308)),
        Just(json!(5e-324)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!("NaN")),
        Just(json!("inf")),
        Just(json!(null)),
        Just(json!(true)),
        Just(json!([])),
        Just(json!({})),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        any::<u64>().prop_map(|x| json!(x)),
    ];
    let raw = prop_oneof![
        Just(json!(format!("{RAW}1e400"))),
        Just(json!(format!("{RAW}-1e400"))),
        Just(json!(format!("{RAW}184467440737095516160000"))),
    ];
    prop_oneof![60 => plain, 1 => raw]
}

/// Map keys: URLs with escapes, odd unicode, empty strings, very long ones.
fn hostile_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("wss://a.example".to_string()),
        Just("wss://b.example/".to_string()),
        Just(String::new()),
        Just("wss://\u{1b}[2J\u{1b}]0;pwned\u{7}.example".to_string()),
        Just("wss://evil\u{202e}elpmaxe.com".to_string()),
        Just("wss://\u{0}\u{fffd}\u{10ffff}".to_string()),
        Just("x".repeat(5000)),
        "\\PC{0,30}",
    ]
}

/// Author keys: valid, off the curve, not hex, the wrong length.
fn hostile_author() -> impl Strategy<Value = String> {
    prop_oneof![
        (1u8..4).prop_map(key_hex),
        Just("fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f".to_string()),
        Just("0".repeat(64)),
        Just("zz".repeat(32)),
        Just(key_hex(1)[..62].to_string()),
        Just(key_hex(2).to_uppercase()),
        "[0-9a-f]{64}",
        "\\PC{0,10}",
    ]
}

/// Some of `fields`, each with a hostile value, plus unknown ones.
fn object_of(fields: &'static [&'static str]) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec((0..fields.len(), hostile_number()), 0..fields.len() * 2),
        prop::collection::vec(("[a-z_]{1,8}", hostile_number()), 0..3),
    )
        .prop_map(move |(known, unknown)| {
            let mut m = Map::new();
            for (i, v) in known {
                m.insert(fields[i].to_string(), v);
            }
            for (k, v) in unknown {
                m.insert(k, v);
            }
            Value::Object(m)
        })
}

const RELAY_FIELDS: &[&str] = &[
    "alpha",
    "beta",
    "latency_ms",
    "updated_at",
    "session",
    "asked",
    "failures",
    "live_alpha",
    "live_beta",
    "kept_alpha",
    "kept_beta",
];

fn relay_entry() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => object_of(RELAY_FIELDS),
        1 => hostile_number(),
        1 => Just(json!("wss://not-an-object")),
    ]
}

fn author_entry() -> impl Strategy<Value = Value> {
    let pairs = prop::collection::vec(
        (
            hostile_key(),
            prop_oneof![3 => object_of(&["hits", "misses"]), 1 => hostile_number()],
        ),
        0..3,
    )
    .prop_map(|pairs| Value::Object(pairs.into_iter().collect()));
    prop_oneof![
        4 => (object_of(&["volume", "updated_at"]), prop_oneof![3 => pairs, 1 => hostile_number()])
            .prop_map(|(mut fields, relays)| {
                fields["relays"] = relays;
                fields
            }),
        1 => hostile_number(),
    ]
}

fn decay() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        hostile_number().prop_map(|f| Some(json!({"mode": "hourly", "factor": f}))),
        hostile_number().prop_map(|f| Some(json!({"mode": "per_session", "factor": f}))),
        Just(Some(json!({"mode": "weekly", "factor": 0.5}))),
        Just(Some(json!({"mode": "hourly", "factor": 0.5, "extra": 1}))),
        Just(Some(json!("hourly"))),
    ]
}

fn version() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!(1))),
        Just(Some(json!(STATS_VERSION))),
        Just(Some(json!(STATS_VERSION + 1))),
        Just(Some(json!(u64::MAX))),
        Just(Some(json!(-1))),
        Just(Some(json!("3"))),
        Just(Some(json!(2.5))),
    ]
}

/// A stats file in the documented shape with hostile values, unknown fields and sometimes a
/// wrong shape where an object belongs.
fn stats_file() -> impl Strategy<Value = String> {
    let format = prop_oneof![
        6 => Just(Some(json!("outbox-stats"))),
        1 => Just(None),
        1 => Just(Some(json!("outbox-world/1"))),
        1 => Just(Some(json!(2))),
    ];
    let relays = prop_oneof![
        8 => prop::collection::vec((hostile_key(), relay_entry()), 0..5)
            .prop_map(|v| Some(Value::Object(v.into_iter().collect()))),
        1 => Just(None),
        1 => hostile_number().prop_map(Some),
    ];
    let authors = prop_oneof![
        8 => prop::collection::vec((hostile_author(), author_entry()), 0..4)
            .prop_map(|v| Some(Value::Object(v.into_iter().collect()))),
        1 => Just(None),
        1 => hostile_number().prop_map(Some),
    ];
    let unknown = prop::collection::vec(("[a-z_]{1,10}", hostile_number()), 0..3);
    (
        format,
        version(),
        prop::option::of(hostile_number()),
        decay(),
        prop::option::of(hostile_number()),
        relays,
        authors,
        unknown,
    )
        .prop_map(
            |(format, version, saved_at, decay, session, relays, authors, unknown)| {
                let mut top = Map::new();
                for (k, v) in unknown {
                    top.insert(k, v);
                }
                let fields = [
                    ("format", format),
                    ("version", version),
                    ("saved_at", saved_at),
                    ("decay", decay),
                    ("session", session),
                    ("relays", relays),
                    ("authors", authors),
                ];
                for (k, v) in fields {
                    if let Some(v) = v {
                        top.insert(k.to_string(), v);
                    }
                }
                render(&Value::Object(top))
            },
        )
}

/// Every value usable: what planning may rely on after a load.
fn assert_sane(stats: &DeliveryStats) {
    testkit::assert_sane(stats);
    let mut again = stats.clone();
    assert_eq!(again.sanitize(), 0, "sanitising sane stats changes nothing");
}

/// The `.corrupt-*` siblings of `path`.
fn corrupt_siblings(path: &Path) -> Vec<PathBuf> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let mut out: Vec<PathBuf> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}.corrupt-"))
        })
        .collect();
    out.sort();
    out
}

fn unreadable(loaded: &Loaded, path: &Path) -> bool {
    loaded
        .warnings
        .iter()
        .any(|w| matches!(w, LoadWarning::Unreadable { path: p, .. } if p == path))
}

fn newer(loaded: &Loaded) -> bool {
    loaded
        .warnings
        .iter()
        .any(|w| matches!(w, LoadWarning::NewerVersion { .. }))
}

/// Loads `bytes` as the stats file, saves, loads again, checking every guarantee on the way.
fn load_save_load(bytes: &[u8]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    fs::write(&path, bytes).unwrap();
    let store = FileStore::new(&path);

    let loaded = match store.load() {
        Ok(loaded) => loaded,
        Err(e) => {
            // Only another program's file is refused, and it is left exactly as it is.
            assert!(e.to_string().contains("not an outbox stats file"), "{e}");
            assert!(store.save(&DeliveryStats::new()).is_err());
            assert_eq!(fs::read(&path).unwrap(), bytes);
            assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
            return;
        }
    };
    assert_sane(&loaded.stats);
    let set_aside = unreadable(&loaded, &path);
    if set_aside {
        // Moved aside whole, never deleted.
        assert!(!path.exists());
        let aside = corrupt_siblings(&path);
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(fs::read(&aside[0]).unwrap(), bytes);
        assert_eq!(loaded.stats, DeliveryStats::new(), "no backup: fresh stats");
    } else {
        // A readable file is only read.
        assert_eq!(fs::read(&path).unwrap(), bytes);
        assert!(corrupt_siblings(&path).is_empty());
    }

    store.save(&loaded.stats).expect("saves");
    if newer(&loaded) {
        assert!(!set_aside);
        assert_eq!(
            fs::read(&path).unwrap(),
            bytes,
            "a newer version's file is never overwritten"
        );
        assert!(store.side_path().exists());
        assert!(!store.backup_path().exists());
    } else if !set_aside {
        assert_eq!(
            fs::read(store.backup_path()).unwrap(),
            bytes,
            "the replaced readable file is the backup"
        );
    }

    let again = store.load().expect("loads");
    assert_eq!(again.stats, loaded.stats, "what was saved is what loads");
    // A newer version's file is kept as it was, so what was wrong in it is reported again
    // whenever it is the file read; anything this version wrote loads clean.
    assert!(
        newer(&loaded)
            || !again.warnings.iter().any(|w| matches!(
                w,
                LoadWarning::Unreadable { .. } | LoadWarning::Sanitised { .. }
            )),
        "first load {:?}, second load {:?}",
        loaded.warnings,
        again.warnings
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_load_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load_save_load(&bytes);
    }

    #[test]
    fn valid_files_with_hostile_values_load_sane(text in stats_file()) {
        load_save_load(text.as_bytes());
    }

    #[test]
    fn truncated_files_load_without_panicking(text in stats_file(), cut in any::<prop::sample::Index>()) {
        let end = cut.index(text.len().max(1)).min(text.len());
        load_save_load(&text.as_bytes()[..end]);
    }
}

#[test]
fn generated_files_cover_each_outcome() {
    // The generator is only useful if it reaches readable, newer and unreadable files alike.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut readable, mut newer_seen, mut unreadable_seen, mut sanitised) = (0, 0, 0, 0);
    for _ in 0..200 {
        let text = stats_file().new_tree(&mut runner).unwrap().current();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        fs::write(&path, &text).unwrap();
        let Ok(loaded) = FileStore::new(&path).load() else {
            // Another program's file, refused untouched.
            unreadable_seen += 1;
            continue;
        };
        if unreadable(&loaded, &path) {
            unreadable_seen += 1;
        } else {
            readable += 1;
        }
        newer_seen += usize::from(newer(&loaded));
        sanitised += usize::from(
            loaded
                .warnings
                .iter()
                .any(|w| matches!(w, LoadWarning::Sanitised { .. })),
        );
    }
    eprintln!("{readable} readable, {unreadable_seen} unreadable, {newer_seen} newer, {sanitised} sanitised");
    assert!(readable > 100, "{readable} readable");
    assert!(unreadable_seen > 5, "{unreadable_seen} unreadable");
    assert!(newer_seen > 5, "{newer_seen} newer");
    assert!(sanitised > 20, "{sanitised} sanitised");
}

/// Runs `f` on a thread and waits at most `within` for it.
fn within<T: Send + 'static>(within: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(within)
        .expect("finished in time instead of blocking")
}

#[test]
#[cfg(unix)]
fn a_fifo_or_device_is_refused_without_reading_or_replacing_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("stats.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Opening a FIFO for reading blocks until a writer comes: it must not be opened.
        let path = fifo.clone();
        let load = within(Duration::from_secs(5), move || {
            FileStore::new(path).load().map(|_| ())
        });
        assert!(load.is_err(), "a FIFO is not a stats file");
        let path = fifo.clone();
        let save = within(Duration::from_secs(5), move || {
            FileStore::new(path).save(&DeliveryStats::new())
        });
        assert!(save.is_err(), "a FIFO is never replaced");
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }
    // `/dev/zero` would be read until memory runs out.
    let load = within(Duration::from_secs(5), || {
        FileStore::new("/dev/zero").load().map(|_| ())
    });
    assert!(load.is_err(), "a device is not a stats file");
}

#[test]
fn a_file_over_the_size_cap_is_set_aside_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    // Sparse: the size is there without the disk space.
    let file = fs::File::create(&path).unwrap();
    file.set_len(MAX_STATS_BYTES + 1).unwrap();
    drop(file);
    let store = FileStore::new(&path);
    let loaded = store.load().unwrap();
    assert_eq!(loaded.stats, DeliveryStats::new());
    let reason = loaded
        .warnings
        .iter()
        .find_map(|w| match w {
            LoadWarning::Unreadable {
                path: p, reason, ..
            } if p == &path => Some(reason.clone()),
            _ => None,
        })
        .expect("reported unreadable");
    assert!(reason.contains("larger than"), "{reason}");
    let aside = corrupt_siblings(&path);
    assert_eq!(aside.len(), 1);
    assert_eq!(fs::metadata(&aside[0]).unwrap().len(), MAX_STATS_BYTES + 1);
    store.save(&DeliveryStats::new()).unwrap();
    assert!(store.load().unwrap().warnings.is_empty());
}

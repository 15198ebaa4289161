//! The conformance suite (`nostr_outbox_stats::conformance`) run on both stores of this crate.

use std::fs;
use std::path::Path;

use nostr_outbox_core::stats::Decay;
use nostr_outbox_core::{DeliveryStats, RelayStats};
use nostr_outbox_stats::conformance::{self as suite, files, Medium};
use nostr_outbox_stats::{FileStore, SqliteStore};

/// Bytes no store reads: neither JSON nor an SQLite header.
fn garbage() -> Vec<u8> {
    (0..700u32).map(|i| (i * 37 % 251) as u8 | 0x80).collect()
}

struct FileMedium;

impl Medium for FileMedium {
    type Store = FileStore;

    fn open(&self, dir: &Path) -> FileStore {
        FileStore::new(dir.join("stats.json"))
    }

    fn interrupt_next_save(&self, store: &FileStore) {
        store.interrupt_next_save();
    }

    fn garble(&self, dir: &Path) -> Vec<u8> {
        fs::write(dir.join("stats.json"), garbage()).unwrap();
        garbage()
    }

    fn write_older(&self, dir: &Path) -> DeliveryStats {
        // Version 1: no authors, no run priors.
        fs::write(
            dir.join("stats.json"),
            r#"{"format": "outbox-stats", "version": 1, "saved_at": 5, "session": 2,
                "decay": {"mode": "hourly", "factor": 0.95},
                "relays": {"wss://a.example": {"alpha": 3.5, "beta": 1.2, "latency_ms": 240.0,
                           "updated_at": 4, "session": 2, "asked": 5, "failures": 0}}}"#,
        )
        .unwrap();
        let mut s = DeliveryStats::with_decay(Decay::Hourly { factor: 0.95 });
        s.set_session(2);
        s.set(
            "wss://a.example",
            RelayStats {
                alpha: 3.5,
                beta: 1.2,
                latency_ms: Some(240.0),
                updated_at: 4,
                session: 2,
                asked: 5,
                failures: 0,
                ..RelayStats::default()
            },
        );
        s
    }

    fn write_newer(&self, dir: &Path) {
        let newer = r#"{"format": "outbox-stats", "version": 9, "saved_at": 4000000000,
            "decay": {"mode": "hourly", "factor": 0.9}, "per_depth": {"x": 1},
            "relays": {"wss://a.example": {"alpha": 2.0, "beta": 3.0, "depth_alpha": [1, 2]}}}"#;
        fs::write(dir.join("stats.json"), newer).unwrap();
        fs::write(dir.join("stats.json.bak"), newer).unwrap();
    }

    fn snapshot(&self, dir: &Path) -> Vec<(String, Vec<u8>)> {
        files(dir)
            .into_iter()
            .filter(|(name, _)| name == "stats.json" || name == "stats.json.bak")
            .collect()
    }
}

struct SqliteMedium;

fn db(dir: &Path) -> std::path::PathBuf {
    dir.join("outbox.sqlite")
}

impl Medium for SqliteMedium {
    type Store = SqliteStore;

    fn open(&self, dir: &Path) -> SqliteStore {
        SqliteStore::new(db(dir))
    }

    fn interrupt_next_save(&self, store: &SqliteStore) {
        store.interrupt_next_save();
    }

    fn garble(&self, dir: &Path) -> Vec<u8> {
        for side in ["outbox.sqlite-wal", "outbox.sqlite-shm"] {
            let _ = fs::remove_file(dir.join(side));
        }
        fs::write(db(dir), garbage()).unwrap();
        garbage()
    }

    fn write_older(&self, dir: &Path) -> DeliveryStats {
        // Version 0: a database with no schema yet (as any SQLite tool creates it).
        let conn = rusqlite::Connection::open(db(dir)).unwrap();
        conn.execute_batch("PRAGMA user_version = 0; VACUUM;")
            .unwrap();
        drop(conn);
        DeliveryStats::new()
    }

    fn write_newer(&self, dir: &Path) {
        let conn = rusqlite::Connection::open(db(dir)).unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
             INSERT INTO meta VALUES ('schema_version', 3);
             CREATE TABLE relays (url TEXT PRIMARY KEY, alpha REAL, depth BLOB);
             INSERT INTO relays VALUES ('wss://a.example', 2.0, x'0102');",
        )
        .unwrap();
    }

    fn snapshot(&self, dir: &Path) -> Vec<(String, Vec<u8>)> {
        files(dir)
            .into_iter()
            .filter(|(name, _)| name.starts_with("outbox.sqlite") && !name.contains("corrupt"))
            .collect()
    }
}

macro_rules! cases {
    ($module:ident, $medium:expr) => {
        mod $module {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn round_trip() {
                suite::round_trip(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn torn_write() {
                suite::torn_write(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_writers() {
                suite::concurrent_writers(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_runs() {
                suite::concurrent_runs(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn corrupt_data_set_aside() {
                suite::corrupt_data_set_aside(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn versions() {
                suite::versions(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn forget_sticks() {
                suite::forget_sticks(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn base_seed_kept() {
                suite::base_seed_kept(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kept_state_merges() {
                suite::kept_state_merges(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn future_stamps_and_pauses_forget_nothing() {
                suite::future_stamps_and_pauses_forget_nothing(&$medium).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn future_lists_dropped() {
                suite::future_lists_dropped(&$medium).await;
            }
        }
    };
}

cases!(file_store, FileMedium);
cases!(sqlite_store, SqliteMedium);

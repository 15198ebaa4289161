//! Everything a client keeps between runs in one SQLite database (feature `sqlite`).
//!
//! # Schema (version 2)
//!
//! | table | rows |
//! |---|---|
//! | `meta(key, value)` | `schema_version`; the stats' `decay` (JSON), `session`, `saved_at`, `days` (the days of use, a JSON array), `forgotten` (the relays forgotten on purpose with the time of the forget, a JSON object; none when absent), `seed` (the base seed of the plans' draws, decimal text, drawn on the first run and never replaced; none in older databases: the next run draws one) |
//! | `relays(url, alpha, beta, latency_ms, …)` | one [`RelayStats`] per canonical relay URL |
//! | `authors(author, volume, updated_at, first, last, probed_secs)` | one [`AuthorStats`] per hex public key |
//! | `pairs(author, url, hits, misses)` | the per (author, relay) [`PairStats`] |
//! | `relay_lists(author, created_at, tags)` | one kind:10002 list per author, tags as JSON |
//! | `documents(name, body)` | the penalty box (`penalties`), JSON, with its lifts ([`crate::kept`]) |
//!
//! # Safety of the database
//!
//! - Every save is one `BEGIN IMMEDIATE` transaction, so a crash or an error midway leaves the
//!   previous state; the journal is WAL with `synchronous = FULL`.
//! - Concurrent writers (threads or processes) wait for each other up to [`BUSY_TIMEOUT`]. A
//!   stats save reads what is stored, adds what its run learned since it loaded
//!   ([`DeliveryStats::merge_learning`]) and writes, in one transaction: concurrent runs keep
//!   each other's learning. Lists and the penalty box are merged the same way, three-way
//!   against what the store loaded ([`crate::kept`]), in one transaction each.
//! - A database that is not one (garbage) or fails SQLite's integrity check is renamed to
//!   `<name>.corrupt-<unix seconds>` (with its `-wal`), reported as a [`LoadWarning`], and a
//!   fresh one starts in its place. So is one larger than [`MAX_STATS_BYTES`] (a bound on what a
//!   load reads).
//! - A database of a newer schema version is refused ([`StatsStoreError::Newer`]) before
//!   anything is written to it; so is a database of some other program: another
//!   `PRAGMA application_id` than [`APPLICATION_ID`], or none and tables that are not all ours
//!   (databases of earlier builds have none and only our tables; they are marked on save).
//! - The database is created owner-only (0600 on Unix); SQLite gives its side files the same
//!   mode. What is kept is bounded ([`DeliveryStats::prune`]).
//! - Values are read like the file store reads them: a wrong-typed number is corrupt and reset
//!   by sanitising, an author key that is not a public key is dropped with a warning.
//! - Loads never create the database; anything but a regular file is refused unopened.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nostr_outbox_client::{
    async_trait, lists_to_keep, LoadWarning, Loaded, Restored, StateStore, StatsStore,
    StatsStoreError, MAX_STORED_LISTS,
};
use nostr_outbox_core::stats::{AuthorStats, Decay, PairStats, Pairs};
use nostr_outbox_core::{public_key_from_hex, DeliveryStats, RawRelayList, RelayStats};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction};
use serde_json::Value;

use crate::kept::{drop_future_lists, merge_lists, merge_penalties, with_lifts_of};
use crate::state::lock;
use crate::task::{blocking, off_thread_stores};
use crate::{
    aside_name, check_dir_writable, finish, now_secs, private_options, set_base, sibling,
    store_opening, to_save, warn_dropped, Parsed, StoreCore, MAX_STATS_BYTES,
};

/// The SQLite binding used, for callers that inspect the database themselves.
pub use rusqlite;

/// The schema version this build writes (and the newest it reads).
pub const SQLITE_SCHEMA_VERSION: u32 = 2;

/// What turns a version 1 database into version 2: how far back each relay's history reaches
/// and the ages of each author's notes (see [`RelayStats::depth_secs`], [`AuthorStats`]).
/// Rows migrated read the new columns as NULL: not learned yet.
const MIGRATE_1_TO_2: &str = "
ALTER TABLE relays ADD COLUMN depth_secs REAL;
ALTER TABLE authors ADD COLUMN first INTEGER;
ALTER TABLE authors ADD COLUMN last INTEGER;
ALTER TABLE authors ADD COLUMN probed_secs REAL;
UPDATE meta SET value = 2 WHERE key = 'schema_version';
";

/// How long a save waits for another writer before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the check before a run ([`SqliteStore::check_writable`]) waits for a lock another
/// process holds: a save holds it for moments, so longer means it is held for the run.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// `PRAGMA application_id` of every database this store writes ("OUTB"), so another program's
/// database is told apart from ours without guessing by its tables.
pub const APPLICATION_ID: i32 = 0x4f55_5442;

/// The tables of this store (every schema version): a database without an application id is
/// ours, written before the id was set, if its tables are among these and include `meta`
/// and `relays`.
const OUR_TABLES: [&str; 6] = [
    "meta",
    "relays",
    "authors",
    "pairs",
    "relay_lists",
    "documents",
];

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS relays (
    url TEXT PRIMARY KEY NOT NULL,
    alpha REAL, beta REAL, latency_ms REAL,
    updated_at INTEGER, session INTEGER, asked INTEGER, failures INTEGER,
    live_alpha REAL, live_beta REAL, kept_alpha REAL, kept_beta REAL, depth_secs REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS authors (
    author TEXT PRIMARY KEY NOT NULL, volume REAL, updated_at INTEGER,
    first INTEGER, last INTEGER, probed_secs REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pairs (
    author TEXT NOT NULL, url TEXT NOT NULL, hits REAL, misses REAL,
    PRIMARY KEY (author, url)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS relay_lists (
    author TEXT PRIMARY KEY NOT NULL, created_at INTEGER NOT NULL, tags TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS documents (name TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
";

/// Stats, relay lists and the penalty box in one SQLite database (see the module docs).
///
/// Each operation opens its own connection on tokio's blocking threads: no connection is
/// shared, and two stores on one path behave like two processes. A clone is the same store (it
/// shares the `base` and `kept` locks).
#[derive(Clone, Debug)]
pub struct SqliteStore {
    core: StoreCore,
}

/// Why opening or reading failed: the content (set it aside) or the medium.
enum Failure {
    Corrupt(String),
    Store(StatsStoreError),
    /// Another connection holds a lock SQLite would not wait for (switching to WAL while
    /// another writer creates the database, a read upgraded to a write): tried again.
    Busy(StatsStoreError),
}

impl From<StatsStoreError> for Failure {
    fn from(e: StatsStoreError) -> Self {
        Failure::Store(e)
    }
}

store_opening!(
    SqliteStore,
    "The database file.",
    "A store at `path` opened only to be read (`outbox stats` showing what is kept): a corrupt \
     database is reported and left where it is, and every save is an error."
);

impl SqliteStore {
    /// Every file this store reads or writes: the database and SQLite's `-wal`, `-shm` and
    /// `-journal` beside it. A command checks its output files against them, so none is
    /// overwritten.
    pub fn files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.path().to_path_buf()];
        files.extend(["-wal", "-shm", "-journal"].map(|side| sibling(self.path(), side)));
        files
    }

    /// Makes the next stats save fail after half its rows, inside its transaction (the
    /// conformance suite's torn write).
    #[cfg(feature = "conformance")]
    #[doc(hidden)]
    pub fn interrupt_next_save(&self) {
        self.core.interrupt.store(true, Ordering::SeqCst);
    }

    fn db_err(&self, e: rusqlite::Error) -> Failure {
        let busy = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        );
        if is_corrupt(&e) {
            Failure::Corrupt(e.to_string())
        } else if busy {
            Failure::Busy(StatsStoreError::Database {
                path: self.path().to_path_buf(),
                message: e.to_string(),
            })
        } else {
            Failure::Store(StatsStoreError::Database {
                path: self.path().to_path_buf(),
                message: e.to_string(),
            })
        }
    }

    /// Opens the database for `work`; a corrupt one is set aside (a warning) and, when
    /// `create`, started fresh. `None`: nothing is stored (and nothing was created).
    fn with_db<T>(
        &self,
        create: bool,
        warnings: &mut Vec<LoadWarning>,
        work: impl Fn(&mut Connection) -> Result<T, Failure>,
    ) -> Result<Option<T>, StatsStoreError> {
        // Twice at most: a corrupt database is set aside once, then the fresh one is used. A
        // busy database is tried again until `BUSY_TIMEOUT`.
        let started = std::time::Instant::now();
        let mut fresh = 0;
        while fresh < 2 {
            let outcome = self.open(create).and_then(|conn| match conn {
                None => Ok(None),
                Some(mut conn) => {
                    let out = work(&mut conn).map(Some);
                    // Closing checkpoints the WAL; a failure there loses nothing committed.
                    let _ = conn.close();
                    out
                }
            });
            match outcome {
                Ok(v) => return Ok(v),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Busy(e)) if started.elapsed() >= BUSY_TIMEOUT => return Err(e),
                Err(Failure::Busy(_)) => std::thread::sleep(Duration::from_millis(20)),
                Err(Failure::Corrupt(reason)) if self.core.read_only => {
                    warnings.push(LoadWarning::Unreadable {
                        path: self.path().to_path_buf(),
                        reason,
                        moved_to: None,
                    });
                    return Ok(None);
                }
                Err(Failure::Corrupt(reason)) => {
                    fresh += 1;
                    tracing::warn!(path = %self.path().display(), %reason, "stats database is unreadable; setting it aside and starting fresh");
                    let moved_to = self.move_aside()?;
                    warnings.push(LoadWarning::Unreadable {
                        path: self.path().to_path_buf(),
                        reason,
                        moved_to: Some(moved_to),
                    });
                    if !create {
                        return Ok(None);
                    }
                }
            }
        }
        Err(StatsStoreError::Database {
            path: self.path().to_path_buf(),
            message: "still unreadable after starting fresh".into(),
        })
    }

    /// A connection to a database of a known version (created and migrated when `create`).
    fn open(&self, create: bool) -> Result<Option<Connection>, Failure> {
        let io = |source| StatsStoreError::Io {
            path: self.path().to_path_buf(),
            source,
        };
        // Looked at before opening: a FIFO would block the open, a device never end.
        let size = match fs::metadata(self.path()) {
            Ok(meta) if !meta.is_file() => {
                return Err(io(std::io::Error::other("not a regular file")).into())
            }
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Created owner-only: SQLite gives its -wal, -shm and journal the same mode.
                match private_options()
                    .write(true)
                    .create_new(true)
                    .open(self.path())
                {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io(e).into()),
                }
                0
            }
            Err(e) => return Err(io(e).into()),
        };
        if create {
            make_private(self.path());
        }
        let wal = fs::metadata(sibling(self.path(), "-wal")).map_or(0, |m| m.len());
        if size.saturating_add(wal) > MAX_STATS_BYTES {
            return Err(Failure::Corrupt(format!(
                "larger than {MAX_STATS_BYTES} bytes"
            )));
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let mut conn =
            Connection::open_with_flags(self.path(), flags).map_err(|e| self.db_err(e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| self.db_err(e))?;
        // Read before anything is written: a newer or foreign database stays as it is.
        let mut version = self.version(&conn)?;
        if version == Some(1) {
            self.migrate_from_1(&mut conn)?;
            version = Some(SQLITE_SCHEMA_VERSION);
        }
        if version == Some(SQLITE_SCHEMA_VERSION) {
            conn.pragma_update(None, "synchronous", "FULL")
                .map_err(|e| self.db_err(e))?;
            if create && application_id(&conn).map_err(|e| self.db_err(e))? == 0 {
                // Ours from before the id was set (see `version`): marked from now on.
                conn.pragma_update(None, "application_id", APPLICATION_ID)
                    .map_err(|e| self.db_err(e))?;
            }
            return Ok(Some(conn));
        }
        if !create {
            // Version 0, an empty database: nothing stored yet.
            return Ok(None);
        }
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| self.db_err(e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %self.path().display(), %mode, "stats database could not switch to WAL");
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| self.db_err(e))?;
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        // Another writer may have created it meanwhile.
        if self.version(&tx)? != Some(SQLITE_SCHEMA_VERSION) {
            tx.execute_batch(SCHEMA).map_err(|e| self.db_err(e))?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .map_err(|e| self.db_err(e))?;
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?1)",
                [SQLITE_SCHEMA_VERSION],
            )
            .map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))?;
        Ok(Some(conn))
    }

    /// Adds what version 2 keeps to a version 1 database, in one transaction (another writer
    /// may have migrated it meanwhile: then nothing is done).
    fn migrate_from_1(&self, conn: &mut Connection) -> Result<(), Failure> {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| self.db_err(e))?;
        if self.version(&tx)? == Some(1) {
            tracing::info!(path = %self.path().display(), "stats database migrated from schema 1 to 2");
            tx.execute_batch(MIGRATE_1_TO_2)
                .map_err(|e| self.db_err(e))?;
        }
        tx.commit().map_err(|e| self.db_err(e))
    }

    /// The schema version: `None` for an empty database (version 0). Newer is refused; so is
    /// another program's database: one with another application id, or without ours and with
    /// tables that are not all ours (see [`OUR_TABLES`]). Such a database is left untouched.
    fn version(&self, conn: &Connection) -> Result<Option<u32>, Failure> {
        let foreign = |why: String| {
            Failure::Store(StatsStoreError::Database {
                path: self.path().to_path_buf(),
                message: format!("not an outbox store ({why}); left untouched"),
            })
        };
        let id = application_id(conn).map_err(|e| self.db_err(e))?;
        if id != 0 && id != APPLICATION_ID {
            return Err(foreign(format!("application id {id:#x}")));
        }
        let tables: Vec<String> = (|| {
            let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
            let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
            names.collect::<rusqlite::Result<Vec<String>>>()
        })()
        .map_err(|e| self.db_err(e))?;
        if tables.is_empty() {
            return Ok(None);
        }
        if id == 0 {
            let ours = |name: &str| OUR_TABLES.contains(&name);
            let has = |name: &str| tables.iter().any(|t| t == name);
            if let Some(other) = tables.iter().find(|t| !ours(t)) {
                let shown: String = other.chars().take(40).collect();
                return Err(foreign(format!("it has a table {shown:?}")));
            }
            if !has("meta") || !has("relays") {
                return Err(foreign("tables but no meta and relays tables".into()));
            }
        }
        let raw: Option<i64> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version' AND typeof(value) = 'integer'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.db_err(e))?;
        let Some(found) = raw.and_then(|v| u32::try_from(v).ok()) else {
            return Err(Failure::Corrupt(
                "no readable schema_version in meta".into(),
            ));
        };
        if found > SQLITE_SCHEMA_VERSION {
            tracing::warn!(path = %self.path().display(), found, "stats database is from a newer version; refused");
            return Err(Failure::Store(StatsStoreError::Newer {
                path: self.path().to_path_buf(),
                found,
                supported: SQLITE_SCHEMA_VERSION,
            }));
        }
        Ok(Some(found))
    }

    /// Renames the database (and its WAL and shared memory) to `<name>.corrupt-<secs>`.
    fn move_aside(&self) -> Result<PathBuf, StatsStoreError> {
        let io = |source| StatsStoreError::Io {
            path: self.path().to_path_buf(),
            source,
        };
        let Some(target) = aside_name(self.path()) else {
            return Err(io(std::io::Error::other(
                "no free name to move the database aside",
            )));
        };
        fs::rename(self.path(), &target).map_err(io)?;
        // A stale WAL left at the path would be replayed into the fresh database.
        for side in ["-wal", "-shm"] {
            let from = sibling(self.path(), side);
            if from.exists() {
                let _ = fs::rename(&from, sibling(&target, side));
            }
        }
        tracing::warn!(from = %self.path().display(), to = %target.display(), "unreadable stats database moved aside");
        Ok(target)
    }

    /// The stored stats (blocking).
    pub fn load(&self) -> Result<Loaded, StatsStoreError> {
        let mut warnings = Vec::new();
        let read = self.with_db(false, &mut warnings, |conn| {
            let tx = conn.transaction().map_err(|e| self.db_err(e))?;
            let check: String = tx
                .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
                .map_err(|e| self.db_err(e))?;
            if check != "ok" {
                return Err(Failure::Corrupt(format!("integrity check: {check}")));
            }
            read_stats(&tx).map_err(|e| self.db_err(e))
        })?;
        let loaded = match read {
            Some(parsed) => finish(parsed, warnings),
            None => Loaded {
                stats: DeliveryStats::new(),
                warnings,
            },
        };
        set_base(&self.core.base, &loaded.stats);
        Ok(loaded)
    }

    /// Whether a save could be written now (blocking): a missing database's directory takes a
    /// new file; an existing one is ours, of a version this build writes, not read-only, and
    /// its write lock can be taken within [`CHECK_TIMEOUT`] (it is released at once).
    pub fn check_writable(&self) -> Result<(), StatsStoreError> {
        let dir = match self.path().parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        check_dir_writable(&dir)?;
        match fs::metadata(self.path()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => {
                return Err(StatsStoreError::Io {
                    path: self.path().to_path_buf(),
                    source,
                })
            }
            Ok(meta) if !meta.is_file() => {
                return Err(StatsStoreError::Io {
                    path: self.path().to_path_buf(),
                    source: std::io::Error::other("not a regular file"),
                })
            }
            Ok(_) => {}
        }
        let check = || -> Result<(), Failure> {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let mut conn =
                Connection::open_with_flags(self.path(), flags).map_err(|e| self.db_err(e))?;
            conn.busy_timeout(CHECK_TIMEOUT)
                .map_err(|e| self.db_err(e))?;
            self.version(&conn)?;
            if conn.is_readonly(c"main").map_err(|e| self.db_err(e))? {
                return Err(Failure::Store(StatsStoreError::Database {
                    path: self.path().to_path_buf(),
                    message: "opened read-only".into(),
                }));
            }
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            tx.rollback().map_err(|e| self.db_err(e))
        };
        match check() {
            Ok(()) => Ok(()),
            // Held by another writer for longer than the check waits.
            Err(Failure::Store(e) | Failure::Busy(e)) => Err(e),
            // A corrupt database is set aside by the load and started fresh: writable.
            Err(Failure::Corrupt(_)) => Ok(()),
        }
    }

    /// Stores `stats` in one write transaction (blocking): what is stored is read, what this
    /// run learned since its base (the last load or save) is added to it
    /// ([`DeliveryStats::merge_learning`]) and the result written; with no base, `stats`
    /// replaces it. Concurrent runs on one database so keep every run's learning.
    pub fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let drawn = self.core.drawn_seed();
        let mut held = self.core.base.lock().unwrap_or_else(|e| e.into_inner());
        let base = held.as_ref();
        let mut warnings = Vec::new();
        let kept = self.with_db(true, &mut warnings, |conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            // What is stored matters only to merge into.
            let stored = match base {
                Some(_) => Some(read_stats(&tx).map_err(|e| self.db_err(e))?.stats),
                None => None,
            };
            let clean = to_save(stored, base, stats);
            write_stats(&tx, &clean, &self.core.interrupt).map_err(|e| self.db_err(e))?;
            // The seed kept wins over the one this store drew: another run may have kept its
            // own.
            if let Some(seed) = drawn {
                tx.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('seed', ?1)",
                    [seed.to_string()],
                )
                .map_err(|e| self.db_err(e))?;
            }
            let kept = read_seed(&tx).map_err(|e| self.db_err(e))?;
            tx.commit().map_err(|e| self.db_err(e))?;
            Ok(kept)
        })?;
        *held = Some(stats.clone());
        drop(held);
        self.core.saved_seed(kept.flatten());
        Ok(())
    }

    /// The base seed kept in the database (blocking), or else `drawn`, kept by this store's
    /// next stats save (see [`StateStore::base_seed`]). Nothing is written here, and a
    /// database that holds a seed is never given another.
    pub fn base_seed(&self, drawn: u64) -> Result<u64, StatsStoreError> {
        let mut warnings = Vec::new();
        let kept = self
            .with_db(false, &mut warnings, |conn| {
                let tx = conn.transaction().map_err(|e| self.db_err(e))?;
                read_seed(&tx).map_err(|e| self.db_err(e))
            })?
            .flatten();
        Ok(self.core.base_seed(kept, drawn))
    }

    /// The stored relay lists (blocking).
    pub fn load_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError> {
        let mut warnings = Vec::new();
        let read = self.with_db(false, &mut warnings, |conn| {
            read_lists(conn).map_err(|e| self.db_err(e))
        })?;
        let (mut value, mut dropped) = read.unwrap_or_default();
        dropped.extend(drop_future_lists(&mut value, now_secs()));
        if !dropped.is_empty() {
            tracing::warn!(path = %self.path().display(), count = dropped.len(), "unreadable relay lists dropped");
            warnings.push(LoadWarning::DroppedEntries { urls: dropped });
        }
        lock(&self.core.kept).lists = Some(value.clone());
        Ok(Restored { value, warnings })
    }

    /// Stores the relay lists in one transaction (blocking): what is stored is read and the
    /// lists merged three-way against this store's base ([`crate::kept`]).
    pub fn save_lists(&self, lists: &[RawRelayList]) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let mut held = lock(&self.core.kept);
        let base = held.lists.as_deref();
        let mut warnings = Vec::new();
        self.with_db(true, &mut warnings, |conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            let (mut stored, _) = read_lists(&tx).map_err(|e| self.db_err(e))?;
            drop_future_lists(&mut stored, now_secs());
            let merged = merge_lists(&stored, base, lists);
            let kept = lists_to_keep(&merged);
            let mut rows = Vec::with_capacity(kept.len());
            for list in kept {
                let tags = serde_json::to_string(&list.tags)
                    .map_err(|e| Failure::Store(StatsStoreError::Encode(e.to_string())))?;
                rows.push((list.author.to_hex(), sql_int(list.created_at), tags));
            }
            (|| {
                tx.execute("DELETE FROM relay_lists", [])?;
                let mut insert = tx.prepare(
                    "INSERT OR REPLACE INTO relay_lists (author, created_at, tags) VALUES (?1, ?2, ?3)",
                )?;
                for (author, created_at, tags) in &rows {
                    insert.execute(params![author, created_at, tags])?;
                }
                Ok(())
            })()
            .map_err(|e| self.db_err(e))?;
            tx.commit().map_err(|e| self.db_err(e))
        })?;
        held.lists = Some(lists.to_vec());
        Ok(())
    }

    /// The stored penalty document (blocking); this store's base for its next
    /// [`save_penalties`](Self::save_penalties).
    pub fn load_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
        Ok(self.core.loaded_penalties(self.read_penalties()?))
    }

    fn read_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
        let mut warnings = Vec::new();
        let read = self.with_db(false, &mut warnings, |conn| {
            conn.query_row(
                "SELECT length(body), CASE WHEN length(body) <= ?1 THEN body END
                 FROM documents WHERE name = 'penalties'",
                [MAX_STATS_BYTES as i64],
                |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<String>>(1)?)),
            )
            .optional()
            .map_err(|e| self.db_err(e))
        })?;
        let value = match read.flatten() {
            None => None,
            Some((_, Some(body))) => match serde_json::from_str::<Value>(&body) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(path = %self.path().display(), error = %e, "unreadable penalty box; starting fresh");
                    warnings.push(LoadWarning::DroppedEntries {
                        urls: vec!["penalties".into()],
                    });
                    None
                }
            },
            Some((len, None)) => {
                tracing::warn!(path = %self.path().display(), ?len, "penalty box too large or not text; starting fresh");
                warnings.push(LoadWarning::DroppedEntries {
                    urls: vec!["penalties".into()],
                });
                None
            }
        };
        Ok(Restored { value, warnings })
    }

    /// Stores the penalty document (blocking), in one transaction: what is stored is read and
    /// the box merged three-way against this store's base, lifts honoured ([`crate::kept`]).
    pub fn save_penalties(&self, penalties: &Value) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let mut held = lock(&self.core.kept);
        let base = held.penalties.as_ref();
        let mut warnings = Vec::new();
        let merged = self.with_db(true, &mut warnings, |conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| self.db_err(e))?;
            let stored: Option<String> = tx
                .query_row(
                    "SELECT CASE WHEN length(body) <= ?1 THEN body END
                     FROM documents WHERE name = 'penalties'",
                    [MAX_STATS_BYTES as i64],
                    |r| r.get::<_, Option<String>>(0),
                )
                .optional()
                .map_err(|e| self.db_err(e))?
                .flatten();
            let stored = stored.and_then(|b| serde_json::from_str::<Value>(&b).ok());
            let merged = merge_penalties(stored.as_ref(), base, penalties);
            let body = serde_json::to_string(&merged)
                .map_err(|e| Failure::Store(StatsStoreError::Encode(e.to_string())))?;
            tx.execute(
                "INSERT OR REPLACE INTO documents (name, body) VALUES ('penalties', ?1)",
                [&body],
            )
            .map_err(|e| self.db_err(e))?;
            tx.commit().map_err(|e| self.db_err(e))?;
            Ok(merged)
        })?;
        if let Some(merged) = merged {
            held.penalties = Some(with_lifts_of(penalties, &merged));
        }
        Ok(())
    }
}

/// The database's `PRAGMA application_id` (0: none set).
fn application_id(conn: &Connection) -> rusqlite::Result<i32> {
    conn.query_row("PRAGMA application_id", [], |r| r.get(0))
}

/// Takes group and other permissions off the database and its side files (databases of
/// earlier builds were created with the process's umask).
fn make_private(path: &Path) {
    #[cfg(unix)]
    for file in [
        path.to_path_buf(),
        sibling(path, "-wal"),
        sibling(path, "-shm"),
        sibling(path, "-journal"),
    ] {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = fs::metadata(&file) {
            if meta.is_file() && meta.permissions().mode() & 0o077 != 0 {
                let mode = meta.permissions().mode() & 0o700;
                let _ = fs::set_permissions(&file, fs::Permissions::from_mode(mode));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Whether an error means the file is not a healthy database (as opposed to locked or full).
fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
    )
}

/// SQLite integers are signed; counters and timestamps saturate.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A stored number as `f64`: NULL or text reads as NaN, so the entry reads as corrupt.
fn float_at(v: ValueRef<'_>) -> f64 {
    match v {
        ValueRef::Real(x) => x,
        ValueRef::Integer(i) => i as f64,
        _ => f64::NAN,
    }
}

/// A stored counter: anything but a non-negative integer reads as 0.
fn int_at(v: ValueRef<'_>) -> u64 {
    match v {
        ValueRef::Integer(i) => u64::try_from(i).unwrap_or(0),
        _ => 0,
    }
}

fn write_stats(
    tx: &Transaction<'_>,
    stats: &DeliveryStats,
    interrupt: &AtomicBool,
) -> rusqlite::Result<()> {
    let decay = serde_json::to_string(&stats.decay).unwrap_or_default();
    for table in ["relays", "authors", "pairs"] {
        tx.execute(&format!("DELETE FROM {table}"), [])?;
    }
    let mut meta = tx.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")?;
    meta.execute(params!["decay", decay])?;
    meta.execute(params!["session", sql_int(stats.session())])?;
    meta.execute(params!["saved_at", sql_int(now_secs())])?;
    let days: Vec<u64> = stats.days().collect();
    meta.execute(params![
        "days",
        serde_json::to_string(&days).unwrap_or_default()
    ])?;
    let forgotten: std::collections::BTreeMap<&str, u64> = stats.forgotten().collect();
    meta.execute(params![
        "forgotten",
        serde_json::to_string(&forgotten).unwrap_or_default()
    ])?;
    let mut relay = tx.prepare(
        "INSERT INTO relays (url, alpha, beta, latency_ms, updated_at, session, asked, failures,
                             live_alpha, live_beta, kept_alpha, kept_beta, depth_secs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?;
    let half = stats.len() / 2;
    for (i, (url, r)) in stats.iter().enumerate() {
        if i == half && interrupt.swap(false, Ordering::SeqCst) {
            // As a crash midway would: the open transaction is never committed.
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_INTERRUPT),
                Some("save interrupted".into()),
            ));
        }
        relay.execute(params![
            url,
            r.alpha,
            r.beta,
            r.latency_ms,
            sql_int(r.updated_at),
            sql_int(r.session),
            sql_int(r.asked),
            sql_int(r.failures),
            r.live_alpha,
            r.live_beta,
            r.kept_alpha,
            r.kept_beta,
            r.depth_secs
        ])?;
    }
    let mut author =
        tx.prepare("INSERT INTO authors (author, volume, updated_at, first, last, probed_secs) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
    let mut pair =
        tx.prepare("INSERT INTO pairs (author, url, hits, misses) VALUES (?1, ?2, ?3, ?4)")?;
    for (key, a) in stats.authors() {
        let hex = key.to_hex();
        author.execute(params![
            hex,
            a.volume,
            sql_int(a.updated_at),
            sql_int(a.first),
            sql_int(a.last),
            a.probed_secs
        ])?;
        for (url, p) in &a.relays {
            pair.execute(params![hex, url, p.hits, p.misses])?;
        }
    }
    Ok(())
}

/// The base seed kept in `meta`, if a readable one is.
fn read_seed(tx: &Transaction<'_>) -> rusqlite::Result<Option<u64>> {
    let value: Option<rusqlite::types::Value> = tx
        .query_row("SELECT value FROM meta WHERE key = 'seed'", [], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(match value {
        Some(rusqlite::types::Value::Text(t)) => t.parse().ok(),
        _ => None,
    })
}

fn read_stats(tx: &Transaction<'_>) -> rusqlite::Result<Parsed> {
    let mut warnings = Vec::new();
    let meta = |key: &str| -> rusqlite::Result<Option<rusqlite::types::Value>> {
        tx.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    let decay = match meta("decay")? {
        None => Some(Decay::default()),
        Some(rusqlite::types::Value::Text(t)) => serde_json::from_str::<Decay>(&t).ok(),
        Some(_) => None,
    };
    let decay = decay.unwrap_or_else(|| {
        tracing::warn!("unreadable decay setting; using the default");
        warnings.push(LoadWarning::Sanitised { count: 1 });
        Decay::default()
    });
    let mut stats = DeliveryStats::with_decay(decay);
    let session = match meta("session")? {
        Some(rusqlite::types::Value::Integer(i)) => u64::try_from(i).unwrap_or(0),
        _ => 0,
    };
    stats.set_session(session);
    // Days of use (see `DeliveryStats::prune_at`): a JSON array; anything else is none.
    if let Some(rusqlite::types::Value::Text(days)) = meta("days")? {
        for day in serde_json::from_str::<Vec<u64>>(&days).unwrap_or_default() {
            stats.note_day(day.saturating_mul(86_400));
        }
    }
    // Relays forgotten on purpose: a JSON object of URL to time; absent in databases before
    // them, and anything unreadable is none.
    if let Some(rusqlite::types::Value::Text(forgotten)) = meta("forgotten")? {
        let read: HashMap<String, u64> = serde_json::from_str(&forgotten).unwrap_or_default();
        for (url, at) in read {
            stats.note_forgotten(&url, at);
        }
    }
    let saved_at = match meta("saved_at")? {
        Some(rusqlite::types::Value::Integer(i)) => u64::try_from(i).unwrap_or(0),
        _ => 0,
    };
    let mut insane = 0usize;
    let mut relays = tx.prepare(
        "SELECT url, alpha, beta, latency_ms, updated_at, session, asked, failures,
                live_alpha, live_beta, kept_alpha, kept_beta, depth_secs FROM relays",
    )?;
    let mut rows = relays.query([])?;
    while let Some(row) = rows.next()? {
        let url: String = match row.get_ref(0)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => continue,
        };
        let f = |i| row.get_ref(i).map(float_at);
        let n = |i| row.get_ref(i).map(int_at);
        let relay = RelayStats {
            alpha: f(1)?,
            beta: f(2)?,
            latency_ms: match row.get_ref(3)? {
                ValueRef::Null => None,
                v => Some(float_at(v)),
            },
            updated_at: n(4)?,
            session: n(5)?,
            asked: n(6)?,
            failures: n(7)?,
            live_alpha: f(8)?,
            live_beta: f(9)?,
            kept_alpha: f(10)?,
            kept_beta: f(11)?,
            // Absent in databases migrated from version 1: not learned yet.
            depth_secs: match row.get_ref(12)? {
                ValueRef::Null => 0.0,
                v => float_at(v),
            },
        };
        insane += usize::from(!relay.is_sane());
        stats.set(url, relay);
    }
    let mut pairs: HashMap<String, Pairs> = HashMap::new();
    let mut pair_rows = tx.prepare("SELECT author, url, hits, misses FROM pairs")?;
    let mut rows = pair_rows.query([])?;
    while let Some(row) = rows.next()? {
        let (ValueRef::Text(author), ValueRef::Text(url)) = (row.get_ref(0)?, row.get_ref(1)?)
        else {
            continue;
        };
        let pair = PairStats {
            hits: float_at(row.get_ref(2)?),
            misses: float_at(row.get_ref(3)?),
        };
        pairs
            .entry(String::from_utf8_lossy(author).into_owned())
            .or_default()
            .insert(String::from_utf8_lossy(url).into_owned(), pair);
    }
    let mut dropped = Vec::new();
    let mut author_rows =
        tx.prepare("SELECT author, volume, updated_at, first, last, probed_secs FROM authors")?;
    let mut rows = author_rows.query([])?;
    while let Some(row) = rows.next()? {
        let hex = match row.get_ref(0)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            other => format!("{other:?}"),
        };
        let Ok(key) = public_key_from_hex(&hex) else {
            pairs.remove(&hex);
            dropped.push(hex);
            continue;
        };
        let author = AuthorStats {
            volume: float_at(row.get_ref(1)?),
            updated_at: int_at(row.get_ref(2)?),
            first: int_at(row.get_ref(3)?),
            last: int_at(row.get_ref(4)?),
            probed_secs: match row.get_ref(5)? {
                ValueRef::Null => 0.0,
                v => float_at(v),
            },
            relays: pairs.remove(&hex).unwrap_or_default(),
        };
        insane += usize::from(!author.is_sane());
        stats.set_author(key, author);
    }
    // Pairs of no stored author cannot be placed.
    dropped.extend(pairs.into_keys());
    if insane > 0 {
        warnings.push(LoadWarning::Sanitised { count: insane });
    }
    dropped.sort();
    warn_dropped(&mut warnings, "author", dropped);
    Ok(Parsed {
        stats,
        warnings,
        newer: false,
        saved_at,
        seed: read_seed(tx)?,
    })
}

fn read_lists(conn: &Connection) -> rusqlite::Result<(Vec<RawRelayList>, Vec<String>)> {
    let mut stmt = conn.prepare(
        "SELECT author, created_at, CASE WHEN length(tags) <= ?1 THEN tags END
         FROM relay_lists ORDER BY author LIMIT ?2",
    )?;
    let mut rows = stmt.query(params![MAX_STATS_BYTES as i64, MAX_STORED_LISTS as i64])?;
    let mut lists = Vec::new();
    let mut dropped = Vec::new();
    while let Some(row) = rows.next()? {
        let hex = match row.get_ref(0)? {
            ValueRef::Text(t) => String::from_utf8_lossy(t).chars().take(64).collect(),
            other => format!("{other:?}"),
        };
        let created_at = match row.get_ref(1)? {
            ValueRef::Integer(i) => u64::try_from(i).ok(),
            _ => None,
        };
        let tags = match row.get_ref(2)? {
            ValueRef::Text(t) => serde_json::from_slice::<Vec<Vec<String>>>(t).ok(),
            _ => None,
        };
        match (public_key_from_hex(&hex), created_at, tags) {
            (Ok(author), Some(created_at), Some(tags)) => lists.push(RawRelayList {
                author,
                created_at,
                tags,
            }),
            _ => dropped.push(hex),
        }
    }
    Ok((lists, dropped))
}

off_thread_stores!(SqliteStore);

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        crate::temp_store("outbox.sqlite", SqliteStore::new)
    }

    fn key_hex(n: u8) -> String {
        let sk = nostr::key::SecretKey::from_slice(&[n.max(1); 32]).unwrap();
        nostr::key::Keys::new(sk).public_key().to_hex()
    }

    #[test]
    fn saves_in_wal_mode_and_loads_never_create_the_database() {
        let (_dir, store) = store();
        assert!(store.load().unwrap().stats.is_empty());
        assert!(store.load_lists().unwrap().value.is_empty());
        assert!(!store.path().exists(), "a load creates nothing");
        store.save(&DeliveryStats::new()).unwrap();
        let conn = Connection::open(store.path()).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let version: i64 = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, i64::from(SQLITE_SCHEMA_VERSION));
    }

    /// A database as version 1 of the schema left it.
    const SCHEMA_1: &str = "
        CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
        CREATE TABLE relays (
            url TEXT PRIMARY KEY NOT NULL,
            alpha REAL, beta REAL, latency_ms REAL,
            updated_at INTEGER, session INTEGER, asked INTEGER, failures INTEGER,
            live_alpha REAL, live_beta REAL, kept_alpha REAL, kept_beta REAL
        ) WITHOUT ROWID;
        CREATE TABLE authors (
            author TEXT PRIMARY KEY NOT NULL, volume REAL, updated_at INTEGER
        ) WITHOUT ROWID;
        CREATE TABLE pairs (
            author TEXT NOT NULL, url TEXT NOT NULL, hits REAL, misses REAL,
            PRIMARY KEY (author, url)
        ) WITHOUT ROWID;
        CREATE TABLE relay_lists (
            author TEXT PRIMARY KEY NOT NULL, created_at INTEGER NOT NULL, tags TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE documents (name TEXT PRIMARY KEY NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;
        INSERT INTO meta VALUES ('schema_version', 1);
    ";

    #[test]
    fn a_version_1_database_is_migrated_and_keeps_what_it_learned() {
        let (_dir, store) = store();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch(SCHEMA_1).unwrap();
        let author = key_hex(4);
        conn.execute_batch(&format!(
            "INSERT INTO relays VALUES ('wss://a.example', 3.0, 1.5, NULL, 100, 2, 4, 1, 4.0, 2.0, 2.5, 1.5);
             INSERT INTO authors VALUES ('{author}', 12.0, 100);
             INSERT INTO pairs VALUES ('{author}', 'wss://a.example', 2.0, 0.5);"
        ))
        .unwrap();
        drop(conn);

        let loaded = store.load().unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let relay = loaded.stats.get("wss://a.example");
        assert_eq!(
            (relay.alpha, relay.kept_alpha, relay.depth_secs),
            (3.0, 2.5, 0.0)
        );
        let key = public_key_from_hex(&author).unwrap();
        let a = loaded.stats.author(&key).expect("author kept");
        assert_eq!(
            (a.volume, a.first, a.last, a.probed_secs),
            (12.0, 0, 0, 0.0)
        );
        assert_eq!(a.relays["wss://a.example"].hits, 2.0);

        // What version 2 adds is saved and read back.
        let mut stats = loaded.stats;
        let mut r = stats.get("wss://a.example");
        r.depth_secs = 86_400.0 * 40.0;
        stats.set("wss://a.example", r);
        let mut a = stats.author(&key).unwrap().clone();
        (a.first, a.last, a.probed_secs) = (1_700_000_000, 1_700_500_000, 3_600.0);
        stats.set_author(key, a.clone());
        store.save(&stats).unwrap();
        let again = store.load().unwrap().stats;
        assert_eq!(again.get("wss://a.example").depth_secs, 86_400.0 * 40.0);
        assert_eq!(again.author(&key), Some(&a));
        let conn = Connection::open(store.path()).unwrap();
        let version: i64 = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, 2);
    }

    #[test]
    fn another_programs_database_is_refused_untouched() {
        let (_dir, store) = store();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);")
            .unwrap();
        drop(conn);
        let before = fs::read(store.path()).unwrap();
        assert!(matches!(
            store.load(),
            Err(StatsStoreError::Database { .. })
        ));
        assert!(store.save(&DeliveryStats::new()).is_err());
        assert_eq!(fs::read(store.path()).unwrap(), before);
    }

    #[test]
    fn a_foreign_database_with_a_meta_table_is_refused_untouched() {
        let (dir, store) = store();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value);
             INSERT INTO meta VALUES ('owner', 'someone else');
             CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);",
        )
        .unwrap();
        drop(conn);
        let before = fs::read(store.path()).unwrap();
        for err in [
            store.load().unwrap_err(),
            store.save(&DeliveryStats::new()).unwrap_err(),
            store.check_writable().unwrap_err(),
        ] {
            assert!(err.to_string().contains("not an outbox store"), "{err}");
        }
        assert_eq!(fs::read(store.path()).unwrap(), before);
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("corrupt")), "{names:?}");

        // Another program's id, whatever its tables, is refused too.
        let (_dir, store) = self::store();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch(&format!("PRAGMA application_id = 7; {SCHEMA}"))
            .unwrap();
        drop(conn);
        assert!(store.load().is_err());
    }

    #[test]
    fn databases_are_marked_and_unmarked_ones_of_ours_are_kept() {
        let (_dir, store) = store();
        store.save(&DeliveryStats::new()).unwrap();
        let conn = Connection::open(store.path()).unwrap();
        assert_eq!(application_id(&conn).unwrap(), APPLICATION_ID);
        // As an earlier build left it: no id; recognised by its tables and marked on save.
        conn.execute_batch("PRAGMA application_id = 0").unwrap();
        drop(conn);
        let mut stats = DeliveryStats::new();
        stats.set("wss://a.example", RelayStats::default());
        store.load().unwrap();
        store.save(&stats).unwrap();
        assert_eq!(store.load().unwrap().stats, stats);
        let conn = Connection::open(store.path()).unwrap();
        assert_eq!(application_id(&conn).unwrap(), APPLICATION_ID);
    }

    #[cfg(unix)]
    #[test]
    fn the_database_and_its_side_files_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, store) = store();
        // A reader keeps the WAL and shared memory in place while the store writes.
        store.save(&DeliveryStats::new()).unwrap();
        let reader = Connection::open(store.path()).unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM relays", [], |r| r.get(0))
            .unwrap();
        store.save_penalties(&serde_json::json!({})).unwrap();
        let mut seen = Vec::new();
        for entry in fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            let name = entry.file_name().to_string_lossy().into_owned();
            assert_eq!(mode, 0o600, "{name}");
            seen.push(name);
        }
        seen.sort();
        assert!(seen.len() >= 2, "{seen:?}");
    }

    #[test]
    fn a_database_another_process_holds_locked_is_found_before_a_run() {
        let (_dir, store) = store();
        store.save(&DeliveryStats::new()).unwrap();
        store.check_writable().unwrap();
        let holder = Connection::open(store.path()).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let started = std::time::Instant::now();
        let err = store.check_writable().unwrap_err();
        assert!(
            started.elapsed() < CHECK_TIMEOUT * 3,
            "{:?}",
            started.elapsed()
        );
        assert!(err.to_string().contains("outbox.sqlite"), "{err}");
        holder.execute_batch("ROLLBACK").unwrap();
        store.check_writable().unwrap();

        let missing = SqliteStore::new("/nonexistent-outbox-dir/outbox.sqlite");
        let err = missing.check_writable().unwrap_err().to_string();
        assert!(err.contains("/nonexistent-outbox-dir"), "{err}");
    }

    #[test]
    fn an_absurd_decay_factor_loads_as_the_default() {
        let (_dir, store) = store();
        store.save(&DeliveryStats::new()).unwrap();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch(
            r#"UPDATE meta SET value = '{"mode":"hourly","factor":3.5}' WHERE key = 'decay';"#,
        )
        .unwrap();
        drop(conn);
        let loaded = store.load().unwrap();
        assert_eq!(loaded.stats.decay, Decay::default());
        let sanitised = LoadWarning::Sanitised { count: 1 };
        assert!(
            loaded.warnings.contains(&sanitised),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn hostile_values_are_sanitised_and_bad_keys_dropped() {
        let (_dir, store) = store();
        store.save(&DeliveryStats::new()).unwrap();
        let conn = Connection::open(store.path()).unwrap();
        let good = key_hex(1);
        conn.execute_batch(&format!(
            "INSERT INTO relays (url, alpha, beta, asked) VALUES
                 ('wss://null.example', NULL, 2.0, 3),
                 ('wss://text.example', 'lots', 2.0, -4),
                 ('wss://neg.example', -5.0, 1.0, 1),
                 ('wss://ok.example', 3.0, 1.5, 2);
             UPDATE relays SET live_alpha = 1, live_beta = 1, kept_alpha = 1, kept_beta = 1;
             INSERT INTO authors (author, volume, updated_at) VALUES ('{good}', 4.0, 9), ('not-a-key', 1.0, 1),
                                        ('{neg}', -1.0, 1);
             INSERT INTO pairs VALUES ('{good}', 'wss://ok.example', 2.5, 0.5),
                                      ('{orphan}', 'wss://ok.example', 1.0, 0.0);
             UPDATE meta SET value = 'garbage' WHERE key = 'decay';",
            neg = key_hex(2),
            orphan = key_hex(3),
        ))
        .unwrap();
        drop(conn);
        let loaded = store.load().unwrap();
        let s = &loaded.stats;
        for url in ["null", "text", "neg"] {
            let r = s.get(&format!("wss://{url}.example"));
            assert!(r.is_sane() && r.is_uniform(), "{url}: {r:?}");
        }
        assert_eq!(s.get("wss://null.example").asked, 3, "counters survive");
        assert_eq!(s.get("wss://text.example").asked, 0);
        assert_eq!(s.get("wss://ok.example").alpha, 3.0);
        let good_key = public_key_from_hex(&good).unwrap();
        assert_eq!(s.author(&good_key).map(|a| a.volume), Some(4.0));
        assert_eq!(s.pair(&good_key, "wss://ok.example").hits, 2.5);
        assert_eq!(s.authors().count(), 1);
        let sanitised = LoadWarning::Sanitised { count: 4 };
        let why = "three relays and one author";
        assert!(
            loaded.warnings.contains(&sanitised),
            "{why}: {:?}",
            loaded.warnings
        );
        assert!(loaded
            .warnings
            .contains(&LoadWarning::Sanitised { count: 1 }));
        let mut dropped = vec![key_hex(3), "not-a-key".to_string()];
        dropped.sort();
        assert!(
            loaded
                .warnings
                .contains(&LoadWarning::DroppedEntries { urls: dropped }),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn a_damaged_page_is_found_by_the_integrity_check_and_set_aside() {
        let (dir, store) = store();
        let mut many = DeliveryStats::new();
        for i in 0..2000 {
            many.set(format!("wss://r{i}.example"), RelayStats::default());
        }
        store.save(&many).unwrap();
        // Keep the header and the first page; overwrite the rest of the pages.
        let mut bytes = fs::read(store.path()).unwrap();
        assert!(bytes.len() > 16_384, "{}", bytes.len());
        for b in &mut bytes[8192..] {
            *b = 0xa5;
        }
        fs::write(store.path(), &bytes).unwrap();
        let loaded = store.load().unwrap();
        assert!(loaded.stats.is_empty());
        assert!(
            matches!(
                &loaded.warnings[..],
                [LoadWarning::Unreadable {
                    moved_to: Some(_),
                    ..
                }]
            ),
            "{:?}",
            loaded.warnings
        );
        let aside = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
            .count();
        assert_eq!(aside, 1);
    }

    #[test]
    fn bad_relay_lists_and_penalties_are_dropped_with_a_warning() {
        let (_dir, store) = store();
        store
            .save_penalties(&serde_json::json!({"relays": {}}))
            .unwrap();
        let conn = Connection::open(store.path()).unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO relay_lists VALUES ('{good}', 5, '[[\"r\",\"wss://a.example\"]]'),
                                            ('{bad_tags}', 5, 'not json'),
                                            ('nope', 5, '[]'),
                                            ('{neg}', -1, '[]');
             UPDATE documents SET body = '{{torn' WHERE name = 'penalties';",
            good = key_hex(1),
            bad_tags = key_hex(2),
            neg = key_hex(3),
        ))
        .unwrap();
        drop(conn);
        let lists = store.load_lists().unwrap();
        assert_eq!(lists.value.len(), 1);
        let LoadWarning::DroppedEntries { urls } = &lists.warnings[0] else {
            panic!("{:?}", lists.warnings);
        };
        assert_eq!(urls.len(), 3);
        let penalties = store.load_penalties().unwrap();
        assert_eq!(penalties.value, None);
        assert_eq!(penalties.warnings.len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_opening_it() {
        let (_dir, store) = store();
        if crate::made_fifo(store.path()) {
            assert!(store.load().is_err());
            assert!(store.save(&DeliveryStats::new()).is_err());
        }
    }
}

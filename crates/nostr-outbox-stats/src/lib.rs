//! The embedded default [`StatsStore`](nostr_outbox_client::StatsStore): delivery statistics in one
//! versioned JSON file.
//!
//! # Format (`nostr-outbox-stats`, version 2)
//!
//! ```json
//! {
//!   "format": "outbox-stats",
//!   "version": 2,
//!   "saved_at": 1767225600,
//!   "decay": {"mode": "hourly", "factor": 0.95},
//!   "session": 4,
//!   "seed": 12210868210233771000,
//!   "days": [20453, 20454],
//!   "forgotten": {"wss://gone.example": 1767225300},
//!   "relays": {
//!     "wss://a.example": {"alpha": 3.5, "beta": 1.2, "latency_ms": 240.0,
//!                         "updated_at": 1767225000, "session": 4, "asked": 5, "failures": 0,
//!                         "live_alpha": 5.0, "live_beta": 1.0,
//!                         "kept_alpha": 3.1, "kept_beta": 2.9, "depth_secs": 31536000.0}
//!   },
//!   "authors": {
//!     "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d": {
//!       "volume": 12.0, "updated_at": 1767225000, "first": 1735689600, "last": 1767200000,
//!       "probed_secs": 31536000.0,
//!       "relays": {"wss://a.example": {"hits": 2.6, "misses": 0.4}}
//!     }
//!   }
//! }
//! ```
//!
//! `relays` holds one [`RelayStats`] per canonical relay URL: the delivery prior (`alpha`,
//! `beta`), liveness (`live_alpha`, `live_beta`: runs answered against runs failed) and
//! event-weighted completeness (`kept_alpha`, `kept_beta`) and how far back its history was
//! seen to reach (`depth_secs`). `authors` (version 2) holds one [`AuthorStats`] per followed
//! author, keyed by hex public key: the remembered notes-per-run `volume`, the `created_at`
//! range of its notes seen (`first`, `last`), how far back the relays asked about it reach
//! (`probed_secs`) and, per relay asked about the author, the
//! fractional `hits` and `misses` of what it returned. Both are learned by
//! [`DeliveryStats::record_round`](nostr_outbox_core::DeliveryStats::record_round).
//! `seed` is the installation's base seed of the plans' draws, drawn at random on its first
//! run and kept ([`StateStore::base_seed`](nostr_outbox_client::StateStore::base_seed)); every save
//! keeps the one stored. Older files have none: the next run draws one and its save keeps it.
//! `days` holds the days (unix seconds / 86,400) on which something was learned, the newest
//! 183 of them: a relay or author not updated on any of them is forgotten
//! ([`DeliveryStats::prune_at`]), so a pause forgets nothing. Stamps in the future (a clock
//! that ran ahead, damage) are brought back to the present on load and before a save
//! ([`DeliveryStats::clamp_future`]). `forgotten` holds the relays forgotten on purpose
//! (`outbox stats --forget`) with the time of the forget: a save merging a run that loaded
//! before it keeps, for that relay, only what was learned after it
//! ([`DeliveryStats::forget_at`]); at most [`nostr_outbox_core::stats::MAX_TOMBSTONES`], forgotten
//! with use like stale relays. Older files have none.
//!
//! Compatibility: every field is optional on read (a missing one takes its default, so files
//! of older versions load: a version 1 file has no `authors` and loads with none); unknown
//! fields are ignored (files of newer versions load, with a [`LoadWarning::NewerVersion`]).
//!
//! A file written by a newer version is never overwritten, since this build would drop the
//! fields it does not know (and the `.bak` would follow on the next save). Saves go to the side
//! file `<name>.v2` instead ([`FileStore::side_path`]), with a warning; the file and its `.bak`
//! stay as the newer version left them. A load uses whichever of the two was saved later (the
//! side file with a [`LoadWarning::FromBackup`] naming it), so this build keeps what it
//! learned, and the newer build, which never reads the side file, keeps its own file whole. A
//! value of the wrong type (`null`, a string where a number belongs) reads as corrupt: a relay
//! is reset to the uniform prior, an author (anything wrong in its entry, pairs included) is
//! dropped and relearned. A relay or author entry that is not an object, or an author key that
//! is not a hex public key, is dropped with a [`LoadWarning::DroppedEntries`] (so is a key that is not a point on the curve). Only
//! what is unreadable starts fresh.
//!
//! # Safety of the file
//!
//! - Writes are atomic: a temporary file in the same directory is written, fsynced and renamed
//!   over the target, then the directory is fsynced. A crash leaves either the old or the new
//!   file, never a mix. A save holds the lock file `<name>.lock` while it reads what is stored,
//!   adds what its run learned since it loaded ([`DeliveryStats::merge_learning`]) and
//!   replaces the file, so concurrent runs keep each other's learning. Files are created
//!   owner-only (0600 on Unix), and what is kept is bounded ([`DeliveryStats::prune`]).
//! - Before a save replaces the file, the current file is checked: if it parses, it is kept as
//!   `<name>.bak` (hard link, or copy where links are not supported); if it does not, it is
//!   moved aside as `<name>.corrupt-<unix seconds>` instead of being overwritten; if it is from
//!   a newer version, it is not replaced at all (see above).
//! - A load that finds an unreadable file moves it aside the same way, reports it (tracing and a
//!   returned [`LoadWarning`]), and falls back to the `.bak` if that is readable, otherwise to
//!   fresh stats. Nothing here panics on bad content.
//!
//! # Beside the stats, and other stores
//!
//! - [`state`]: the relay lists and the penalty box the runtime keeps between runs, in
//!   `<name>.lists.json` and `<name>.penalties.json`, and the async
//!   [`StatsStore`](nostr_outbox_client::StatsStore) / [`StateStore`](nostr_outbox_client::StateStore)
//!   implementations (file IO on tokio's blocking threads).
//! - [`sqlite`] (feature `sqlite`, on by default): the same state in one SQLite database.
//! - `conformance` (feature `conformance`): the suite every store here passes.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use nostr_outbox_client::{LoadWarning, Loaded, Restored, StatsStoreError};
use nostr_outbox_core::stats::{AuthorStats, Decay, PairStats};
use nostr_outbox_core::{public_key_from_hex, DeliveryStats, RelayStats};
use serde::Serialize;
use serde_json::{Map, Value};

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod kept;
#[cfg(feature = "sqlite")]
pub mod notes;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod state;
mod task;

#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// The `format` tag of stats files.
pub const STATS_FORMAT: &str = "outbox-stats";

/// The format version this build writes (and the newest it fully understands).
pub const STATS_VERSION: u32 = 2;

/// The largest stats file read; a larger one is set aside as unreadable (a bound on memory).
pub const MAX_STATS_BYTES: u64 = 256 * 1024 * 1024;

/// Delivery statistics in a JSON file (see the crate docs for format and guarantees), with
/// the relay lists and penalty box beside it ([`state`]).
///
/// `load` and `save` here block on the file system; through the async
/// [`StatsStore`](nostr_outbox_client::StatsStore) trait they run on tokio's blocking threads. A clone
/// is the same store (it shares the save lock).
#[derive(Clone, Debug)]
pub struct FileStore {
    core: StoreCore,
}

/// What every store here holds beside its path, the same for the file and the SQLite store. A
/// clone shares all of it: it is the same store.
#[derive(Clone, Debug)]
pub(crate) struct StoreCore {
    /// The stats file or the database.
    pub(crate) path: PathBuf,
    /// Set by the conformance suite: the next stats save stops halfway through writing.
    pub(crate) interrupt: Arc<AtomicBool>,
    /// What this store last loaded or saved: a save adds the difference to what is stored
    /// then. A save holds it throughout, so threads sharing one store never race on the backup
    /// step or add one difference twice. Never held while calling out of this crate; taken
    /// before a database's lock, never the other way round.
    pub(crate) base: Arc<Mutex<Option<DeliveryStats>>>,
    /// What this store last loaded or saved of the lists and the penalty box ([`kept`]). A save
    /// of either holds it throughout; never held with `base`.
    pub(crate) kept: Arc<Mutex<kept::KeptBase>>,
    /// Opened only to be shown: nothing is moved, written or created.
    pub(crate) read_only: bool,
    /// The base seed this store returned (`base_seed`): kept by the next save unless the store
    /// holds one already.
    pub(crate) seed: Arc<Mutex<Option<u64>>>,
}

impl StoreCore {
    /// The state of a store at `path` that has loaded nothing yet.
    pub(crate) fn new(path: PathBuf, read_only: bool) -> Self {
        Self {
            path,
            interrupt: Arc::new(AtomicBool::new(false)),
            base: Arc::new(Mutex::new(None)),
            kept: Arc::default(),
            read_only,
            seed: Arc::default(),
        }
    }

    /// An error unless this store may write.
    pub(crate) fn writable(&self) -> Result<(), StatsStoreError> {
        if self.read_only {
            return Err(StatsStoreError::Io {
                path: self.path.clone(),
                source: io::Error::new(io::ErrorKind::PermissionDenied, "opened read-only"),
            });
        }
        Ok(())
    }

    /// The seed this store drew or found, read before a save takes its base: one lock at a
    /// time.
    pub(crate) fn drawn_seed(&self) -> Option<u64> {
        *self.seed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remembers the seed a save found kept (or kept itself).
    pub(crate) fn saved_seed(&self, kept: Option<u64>) {
        if kept.is_some() {
            *self.seed.lock().unwrap_or_else(|e| e.into_inner()) = kept;
        }
    }

    /// What `base_seed` returns: the seed `kept` in the store, else the one this store
    /// returned before, else `drawn`; remembered for the next save.
    pub(crate) fn base_seed(&self, kept: Option<u64>, drawn: u64) -> u64 {
        let mut held = self.seed.lock().unwrap_or_else(|e| e.into_inner());
        let seed = kept.or(*held).unwrap_or(drawn);
        *held = Some(seed);
        seed
    }

    /// Takes the penalty document a load read as the base of the next `save_penalties`.
    pub(crate) fn loaded_penalties(
        &self,
        loaded: Restored<Option<Value>>,
    ) -> Restored<Option<Value>> {
        state::lock(&self.kept).loaded_penalties(loaded.value.as_ref());
        loaded
    }
}

/// `new`, `read_only` and `path` of a store kept in a [`StoreCore`], given the docs of `path`
/// and `read_only`: one definition, so the file and SQLite stores open alike.
macro_rules! store_opening {
    ($store:ident, $path_doc:literal, $read_only_doc:literal) => {
        impl $store {
            /// A store at `path` (created on the first save; its directory must exist).
            pub fn new(path: impl Into<PathBuf>) -> Self {
                Self {
                    core: StoreCore::new(path.into(), false),
                }
            }

            #[doc = $read_only_doc]
            pub fn read_only(path: impl Into<PathBuf>) -> Self {
                Self {
                    core: StoreCore::new(path.into(), true),
                }
            }

            #[doc = $path_doc]
            pub fn path(&self) -> &Path {
                &self.core.path
            }
        }
    };
}
pub(crate) use store_opening;

/// How the reason of a file that is not a stats file at all begins: such a file (another
/// program's JSON) is refused untouched, never set aside or replaced.
const FOREIGN: &str = "not an outbox stats file";

/// Whether `parse` refused the file as another program's.
fn is_foreign(reason: &str) -> bool {
    reason.starts_with(FOREIGN)
}

/// The top-level fields of every version of the format: a file without the `format` marker is
/// taken for an old stats file only if it has `relays` and no other field.
const FIELDS: [&str; 10] = [
    "format",
    "version",
    "saved_at",
    "decay",
    "session",
    "seed",
    "days",
    "relays",
    "authors",
    "forgotten",
];

/// What one file held, parsed leniently.
struct Parsed {
    stats: DeliveryStats,
    warnings: Vec<LoadWarning>,
    /// Written by a newer format version than [`STATS_VERSION`].
    newer: bool,
    /// When it was written (0 if unknown).
    saved_at: u64,
    /// The base seed kept in it, if any.
    seed: Option<u64>,
}

#[derive(Serialize)]
struct FileOut<'a> {
    format: &'static str,
    version: u32,
    saved_at: u64,
    decay: Decay,
    session: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    days: Vec<u64>,
    forgotten: BTreeMap<&'a str, u64>,
    relays: BTreeMap<&'a str, RelayStats>,
    authors: BTreeMap<String, AuthorOut<'a>>,
}

/// One author as written: relays sorted, so equal stats give byte-equal files.
#[derive(Serialize)]
struct AuthorOut<'a> {
    volume: f64,
    updated_at: u64,
    first: u64,
    last: u64,
    probed_secs: f64,
    relays: BTreeMap<&'a str, PairStats>,
}

impl<'a> From<&'a AuthorStats> for AuthorOut<'a> {
    fn from(a: &'a AuthorStats) -> Self {
        Self {
            volume: a.volume,
            updated_at: a.updated_at,
            first: a.first,
            last: a.last,
            probed_secs: a.probed_secs,
            relays: a.relays.iter().map(|(url, p)| (url, *p)).collect(),
        }
    }
}

store_opening!(
    FileStore,
    "The stats file.",
    "A store at `path` opened only to be read (`outbox stats` showing what is kept): its loads \
     move nothing aside (an unreadable file is reported and left where it is), and every save \
     is an error."
);

impl FileStore {
    /// The lock file a save holds while it reads, merges and replaces the stats file
    /// (`<name>.lock`, created and removed by each save; the stats file itself is replaced by a
    /// rename, so it cannot be locked).
    pub fn lock_path(&self) -> PathBuf {
        sibling(self.path(), ".lock")
    }

    /// Where the last good file is kept.
    pub fn backup_path(&self) -> PathBuf {
        sibling(self.path(), ".bak")
    }

    /// Where this build saves while the main file belongs to a newer format version
    /// (`<name>.v2` for version 2), so that file is never overwritten.
    pub fn side_path(&self) -> PathBuf {
        sibling(self.path(), &format!(".v{STATS_VERSION}"))
    }

    /// Every file this store reads or writes: the stats file, its backup, side file and lock
    /// file, and the lists and penalties beside it (files set aside as corrupt get names of
    /// their own). A command checks its output files against them, so none is overwritten.
    pub fn files(&self) -> Vec<PathBuf> {
        vec![
            self.path().to_path_buf(),
            self.backup_path(),
            self.side_path(),
            self.lock_path(),
            self.lists_path(),
            self.penalties_path(),
        ]
    }

    fn dir(&self) -> PathBuf {
        dir_of(self.path())
    }

    /// Moves an unreadable file aside; returns where it went.
    fn move_aside(&self, path: &Path) -> Option<PathBuf> {
        if self.core.read_only {
            return None;
        }
        let target = aside_name(path)?;
        match fs::rename(path, &target) {
            Ok(()) => {
                tracing::warn!(from = %path.display(), to = %target.display(), "unreadable stats file moved aside");
                Some(target)
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), %err, "could not move unreadable stats file aside");
                None
            }
        }
    }

    /// Keeps the current file as the backup (it parsed), atomically.
    fn backup(&self) -> io::Result<()> {
        let bak = self.backup_path();
        let tmp = tempfile::Builder::new()
            .prefix(".outbox-stats-bak")
            .tempfile_in(self.dir())?
            .into_temp_path();
        // The temp path exists; a hard link needs a free name.
        fs::remove_file(&tmp)?;
        if fs::hard_link(self.path(), &tmp).is_err() {
            fs::copy(self.path(), &tmp)?;
        }
        fs::rename(&tmp, &bak)?;
        // `tmp` no longer exists; dropping the TempPath ignores that.
        Ok(())
    }
}

impl FileStore {
    /// The stored stats (blocking; see the crate docs for what is worked around). They are
    /// this store's base: its next save adds what was learned since to what is stored then.
    pub fn load(&self) -> Result<Loaded, StatsStoreError> {
        let loaded = self.load_unlocked()?;
        set_base(&self.core.base, &loaded.stats);
        Ok(loaded)
    }

    /// Whether a save could be written now: the directory exists and takes a new file, the
    /// stats file, if any, is a regular file (blocking; [`check_writable_file`]), and the lock
    /// file, if any, is a regular file: a symlink or directory there, which a save would
    /// refuse, is an error naming it. A lock left by a save that never finished is no obstacle:
    /// the save takes it over ([`STALE_LOCK`]). A lock that looks held (younger than
    /// [`STALE_LOCK`] and not known to be left by a process that is gone) and is not released
    /// within [`CHECK_LOCK_WAIT`] is an error too: a save would wait for it in vain, after the
    /// run did its work.
    pub fn check_writable(&self) -> Result<(), StatsStoreError> {
        check_writable_file(self.path())?;
        let lock = self.lock_path();
        let io_err = io_error(&lock);
        let started = std::time::Instant::now();
        loop {
            let meta = match fs::symlink_metadata(&lock) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_err(e)),
            };
            if !meta.is_file() {
                return Err(io_err(io::Error::other(
                    "the lock file is not a regular file (a symlink or directory); remove it",
                )));
            }
            if left_over(&lock, &meta) {
                return Ok(());
            }
            if started.elapsed() >= CHECK_LOCK_WAIT {
                let holder = match lock_owner(&lock) {
                    Some(pid) => format!("process {pid}"),
                    None => "a save that has not said who it is".into(),
                };
                return Err(io_err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "the lock file is held by {holder}, and a save would wait for it in \
                         vain; if no outbox run is using this store, remove it"
                    ),
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn load_unlocked(&self) -> Result<Loaded, StatsStoreError> {
        let mut warnings = Vec::new();
        match read(self.path())? {
            None => return Ok(Loaded::default()),
            Some(bytes) => match parse(&bytes) {
                Ok(parsed) if parsed.newer => {
                    // What this build saved since is in the side file; the newer of the two wins.
                    let side = self.side_path();
                    if let Some(own) = read(&side)?.and_then(|b| parse(&b).ok()) {
                        if !own.newer && own.saved_at > parsed.saved_at {
                            tracing::warn!(path = %self.path().display(), side = %side.display(), "stats file is from a newer version; using this version's own later save");
                            // Only the version matters of a file whose data is not used.
                            warnings.extend(
                                parsed
                                    .warnings
                                    .into_iter()
                                    .filter(|w| matches!(w, LoadWarning::NewerVersion { .. })),
                            );
                            warnings.push(LoadWarning::FromBackup { path: side });
                            return Ok(finish(own, warnings));
                        }
                    }
                    return Ok(finish(parsed, warnings));
                }
                Ok(parsed) => {
                    return Ok(finish(parsed, warnings));
                }
                Err(reason) if is_foreign(&reason) => return Err(foreign(self.path(), reason)),
                Err(reason) => {
                    tracing::warn!(path = %self.path().display(), %reason, "stats file is unreadable");
                    let moved_to = self.move_aside(self.path());
                    warnings.push(LoadWarning::Unreadable {
                        path: self.path().to_path_buf(),
                        reason,
                        moved_to,
                    });
                }
            },
        }
        let bak = self.backup_path();
        if let Some(bytes) = read(&bak)? {
            match parse(&bytes) {
                Ok(parsed) => {
                    tracing::warn!(path = %bak.display(), "stats restored from the last good backup");
                    warnings.push(LoadWarning::FromBackup { path: bak });
                    return Ok(finish(parsed, warnings));
                }
                Err(reason) => {
                    tracing::warn!(path = %bak.display(), %reason, "stats backup is unreadable too");
                    warnings.push(LoadWarning::Unreadable {
                        path: bak,
                        reason,
                        moved_to: None,
                    });
                }
            }
        }
        Ok(Loaded {
            stats: DeliveryStats::new(),
            warnings,
        })
    }

    /// Stores `stats` (blocking): atomically, keeping the last good file. Under the lock file,
    /// what is stored now is read and what this run learned since its base (the last load or
    /// save) is added to it ([`DeliveryStats::merge_learning`]); with no base, `stats` replaces
    /// it. Concurrent runs on one file so keep every run's learning.
    pub fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let drawn = self.core.drawn_seed();
        let mut held = self.core.base.lock().unwrap_or_else(|e| e.into_inner());
        let _lock = lock_file(&self.lock_path())?;
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StatsStoreError::Io { path, source }
        };
        // Never replace unreadable data: keep a good file as the backup, set a bad one aside.
        // Never replace a newer version's file either: it holds fields this build would drop.
        let mut target = self.path().to_path_buf();
        let mut stored = None;
        // The seed kept wins over the one this store drew: another run may have kept its own.
        let mut seed = drawn;
        if let Some(current) = read(self.path())? {
            match parse(&current) {
                Ok(parsed) if parsed.newer => {
                    target = self.side_path();
                    tracing::warn!(path = %self.path().display(), side = %target.display(), "stats file is from a newer version; left untouched, saving beside it");
                    let own = read(&target)?
                        .and_then(|b| parse(&b).ok())
                        .filter(|own| !own.newer);
                    seed = parsed.seed.or(own.as_ref().and_then(|o| o.seed)).or(seed);
                    stored = own.map(|own| own.stats);
                }
                Ok(parsed) => {
                    if let Err(err) = self.backup() {
                        tracing::warn!(path = %self.path().display(), %err, "could not keep a backup of the stats file");
                    }
                    seed = parsed.seed.or(seed);
                    stored = Some(parsed.stats);
                }
                Err(reason) if is_foreign(&reason) => return Err(foreign(self.path(), reason)),
                Err(_) => {
                    self.move_aside(self.path());
                }
            }
        }
        let clean = to_save(stored, held.as_ref(), stats);
        let out = FileOut {
            format: STATS_FORMAT,
            version: STATS_VERSION,
            saved_at: now_secs(),
            decay: clean.decay,
            session: clean.session(),
            seed,
            days: clean.days().collect(),
            forgotten: clean.forgotten().collect(),
            relays: clean.iter().map(|(url, s)| (url, *s)).collect(),
            authors: clean
                .authors()
                .map(|(author, a)| (author.to_hex(), AuthorOut::from(a)))
                .collect(),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&out).map_err(|e| StatsStoreError::Encode(e.to_string()))?;
        bytes.push(b'\n');
        let dir = self.dir();
        let mut tmp = tempfile::Builder::new()
            .prefix(".nostr-outbox-stats")
            .tempfile_in(&dir)
            .map_err(io_err(&dir))?;
        if self.core.interrupt.swap(false, Ordering::SeqCst) {
            // A crash halfway through the write: the temporary file is dropped unrenamed.
            tmp.write_all(&bytes[..bytes.len() / 2])
                .map_err(io_err(tmp.path()))?;
            return Err(io_err(tmp.path())(io::Error::other("save interrupted")));
        }
        tmp.write_all(&bytes).map_err(io_err(tmp.path()))?;
        tmp.as_file().sync_all().map_err(io_err(tmp.path()))?;
        tmp.persist(&target).map_err(|e| StatsStoreError::Io {
            path: target.clone(),
            source: e.error,
        })?;
        sync_dir(&dir).map_err(io_err(&dir))?;
        *held = Some(stats.clone());
        drop(held);
        self.core.saved_seed(seed);
        Ok(())
    }

    /// The base seed kept in the file (blocking), or else `drawn`, kept by this store's next
    /// save (see [`StateStore::base_seed`](nostr_outbox_client::StateStore::base_seed)). Nothing is
    /// written here: a run's first save keeps it, and a file that holds one is never given
    /// another. An unreadable file holds none.
    pub fn base_seed(&self, drawn: u64) -> Result<u64, StatsStoreError> {
        /// Only the seed of a file, read without building its stats.
        #[derive(serde::Deserialize)]
        struct SeedOnly {
            #[serde(default)]
            seed: Option<Value>,
        }
        let seed_in = |path: &Path| -> Result<Option<u64>, StatsStoreError> {
            Ok(read(path)?
                .and_then(|bytes| serde_json::from_slice::<SeedOnly>(&bytes).ok())
                .and_then(|top| top.seed?.as_u64()))
        };
        // The file, else the side file of a newer version's, else the backup a load of an
        // unreadable file falls back to.
        let mut kept = None;
        for path in [
            self.path().to_path_buf(),
            self.side_path(),
            self.backup_path(),
        ] {
            kept = seed_in(&path)?;
            if kept.is_some() {
                break;
            }
        }
        Ok(self.core.base_seed(kept, drawn))
    }
}

/// A free name to move the unreadable file at `path` aside to: `<name>.corrupt-<unix seconds>`,
/// or with `-1`, `-2`, … after it when taken; `None` when a thousand are.
fn aside_name(path: &Path) -> Option<PathBuf> {
    let secs = now_secs();
    (0..1000u32)
        .map(|n| match n {
            0 => sibling(path, &format!(".corrupt-{secs}")),
            n => sibling(path, &format!(".corrupt-{secs}-{n}")),
        })
        .find(|target| !target.exists())
}

/// Records what a store last loaded or saved (its base for the next save).
fn set_base(base: &Mutex<Option<DeliveryStats>>, stats: &DeliveryStats) {
    let copy = stats.clone();
    *base.lock().unwrap_or_else(|e| e.into_inner()) = Some(copy);
}

/// What a save writes: what is `stored` now (`None`: nothing readable) with what this run
/// learned since its `base` added to it ([`DeliveryStats::merge_learning`]), or, with no base or
/// nothing stored, `stats` itself; sanitised, stamps in the future brought back and pruned.
fn to_save(
    stored: Option<DeliveryStats>,
    base: Option<&DeliveryStats>,
    stats: &DeliveryStats,
) -> DeliveryStats {
    let mut clean = match (base, stored) {
        (Some(base), Some(mut stored)) => {
            stored.sanitize();
            stored.clamp_future(now_secs());
            stored.merge_learning(base, stats);
            stored
        }
        _ => stats.clone(),
    };
    clean.sanitize();
    clean.clamp_future(now_secs());
    clean.prune_at(now_secs());
    clean
}

/// A store of kind `S` opened at `name` in a fresh temporary directory, kept with it.
#[cfg(test)]
fn temp_store<S>(name: &str, open: fn(PathBuf) -> S) -> (tempfile::TempDir, S) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path().join(name));
    (dir, store)
}

/// Makes a FIFO at `path`; false where that cannot be done (no `mkfifo`).
#[cfg(all(test, unix))]
fn made_fifo(path: &Path) -> bool {
    std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// How long a save waits for another process's save to release the lock file.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A lock file older than this is left over by a save that never finished (a crash), and is
/// taken over. A save holds it for moments. A lock naming a process that is gone (on Linux,
/// where that can be told) is taken over at once, however young.
pub const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(60);

/// How long the check before a run ([`FileStore::check_writable`]) waits for a lock file that
/// looks held to be released: a save holds it for moments.
pub const CHECK_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether the lock file at `path` (a regular file, `meta`) was left by a save that never
/// finished, and is taken over: older than [`STALE_LOCK`], or naming a process that is gone.
fn left_over(path: &Path, meta: &fs::Metadata) -> bool {
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or_default();
    age > STALE_LOCK || owner_gone(path)
}

/// The process a lock file names, if it names one.
fn lock_owner(path: &Path) -> Option<u32> {
    let mut text = String::new();
    fs::File::open(path)
        .and_then(|f| f.take(128).read_to_string(&mut text))
        .ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// A held lock file; removed when dropped.
pub(crate) struct LockFile(PathBuf);

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Takes the lock: creates `path` (owner-only) if no one holds it, waiting at most
/// [`LOCK_WAIT`] for another save; a lock older than [`STALE_LOCK`] is taken over. Anything
/// but a regular file there is an error at once.
pub(crate) fn lock_file(path: &Path) -> Result<LockFile, StatsStoreError> {
    let io_err = io_error(path);
    let started = std::time::Instant::now();
    loop {
        match private_options().write(true).create_new(true).open(path) {
            Ok(mut file) => {
                // Who holds it, so a lock whose process is gone can be taken over at once.
                let _ = writeln!(file, "{} {}", std::process::id(), pid_namespace());
                return Ok(LockFile(path.to_path_buf()));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(e)),
        }
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            // Released meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_err(e)),
        };
        if !meta.is_file() {
            return Err(io_err(io::Error::other(
                "the lock file is not a regular file",
            )));
        }
        if left_over(path, &meta) {
            tracing::warn!(path = %path.display(), "taking over a lock file left by a save that never finished");
            let _ = fs::remove_file(path);
            continue;
        }
        if started.elapsed() >= LOCK_WAIT {
            return Err(io_err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("held by another save for over {} s", LOCK_WAIT.as_secs()),
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// This process's PID namespace (Linux; empty elsewhere): a PID only names a process within
/// it, so a lock written from another container is never judged by its PID.
fn pid_namespace() -> String {
    fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether the lock file names a process that no longer runs (Linux only: `/proc/<pid>`
/// missing, the PID from this PID namespace). An unreadable or empty lock (its owner still
/// writing it), or one from another namespace, is not judged here.
fn owner_gone(path: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        let mut text = String::new();
        let read = fs::File::open(path).and_then(|f| f.take(128).read_to_string(&mut text));
        let mut words = text.split_whitespace();
        let pid = words.next().and_then(|w| w.parse::<u32>().ok());
        let ns = words.next().unwrap_or_default();
        let own = pid_namespace();
        match (read, pid) {
            (Ok(_), Some(pid)) if pid != std::process::id() && !own.is_empty() && ns == own => {
                !Path::new(&format!("/proc/{pid}")).exists()
            }
            _ => false,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        false
    }
}

/// Options that create a file readable and writable by its owner alone (on Unix).
pub(crate) fn private_options() -> fs::OpenOptions {
    #[allow(unused_mut)]
    let mut options = fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// The directory `path` is in (`.` for a bare file name).
fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether a file could be written at `path` now (blocking): what is there, if anything, is a
/// regular file, and its directory exists and takes a new file. A FIFO, device or directory is
/// refused without being opened (opening a FIFO blocks until someone reads it; a device never
/// holds what is written), and nothing is created beside it. What a stats file is checked for
/// before a run ([`FileStore::check_writable`]), and any other file written when a run ends
/// (`outbox feed --summary-json`).
pub fn check_writable_file(path: &Path) -> Result<(), StatsStoreError> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(StatsStoreError::Io {
                path: path.to_path_buf(),
                source: io::Error::other("not a regular file"),
            })
        }
        _ => {}
    }
    check_dir_writable(&dir_of(path))
}

/// Makes an I/O error on `path` a store error naming it.
fn io_error(path: &Path) -> impl Fn(io::Error) -> StatsStoreError + '_ {
    move |source| StatsStoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether `dir` exists and takes a new file: one is created there and removed.
pub(crate) fn check_dir_writable(dir: &Path) -> Result<(), StatsStoreError> {
    let io_err = io_error(dir);
    match fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => return Err(io_err(io::Error::other("not a directory"))),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io_err(io::Error::new(
                io::ErrorKind::NotFound,
                "the directory does not exist",
            )))
        }
        Err(e) => return Err(io_err(e)),
    }
    tempfile::Builder::new()
        .prefix(".outbox-check")
        .tempfile_in(dir)
        .map(drop)
        .map_err(io_err)
}

/// Reads the stats file at `path` as [`FileStore::load`] reads it (regular files only, at most
/// [`MAX_STATS_BYTES`], the same lenient parse and the same sanity checks, with the same
/// warnings), without touching anything: a file that is missing or unreadable (garbage, another
/// format) is an error naming it instead of being set aside, and no backup or side file is
/// consulted. For tools that plan from a saved file.
pub fn read_stats_file(path: &Path) -> Result<Loaded, StatsStoreError> {
    let unreadable = |reason: String| StatsStoreError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, reason),
    };
    let Some(bytes) = read(path)? else {
        return Err(StatsStoreError::Io {
            path: path.to_path_buf(),
            source: io::Error::from(io::ErrorKind::NotFound),
        });
    };
    let parsed = parse(&bytes).map_err(unreadable)?;
    Ok(finish(parsed, Vec::new()))
}

/// The error refusing another program's file, left untouched.
fn foreign(path: &Path, reason: String) -> StatsStoreError {
    tracing::warn!(path = %path.display(), %reason, "not a stats file; left untouched");
    StatsStoreError::Io {
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{reason}; left untouched"),
        ),
    }
}

/// Sanitises and attaches the warnings of a parsed file.
fn finish(mut parsed: Parsed, mut warnings: Vec<LoadWarning>) -> Loaded {
    warnings.append(&mut parsed.warnings);
    let count = parsed.stats.sanitize();
    if count > 0 {
        warnings.push(LoadWarning::Sanitised { count });
    }
    // A stamp in the future is a clock that ran ahead or damage: it must not decide what is
    // forgotten (`DeliveryStats::prune_at`).
    let now = now_secs();
    parsed.stats.clamp_future(now);
    parsed.stats.prune_at(now);
    Loaded {
        stats: parsed.stats,
        warnings,
    }
}

/// The file's bytes (at most one past [`MAX_STATS_BYTES`]), or `None` if it does not exist.
/// Anything but a regular file is an error, never opened: a FIFO would block the open, a
/// device would never end.
fn read(path: &Path) -> Result<Option<Vec<u8>>, StatsStoreError> {
    let io_err = io_error(path);
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return Err(io_err(io::Error::other("not a regular file"))),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io_err(source)),
    }
    let mut bytes = Vec::new();
    match fs::File::open(path).and_then(|f| f.take(MAX_STATS_BYTES + 1).read_to_end(&mut bytes)) {
        Ok(_) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(io_err(source)),
    }
}

/// Parses a stats file leniently; `Err` only when nothing at all can be read.
fn parse(bytes: &[u8]) -> Result<Parsed, String> {
    if bytes.len() as u64 > MAX_STATS_BYTES {
        return Err(format!("larger than {MAX_STATS_BYTES} bytes"));
    }
    // Not JSON at all: a damaged stats file (set aside), or so foreign no save could be
    // mistaken for it.
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    // Valid JSON is someone's data: only a stats file's shape is read, anything else refused.
    let Value::Object(top) = value else {
        return Err(format!("{FOREIGN} (not a json object)"));
    };
    match top.get("format") {
        Some(Value::String(f)) if f == STATS_FORMAT => {}
        // Every version wrote the marker; an old file without it has only the format's fields.
        None if matches!(top.get("relays"), Some(Value::Object(_)))
            && top.keys().all(|k| FIELDS.contains(&k.as_str())) => {}
        None => return Err(format!("{FOREIGN} (no \"format\": \"{STATS_FORMAT}\")")),
        Some(other) => {
            let shown: String = other.to_string().chars().take(80).collect();
            return Err(format!(
                "{FOREIGN} (format is {shown}, expected \"{STATS_FORMAT}\")"
            ));
        }
    }
    let mut warnings = Vec::new();
    let newer = top
        .get("version")
        .and_then(Value::as_u64)
        .is_some_and(|found| found > u64::from(STATS_VERSION));
    let saved_at = top.get("saved_at").and_then(Value::as_u64).unwrap_or(0);
    if let Some(found) = top.get("version").and_then(Value::as_u64) {
        if found > u64::from(STATS_VERSION) {
            warnings.push(LoadWarning::NewerVersion {
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported: STATS_VERSION,
            });
        }
    }
    let decay = match top.get("decay") {
        None => Decay::default(),
        Some(v) => serde_json::from_value::<Decay>(v.clone()).unwrap_or_else(|err| {
            tracing::warn!(%err, "unreadable decay setting; using the default");
            warnings.push(LoadWarning::Sanitised { count: 1 });
            Decay::default()
        }),
    };
    let mut stats = DeliveryStats::with_decay(decay);
    stats.set_session(top.get("session").and_then(Value::as_u64).unwrap_or(0));
    // Days of use (version 2 files before it have none): unreadable entries are skipped.
    if let Some(Value::Array(days)) = top.get("days") {
        for day in days.iter().filter_map(Value::as_u64) {
            stats.note_day(day.saturating_mul(86_400));
        }
    }
    // Relays forgotten on purpose (files before them have none): unreadable entries are
    // skipped, and at most `MAX_TOMBSTONES` are kept.
    if let Some(Value::Object(forgotten)) = top.get("forgotten") {
        for (url, at) in forgotten {
            if let Some(at) = at.as_u64() {
                stats.note_forgotten(url, at);
            }
        }
    }
    let mut dropped = Vec::new();
    let mut insane = 0usize;
    match top.get("relays") {
        None | Some(Value::Null) => {}
        Some(Value::Object(relays)) => {
            for (url, entry) in relays {
                match entry {
                    Value::Object(fields) => {
                        let relay = relay_from(fields);
                        // `set` resets an absurd entry to the uniform prior with a trace event.
                        insane += usize::from(!relay.is_sane());
                        stats.set(url.clone(), relay);
                    }
                    _ => dropped.push(url.clone()),
                }
            }
        }
        // A newer version may have reshaped it: its file is kept untouched (never set aside),
        // and this build starts its own relay stats in the side file.
        Some(_) if newer => {
            tracing::warn!("`relays` of a newer version's file is not readable here");
            dropped.push("relays".into());
        }
        Some(_) => return Err("`relays` is not an object".into()),
    }
    let mut dropped_authors = Vec::new();
    match top.get("authors") {
        // Version 1 files have none.
        None | Some(Value::Null) => {}
        Some(Value::Object(authors)) => {
            for (hex, entry) in authors {
                // A key that is not a public key (or not on the curve) could never match a
                // follow: dropped.
                match (entry, public_key_from_hex(hex)) {
                    (Value::Object(fields), Ok(author)) => {
                        let stats_of = author_from(fields);
                        // `set_author` drops an absurd entry with a trace event.
                        insane += usize::from(!stats_of.is_sane());
                        stats.set_author(author, stats_of);
                    }
                    _ => dropped_authors.push(hex.clone()),
                }
            }
        }
        Some(_) => {
            // Per-author data only refines planning; losing it is better than losing relays.
            tracing::warn!("`authors` is not an object; per-author stats start fresh");
            dropped_authors.push("authors".into());
        }
    }
    if insane > 0 {
        warnings.push(LoadWarning::Sanitised { count: insane });
    }
    warn_dropped(&mut warnings, "relay", dropped);
    warn_dropped(&mut warnings, "author", dropped_authors);
    Ok(Parsed {
        stats,
        warnings,
        newer,
        saved_at,
        seed: top.get("seed").and_then(Value::as_u64),
    })
}

/// Says that the `dropped` entries of a load, of relays or authors (`what`), were unreadable
/// and start fresh.
fn warn_dropped(warnings: &mut Vec<LoadWarning>, what: &str, dropped: Vec<String>) {
    if !dropped.is_empty() {
        tracing::warn!(
            count = dropped.len(),
            "unreadable {what} entries start fresh"
        );
        warnings.push(LoadWarning::DroppedEntries { urls: dropped });
    }
}

/// One relay's stats from its JSON fields: a missing field takes its default, a present field
/// of the wrong type reads as NaN (α, β, latency) so sanitising resets it, or 0 (counters).
fn relay_from(fields: &Map<String, Value>) -> RelayStats {
    let d = RelayStats::default();
    let float = |key: &str, default: f64| float_field(fields, key, default);
    let int =
        |key: &str, default: u64| fields.get(key).map_or(default, |v| v.as_u64().unwrap_or(0));
    RelayStats {
        alpha: float("alpha", d.alpha),
        beta: float("beta", d.beta),
        latency_ms: match fields.get("latency_ms") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_f64().unwrap_or(f64::NAN)),
        },
        updated_at: int("updated_at", d.updated_at),
        session: int("session", d.session),
        asked: int("asked", d.asked),
        failures: int("failures", d.failures),
        live_alpha: float("live_alpha", d.live_alpha),
        live_beta: float("live_beta", d.live_beta),
        kept_alpha: float("kept_alpha", d.kept_alpha),
        kept_beta: float("kept_beta", d.kept_beta),
        depth_secs: float("depth_secs", d.depth_secs),
    }
}

/// A JSON number as `f64`; a missing field is `default`, a present one of the wrong type NaN
/// (so the entry reads as corrupt instead of silently taking a made-up value).
fn float_field(fields: &Map<String, Value>, key: &str, default: f64) -> f64 {
    match fields.get(key) {
        None => default,
        Some(v) => v.as_f64().unwrap_or(f64::NAN),
    }
}

/// One author's stats from its JSON fields (same rules as [`relay_from`]). A `relays` value or
/// pair entry of the wrong type makes the whole author corrupt, so it is dropped and relearned.
fn author_from(fields: &Map<String, Value>) -> AuthorStats {
    let d = AuthorStats::default();
    let mut volume = float_field(fields, "volume", d.volume);
    let int =
        |key: &str, default: u64| fields.get(key).map_or(default, |v| v.as_u64().unwrap_or(0));
    let updated_at = int("updated_at", d.updated_at);
    let (first, last) = (int("first", d.first), int("last", d.last));
    let probed_secs = float_field(fields, "probed_secs", d.probed_secs);
    let mut relays = nostr_outbox_core::stats::Pairs::new();
    match fields.get("relays") {
        None | Some(Value::Null) => {}
        Some(Value::Object(pairs)) => {
            for (url, pair) in pairs {
                let pair = match pair {
                    Value::Object(p) => PairStats {
                        hits: float_field(p, "hits", 0.0),
                        misses: float_field(p, "misses", 0.0),
                    },
                    _ => PairStats {
                        hits: f64::NAN,
                        misses: f64::NAN,
                    },
                };
                relays.insert(url.clone(), pair);
            }
        }
        Some(_) => volume = f64::NAN,
    }
    AuthorStats {
        volume,
        updated_at,
        first,
        last,
        probed_secs,
        relays,
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Makes a rename durable: fsync the directory holding the file (a no-op where directories
/// cannot be opened, as on Windows).
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        fs::File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

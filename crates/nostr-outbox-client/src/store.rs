//! Persisting what a client learns across runs: the [`StatsStore`] and [`StateStore`] traits
//! and an in-memory store. Implementations that touch a medium live at the edges (the
//! `nostr-outbox-stats` crate: a JSON file store and a SQLite store).
//!
//! The traits are async (through [`async_trait`](macro@async_trait), re-exported here so implementations name
//! the same version) because a client's storage may be: IndexedDB, an async SQL driver, a
//! remote key-value store. A store doing blocking IO runs it off the async threads.

use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;

pub use async_trait::async_trait;
use serde_json::Value;

use nostr_outbox_core::route_table::RawRelayList;
use nostr_outbox_core::DeliveryStats;

/// The most relay lists a store keeps and returns (a reader follows at most ~10k people); a
/// bound on what a load allocates.
pub const MAX_STORED_LISTS: usize = 50_000;

/// Why a store could not load or save at all. Unreadable *content* is not an error (see
/// [`LoadWarning`]): only failures the caller may want to act on, such as a permission problem.
#[derive(Debug, thiserror::Error)]
pub enum StatsStoreError {
    /// Reading, writing, syncing or renaming a file failed.
    #[error("stats store io on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The stats could not be encoded.
    #[error("cannot encode stats: {0}")]
    Encode(String),
    /// The store was written by a newer schema version. It is refused, and left exactly as it
    /// is: this build would drop what it does not know.
    #[error(
        "{path} has schema version {found}, newer than this build's {supported}; left untouched"
    )]
    Newer {
        /// The store's file.
        path: PathBuf,
        /// The version found.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// The database engine failed for a reason other than bad content (locked past the busy
    /// timeout, disk full, permissions).
    #[error("stats database {path}: {message}")]
    Database {
        /// The database file.
        path: PathBuf,
        /// What the engine said.
        message: String,
    },
}

/// Something a store noticed while loading and worked around; the stats it returned are usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadWarning {
    /// The stored data could not be read at all (truncated, garbage, wrong shape).
    Unreadable {
        /// Where it was.
        path: PathBuf,
        /// What the parser said.
        reason: String,
        /// Where the unreadable file was moved so it is not overwritten, if it was moved.
        moved_to: Option<PathBuf>,
    },
    /// The stats came from the backup of the last good save instead.
    FromBackup {
        /// The backup file used.
        path: PathBuf,
    },
    /// Some relay entries could not be read and start fresh.
    DroppedEntries {
        /// The relay URLs (or keys) dropped.
        urls: Vec<String>,
    },
    /// Some values were absurd and were reset to the uniform prior.
    Sanitised {
        /// How many values were reset.
        count: usize,
    },
    /// The data was written by a newer format version; fields this version does not know were
    /// ignored.
    NewerVersion {
        /// The version found.
        found: u32,
        /// The newest version this build writes.
        supported: u32,
    },
}

impl fmt::Display for LoadWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadWarning::Unreadable {
                path,
                reason,
                moved_to,
            } => {
                write!(f, "{} is unreadable ({reason})", path.display())?;
                if let Some(to) = moved_to {
                    write!(f, "; moved aside to {}", to.display())?;
                }
                Ok(())
            }
            LoadWarning::FromBackup { path } => {
                write!(f, "stats restored from backup {}", path.display())
            }
            LoadWarning::DroppedEntries { urls } => {
                write!(f, "{} unreadable entries start fresh", urls.len())
            }
            LoadWarning::Sanitised { count } => {
                write!(f, "{count} absurd values reset to the uniform prior")
            }
            LoadWarning::NewerVersion { found, supported } => write!(
                f,
                "stats written by format version {found}, this build knows {supported}"
            ),
        }
    }
}

/// What [`StatsStore::load`] returns: usable stats and what was worked around to get them.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The stats (fresh where nothing readable was stored).
    pub stats: DeliveryStats,
    /// Problems noticed and worked around, each also reported through `tracing`.
    pub warnings: Vec<LoadWarning>,
}

/// What a [`StateStore`] load returns: the value (empty where nothing readable was stored) and
/// what was worked around to get it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Restored<T> {
    /// The stored value.
    pub value: T,
    /// Problems noticed and worked around.
    pub warnings: Vec<LoadWarning>,
}

/// Persists [`DeliveryStats`] across runs.
///
/// Object-safe (`Arc<dyn StatsStore>`) and shared across tasks (`&self`, `Send + Sync`).
/// Contract: `load` never fails because stored *content* is bad — it returns fresh stats for
/// whatever is unreadable plus a [`LoadWarning`] — and `save` never replaces readable stored
/// data with something unreadable, nor data of a newer version. Errors are reserved for the
/// medium itself failing and for refusals ([`StatsStoreError::Newer`]).
///
/// Implement it with `#[async_trait]` ([`async_trait`](macro@async_trait)).
#[async_trait]
pub trait StatsStore: Send + Sync + fmt::Debug {
    /// The stored stats, or fresh ones when nothing is stored yet.
    async fn load(&self) -> Result<Loaded, StatsStoreError>;

    /// Stores `stats`. A store that several runs share folds what this run learned since its
    /// `load` into what is stored now ([`DeliveryStats::merge_learning`]) instead of replacing
    /// another run's learning.
    async fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError>;

    /// Whether a save could be written now (the directory exists and takes files, the database
    /// is ours and not locked by another program). Checked before a run fetches anything, so
    /// an unwritable store is found before a run's learning depends on it. The default: yes.
    async fn check_writable(&self) -> Result<(), StatsStoreError> {
        Ok(())
    }
}

/// The rest of what a client keeps between runs, beside its stats: the relay lists it fetched
/// (so the next run plans routed at once) and the relays it set aside.
///
/// The penalty box is the runtime's own plain data; a store keeps it as an opaque JSON
/// document (`nostr_outbox_runtime::store` converts). The contract of [`StatsStore`] holds: bad
/// content loads as empty with a warning, never as an error.
#[async_trait]
pub trait StateStore: StatsStore {
    /// The stored relay lists (at most [`MAX_STORED_LISTS`]); none when nothing is stored.
    async fn load_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError>;

    /// Stores `lists` (their order is not kept; beyond [`MAX_STORED_LISTS`], the newest).
    async fn save_lists(&self, lists: &[RawRelayList]) -> Result<(), StatsStoreError>;

    /// The stored penalty document, or `None` when nothing is stored.
    async fn load_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError>;

    /// Stores the penalty document, replacing what was stored.
    async fn save_penalties(&self, penalties: &Value) -> Result<(), StatsStoreError>;

    /// The base seed of the plans' draws kept with these stats, or else `drawn`, kept from
    /// now on: each installation draws its base once, at random, and its runs vary it with
    /// the run count ([`session_seed`](nostr_outbox_core::session_seed)), so no two installations
    /// share a draw sequence and one installation's runs never repeat one. A seed already
    /// kept wins over `drawn`, also when another run kept it meanwhile. Nothing need be
    /// written here: a store may keep it with the next stats save. The default keeps nothing
    /// and returns `drawn`.
    async fn base_seed(&self, drawn: u64) -> Result<u64, StatsStoreError> {
        Ok(drawn)
    }
}

/// The lists a store keeps of `lists`: by author, at most [`MAX_STORED_LISTS`] (the newest),
/// so equal inputs store equal bytes.
pub fn lists_to_keep(lists: &[RawRelayList]) -> Vec<&RawRelayList> {
    let mut kept: Vec<&RawRelayList> = lists.iter().collect();
    if kept.len() > MAX_STORED_LISTS {
        kept.sort_by_key(|l| std::cmp::Reverse(l.created_at));
        kept.truncate(MAX_STORED_LISTS);
    }
    kept.sort_by_key(|l| (l.author, l.created_at));
    kept
}

/// A store that keeps everything in memory (tests, and clients that persist elsewhere).
#[derive(Debug, Default)]
pub struct MemoryStore {
    saved: Mutex<Saved>,
}

#[derive(Debug, Default)]
struct Saved {
    stats: Option<DeliveryStats>,
    lists: Vec<RawRelayList>,
    penalties: Option<Value>,
    seed: Option<u64>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn saved(&self) -> std::sync::MutexGuard<'_, Saved> {
        // A poisoned lock only means another thread panicked mid-save of a plain clone; the
        // values inside are whole.
        self.saved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stored stats, without an executor (the trait's `load` does the same).
    pub fn load(&self) -> Result<Loaded, StatsStoreError> {
        let saved = self.saved().stats.clone();
        let mut stats = saved.unwrap_or_default();
        let count = stats.sanitize();
        let warnings = if count > 0 {
            vec![LoadWarning::Sanitised { count }]
        } else {
            Vec::new()
        };
        Ok(Loaded { stats, warnings })
    }

    /// Stores `stats`, without an executor (the trait's `save` does the same).
    pub fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        let copy = stats.clone();
        self.saved().stats = Some(copy);
        Ok(())
    }
}

#[async_trait]
impl StatsStore for MemoryStore {
    async fn load(&self) -> Result<Loaded, StatsStoreError> {
        MemoryStore::load(self)
    }

    async fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        MemoryStore::save(self, stats)
    }
}

#[async_trait]
impl StateStore for MemoryStore {
    async fn load_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError> {
        Ok(Restored {
            value: self.saved().lists.clone(),
            warnings: Vec::new(),
        })
    }

    async fn save_lists(&self, lists: &[RawRelayList]) -> Result<(), StatsStoreError> {
        let kept = lists_to_keep(lists).into_iter().cloned().collect();
        self.saved().lists = kept;
        Ok(())
    }

    async fn load_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
        Ok(Restored {
            value: self.saved().penalties.clone(),
            warnings: Vec::new(),
        })
    }

    async fn save_penalties(&self, penalties: &Value) -> Result<(), StatsStoreError> {
        self.saved().penalties = Some(penalties.clone());
        Ok(())
    }

    async fn base_seed(&self, drawn: u64) -> Result<u64, StatsStoreError> {
        Ok(*self.saved().seed.get_or_insert(drawn))
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// Runs a future that never waits (the memory store's), without an executor.
    fn ready<T>(f: impl Future<Output = T>) -> T {
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(f).poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the memory store never waits"),
        }
    }

    fn list(n: u8, created_at: u64) -> RawRelayList {
        let sk = nostr::key::SecretKey::from_slice(&[n.max(1); 32]).unwrap();
        RawRelayList {
            author: nostr::key::Keys::new(sk).public_key(),
            created_at,
            tags: vec![vec!["r".into(), format!("wss://r{n}.example")]],
        }
    }

    #[test]
    fn memory_store_round_trips_through_the_traits() {
        let store = MemoryStore::new();
        let dynamic: &dyn StateStore = &store;
        assert!(ready(dynamic.load()).unwrap().stats.is_empty());
        let mut s = DeliveryStats::new();
        s.record_latency("wss://a.example", 100.0, 9);
        ready(dynamic.save(&s)).unwrap();
        assert_eq!(ready(dynamic.load()).unwrap().stats, s);
        assert_eq!(store.load().unwrap().stats, s, "the inherent form agrees");

        let lists = vec![list(2, 5), list(1, 7)];
        ready(dynamic.save_lists(&lists)).unwrap();
        let back = ready(dynamic.load_lists()).unwrap().value;
        assert_eq!(back.len(), 2);
        assert!(back.contains(&lists[0]) && back.contains(&lists[1]));
        assert_eq!(ready(dynamic.load_penalties()).unwrap().value, None);
        let doc = serde_json::json!({"relays": {}});
        ready(dynamic.save_penalties(&doc)).unwrap();
        assert_eq!(ready(dynamic.load_penalties()).unwrap().value, Some(doc));
        assert_eq!(
            ready(dynamic.base_seed(7)).unwrap(),
            7,
            "the first draw is kept"
        );
        assert_eq!(
            ready(dynamic.base_seed(8)).unwrap(),
            7,
            "and wins over later draws"
        );
    }

    #[test]
    fn lists_beyond_the_cap_keep_the_newest_in_a_stable_order() {
        let many: Vec<RawRelayList> = (0..MAX_STORED_LISTS as u64 + 3)
            .map(|t| RawRelayList {
                created_at: t,
                ..list(1, 0)
            })
            .collect();
        let kept = lists_to_keep(&many);
        assert_eq!(kept.len(), MAX_STORED_LISTS);
        assert_eq!(kept.iter().map(|l| l.created_at).min(), Some(3));
        let (one, two) = ([list(1, 1), list(2, 1)], [list(2, 1), list(1, 1)]);
        assert_eq!(lists_to_keep(&one), lists_to_keep(&two));
    }
}

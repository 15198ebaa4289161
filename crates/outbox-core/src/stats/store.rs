//! Persisting [`DeliveryStats`] across runs: the [`StatsStore`] trait and an in-memory store.
//! The embedded default file store lives in the `outbox-stats` crate.

use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;

use super::DeliveryStats;

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
                write!(f, "{} unreadable relay entries start fresh", urls.len())
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

/// Persists [`DeliveryStats`] across runs.
///
/// Synchronous and object-safe; implementations are shared across threads (`&self`, `Sync`).
/// Contract: `load` never fails because stored *content* is bad — it returns fresh stats for
/// whatever is unreadable plus a [`LoadWarning`] — and `save` never replaces readable stored
/// data with something unreadable. Errors are reserved for the medium itself failing.
pub trait StatsStore: Send + Sync + fmt::Debug {
    /// The stored stats, or fresh ones when nothing is stored yet.
    fn load(&self) -> Result<Loaded, StatsStoreError>;

    /// Stores `stats`, replacing what was stored.
    fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError>;
}

/// A store that keeps the stats in memory (tests, and clients that persist elsewhere).
#[derive(Debug, Default)]
pub struct MemoryStore {
    saved: Mutex<Option<DeliveryStats>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl StatsStore for MemoryStore {
    fn load(&self) -> Result<Loaded, StatsStoreError> {
        // A poisoned lock only means another thread panicked mid-save of a plain clone; the
        // value inside is still a whole `DeliveryStats`.
        let saved = self.saved.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut stats = saved.unwrap_or_default();
        let count = stats.sanitize();
        let warnings = if count > 0 {
            vec![LoadWarning::Sanitised { count }]
        } else {
            Vec::new()
        };
        Ok(Loaded { stats, warnings })
    }

    fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        let copy = stats.clone();
        *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = Some(copy);
        Ok(())
    }
}

//! A minimal JSON file store for [`DeliveryStats`] (and the penalty box beside it).
//!
//! The fuller store (backups, versioned format) lives in its own crate; this one keeps the
//! runtime and the CLI usable on their own. Writes are atomic: a temporary file in the same
//! directory is written, synced and renamed over the old one, so a crash never leaves half a
//! file. Unreadable content is moved aside and reported as a [`LoadWarning`], never an error.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use outbox_core::{DeliveryStats, LoadWarning, Loaded, StatsStore, StatsStoreError};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Stats as pretty JSON in one file.
#[derive(Clone, Debug)]
pub struct JsonFileStore {
    path: PathBuf,
}

impl JsonFileStore {
    /// A store at `path` (created on first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl StatsStore for JsonFileStore {
    fn load(&self) -> Result<Loaded, StatsStoreError> {
        let (stats, mut warnings) = load_json::<DeliveryStats>(&self.path)?;
        let mut stats = stats.unwrap_or_default();
        let count = stats.sanitize();
        if count > 0 {
            warnings.push(LoadWarning::Sanitised { count });
        }
        Ok(Loaded { stats, warnings })
    }

    fn save(&self, stats: &DeliveryStats) -> Result<(), StatsStoreError> {
        save_json(&self.path, stats)
    }
}

/// Reads a JSON file. A missing file is `None`; an unreadable one is moved aside to
/// `<file>.corrupt` and reported as a warning.
pub fn load_json<T: DeserializeOwned>(
    path: &Path,
) -> Result<(Option<T>, Vec<LoadWarning>), StatsStoreError> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(source) => {
            return Err(StatsStoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    match serde_json::from_slice::<T>(&text) {
        Ok(value) => Ok((Some(value), Vec::new())),
        Err(e) => {
            let aside = path.with_extension("corrupt");
            let moved_to = fs::rename(path, &aside).ok().map(|_| aside);
            let warning = LoadWarning::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
                moved_to,
            };
            tracing::warn!(%warning, "starting fresh");
            Ok((None, vec![warning]))
        }
    }
}

/// Writes `value` as pretty JSON atomically (temp file, fsync, rename).
pub fn save_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StatsStoreError> {
    let io = |source| StatsStoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let json =
        serde_json::to_vec_pretty(value).map_err(|e| StatsStoreError::Encode(e.to_string()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(&json).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.json");
        let store = JsonFileStore::new(&path);
        assert!(store.load().unwrap().stats.is_empty());
        let mut stats = DeliveryStats::new();
        stats.record_delivery("wss://a.example", 3, 4, 100);
        store.save(&stats).unwrap();
        let back = store.load().unwrap();
        assert_eq!(
            back.stats.get("wss://a.example"),
            stats.get("wss://a.example")
        );
        assert!(back.warnings.is_empty());

        fs::write(&path, b"{not json").unwrap();
        let loaded = store.load().unwrap();
        assert!(loaded.stats.is_empty());
        assert!(matches!(
            loaded.warnings[0],
            LoadWarning::Unreadable {
                moved_to: Some(_),
                ..
            }
        ));
    }
}

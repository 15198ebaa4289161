//! Plain JSON files for the runtime's own state (the penalty box).
//!
//! Learned stats go through a [`StatsStore`](outbox_core::StatsStore) (the `outbox-stats`
//! crate's file store, with backups and a versioned format); the penalty box is simpler state
//! kept beside it. Writes are atomic: a temporary file in the same directory is written, synced
//! and renamed over the old one, so a crash never leaves half a file. Unreadable content is
//! moved aside and reported as a [`LoadWarning`], never an error.

use std::fs;
use std::io::Write;
use std::path::Path;

use outbox_core::{LoadWarning, StatsStoreError};
use serde::de::DeserializeOwned;
use serde::Serialize;
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
    use crate::PenaltyBox;

    #[test]
    fn round_trips_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("penalties.json");
        assert!(load_json::<PenaltyBox>(&path).unwrap().0.is_none());
        let mut b = PenaltyBox::new();
        b.penalise(
            "wss://a.example",
            "auth-required: x",
            10,
            &Default::default(),
        );
        save_json(&path, &b).unwrap();
        let (back, warnings) = load_json::<PenaltyBox>(&path).unwrap();
        assert_eq!(back, Some(b));
        assert!(warnings.is_empty());

        fs::write(&path, b"{not json").unwrap();
        let (back, warnings) = load_json::<PenaltyBox>(&path).unwrap();
        assert!(back.is_none());
        assert!(matches!(
            warnings[0],
            LoadWarning::Unreadable {
                moved_to: Some(_),
                ..
            }
        ));
    }
}

//! Plain JSON files for the runtime's own state (the penalty box).
//!
//! Learned stats go through a [`StatsStore`](outbox_core::StatsStore) (the `outbox-stats`
//! crate's file store, with backups and a versioned format); the penalty box is simpler state
//! kept beside it. Writes are atomic: a temporary file in the same directory is written, synced
//! and renamed over the old one, so a crash never leaves half a file. Unreadable content is
//! moved aside and reported as a [`LoadWarning`], never an error.

use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use outbox_core::{LoadWarning, StatsStoreError};
use serde::de::DeserializeOwned;
use serde::Serialize;
/// The largest state file read (a bound on memory, whatever the path points at).
pub const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a JSON file. A missing file is `None`; an unreadable one is moved aside to
/// `<file>.corrupt` and reported as a warning. Anything that is not a regular file (a FIFO, a
/// device) or is larger than [`MAX_STATE_BYTES`] is an error, never read.
pub fn load_json<T: DeserializeOwned>(
    path: &Path,
) -> Result<(Option<T>, Vec<LoadWarning>), StatsStoreError> {
    let io = |source| StatsStoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    // Looked at before opening: opening a FIFO would block until someone writes to it.
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(io(std::io::Error::other("not a regular file")));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(source) => return Err(io(source)),
    }
    let mut text = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_STATE_BYTES + 1).read_to_end(&mut text))
        .map_err(io)?;
    if text.len() as u64 > MAX_STATE_BYTES {
        return Err(io(std::io::Error::other(format!(
            "larger than {MAX_STATE_BYTES} bytes"
        ))));
    }
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
    #[cfg(unix)]
    fn devices_and_fifos_are_refused_without_reading() {
        // `/dev/zero` would be read forever; a FIFO would block the open.
        assert!(load_json::<PenaltyBox>(Path::new("/dev/zero")).is_err());
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(load_json::<PenaltyBox>(&fifo).is_err());
        }
    }

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

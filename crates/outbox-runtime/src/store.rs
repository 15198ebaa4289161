//! What a run keeps between runs besides its stats: the relay lists and the penalty box, kept
//! by a [`StateStore`] (the `outbox-stats` crate's file and SQLite stores, or a client's own).
//!
//! The runtime saves its stats through [`FeedInput::store`](crate::FeedInput::store) itself.
//! Lists and penalties are the caller's to restore into the [`FeedInput`](crate::FeedInput)
//! before a run ([`load_kept`]) and to keep from its [`FeedSummary`](crate::FeedSummary) after
//! ([`save_kept`]), so a caller decides whether a run remembers set-aside relays (the live bench,
//! for one, starts every session with an empty box).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use outbox_client::{LoadWarning, StatsStoreError};
use outbox_client::{StateStore, MAX_STORED_LISTS};
use outbox_core::RawRelayList;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::PenaltyBox;

/// The relay lists and penalty box a store kept, and what was worked around to read them.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// Relay lists of the last run (at most [`MAX_STORED_LISTS`]).
    pub lists: Vec<RawRelayList>,
    /// Relays set aside by the last run.
    pub penalties: PenaltyBox,
    /// Problems worked around; the values above are usable.
    pub warnings: Vec<LoadWarning>,
}

/// Reads the lists and the penalty box from `store`. Unreadable content starts empty with a
/// warning; only the medium failing, or a store refusing (a newer version), is an error.
pub async fn load_kept(store: &dyn StateStore) -> Result<Kept, StatsStoreError> {
    let lists = store.load_lists().await?;
    let penalties = store.load_penalties().await?;
    let mut warnings = lists.warnings;
    warnings.extend(penalties.warnings);
    let mut lists = lists.value;
    // A client's store may not bound what it returns.
    lists.truncate(MAX_STORED_LISTS);
    let penalties = match penalties.value {
        None => PenaltyBox::new(),
        Some(doc) => match serde_json::from_value::<PenaltyBox>(doc) {
            Ok(penalties) => penalties,
            Err(e) => {
                tracing::warn!(error = %e, "unreadable penalty box; no relay starts set aside");
                warnings.push(LoadWarning::DroppedEntries {
                    urls: vec!["penalties".into()],
                });
                PenaltyBox::new()
            }
        },
    };
    Ok(Kept {
        lists,
        penalties,
        warnings,
    })
}

/// Keeps `lists` and `penalties` (a run's [`FeedSummary`](crate::FeedSummary) has both) in
/// `store` for the next run.
pub async fn save_kept(
    store: &dyn StateStore,
    lists: &[RawRelayList],
    penalties: &PenaltyBox,
) -> Result<(), StatsStoreError> {
    let doc =
        serde_json::to_value(penalties).map_err(|e| StatsStoreError::Encode(e.to_string()))?;
    store.save_penalties(&doc).await?;
    store.save_lists(lists).await
}

/// The largest state file read (a bound on memory, whatever the path points at).
pub const MAX_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a JSON file (a plain file helper; the stores above are the way to keep state).
/// A missing file is `None`; an unreadable one is moved aside to
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
    use std::sync::Arc;

    use outbox_client::MemoryStore;
    use outbox_stats::{FileStore, SqliteStore};

    use super::*;

    fn boxed() -> PenaltyBox {
        let mut b = PenaltyBox::new();
        b.penalise(
            "wss://a.example",
            "auth-required: x",
            10,
            &Default::default(),
        );
        b
    }

    fn list() -> RawRelayList {
        let sk = nostr::key::SecretKey::from_slice(&[3u8; 32]).unwrap();
        RawRelayList {
            author: nostr::key::Keys::new(sk).public_key(),
            created_at: 7,
            tags: vec![vec!["r".into(), "wss://w.example".into()]],
        }
    }

    #[tokio::test]
    async fn every_store_keeps_lists_and_penalties() {
        let dir = tempfile::tempdir().unwrap();
        let stores: Vec<Arc<dyn StateStore>> = vec![
            Arc::new(MemoryStore::new()),
            Arc::new(FileStore::new(dir.path().join("stats.json"))),
            Arc::new(SqliteStore::new(dir.path().join("outbox.sqlite"))),
        ];
        for store in stores {
            let empty = load_kept(store.as_ref()).await.unwrap();
            assert!(empty.lists.is_empty() && empty.warnings.is_empty());
            assert_eq!(empty.penalties, PenaltyBox::new());
            save_kept(store.as_ref(), &[list()], &boxed())
                .await
                .unwrap();
            let kept = load_kept(store.as_ref()).await.unwrap();
            assert_eq!(kept.lists, vec![list()], "{store:?}");
            assert_eq!(kept.penalties, boxed(), "{store:?}");
            assert!(kept.warnings.is_empty(), "{:?}", kept.warnings);
        }
    }

    #[tokio::test]
    async fn a_penalty_box_of_the_wrong_shape_starts_empty_with_a_warning() {
        let store = MemoryStore::new();
        store
            .save_penalties(&serde_json::json!({"relays": [1, 2]}))
            .await
            .unwrap();
        let kept = load_kept(&store).await.unwrap();
        assert_eq!(kept.penalties, PenaltyBox::new());
        assert_eq!(
            kept.warnings,
            vec![LoadWarning::DroppedEntries {
                urls: vec!["penalties".into()]
            }]
        );
    }

    #[tokio::test]
    async fn the_file_store_reads_what_earlier_builds_wrote() {
        // Earlier builds wrote the box and the lists as plain JSON files beside the stats.
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("stats.json");
        std::fs::write(
            dir.path().join("stats.json.penalties.json"),
            serde_json::to_vec_pretty(&boxed()).unwrap(),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("stats.json.lists.json"),
            serde_json::to_vec_pretty(&vec![list()]).unwrap(),
        )
        .unwrap();
        let kept = load_kept(&FileStore::new(stats)).await.unwrap();
        assert_eq!(kept.penalties, boxed());
        assert_eq!(kept.lists, vec![list()]);
    }

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

//! What the file store keeps beside the stats file, and its async trait implementations.
//!
//! - `<name>.lists.json`: the relay lists, a JSON array of `{"author", "created_at", "tags"}`
//!   (kind:10002 lists as fetched). An entry that does not read, or is dated in the future
//!   ([`crate::kept::drop_future_lists`]), is dropped with a [`LoadWarning::DroppedEntries`];
//!   at most [`MAX_STORED_LISTS`] are read.
//! - `<name>.penalties.json`: the runtime's penalty box, kept as JSON.
//!
//! A save of either merges, under the stats file's lock file, what is stored now with what the
//! run changed since it loaded ([`crate::kept`]).
//!
//! Both are caches a run can rebuild, so they are unversioned and have no backup; otherwise the
//! stats file's rules hold: writes are atomic (temporary file, fsync, rename, directory fsync),
//! reads are bounded by [`MAX_STATS_BYTES`] and refuse anything but a
//! regular file, and an unreadable file is moved aside as `<file>.corrupt-<unix seconds>`.
//!
//! The async methods run the blocking file IO on tokio's blocking threads.

use std::io::Write;
use std::path::{Path, PathBuf};

use nostr_outbox_client::{
    async_trait, lists_to_keep, LoadWarning, Loaded, Restored, StateStore, StatsStore,
    StatsStoreError, MAX_STORED_LISTS,
};
use nostr_outbox_core::{DeliveryStats, RawRelayList};
use serde_json::Value;

use crate::kept::{drop_future_lists, merge_lists, merge_penalties, with_lifts_of, KeptBase};
use crate::task::{blocking, off_thread_stores};
use crate::{lock_file, now_secs, read, sibling, sync_dir, FileStore, MAX_STATS_BYTES};

/// The lists and box a store last loaded or saved; a poisoned lock only means a save panicked
/// holding plain data.
pub(crate) fn lock(kept: &std::sync::Mutex<KeptBase>) -> std::sync::MutexGuard<'_, KeptBase> {
    kept.lock().unwrap_or_else(|e| e.into_inner())
}

impl FileStore {
    /// Where the relay lists are kept: `<name>.lists.json`.
    pub fn lists_path(&self) -> PathBuf {
        sibling(self.path(), ".lists.json")
    }

    /// Where the penalty box is kept: `<name>.penalties.json`.
    pub fn penalties_path(&self) -> PathBuf {
        sibling(self.path(), ".penalties.json")
    }

    /// Makes the next save stop halfway through writing its temporary file, as a crash would
    /// (the conformance suite's torn write).
    #[cfg(feature = "conformance")]
    #[doc(hidden)]
    pub fn interrupt_next_save(&self) {
        self.core
            .interrupt
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The stored relay lists (blocking). They are this store's base for its next
    /// [`save_lists`](Self::save_lists).
    pub fn load_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError> {
        let loaded = self.read_lists()?;
        lock(&self.core.kept).lists = Some(loaded.value.clone());
        Ok(loaded)
    }

    fn read_lists(&self) -> Result<Restored<Vec<RawRelayList>>, StatsStoreError> {
        let path = self.lists_path();
        let Some(bytes) = read(&path)? else {
            return Ok(Restored::default());
        };
        match parse_lists(&bytes) {
            Ok((mut value, mut dropped)) => {
                dropped.extend(drop_future_lists(&mut value, now_secs()));
                let mut warnings = Vec::new();
                if !dropped.is_empty() {
                    tracing::warn!(path = %path.display(), count = dropped.len(), "unreadable relay lists dropped");
                    warnings.push(LoadWarning::DroppedEntries { urls: dropped });
                }
                Ok(Restored { value, warnings })
            }
            Err(reason) => Ok(Restored {
                value: Vec::new(),
                warnings: vec![self.set_aside(&path, reason)],
            }),
        }
    }

    /// Stores the relay lists (blocking, atomic). Under the lock file, what is stored now is
    /// read and the lists merged three-way against this store's base ([`crate::kept`]), so a
    /// run keeps what others saved since it loaded.
    pub fn save_lists(&self, lists: &[RawRelayList]) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let mut held = lock(&self.core.kept);
        let _lock = lock_file(&self.lock_path())?;
        let path = self.lists_path();
        let mut stored = match read(&path)? {
            Some(bytes) => parse_lists(&bytes).map(|(l, _)| l).unwrap_or_default(),
            None => Vec::new(),
        };
        drop_future_lists(&mut stored, now_secs());
        let merged = merge_lists(&stored, held.lists.as_deref(), lists);
        let bytes = serde_json::to_vec(&lists_to_keep(&merged))
            .map_err(|e| StatsStoreError::Encode(e.to_string()))?;
        write_atomic(&path, &bytes)?;
        held.lists = Some(lists.to_vec());
        Ok(())
    }

    /// The stored penalty document (blocking). It is this store's base for its next
    /// [`save_penalties`](Self::save_penalties).
    pub fn load_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
        Ok(self.core.loaded_penalties(self.read_penalties()?))
    }

    fn read_penalties(&self) -> Result<Restored<Option<Value>>, StatsStoreError> {
        let path = self.penalties_path();
        let Some(bytes) = read(&path)? else {
            return Ok(Restored::default());
        };
        let parsed = if bytes.len() as u64 > MAX_STATS_BYTES {
            Err(format!("larger than {MAX_STATS_BYTES} bytes"))
        } else {
            serde_json::from_slice::<Value>(&bytes).map_err(|e| e.to_string())
        };
        match parsed {
            Ok(value) => Ok(Restored {
                value: Some(value),
                warnings: Vec::new(),
            }),
            Err(reason) => Ok(Restored {
                value: None,
                warnings: vec![self.set_aside(&path, reason)],
            }),
        }
    }

    /// Stores the penalty document (blocking, atomic). Under the lock file, what is stored now
    /// is read and the box merged three-way against this store's base, lifts honoured
    /// ([`crate::kept`]).
    pub fn save_penalties(&self, penalties: &Value) -> Result<(), StatsStoreError> {
        self.core.writable()?;
        let mut held = lock(&self.core.kept);
        let _lock = lock_file(&self.lock_path())?;
        let path = self.penalties_path();
        let stored = match read(&path)? {
            Some(bytes) if bytes.len() as u64 <= MAX_STATS_BYTES => {
                serde_json::from_slice::<Value>(&bytes).ok()
            }
            _ => None,
        };
        let merged = merge_penalties(stored.as_ref(), held.penalties.as_ref(), penalties);
        let bytes = serde_json::to_vec_pretty(&merged)
            .map_err(|e| StatsStoreError::Encode(e.to_string()))?;
        write_atomic(&path, &bytes)?;
        held.penalties = Some(with_lifts_of(penalties, &merged));
        Ok(())
    }

    /// Moves an unreadable file aside and says so.
    fn set_aside(&self, path: &Path, reason: String) -> LoadWarning {
        tracing::warn!(path = %path.display(), %reason, "unreadable file; starting fresh");
        LoadWarning::Unreadable {
            path: path.to_path_buf(),
            moved_to: self.move_aside(path),
            reason,
        }
    }
}

/// Relay lists from a JSON array, each entry on its own; `Err` when nothing can be read.
fn parse_lists(bytes: &[u8]) -> Result<(Vec<RawRelayList>, Vec<String>), String> {
    if bytes.len() as u64 > MAX_STATS_BYTES {
        return Err(format!("larger than {MAX_STATS_BYTES} bytes"));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let Value::Array(items) = value else {
        return Err("not a json array".into());
    };
    let mut lists = Vec::new();
    let mut dropped = Vec::new();
    let beyond = items.len().saturating_sub(MAX_STORED_LISTS);
    for (i, item) in items.into_iter().take(MAX_STORED_LISTS).enumerate() {
        let name = match item.get("author") {
            Some(Value::String(author)) => author.chars().take(64).collect(),
            _ => format!("#{i}"),
        };
        match serde_json::from_value::<RawRelayList>(item) {
            Ok(list) => lists.push(list),
            Err(_) => dropped.push(name),
        }
    }
    if beyond > 0 {
        dropped.push(format!("{beyond} lists beyond {MAX_STORED_LISTS}"));
    }
    Ok((lists, dropped))
}

/// Replaces `path` with `bytes` whole: a temporary file beside it, fsynced, renamed over it,
/// then the directory fsynced.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StatsStoreError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StatsStoreError::Io { path, source }
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".outbox-state")
        .tempfile_in(&dir)
        .map_err(io_err(&dir))?;
    tmp.write_all(bytes).map_err(io_err(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io_err(tmp.path()))?;
    tmp.persist(path).map_err(|e| StatsStoreError::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_dir(&dir).map_err(io_err(&dir))
}

off_thread_stores!(FileStore);

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, FileStore) {
        crate::temp_store("stats.json", FileStore::new)
    }

    #[test]
    fn lists_and_penalties_sit_beside_the_stats_file() {
        let (dir, store) = store();
        assert_eq!(store.lists_path(), dir.path().join("stats.json.lists.json"));
        assert_eq!(
            store.penalties_path(),
            dir.path().join("stats.json.penalties.json")
        );
    }

    #[test]
    fn a_bad_list_entry_is_dropped_and_the_rest_loads() {
        let (_dir, store) = store();
        let good = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d";
        let text = format!(
            r#"[{{"author": "{good}", "created_at": 5, "tags": [["r", "wss://a.example"]]}},
                {{"author": "not-a-key", "created_at": 5, "tags": []}},
                17]"#
        );
        std::fs::write(store.lists_path(), text).unwrap();
        let loaded = store.load_lists().unwrap();
        assert_eq!(loaded.value.len(), 1);
        assert_eq!(
            loaded.warnings,
            vec![LoadWarning::DroppedEntries {
                urls: vec!["not-a-key".into(), "#2".into()]
            }]
        );
    }

    #[test]
    fn unreadable_state_files_are_moved_aside_not_deleted() {
        let (dir, store) = store();
        std::fs::write(store.lists_path(), b"{\"not\": \"an array\"}").unwrap();
        std::fs::write(store.penalties_path(), b"{torn").unwrap();
        let lists = store.load_lists().unwrap();
        let penalties = store.load_penalties().unwrap();
        assert!(lists.value.is_empty() && penalties.value.is_none());
        for w in lists.warnings.iter().chain(&penalties.warnings) {
            let LoadWarning::Unreadable {
                moved_to: Some(to), ..
            } = w
            else {
                panic!("{w:?}");
            };
            assert!(to.exists(), "{}", to.display());
        }
        assert!(!store.lists_path().exists() && !store.penalties_path().exists());
        let aside = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(aside, 2);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_opening_it() {
        let (_dir, store) = store();
        if crate::made_fifo(&store.penalties_path()) {
            assert!(store.load_penalties().is_err());
        }
    }

    #[test]
    fn the_async_form_works_outside_a_runtime_too() {
        let (_dir, store) = store();
        let doc = serde_json::json!({"relays": {"wss://a.example": {"strikes": 1}}});
        // No tokio runtime here: the IO runs on this thread.
        {
            use std::future::Future;
            let fut = StateStore::save_penalties(&store, &doc);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let mut fut = std::pin::pin!(fut);
            assert!(matches!(
                fut.as_mut().poll(&mut cx),
                std::task::Poll::Ready(Ok(()))
            ));
        }
        assert_eq!(store.load_penalties().unwrap().value, Some(doc));
    }
}

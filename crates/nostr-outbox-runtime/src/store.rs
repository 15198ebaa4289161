//! What a run keeps between runs besides its stats: the relay lists, the penalty box and what
//! relays were learned to speak ([`Learned`]), kept by a [`StateStore`] (the
//! `nostr-outbox-stats` crate's file and SQLite stores, or a client's own). The last two share
//! the store's penalty document: the box's fields, and `extensions` beside them.
//!
//! The runtime reads and writes state only through the stores' traits: it saves its stats
//! through [`FeedInput::store`](crate::FeedInput::store) itself.
//! Lists and penalties are the caller's to restore into the [`FeedInput`](crate::FeedInput)
//! before a run ([`load_kept`]) and to keep from its [`FeedSummary`](crate::FeedSummary) after
//! ([`save_kept`]), so a caller decides whether a run remembers set-aside relays (the live bench,
//! for one, starts every session with an empty box).

use nostr_outbox_client::{LoadWarning, StatsStoreError};
use nostr_outbox_client::{StateStore, MAX_STORED_LISTS};
use nostr_outbox_core::RawRelayList;

use crate::connection::extensions::Learned;
use crate::penalty::PenaltyBox;

/// The field of the penalty document that holds what relays were learned to speak.
const EXTENSIONS: &str = "extensions";

/// The relay lists and penalty box a store kept, and what was worked around to read them.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// Relay lists of the last run (at most [`MAX_STORED_LISTS`]).
    pub lists: Vec<RawRelayList>,
    /// Relays set aside by the last run.
    pub penalties: PenaltyBox,
    /// What relays were learned to speak (restore it into a client with
    /// [`Extensions::restore`](crate::Extensions::restore)).
    pub extensions: Learned,
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
    let extensions = penalties
        .value
        .as_ref()
        .and_then(|doc| doc.get(EXTENSIONS))
        .and_then(|v| match serde_json::from_value::<Learned>(v.clone()) {
            Ok(learned) => Some(learned),
            Err(e) => {
                tracing::warn!(error = %e, "unreadable extension support; learning it again");
                None
            }
        })
        .unwrap_or_default();
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
        extensions,
        warnings,
    })
}

/// Keeps `lists` and `penalties` (a run's [`FeedSummary`](crate::FeedSummary) has both) and
/// `extensions` (its client's [`Extensions::learned`](crate::Extensions::learned)) in `store`
/// for the next run.
pub async fn save_kept(
    store: &dyn StateStore,
    lists: &[RawRelayList],
    penalties: &PenaltyBox,
    extensions: &Learned,
) -> Result<(), StatsStoreError> {
    let encode = |e: serde_json::Error| StatsStoreError::Encode(e.to_string());
    let mut doc = serde_json::to_value(penalties).map_err(encode)?;
    if let Some(top) = doc.as_object_mut() {
        top.insert(
            EXTENSIONS.into(),
            serde_json::to_value(extensions).map_err(encode)?,
        );
    }
    store.save_penalties(&doc).await?;
    store.save_lists(lists).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use nostr_outbox_client::MemoryStore;
    use nostr_outbox_stats::{FileStore, SqliteStore};

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

    fn learned() -> Learned {
        let mut learned = Learned::default();
        learned.record(
            "wss://a.example",
            crate::Extension::Reconcile,
            crate::connection::extensions::Outcome::Ignored,
            1_700_000_000,
        );
        learned
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
            save_kept(store.as_ref(), &[list()], &boxed(), &learned())
                .await
                .unwrap();
            let kept = load_kept(store.as_ref()).await.unwrap();
            assert_eq!(kept.lists, vec![list()], "{store:?}");
            assert_eq!(kept.penalties, boxed(), "{store:?}");
            assert_eq!(kept.extensions, learned(), "{store:?}");
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
}

//! The newest notes a feed delivered, and per relay up to when it delivered them: kept in a
//! small SQLite file beside the stats so a feed started again prints them at once and asks
//! each relay only for what is new.
//!
//! Bounded on every side: at most [`NOTES_PER_FOLLOW`] notes per author (the newest) and
//! [`MAX_NOTES`] in all, at most [`MAX_MARKS`] relay marks (the newest) each naming at most
//! [`MAX_MARK_AUTHORS`] follows; a row larger than [`MAX_NOTE_BYTES`] is never read, and a
//! file larger than [`MAX_FILE_BYTES`] is not opened. Every note is verified when it is
//! loaded (id and signature); a note or mark dated more than [`FUTURE_TOLERANCE_SECS`] after
//! the present is dropped, as is a row that does not parse.
//!
//! A client with its own event database needs none of this: it gives the runtime its own
//! marks (`FeedInput::marks` in `nostr-outbox-runtime`) and keeps the notes as it likes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nostr::event::Event;
use nostr::key::PublicKey;
use rusqlite::{params, Connection, OpenFlags};

/// The newest notes kept per author.
pub const NOTES_PER_FOLLOW: usize = 20;

/// The most notes kept in all (the newest).
pub const MAX_NOTES: usize = 10_000;

/// The most relay marks kept (the newest).
pub const MAX_MARKS: usize = 1_024;

/// The most follows one relay mark names; a mark naming more is not kept (that relay is asked
/// the whole window again).
pub const MAX_MARK_AUTHORS: usize = 5_000;

/// The largest note (its JSON) kept or read.
pub const MAX_NOTE_BYTES: usize = 128 * 1024;

/// The largest notes file opened: beyond, it is not read (and a save replaces its contents).
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// How far past the present a kept note or mark may be dated (the runtime's tolerance for an
/// event's date).
pub const FUTURE_TOLERANCE_SECS: u64 = 15 * 60;

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Up to when a relay delivered everything it holds for some follows (unix seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptMark {
    /// The relay (canonical URL).
    pub relay: String,
    /// Unix seconds.
    pub at: u64,
    /// The follows its feed filter named.
    pub authors: Vec<PublicKey>,
}

/// What a notes file held, checked.
#[derive(Debug, Default)]
pub struct KeptNotes {
    /// Verified notes, oldest first.
    pub notes: Vec<Event>,
    /// Relay marks, newest first.
    pub marks: Vec<KeptMark>,
    /// Rows dropped: unparsable, unverified, too large or dated in the future.
    pub dropped: usize,
}

/// An error of the notes file.
#[derive(Debug)]
pub enum NotesError {
    /// The database said no.
    Db {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// The file could not be removed.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
}

impl std::fmt::Display for NotesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotesError::Db { path, source } => write!(f, "{}: {source}", path.display()),
            NotesError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            NotesError::TooLarge { path, bytes } => write!(
                f,
                "{}: {bytes} bytes, more than the {MAX_FILE_BYTES} a notes file may hold",
                path.display()
            ),
        }
    }
}

impl std::error::Error for NotesError {}

/// The notes file beside a store at `store` (the stats file or the SQLite database):
/// `STORE.notes.sqlite`.
pub fn notes_path_beside(store: &Path) -> PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push(".notes.sqlite");
    PathBuf::from(p)
}

/// The kept notes and relay marks, in one SQLite file.
#[derive(Clone, Debug)]
pub struct NotesStore {
    path: PathBuf,
}

impl NotesStore {
    /// The notes file at `path` (created at the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Where it is kept.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: rusqlite::Error) -> NotesError {
        NotesError::Db {
            path: self.path.clone(),
            source,
        }
    }

    fn open(&self, create: bool) -> Result<Option<Connection>, NotesError> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if meta.len() > MAX_FILE_BYTES => {
                return Err(NotesError::TooLarge {
                    path: self.path.clone(),
                    bytes: meta.len(),
                })
            }
            Ok(_) => {}
            Err(_) if !create => return Ok(None),
            Err(_) => {}
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| self.err(e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| self.err(e))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS notes (
                 id TEXT PRIMARY KEY, author TEXT NOT NULL,
                 created_at INTEGER NOT NULL, json TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS notes_by_author ON notes (author, created_at);
             CREATE TABLE IF NOT EXISTS marks (
                 relay TEXT PRIMARY KEY, at INTEGER NOT NULL, authors TEXT NOT NULL);",
        )
        .map_err(|e| self.err(e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600));
        }
        Ok(Some(conn))
    }

    /// What is kept, checked against `now` (unix seconds); nothing when there is no file.
    /// Blocking.
    pub fn load(&self, now: u64) -> Result<KeptNotes, NotesError> {
        let Some(conn) = self.open(false)? else {
            return Ok(KeptNotes::default());
        };
        let horizon = now.saturating_add(FUTURE_TOLERANCE_SECS);
        let mut kept = KeptNotes::default();
        let mut rows = conn
            .prepare(
                "SELECT CASE WHEN length(CAST(json AS BLOB)) <= ?1 THEN json END
                 FROM notes ORDER BY created_at DESC, id LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let notes = rows
            .query_map(params![MAX_NOTE_BYTES as i64, MAX_NOTES as i64], |row| {
                row.get::<_, Option<String>>(0)
            })
            .map_err(|e| self.err(e))?;
        for json in notes {
            let event = json
                .ok()
                .flatten()
                .and_then(|json| serde_json::from_str::<Event>(&json).ok())
                .filter(|e| e.created_at.as_secs() <= horizon && e.verify().is_ok());
            match event {
                Some(event) => kept.notes.push(event),
                None => kept.dropped += 1,
            }
        }
        kept.notes.reverse();
        let mut rows = conn
            .prepare(
                "SELECT relay, at, CASE WHEN length(CAST(authors AS BLOB)) <= ?1 THEN authors END
                 FROM marks ORDER BY at DESC, relay LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let marks = rows
            .query_map(
                params![(MAX_MARK_AUTHORS * 65) as i64, MAX_MARKS as i64],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, Option<String>>(2)?,
                    ))
                },
            )
            .map_err(|e| self.err(e))?;
        for mark in marks {
            let mark = mark.ok().and_then(|(relay, at, authors)| {
                let at = u64::try_from(at).ok().filter(|at| *at <= horizon)?;
                let authors = authors?
                    .split(',')
                    .map(|a| PublicKey::from_hex(a).ok())
                    .collect::<Option<Vec<_>>>()?;
                (!authors.is_empty() && authors.len() <= MAX_MARK_AUTHORS).then_some(KeptMark {
                    relay,
                    at,
                    authors,
                })
            });
            match mark {
                Some(mark) => kept.marks.push(mark),
                None => kept.dropped += 1,
            }
        }
        Ok(kept)
    }

    /// Adds `notes` and the relay marks of a run (each replacing the relay's kept one), then
    /// keeps only the newest within the bounds. Notes dated more than the tolerance after
    /// `now`, or too large, are not kept. Blocking.
    pub fn save(&self, notes: &[Event], marks: &[KeptMark], now: u64) -> Result<(), NotesError> {
        let horizon = now.saturating_add(FUTURE_TOLERANCE_SECS);
        let Some(mut conn) = self.open(true)? else {
            return Ok(());
        };
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        {
            let mut insert = tx
                .prepare(
                    "INSERT OR IGNORE INTO notes (id, author, created_at, json)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(|e| self.err(e))?;
            for event in notes {
                let at = event.created_at.as_secs();
                let json = serde_json::to_string(event).unwrap_or_default();
                if at > horizon || json.is_empty() || json.len() > MAX_NOTE_BYTES {
                    continue;
                }
                let at = i64::try_from(at).unwrap_or(i64::MAX);
                insert
                    .execute(params![event.id.to_hex(), event.pubkey.to_hex(), at, json])
                    .map_err(|e| self.err(e))?;
            }
            let mut mark = tx
                .prepare("INSERT OR REPLACE INTO marks (relay, at, authors) VALUES (?1, ?2, ?3)")
                .map_err(|e| self.err(e))?;
            for m in marks {
                if m.at > horizon || m.authors.is_empty() || m.authors.len() > MAX_MARK_AUTHORS {
                    continue;
                }
                let authors: Vec<String> = m.authors.iter().map(|a| a.to_hex()).collect();
                let at = i64::try_from(m.at).unwrap_or(i64::MAX);
                mark.execute(params![m.relay, at, authors.join(",")])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.execute(
            "DELETE FROM notes WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() OVER
                 (PARTITION BY author ORDER BY created_at DESC, id) AS n FROM notes) WHERE n > ?1)",
            params![NOTES_PER_FOLLOW as i64],
        )
        .map_err(|e| self.err(e))?;
        tx.execute(
            "DELETE FROM notes WHERE id NOT IN
                 (SELECT id FROM notes ORDER BY created_at DESC, id LIMIT ?1)",
            params![MAX_NOTES as i64],
        )
        .map_err(|e| self.err(e))?;
        tx.execute(
            "DELETE FROM marks WHERE relay NOT IN
                 (SELECT relay FROM marks ORDER BY at DESC, relay LIMIT ?1)",
            params![MAX_MARKS as i64],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// Forgets every kept note and mark (the file stays, empty). Nothing to do without a
    /// file. Blocking.
    pub fn clear(&self) -> Result<(), NotesError> {
        if !self.path.exists() {
            return Ok(());
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(NotesError::Io {
                    path: self.path.clone(),
                    source,
                })
            }
        }
        for suffix in ["-journal", "-wal", "-shm"] {
            let mut p = self.path.as_os_str().to_owned();
            p.push(suffix);
            let _ = std::fs::remove_file(PathBuf::from(p));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent};
    use nostr::key::{Keys, SecretKey};
    use nostr::types::Timestamp;

    fn note(keys: &Keys, text: &str, at: u64) -> Event {
        EventBuilder::new(nostr::event::Kind::TextNote, text)
            .custom_created_at(Timestamp::from(at))
            .finalize(keys)
            .unwrap()
    }

    fn keys(byte: u8) -> Keys {
        Keys::new(SecretKey::from_slice(&[byte; 32]).unwrap())
    }

    #[test]
    fn notes_and_marks_come_back_bounded_per_follow_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let store = NotesStore::new(notes_path_beside(&dir.path().join("stats.json")));
        assert!(
            store.load(1_000).unwrap().notes.is_empty(),
            "no file: nothing"
        );
        let (a, b) = (keys(1), keys(2));
        let mut notes: Vec<Event> = (0..30).map(|n| note(&a, "a", 100 + n)).collect();
        notes.push(note(&b, "b", 50));
        // Dated far ahead: not kept.
        notes.push(note(&b, "future", 1_000 + FUTURE_TOLERANCE_SECS + 1));
        let mark = KeptMark {
            relay: "wss://r.example".into(),
            at: 900,
            authors: vec![a.public_key(), b.public_key()],
        };
        store
            .save(&notes, std::slice::from_ref(&mark), 1_000)
            .unwrap();
        let kept = store.load(1_000).unwrap();
        assert_eq!(kept.notes.len(), NOTES_PER_FOLLOW + 1);
        assert_eq!(kept.notes[0].content, "b", "oldest first");
        let newest_a = kept.notes.iter().filter(|e| e.pubkey == a.public_key());
        assert!(newest_a.clone().all(|e| e.created_at.as_secs() >= 110));
        assert_eq!(newest_a.count(), NOTES_PER_FOLLOW);
        assert_eq!(kept.marks, vec![mark]);
        assert_eq!(kept.dropped, 0);

        // A tampered row and a mark dated ahead are dropped on load, without a panic.
        let conn = Connection::open(store.path()).unwrap();
        conn.execute(
            "UPDATE notes SET json = replace(json, '\"a\"', '\"z\"') WHERE created_at = 129",
            [],
        )
        .unwrap();
        conn.execute("INSERT INTO notes VALUES ('x', 'y', 5, 'not json')", [])
            .unwrap();
        conn.execute(
            "INSERT INTO marks VALUES ('wss://f.example', 99999999999, ?1)",
            [a.public_key().to_hex()],
        )
        .unwrap();
        conn.execute("INSERT INTO marks VALUES ('wss://g.example', 5, 'zz')", [])
            .unwrap();
        let kept = store.load(1_000).unwrap();
        assert_eq!(kept.notes.len(), NOTES_PER_FOLLOW);
        assert!(kept.notes.iter().all(|e| e.content != "z"));
        assert_eq!(kept.marks.len(), 1);
        assert_eq!(kept.dropped, 4);

        store.clear().unwrap();
        assert!(!store.path().exists());
        let kept = store.load(1_000).unwrap();
        assert!(kept.notes.is_empty() && kept.marks.is_empty());
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.notes.sqlite");
        std::fs::write(&path, b"garbage, not sqlite at all").unwrap();
        let store = NotesStore::new(&path);
        assert!(store.load(1_000).is_err());
        store.clear().unwrap();
        assert!(store.load(1_000).unwrap().notes.is_empty());
    }
}

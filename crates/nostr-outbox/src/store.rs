//! Where learned state is kept: the `--stats`, `--store` and `--data-dir` options shared by
//! `outbox feed` and `outbox stats`, and opening the store they name.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use nostr_outbox_client::StateStore;
use nostr_outbox_stats::{FileStore, SqliteStore};

/// The options naming a store.
#[derive(Debug, clap::Args)]
pub struct StoreArgs {
    /// Learned relay stats (JSON file); `outbox feed` reads it at start and writes it on a
    /// timer and at the end. The relays set aside and the relay lists are kept beside it (`FILE.penalties.json`,
    /// `FILE.lists.json`). Default: `stats.json` in the data directory. Same as
    /// `--store file:FILE`.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Where to keep stats, set-aside relays and relay lists: `file:FILE` (JSON files, as
    /// `--stats`) or `sqlite:PATH` (one SQLite database; `sqlite` alone: `outbox.sqlite` in
    /// the data directory). Default: JSON files in the data directory.
    #[arg(long, value_parser = parse_store, conflicts_with = "stats")]
    pub store: Option<StoreArg>,
    /// Where stats, set-aside relays and relay lists are kept by default (default: the
    /// platform's data directory, e.g. `~/.local/share/outbox`).
    #[arg(long, env = "OUTBOX_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// A `--store` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreArg {
    /// JSON files: the stats file, with the lists and penalties beside it.
    File(PathBuf),
    /// One SQLite database; `None`: in the data directory.
    Sqlite(Option<PathBuf>),
}

pub(crate) fn parse_store(raw: &str) -> Result<StoreArg, String> {
    let (kind, path) = raw.split_once(':').unwrap_or((raw, ""));
    match (kind, path) {
        ("sqlite", "") => Ok(StoreArg::Sqlite(None)),
        ("sqlite", path) => Ok(StoreArg::Sqlite(Some(PathBuf::from(path)))),
        ("file", "") => Err("file: needs a path (file:FILE)".into()),
        ("file", path) => Ok(StoreArg::File(PathBuf::from(path))),
        _ => Err(format!(
            "{} is not a store: use file:FILE, sqlite:PATH or sqlite",
            crate::text::quoted_arg(raw)
        )),
    }
}

/// A store resolved to where it lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// JSON files: the stats file, with the lists and penalties beside it.
    File(PathBuf),
    /// One SQLite database.
    Sqlite(PathBuf),
}

impl Location {
    /// Whether anything was ever kept there.
    pub fn exists(&self) -> bool {
        match self {
            Location::Sqlite(path) => path.exists(),
            Location::File(path) => {
                let beside = |suffix: &str| {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    PathBuf::from(p).exists()
                };
                path.exists() || beside(".penalties.json") || beside(".lists.json")
            }
        }
    }

    /// The notes file beside the store: the newest notes per follow and per-relay marks a
    /// feed kept (`STORE.notes.sqlite`).
    pub fn notes_path(&self) -> PathBuf {
        match self {
            Location::File(path) | Location::Sqlite(path) => {
                nostr_outbox_stats::notes::notes_path_beside(path)
            }
        }
    }

    /// The store kept here.
    pub fn open(&self) -> Arc<dyn StateStore> {
        match self {
            Location::File(path) => Arc::new(FileStore::new(path)),
            Location::Sqlite(path) => Arc::new(SqliteStore::new(path)),
        }
    }

    /// The store kept here, only to be read: nothing is moved aside, written or created.
    pub fn open_read_only(&self) -> Arc<dyn StateStore> {
        match self {
            Location::File(path) => Arc::new(FileStore::read_only(path)),
            Location::Sqlite(path) => Arc::new(SqliteStore::read_only(path)),
        }
    }
}

impl StoreArgs {
    /// Where the store is: `--store`, `--stats`, else JSON files in the data directory (created
    /// if missing when `create`).
    pub fn location(&self, create: bool) -> anyhow::Result<Location> {
        Ok(match (&self.store, &self.stats) {
            (Some(StoreArg::File(path)), _) | (None, Some(path)) => Location::File(path.clone()),
            (Some(StoreArg::Sqlite(Some(path))), _) => Location::Sqlite(path.clone()),
            (Some(StoreArg::Sqlite(None)), _) => {
                Location::Sqlite(self.data_dir(create)?.join("outbox.sqlite"))
            }
            (None, None) => Location::File(self.data_dir(create)?.join("stats.json")),
        })
    }

    /// The store, its data directory created if missing.
    pub fn open(&self) -> anyhow::Result<Arc<dyn StateStore>> {
        Ok(self.location(true)?.open())
    }

    /// `--data-dir`, else the platform's data directory; created if missing when `create`.
    fn data_dir(&self, create: bool) -> anyhow::Result<PathBuf> {
        let dir = match &self.data_dir {
            Some(dir) => dir.clone(),
            None => directories::ProjectDirs::from("", "", "outbox")
                .context("no home directory to keep stats in: give --stats FILE or --no-stats")?
                .data_dir()
                .to_path_buf(),
        };
        if create {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating the data directory {}", dir.display()))?;
        }
        Ok(dir)
    }
}

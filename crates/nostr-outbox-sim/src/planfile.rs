//! The `outbox-plan/1` file: a plan written down by canonical URL and public key, so any tool
//! can read it, write it and score it against a world (see `docs/formats.md`), and its
//! conversions to and from [`Asks`], the plan in world terms a file is scored as.

use nostr::types::RelayUrl;
use nostr_outbox_core::{Plan, RouteTable, UrlPolicy};
use serde::{Deserialize, Serialize};

use crate::asks::{Ask, Asks};
use crate::sim_world::SimWorld;

/// The file format tag of plan files.
pub const PLAN_FORMAT: &str = "outbox-plan/1";

/// An `outbox-plan/1` file: what any tool can read, write and score against a world.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFile {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    /// The strategy that made the plan.
    pub strategy: String,
    /// The 0-based session the plan was made for.
    pub session: u32,
    /// One entry per connection.
    pub relays: Vec<PlanFileEntry>,
}

/// One connection of a plan file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFileEntry {
    /// Canonical relay URL.
    pub url: String,
    /// Hex public keys named in the relay's filter.
    pub authors: Vec<String>,
}

/// A plan file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    /// Not JSON, or a required field is missing or has the wrong type.
    #[error("plan file: {0}")]
    Json(#[from] serde_json::Error),
    /// The `format` field is not `outbox-plan/1`.
    #[error("plan file: field `format` is {0:?}, expected \"outbox-plan/1\"")]
    Format(String),
    /// A field holds a malformed value.
    #[error("plan file: field `{field}`: {message}")]
    Invalid {
        /// The JSON path of the field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl PlanFileEntry {
    /// A connection to `url` asking about `authors` (hex public keys).
    pub fn new(url: impl Into<String>, authors: impl IntoIterator<Item: Into<String>>) -> Self {
        Self {
            url: url.into(),
            authors: authors.into_iter().map(Into::into).collect(),
        }
    }
}

impl PlanFile {
    /// The plan of `strategy` for `session` that asks `relays`.
    pub fn new(strategy: impl Into<String>, session: u32, relays: Vec<PlanFileEntry>) -> Self {
        PlanFile {
            format: PLAN_FORMAT.to_string(),
            strategy: strategy.into(),
            session,
            relays,
        }
    }

    /// `plan` (made from `table`) as a file for `session`.
    pub fn from_plan(plan: &Plan, table: &RouteTable, session: u32) -> Self {
        let relays = plan.entries(table).into_iter().map(|e| {
            let authors = e.authors.iter().map(|&a| table.pubkey(a).to_hex());
            PlanFileEntry::new(table.url(e.relay), authors)
        });
        PlanFile::new(plan.strategy(), session, relays.collect())
    }

    /// Reads and validates a plan file (unknown fields are ignored).
    pub fn from_json(text: &str) -> Result<Self, PlanFileError> {
        let file: PlanFile = serde_json::from_str(text)?;
        if file.format != PLAN_FORMAT {
            return Err(PlanFileError::Format(file.format));
        }
        for (i, entry) in file.relays.iter().enumerate() {
            if RelayUrl::parse(&entry.url).is_err() {
                return Err(PlanFileError::Invalid {
                    field: format!("relays[{i}].url"),
                    message: format!("not a relay url: {:?}", truncate(&entry.url)),
                });
            }
            for (j, author) in entry.authors.iter().enumerate() {
                if let Err(e) = nostr_outbox_core::keys::public_key_from_hex(author) {
                    return Err(PlanFileError::Invalid {
                        field: format!("relays[{i}].authors[{j}]"),
                        message: format!("{e}: {:?}", truncate(author)),
                    });
                }
            }
        }
        Ok(file)
    }

    /// The file as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plan files always serialise")
    }

    /// Number of connections.
    pub fn connections(&self) -> usize {
        self.relays.len()
    }

    /// Sum of author-list lengths.
    pub fn disclosure(&self) -> usize {
        self.relays.iter().map(|r| r.authors.len()).sum()
    }
}

/// A plan file that cannot be scored against a world.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// An author is not a valid public key.
    #[error("plan: field `relays[{entry}].authors[{index}]`: not a hex public key")]
    BadAuthor {
        /// Entry index.
        entry: usize,
        /// Author index.
        index: usize,
    },
}

// Plan files and asks convert here, both ways, so the asks know nothing of files.
impl PlanFile {
    /// What `asks` asked in `session` (the plan of `strategy`, with any re-plans around
    /// failures merged in), as a file: one entry per relay asked, in the order first asked.
    pub fn from_asks(asks: &Asks, sim: &SimWorld, strategy: &str, session: u32) -> Self {
        let follows = &sim.world.follows;
        let relays = asks.entries.iter().map(|a| {
            let authors = (a.authors.iter())
                .filter_map(|&f| follows.get(f as usize))
                .map(|pk| pk.to_hex());
            PlanFileEntry::new(a.url.clone(), authors)
        });
        PlanFile::new(strategy, session, relays.collect())
    }
}

impl Asks {
    /// The asks of an `outbox-plan/1` file. URLs are looked up as given, then canonicalised.
    pub fn from_plan_file(sim: &SimWorld, file: &PlanFile) -> Result<Self, ScoreError> {
        let policy = UrlPolicy::default();
        let mut foreign = 0;
        let mut entries = Vec::with_capacity(file.relays.len());
        for (i, e) in file.relays.iter().enumerate() {
            let relay = sim.world.relay_id(&e.url).or_else(|| {
                policy
                    .canonicalize(&e.url)
                    .ok()
                    .and_then(|c| sim.world.relay_id(&c))
            });
            let mut authors = Vec::with_capacity(e.authors.len());
            for (j, hex) in e.authors.iter().enumerate() {
                let pk = nostr_outbox_core::public_key_from_hex(hex)
                    .map_err(|_| ScoreError::BadAuthor { entry: i, index: j })?;
                match sim.table.author_id(&pk) {
                    Some(a) => authors.push(a.0),
                    None => foreign += 1,
                }
            }
            authors.sort_unstable();
            authors.dedup();
            entries.push(Ask {
                url: e.url.clone(),
                relay,
                authors,
            });
        }
        Ok(Self {
            entries,
            orphans: None,
            foreign_authors: foreign,
        })
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

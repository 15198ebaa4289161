//! Plans: per-relay REQ filters, the residual on the reader's relays, and the `outbox-plan/1`
//! file format.

use std::collections::BTreeMap;

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::types::{RelayUrl, Timestamp};
use serde::{Deserialize, Serialize};

use crate::ids::{AuthorId, RelayId};
use crate::route_table::RouteTable;
use crate::selector::{Assignment, Selection};

/// The file format tag of plan files.
pub const PLAN_FORMAT: &str = "outbox-plan/1";

/// A selection made concrete: which relay is asked about which follows.
///
/// Routed relays are asked about the follows assigned to them; every follow no routed relay
/// covers is the **residual** and is asked of the reader's own relays. A table without any
/// lists therefore yields a plan that asks the reader's relays about everyone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    strategy: String,
    routed: Vec<Assignment>,
    residual: Vec<AuthorId>,
    pool: Vec<RelayId>,
}

/// One connection of a plan: a relay and the authors of its one filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanEntry {
    /// The relay.
    pub relay: RelayId,
    /// The authors named in its filter, in id order, no duplicates.
    pub authors: Vec<AuthorId>,
}

impl Plan {
    /// Builds the plan for `selection`: routed assignments (empty ones dropped, authors sorted
    /// and de-duplicated) plus the residual on the reader's relays.
    pub fn from_selection(table: &RouteTable, strategy: &str, selection: Selection) -> Self {
        let mut covered = vec![false; table.follow_count()];
        let mut routed: Vec<Assignment> = Vec::with_capacity(selection.assignments.len());
        for mut a in selection.assignments {
            a.authors.sort_unstable();
            a.authors.dedup();
            if a.authors.is_empty() {
                continue;
            }
            for author in &a.authors {
                if let Some(c) = covered.get_mut(author.index()) {
                    *c = true;
                }
            }
            routed.push(a);
        }
        routed.sort_by_key(|a| table.url_rank(a.relay));
        // A selector that named one relay twice gets one merged filter.
        routed.dedup_by(|later, first| {
            if later.relay != first.relay {
                return false;
            }
            first.authors.append(&mut later.authors);
            first.authors.sort_unstable();
            first.authors.dedup();
            true
        });
        let residual: Vec<AuthorId> = table.authors().filter(|a| !covered[a.index()]).collect();
        let pool = if residual.is_empty() {
            Vec::new()
        } else {
            table.reader_relays().to_vec()
        };
        Self {
            strategy: strategy.to_string(),
            routed,
            residual,
            pool,
        }
    }

    /// The same plan with the residual carried by at most `limit` of the reader's relays: the
    /// first ones in the reader's order, and never fewer than one while there is a residual
    /// (the residual must be asked of someone). The routed budget is a separate count.
    pub fn with_pool_limit(mut self, limit: usize) -> Self {
        self.pool.truncate(limit.max(1));
        self
    }

    /// A plan exactly as given, skipping the normalisation of
    /// [`from_selection`](Self::from_selection): for tests of the invariant checker only.
    #[cfg(test)]
    pub(crate) fn raw(
        routed: Vec<Assignment>,
        residual: Vec<AuthorId>,
        pool: Vec<RelayId>,
    ) -> Self {
        Self {
            strategy: "raw".to_string(),
            routed,
            residual,
            pool,
        }
    }

    /// The strategy that made the plan.
    pub fn strategy(&self) -> &str {
        &self.strategy
    }

    /// The routed relays and their authors, sorted by URL.
    pub fn routed(&self) -> &[Assignment] {
        &self.routed
    }

    /// Follows no routed relay covers; asked of the reader's relays.
    pub fn residual(&self) -> &[AuthorId] {
        &self.residual
    }

    /// The reader's relays that carry the residual (empty when there is no residual).
    pub fn pool(&self) -> &[RelayId] {
        &self.pool
    }

    /// Every connection with the merged filter it receives (a reader relay that is also routed
    /// gets one filter naming both its routed authors and the residual), sorted by URL.
    pub fn entries(&self, table: &RouteTable) -> Vec<PlanEntry> {
        let mut merged: BTreeMap<&str, PlanEntry> = BTreeMap::new();
        for a in &self.routed {
            merged.insert(
                table.url(a.relay),
                PlanEntry {
                    relay: a.relay,
                    authors: a.authors.clone(),
                },
            );
        }
        for &relay in &self.pool {
            let entry = merged.entry(table.url(relay)).or_insert_with(|| PlanEntry {
                relay,
                authors: Vec::new(),
            });
            entry.authors.extend_from_slice(&self.residual);
            entry.authors.sort_unstable();
            entry.authors.dedup();
        }
        merged.into_values().collect()
    }

    /// Number of connections the plan opens.
    pub fn connections(&self, table: &RouteTable) -> usize {
        self.entries(table).len()
    }

    /// Sum of author-list lengths over all connections: how much of the follow list the relays
    /// learn in total.
    pub fn disclosure(&self, table: &RouteTable) -> usize {
        self.entries(table).iter().map(|e| e.authors.len()).sum()
    }

    /// The relays asked about `author`.
    pub fn asked(&self, author: AuthorId) -> Vec<RelayId> {
        let mut out: Vec<RelayId> = self
            .routed
            .iter()
            .filter(|a| a.authors.binary_search(&author).is_ok())
            .map(|a| a.relay)
            .collect();
        if self.residual.binary_search(&author).is_ok() {
            out.extend(self.pool.iter().copied());
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The REQ filters to send: one per connection, for `kinds` and an optional `since`.
    ///
    /// URLs in a route table are canonical and already validated, so they always parse; an
    /// entry that somehow does not is skipped with a trace event rather than sent anywhere.
    pub fn to_filters(
        &self,
        table: &RouteTable,
        kinds: &[Kind],
        since: Option<Timestamp>,
    ) -> Vec<(RelayUrl, Filter)> {
        self.entries(table)
            .into_iter()
            .filter_map(|e| {
                let url = match RelayUrl::parse(table.url(e.relay)) {
                    Ok(url) => url,
                    Err(err) => {
                        tracing::warn!(url = table.url(e.relay), %err, "skipping unparsable relay url");
                        return None;
                    }
                };
                let mut filter = Filter::new()
                    .authors(e.authors.iter().map(|&a| *table.pubkey(a)))
                    .kinds(kinds.iter().copied());
                if let Some(since) = since {
                    filter = filter.since(since);
                }
                Some((url, filter))
            })
            .collect()
    }

    /// The plan as an `outbox-plan/1` file for `session`.
    pub fn to_file(&self, table: &RouteTable, session: u32) -> PlanFile {
        PlanFile {
            format: PLAN_FORMAT.to_string(),
            strategy: self.strategy.clone(),
            session,
            relays: self
                .entries(table)
                .into_iter()
                .map(|e| PlanFileEntry {
                    url: table.url(e.relay).to_string(),
                    authors: e
                        .authors
                        .iter()
                        .map(|&a| table.pubkey(a).to_hex())
                        .collect(),
                })
                .collect(),
        }
    }
}

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

impl PlanFile {
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
                if let Err(e) = crate::keys::public_key_from_hex(author) {
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

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url_policy::UrlPolicy;
    use nostr::key::{Keys, PublicKey};

    #[test]
    fn pool_limit_keeps_the_first_reader_relays_and_never_fewer_than_one() {
        let follows: Vec<PublicKey> = (0..3).map(|_| Keys::generate().public_key()).collect();
        let homes = ["wss://h1.example", "wss://h2.example", "wss://h3.example"];
        let table = RouteTable::without_lists(UrlPolicy::default(), follows, homes);
        let plan = Plan::from_selection(&table, "none", Selection::default());
        assert_eq!(plan.pool().len(), 3);
        let two = plan.clone().with_pool_limit(2);
        let urls: Vec<&str> = two.pool().iter().map(|&r| table.url(r)).collect();
        assert_eq!(urls, ["wss://h1.example", "wss://h2.example"]);
        assert_eq!(two.connections(&table), 2);
        assert_eq!(plan.clone().with_pool_limit(0).pool().len(), 1);
        assert_eq!(plan.with_pool_limit(10).pool().len(), 3);
    }
}

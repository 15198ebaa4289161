//! Plans: per-relay REQ filters and the residual on the reader's relays.

use std::collections::BTreeMap;

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::types::{RelayUrl, Timestamp};

use crate::ids::{AuthorId, RelayId};
use crate::route_table::RouteTable;
use crate::selector::{Assignment, Selection};

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

/// How many relays a plan tells about each follow (each learns the reader follows them).
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Disclosure {
    /// Relays told about a follow, on average over the follows.
    pub mean: f64,
    /// The most relays told about one follow.
    pub max: u32,
}

impl std::fmt::Display for Disclosure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.2} relays per follow (at most {})",
            self.mean, self.max
        )
    }
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

    /// Routed relays that count against the budget: those not among the reader's relays that
    /// carry the residual under `pool_limit` ([`RouteTable::pool`]), which are connected anyway.
    pub fn routed_beyond_pool(&self, table: &RouteTable, pool_limit: Option<usize>) -> usize {
        let pool = table.pool(pool_limit);
        self.routed
            .iter()
            .filter(|a| !pool.contains(&a.relay))
            .count()
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

    /// How many relays are told about each follow of `table` (each relay whose filter names
    /// them, the residual's included): the mean over the follows and the most.
    pub fn disclosure_per_follow(&self, table: &RouteTable) -> Disclosure {
        let mut told = vec![0u32; table.authors().len()];
        for entry in self.entries(table) {
            for a in entry.authors {
                if let Some(n) = told.get_mut(a.index()) {
                    *n = n.saturating_add(1);
                }
            }
        }
        let total: u64 = told.iter().map(|&n| u64::from(n)).sum();
        Disclosure {
            mean: if told.is_empty() {
                0.0
            } else {
                total as f64 / told.len() as f64
            },
            max: told.iter().copied().max().unwrap_or(0),
        }
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

    #[test]
    fn disclosure_counts_the_relays_told_about_each_follow() {
        let follows: Vec<PublicKey> = (0..4).map(|_| Keys::generate().public_key()).collect();
        let homes = ["wss://h1.example", "wss://h2.example"];
        let table = RouteTable::without_lists(UrlPolicy::default(), follows, homes);
        // Every follow is the residual's, on both reader relays.
        let plan = Plan::from_selection(&table, "none", Selection::default());
        assert_eq!(
            plan.disclosure_per_follow(&table),
            Disclosure { mean: 2.0, max: 2 }
        );
        let one = plan.with_pool_limit(1);
        assert_eq!(
            one.disclosure_per_follow(&table),
            Disclosure { mean: 1.0, max: 1 }
        );
        assert_eq!(
            one.disclosure(&table),
            4,
            "the total is the sum over follows"
        );
    }
}

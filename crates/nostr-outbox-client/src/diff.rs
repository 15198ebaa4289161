//! Plan diffs and per-slot generations: applying a new plan touches only what changed.
//!
//! Route tables are rebuilt as relay lists arrive, so interned ids are not stable between plans.
//! Slots are therefore keyed by canonical relay URL and hold public keys. Each slot carries a
//! generation that changes only when its own filter changes: one relay's change never redials or
//! re-subscribes the others, and a changed filter is replaced in place (REQ again under the same
//! subscription id).

use std::collections::{BTreeMap, BTreeSet};

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;

use nostr_outbox_core::plan::Plan;
use nostr_outbox_core::route_table::RouteTable;

/// One connection slot: a relay, the authors of its filter and the filter's generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Canonical relay URL.
    pub url: String,
    /// Authors named in the filter, sorted.
    pub authors: Vec<PublicKey>,
    /// Bumped each time this slot's filter changes; starts at 1 when the slot is dialled.
    pub generation: u64,
}

impl Slot {
    /// The REQ filter of this slot: its authors, on `kinds`, from `since` — what a pool that
    /// applies [`PlanDiff`]s sends when it dials or replaces this slot.
    pub fn filter(&self, kinds: &[Kind], since: Option<Timestamp>) -> Filter {
        let mut filter = Filter::new()
            .authors(self.authors.iter().copied())
            .kinds(kinds.iter().copied());
        if let Some(since) = since {
            filter = filter.since(since);
        }
        filter
    }
}

/// What applying a new plan does to the open slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanDiff {
    /// New relays to connect to (with their first filter).
    pub dial: Vec<String>,
    /// Relays no longer in the plan: close their subscription and socket.
    pub close: Vec<String>,
    /// Relays whose filter changed: re-send REQ under the same subscription id.
    pub replace: Vec<String>,
    /// Relays whose filter is the same: leave them alone.
    pub unchanged: Vec<String>,
}

impl PlanDiff {
    /// Whether applying the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.dial.is_empty() && self.close.is_empty() && self.replace.is_empty()
    }
}

/// The open slots of one reader's feed, keyed by relay URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slots {
    slots: BTreeMap<String, Slot>,
}

impl Slots {
    /// No open slots.
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot for a relay, if open.
    pub fn get(&self, url: &str) -> Option<&Slot> {
        self.slots.get(url)
    }

    /// Every open slot, by URL.
    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.slots.values()
    }

    /// Number of open slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no slot is open.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The diff that applying `plan` would cause, without applying it.
    pub fn diff(&self, plan: &Plan, table: &RouteTable) -> PlanDiff {
        diff_slots(&self.slots, &wanted(plan, table))
    }

    /// Applies `plan`: opens, closes and updates slots, bumping the generation of exactly the
    /// slots whose filter changed, and returns what changed.
    pub fn apply(&mut self, plan: &Plan, table: &RouteTable) -> PlanDiff {
        let wanted = wanted(plan, table);
        let diff = diff_slots(&self.slots, &wanted);
        for url in &diff.close {
            self.slots.remove(url);
        }
        for url in &diff.dial {
            self.slots.insert(
                url.clone(),
                Slot {
                    url: url.clone(),
                    authors: wanted[url].clone(),
                    generation: 1,
                },
            );
        }
        for url in &diff.replace {
            if let Some(slot) = self.slots.get_mut(url) {
                slot.authors = wanted[url].clone();
                slot.generation += 1;
            }
        }
        diff
    }
}

fn wanted(plan: &Plan, table: &RouteTable) -> BTreeMap<String, Vec<PublicKey>> {
    plan.entries(table)
        .into_iter()
        .map(|e| {
            let mut authors: Vec<PublicKey> = e.authors.iter().map(|&a| *table.pubkey(a)).collect();
            authors.sort_unstable();
            (table.url(e.relay).to_string(), authors)
        })
        .collect()
}

fn diff_slots(
    current: &BTreeMap<String, Slot>,
    wanted: &BTreeMap<String, Vec<PublicKey>>,
) -> PlanDiff {
    let mut diff = PlanDiff::default();
    let urls: BTreeSet<&String> = current.keys().chain(wanted.keys()).collect();
    for url in urls {
        match (current.get(url), wanted.get(url)) {
            (Some(_), None) => diff.close.push(url.clone()),
            (None, Some(_)) => diff.dial.push(url.clone()),
            (Some(slot), Some(authors)) if &slot.authors == authors => {
                diff.unchanged.push(url.clone())
            }
            (Some(_), Some(_)) => diff.replace.push(url.clone()),
            (None, None) => {}
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::key::{Keys, SecretKey};
    use nostr_outbox_core::route_table::{RawRelayList, RouteTableBuilder};
    use nostr_outbox_core::selector::{Assignment, Selection};
    use nostr_outbox_core::url_policy::UrlPolicy;
    use nostr_outbox_core::{AuthorId, RelayId};

    fn key(n: u8) -> PublicKey {
        let mut sk = [7u8; 32];
        sk[31] = n;
        Keys::new(SecretKey::from_slice(&sk).unwrap()).public_key()
    }

    fn table(lists: &[(u8, &[&str])]) -> RouteTable {
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows(lists.iter().map(|(k, _)| key(*k)))
            .reader_relays(["wss://home.example"]);
        for (k, relays) in lists {
            b.add_list(RawRelayList {
                author: key(*k),
                created_at: 1,
                tags: relays
                    .iter()
                    .map(|r| vec!["r".into(), r.to_string()])
                    .collect(),
            });
        }
        b.build()
    }

    fn route_all(t: &RouteTable) -> Plan {
        let assignments = t
            .relays()
            .filter(|&r| t.popularity(r) > 0)
            .map(|r: RelayId| Assignment {
                relay: r,
                authors: t.writers(r).to_vec(),
            })
            .collect();
        Plan::from_selection(t, "all", Selection { assignments })
    }

    #[test]
    fn only_changed_slots_get_a_new_generation() {
        let t1 = table(&[
            (1, &["wss://a.example"]),
            (2, &["wss://b.example"]),
            (3, &["wss://c.example"]),
        ]);
        let mut slots = Slots::new();
        let first = slots.apply(&route_all(&t1), &t1);
        assert_eq!(
            first.dial,
            ["wss://a.example", "wss://b.example", "wss://c.example"]
        );

        // Author 2 moves from b to a; c is untouched; a new relay d appears; b disappears.
        let t2 = table(&[
            (1, &["wss://a.example"]),
            (2, &["wss://a.example"]),
            (3, &["wss://c.example"]),
            (4, &["wss://d.example"]),
        ]);
        let diff = slots.apply(&route_all(&t2), &t2);
        assert_eq!(diff.dial, ["wss://d.example"]);
        assert_eq!(diff.close, ["wss://b.example"]);
        assert_eq!(diff.replace, ["wss://a.example"]);
        assert_eq!(diff.unchanged, ["wss://c.example"]);
        assert_eq!(slots.get("wss://a.example").unwrap().generation, 2);
        assert_eq!(slots.get("wss://c.example").unwrap().generation, 1);
        assert!(slots.diff(&route_all(&t2), &t2).is_empty());
        let _ = AuthorId(0);
    }

    #[test]
    fn a_slots_filter_is_the_plans_filter_for_its_relay() {
        let t = table(&[
            (1, &["wss://a.example"]),
            (2, &["wss://a.example", "wss://b.example"]),
        ]);
        let plan = route_all(&t);
        let mut slots = Slots::new();
        slots.apply(&plan, &t);
        let since = Some(Timestamp::from_secs(1_700_000_000));
        let kinds = [Kind::TextNote, Kind::Repost];
        let filters = plan.to_filters(&t, &kinds, since);
        assert!(!filters.is_empty());
        for (url, filter) in filters {
            let slot = slots.get(url.as_str_without_trailing_slash()).unwrap();
            assert_eq!(slot.filter(&kinds, since), filter, "{url}");
        }
    }
}

//! The relay directory: where anyone — follow or not — writes, reads and takes direct messages.
//!
//! The route table knows only follows and only their write relays, which is all a feed needs.
//! Inbox reads, threads, pointers and publishing also reach people the reader does not follow
//! (tagged people, thread participants, message recipients) and use the other markers: NIP-65
//! `read` relays and NIP-17 kind:10050 DM inbox relays. The directory keeps all three per
//! person, canonical under the same [`UrlPolicy`] and counted in the same [`DropReport`] as the
//! route table, each list kept as a [`RawRelayList`] as the route table keeps them (the
//! directory reads kind:10050 events too, so it makes them from the events itself). The newest
//! list per person and kind wins; how many people it holds is bounded.

use std::collections::HashMap;

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;
use serde::Serialize;

use nostr_outbox_core::route_table::{keep_newest, parse_r_tag, DropReport, RawRelayList};
use nostr_outbox_core::url_policy::{DropReason, UrlPolicy};

/// The most people a directory holds by default: lists of further people are counted and
/// ignored, so a flood of lists cannot grow it without bound.
pub const MAX_DIRECTORY_PEOPLE: usize = 200_000;

/// One person's relays, canonical, each list in its own order and capped at the policy's list
/// cap ([`UrlPolicy::max_write_relays`], applied to every marker alike).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PersonRelays {
    /// Where the person writes (kind:10002 `write` or unmarked): where their events are.
    pub write: Vec<String>,
    /// Where the person reads (kind:10002 `read` or unmarked): where mentions of them go.
    pub read: Vec<String>,
    /// Where the person takes NIP-17 direct messages (kind:10050 `relay` tags).
    pub dm: Vec<String>,
}

/// Why an event is not a list the directory reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotADirectoryList {
    /// Neither a kind:10002 relay list nor a kind:10050 DM inbox list.
    #[error("kind {0} is neither a kind:10002 relay list nor a kind:10050 DM inbox list")]
    WrongKind(u16),
    /// The event's id or signature does not verify.
    #[error("the event's id or signature does not verify")]
    Unverified,
}

/// Collects relay lists and DM inbox lists (newest per person and kind), then builds a
/// [`RelayDirectory`]. Calls may come in any order.
#[derive(Debug)]
pub struct RelayDirectoryBuilder {
    policy: UrlPolicy,
    max_people: usize,
    relay_lists: HashMap<PublicKey, RawRelayList>,
    dm_lists: HashMap<PublicKey, RawRelayList>,
    /// Distinct people with a kept list of either kind.
    people: usize,
    report: DropReport,
    over_capacity: u64,
}

impl RelayDirectoryBuilder {
    /// A builder that reads URLs under `policy`, holding at most [`MAX_DIRECTORY_PEOPLE`].
    pub fn new(policy: UrlPolicy) -> Self {
        Self {
            policy,
            max_people: MAX_DIRECTORY_PEOPLE,
            relay_lists: HashMap::new(),
            dm_lists: HashMap::new(),
            people: 0,
            report: DropReport::default(),
            over_capacity: 0,
        }
    }

    /// Holds at most `max_people` people; lists of others are counted and ignored.
    pub fn max_people(mut self, max_people: usize) -> Self {
        self.max_people = max_people;
        self
    }

    /// Whether a list of `author` may be kept: the person is known, or there is room.
    fn admits(&mut self, author: &PublicKey) -> bool {
        if self.relay_lists.contains_key(author) || self.dm_lists.contains_key(author) {
            return true;
        }
        if self.people < self.max_people {
            self.people += 1;
            return true;
        }
        self.over_capacity += 1;
        false
    }

    /// Adds a kind:10002 list (raw `r` tags); the newest per person wins, the first seen on a
    /// tie.
    pub fn add_relay_list(&mut self, list: RawRelayList) {
        if self.admits(&list.author) {
            keep_newest(&mut self.relay_lists, list, &mut self.report);
        }
    }

    /// Adds a kind:10050 DM inbox list (raw `relay` tags); the newest per person wins.
    pub fn add_dm_list(&mut self, list: RawRelayList) {
        if self.admits(&list.author) {
            keep_newest(&mut self.dm_lists, list, &mut self.report);
        }
    }

    /// Adds a signed kind:10002 or kind:10050 event after verifying it; anything else is
    /// counted as rejected and returned as the reason.
    pub fn add_event(&mut self, event: &Event) -> Result<(), NotADirectoryList> {
        let result = match event.kind {
            Kind::RelayList | Kind::InboxRelays => event
                .verify()
                .map_err(|_| NotADirectoryList::Unverified)
                .map(|()| self.add_verified(event)),
            other => Err(NotADirectoryList::WrongKind(other.as_u16())),
        };
        if result.is_err() {
            self.report.rejected_events += 1;
        }
        result
    }

    /// Adds an event whose id and signature were already verified (only its kind is read).
    pub fn add_verified(&mut self, event: &Event) {
        let list = RawRelayList {
            author: event.pubkey,
            created_at: event.created_at.as_secs(),
            tags: event.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
        };
        match event.kind {
            Kind::RelayList => self.add_relay_list(list),
            Kind::InboxRelays => self.add_dm_list(list),
            _ => self.report.rejected_events += 1,
        }
    }

    /// Validates every kept list under the policy and builds the directory.
    pub fn build(self) -> RelayDirectory {
        let Self {
            policy,
            relay_lists,
            dm_lists,
            mut report,
            over_capacity,
            ..
        } = self;
        let mut people: HashMap<PublicKey, PersonRelays> = HashMap::with_capacity(
            relay_lists
                .len()
                .max(dm_lists.len())
                .min(MAX_DIRECTORY_PEOPLE),
        );
        // Sorted, so which duplicates and examples are reported does not depend on hashing.
        let mut relay_lists: Vec<RawRelayList> = relay_lists.into_values().collect();
        relay_lists.sort_by_key(|l| l.author);
        for list in &relay_lists {
            let person = people.entry(list.author).or_default();
            for tag in &list.tags {
                let Some(entry) = parse_r_tag(tag, &mut report) else {
                    continue;
                };
                if entry.write {
                    keep_url(&policy, &mut person.write, entry.url, &mut report);
                }
                if entry.read {
                    keep_url(&policy, &mut person.read, entry.url, &mut report);
                }
            }
        }
        let mut dm_lists: Vec<RawRelayList> = dm_lists.into_values().collect();
        dm_lists.sort_by_key(|l| l.author);
        for list in &dm_lists {
            let person = people.entry(list.author).or_default();
            for tag in &list.tags {
                if tag.first().map(String::as_str) != Some("relay") {
                    continue;
                }
                match tag.get(1) {
                    Some(url) => keep_url(&policy, &mut person.dm, url, &mut report),
                    None => report.drop(DropReason::MalformedTag, "relay"),
                }
            }
        }
        RelayDirectory {
            policy,
            people,
            report,
            over_capacity,
        }
    }
}

/// Canonicalises `raw` into `into`, counting what is dropped (bad URL, duplicate, over cap).
fn keep_url(policy: &UrlPolicy, into: &mut Vec<String>, raw: &str, report: &mut DropReport) {
    match policy.canonicalize(raw) {
        Err(reason) => report.drop(reason, raw),
        Ok(url) if into.contains(&url) => report.drop(DropReason::Duplicate, raw),
        Ok(_) if into.len() >= policy.max_write_relays => report.drop(DropReason::OverListCap, raw),
        Ok(url) => into.push(url),
    }
}

/// Who writes, reads and takes direct messages where: a pubkey-keyed map of canonical relay
/// URLs, for routes that reach people who are not follows.
#[derive(Clone, Debug)]
pub struct RelayDirectory {
    policy: UrlPolicy,
    people: HashMap<PublicKey, PersonRelays>,
    report: DropReport,
    over_capacity: u64,
}

impl Default for RelayDirectory {
    /// An empty directory under the default policy.
    fn default() -> Self {
        RelayDirectoryBuilder::new(UrlPolicy::default()).build()
    }
}

impl RelayDirectory {
    /// A directory of the kind:10002 lists `lists` (e.g. a world's lists or a store's kept
    /// lists), newest per person winning.
    pub fn from_relay_lists(
        policy: UrlPolicy,
        lists: impl IntoIterator<Item = RawRelayList>,
    ) -> Self {
        let mut builder = RelayDirectoryBuilder::new(policy);
        for list in lists {
            builder.add_relay_list(list);
        }
        builder.build()
    }

    /// The policy its URLs were read under (routes read relay hints under it too).
    pub fn policy(&self) -> &UrlPolicy {
        &self.policy
    }

    /// Everything known about one person.
    pub fn person(&self, pk: &PublicKey) -> Option<&PersonRelays> {
        self.people.get(pk)
    }

    /// The person's write relays (empty when unknown).
    pub fn write_relays(&self, pk: &PublicKey) -> &[String] {
        self.people.get(pk).map_or(&[], |p| &p.write)
    }

    /// The person's read relays (empty when unknown).
    pub fn read_relays(&self, pk: &PublicKey) -> &[String] {
        self.people.get(pk).map_or(&[], |p| &p.read)
    }

    /// The person's kind:10050 DM inbox relays (empty when unknown).
    pub fn dm_relays(&self, pk: &PublicKey) -> &[String] {
        self.people.get(pk).map_or(&[], |p| &p.dm)
    }

    /// How many people it holds.
    pub fn len(&self) -> usize {
        self.people.len()
    }

    /// Whether it holds nobody.
    pub fn is_empty(&self) -> bool {
        self.people.is_empty()
    }

    /// What was dropped while reading the lists, and why.
    pub fn drop_report(&self) -> &DropReport {
        &self.report
    }

    /// Lists ignored because the directory was full.
    pub fn lists_over_capacity(&self) -> u64 {
        self.over_capacity
    }
}

#[cfg(test)]
mod tests {
    use nostr::event::{EventBuilder, FinalizeEvent, Tag};
    use nostr::key::{Keys, SecretKey};

    use super::*;

    fn key(n: u8) -> PublicKey {
        Keys::new(SecretKey::from_slice(&[n.max(1); 32]).unwrap()).public_key()
    }

    fn list(author: PublicKey, at: u64, tags: &[&[&str]]) -> RawRelayList {
        RawRelayList {
            author,
            created_at: at,
            tags: tags
                .iter()
                .map(|t| t.iter().map(|s| s.to_string()).collect())
                .collect(),
        }
    }

    #[test]
    fn both_markers_are_kept_canonical_and_newest_wins() {
        let a = key(1);
        let mut b = RelayDirectoryBuilder::new(UrlPolicy::default());
        b.add_relay_list(list(a, 1, &[&["r", "wss://old.example"]]));
        b.add_relay_list(list(
            a,
            2,
            &[
                &["r", "wss://Both.example/"],
                &["r", "wss://out.example", "write"],
                &["r", "wss://in.example", "read"],
                &["r", "wss://in.example/", "read"],
                &["r", "http://web.example", "read"],
            ],
        ));
        // An older list arriving later changes nothing.
        b.add_relay_list(list(a, 0, &[&["r", "wss://older.example"]]));
        let d = b.build();
        assert_eq!(
            d.write_relays(&a),
            ["wss://both.example", "wss://out.example"]
        );
        assert_eq!(
            d.read_relays(&a),
            ["wss://both.example", "wss://in.example"]
        );
        let report = d.drop_report();
        assert_eq!(report.superseded_lists, 2);
        assert_eq!(report.by_reason[&DropReason::Duplicate], 1);
        assert_eq!(report.by_reason[&DropReason::NotWebSocket], 1);
        assert_eq!(report.read_only_entries, 0);
        assert!(d.read_relays(&key(2)).is_empty());
    }

    #[test]
    fn read_relays_are_capped_like_write_relays() {
        let a = key(1);
        let tags: Vec<Vec<String>> = (0..40)
            .map(|i| vec!["r".into(), format!("wss://r{i}.example"), "read".into()])
            .collect();
        let d = RelayDirectory::from_relay_lists(
            UrlPolicy::default(),
            [RawRelayList {
                author: a,
                created_at: 1,
                tags,
            }],
        );
        let cap = UrlPolicy::default().max_write_relays;
        assert_eq!(d.read_relays(&a).len(), cap);
        assert_eq!(
            d.drop_report().by_reason[&DropReason::OverListCap],
            40 - cap as u64
        );
    }

    #[test]
    fn dm_inbox_events_are_verified_and_read() {
        let keys = Keys::generate();
        let event = EventBuilder::new(Kind::InboxRelays, "")
            .tag(Tag::parse(["relay", "wss://dm.example/"]).unwrap())
            .tag(Tag::parse(["relay"]).unwrap())
            .tag(Tag::parse(["r", "wss://ignored.example"]).unwrap())
            .finalize(&keys)
            .unwrap();
        let note = EventBuilder::new(Kind::TextNote, "hi")
            .finalize(&keys)
            .unwrap();
        let mut forged = event.clone();
        forged.created_at = nostr::types::Timestamp::from_secs(forged.created_at.as_secs() + 1);
        let mut b = RelayDirectoryBuilder::new(UrlPolicy::default());
        assert_eq!(b.add_event(&event), Ok(()));
        assert_eq!(b.add_event(&note), Err(NotADirectoryList::WrongKind(1)));
        assert_eq!(b.add_event(&forged), Err(NotADirectoryList::Unverified));
        let d = b.build();
        assert_eq!(d.dm_relays(&keys.public_key()), ["wss://dm.example"]);
        assert!(d.write_relays(&keys.public_key()).is_empty());
        assert_eq!(d.drop_report().rejected_events, 2);
        assert_eq!(d.drop_report().by_reason[&DropReason::MalformedTag], 1);
    }

    #[test]
    fn the_directory_is_bounded() {
        let mut b = RelayDirectoryBuilder::new(UrlPolicy::default()).max_people(2);
        for n in 1..=5 {
            b.add_relay_list(list(key(n), 1, &[&["r", "wss://x.example"]]));
        }
        // A known person's newer list still replaces the old one.
        b.add_relay_list(list(key(1), 2, &[&["r", "wss://y.example"]]));
        b.add_dm_list(list(key(2), 2, &[&["relay", "wss://dm.example"]]));
        let d = b.build();
        assert_eq!(d.len(), 2);
        assert_eq!(d.lists_over_capacity(), 3);
        assert_eq!(d.write_relays(&key(1)), ["wss://y.example"]);
        assert_eq!(d.dm_relays(&key(2)), ["wss://dm.example"]);
    }
}

//! The route table: who writes where, as interned ids and a compact adjacency.
//!
//! Built from kind:10002 relay lists (NIP-65), either as signed `nostr::Event`s or as raw tag
//! arrays from a world file. The newest list per author wins. Every entry passes through a
//! [`UrlPolicy`]; what is dropped is counted in a [`DropReport`].
//!
//! Relay hints ([`crate::hints`]) are kept beside the declared write relays, never among them:
//! [`RouteTable::write_relays`] and [`RouteTable::writers`] are what the lists declare,
//! [`RouteTable::hint_relays`] what hints add, and [`RouteTable::candidates`] /
//! [`RouteTable::candidate_writers`] both together.

use std::collections::{BTreeMap, HashMap};

use crate::fastmap::FastMap;
use crate::hints::{Hint, HintCounts, HintSource, MAX_HINTS_PER_SOURCE};

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;
use nostr::nips::nip65::RelayMetadata;
use serde::{Deserialize, Serialize};

use crate::ids::{AuthorId, RelayId};
use crate::url_policy::{DropReason, UrlPolicy};

/// One relay list before validation: an author, its timestamp and the raw tags. Serialisable,
/// so a client can keep the lists it fetched and plan routed from the next run's first REQ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRelayList {
    /// The list's author.
    pub author: PublicKey,
    /// The list's `created_at` (unix seconds); the newest list per author wins.
    pub created_at: u64,
    /// The raw tags; only `r` tags are read.
    pub tags: Vec<Vec<String>>,
}

/// What the route table did not use, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DropReport {
    /// Entries dropped, by reason.
    pub by_reason: BTreeMap<DropReason, u64>,
    /// A few examples per reason (raw value, truncated), for `--explain`.
    pub examples: BTreeMap<DropReason, Vec<String>>,
    /// Lists replaced by a newer list of the same author.
    pub superseded_lists: u64,
    /// Lists from authors the reader does not follow.
    pub lists_not_followed: u64,
    /// Events given to the builder that are not kind:10002 or fail verification.
    pub rejected_events: u64,
    /// Entries marked `read` only (kept out of routing, not an error).
    pub read_only_entries: u64,
    /// Relay hints offered, per source, and what became of them (absent: none offered).
    pub hints: BTreeMap<HintSource, HintCounts>,
}

impl DropReport {
    const EXAMPLES_PER_REASON: usize = 3;

    /// Counts one dropped entry under `reason`, keeping the first few as examples (cut to 60
    /// characters).
    pub fn drop(&mut self, reason: DropReason, raw: &str) {
        *self.by_reason.entry(reason).or_default() += 1;
        let examples = self.examples.entry(reason).or_default();
        if examples.len() < Self::EXAMPLES_PER_REASON {
            let mut shown: String = raw.chars().take(60).collect();
            if raw.chars().count() > 60 {
                shown.push('…');
            }
            if !examples.contains(&shown) {
                examples.push(shown);
            }
        }
    }

    /// Total entries dropped.
    pub fn total_dropped(&self) -> u64 {
        self.by_reason.values().sum()
    }
}

/// Why an event is not a usable relay list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotARelayList {
    /// The event is not kind:10002.
    #[error("not a kind:10002 relay list")]
    WrongKind,
    /// The event's id or signature does not verify.
    #[error("the event's id or signature does not verify")]
    Unverified,
}

impl RawRelayList {
    /// The list of an event whose id and signature were already verified (a relay client that
    /// verifies every event it receives need not pay twice); only the kind is checked.
    pub fn from_verified(event: &Event) -> Result<Self, NotARelayList> {
        if event.kind != Kind::RelayList {
            return Err(NotARelayList::WrongKind);
        }
        Ok(Self {
            author: event.pubkey,
            created_at: event.created_at.as_secs(),
            tags: event.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
        })
    }
}

impl TryFrom<&Event> for RawRelayList {
    type Error = NotARelayList;

    /// A signed kind:10002 event's list: kind and signature checked, tags kept raw (the route
    /// table validates them under its URL policy). For an event already verified,
    /// [`RawRelayList::from_verified`] checks the kind alone.
    fn try_from(event: &Event) -> Result<Self, Self::Error> {
        if event.kind != Kind::RelayList {
            return Err(NotARelayList::WrongKind);
        }
        event.verify().map_err(|_| NotARelayList::Unverified)?;
        Self::from_verified(event)
    }
}

/// Collects follows, the reader's relays and relay lists, then builds a [`RouteTable`].
///
/// Calls may come in any order: lists are kept per author (newest wins) and matched against the
/// follows only in [`build`](Self::build).
#[derive(Debug)]
pub struct RouteTableBuilder {
    policy: UrlPolicy,
    follows: Vec<PublicKey>,
    follow_index: FastMap<PublicKey, AuthorId>,
    reader_relays: Vec<String>,
    /// The reader's own kind:10002, newest kept; its relays join `reader_relays` at build.
    reader_list: Option<RawRelayList>,
    newest: HashMap<PublicKey, RawRelayList>,
    /// Hints offered, canonical, in the order offered.
    hints: Vec<(PublicKey, String, HintSource)>,
    /// Hints held per source (at most [`MAX_HINTS_PER_SOURCE`] each).
    hints_held: [usize; 3],
    report: DropReport,
}

impl RouteTableBuilder {
    /// A builder that filters entries with `policy`.
    pub fn new(policy: UrlPolicy) -> Self {
        Self {
            policy,
            follows: Vec::new(),
            follow_index: FastMap::default(),
            reader_relays: Vec::new(),
            reader_list: None,
            newest: HashMap::new(),
            hints: Vec::new(),
            hints_held: [0; 3],
            report: DropReport::default(),
        }
    }

    /// Offers a relay hint: `author` may write to `url` ([`crate::hints`]). The URL goes
    /// through the policy like a list entry; hints are matched against the follows and their
    /// lists only in [`build`](Self::build), where each follow keeps at most
    /// [`HintSource::per_author_cap`] hints of each source (the first offered), none naming one
    /// of its declared write relays, and a relay hinted by several sources once, under the
    /// strongest. At most [`MAX_HINTS_PER_SOURCE`] hints of a source are held; every hint is
    /// counted in [`DropReport::hints`]. Returns whether the hint is held.
    pub fn hint(&mut self, author: PublicKey, url: &str, source: HintSource) -> bool {
        let counts = self.report.hints.entry(source).or_default();
        counts.offered += 1;
        let canonical = match self.policy.canonicalize(url) {
            Ok(canonical) => canonical,
            Err(reason) => {
                *counts.refused.entry(reason).or_default() += 1;
                return false;
            }
        };
        let held = &mut self.hints_held[source.index()];
        if *held >= MAX_HINTS_PER_SOURCE {
            counts.over_source_cap += 1;
            return false;
        }
        *held += 1;
        self.hints.push((author, canonical, source));
        true
    }

    /// Offers every hint of `hints` ([`hint`](Self::hint)).
    pub fn add_hints<'h>(&mut self, hints: impl IntoIterator<Item = &'h Hint>) {
        for h in hints {
            self.hint(h.author, &h.relay, h.source);
        }
    }

    /// Adds followed authors (duplicates are ignored). Only follows are ever routed.
    pub fn follows(mut self, follows: impl IntoIterator<Item = PublicKey>) -> Self {
        for pk in follows {
            self.add_follow(pk);
        }
        self
    }

    /// Adds one followed author.
    pub fn add_follow(&mut self, pk: PublicKey) -> AuthorId {
        if let Some(&id) = self.follow_index.get(&pk) {
            return id;
        }
        let id = AuthorId(self.follows.len() as u32);
        self.follows.push(pk);
        self.follow_index.insert(pk, id);
        id
    }

    /// Adds the reader's own relays (the pool asked about the residual). Unacceptable URLs are
    /// dropped and counted like list entries.
    pub fn reader_relays<S: AsRef<str>>(mut self, relays: impl IntoIterator<Item = S>) -> Self {
        for raw in relays {
            let raw = raw.as_ref();
            match self.policy.canonicalize(raw) {
                Ok(url) if !self.reader_relays.contains(&url) => self.reader_relays.push(url),
                Ok(_) => self.report.drop(DropReason::Duplicate, raw),
                Err(reason) => self.report.drop(reason, raw),
            }
        }
        self
    }

    /// Adds a kind:10002 event. Other kinds and events whose signature does not verify are
    /// counted as rejected.
    pub fn add_event(&mut self, event: &Event) {
        match RawRelayList::try_from(event) {
            Ok(list) => self.add_list(list),
            Err(why) => {
                self.report.rejected_events += 1;
                tracing::debug!(id = %event.id, kind = %event.kind, %why, "rejected relay-list event");
            }
        }
    }

    /// Adds a raw relay list, followed or not yet: lists of authors who are not follows when
    /// the table is built are counted and ignored. The newest list per author wins; on equal
    /// timestamps the first one seen is kept, so the outcome does not depend on arrival order.
    pub fn add_list(&mut self, list: RawRelayList) {
        keep_newest(&mut self.newest, list, &mut self.report);
    }

    /// Adds the reader's own kind:10002 event: its relays marked for reading (or unmarked) join
    /// the reader's relays, which carry the residual. A list that is not the newest seen, not
    /// kind:10002 or not verified is counted and ignored.
    pub fn reader_event(mut self, event: &Event) -> Self {
        match RawRelayList::try_from(event) {
            Ok(list) => self.reader_list(list),
            Err(_) => {
                self.report.rejected_events += 1;
                self
            }
        }
    }

    /// Adds the reader's own relay list (see [`reader_event`](Self::reader_event)).
    pub fn reader_list(mut self, list: RawRelayList) -> Self {
        match &self.reader_list {
            Some(current) if current.author != list.author => {
                tracing::debug!("a second reader list from another author is ignored");
                self.report.rejected_events += 1;
            }
            Some(current) if current.created_at >= list.created_at => {
                self.report.superseded_lists += 1;
            }
            _ => self.reader_list = Some(list),
        }
        self
    }

    /// Validates every kept list and builds the table.
    pub fn build(self) -> RouteTable {
        let mut builder = self;
        if let Some(list) = builder.reader_list.take() {
            let read: Vec<String> = reader_read_relays(&list, &mut builder.report);
            builder = builder.reader_relays(read);
        }
        let RouteTableBuilder {
            policy,
            follows,
            follow_index,
            reader_relays,
            reader_list: _,
            newest: lists,
            hints,
            hints_held: _,
            mut report,
        } = builder;
        let mut newest: HashMap<AuthorId, RawRelayList> = HashMap::with_capacity(lists.len());
        for (author, list) in lists {
            match follow_index.get(&author) {
                Some(&id) => {
                    newest.insert(id, list);
                }
                None => report.lists_not_followed += 1,
            }
        }
        let mut relays = RelayInterner::default();
        let reader: Vec<RelayId> = reader_relays.iter().map(|u| relays.intern(u)).collect();

        let mut write_offsets = Vec::with_capacity(follows.len() + 1);
        let mut write_targets = Vec::new();
        let mut has_list = vec![false; follows.len()];
        write_offsets.push(0u32);
        let mut seen = Vec::new();
        for (index, flag) in has_list.iter_mut().enumerate() {
            if let Some(list) = newest.get(&AuthorId(index as u32)) {
                *flag = true;
                seen.clear();
                let mut kept = 0usize;
                for tag in &list.tags {
                    let Some(entry) = parse_r_tag(tag, &mut report) else {
                        continue;
                    };
                    if !entry.write {
                        report.read_only_entries += 1;
                        continue;
                    }
                    match policy.canonicalize(entry.url) {
                        Err(reason) => report.drop(reason, entry.url),
                        Ok(url) => {
                            let id = relays.intern(&url);
                            if seen.contains(&id) {
                                report.drop(DropReason::Duplicate, entry.url);
                            } else if kept >= policy.max_write_relays {
                                report.drop(DropReason::OverListCap, entry.url);
                            } else {
                                seen.push(id);
                                write_targets.push(id);
                                kept += 1;
                            }
                        }
                    }
                }
            }
            write_offsets.push(write_targets.len() as u32);
        }

        let (hint_offsets, hint_targets, hint_sources) = keep_hints(
            hints,
            &follow_index,
            &write_offsets,
            &write_targets,
            &mut relays,
            &mut report,
        );
        let relay_count = relays.urls.len();
        let (reader_offsets, reader_targets) = invert(&write_offsets, &write_targets, relay_count);
        let candidates = (!hint_targets.is_empty()).then(|| {
            let mut offsets = Vec::with_capacity(write_offsets.len());
            let mut targets = Vec::with_capacity(write_targets.len() + hint_targets.len());
            offsets.push(0u32);
            for a in 0..follows.len() {
                targets.extend_from_slice(row(&write_targets, &write_offsets, a));
                targets.extend_from_slice(row(&hint_targets, &hint_offsets, a));
                offsets.push(targets.len() as u32);
            }
            let (by_relay_offsets, by_relay) = invert(&offsets, &targets, relay_count);
            Candidates {
                offsets,
                targets,
                by_relay_offsets,
                by_relay,
            }
        });
        let mut by_url: Vec<u32> = (0..relay_count as u32).collect();
        by_url.sort_unstable_by(|&a, &b| relays.urls[a as usize].cmp(&relays.urls[b as usize]));
        let mut url_rank = vec![0u32; relay_count];
        for (rank, &relay) in by_url.iter().enumerate() {
            url_rank[relay as usize] = rank as u32;
        }
        let mut is_reader = vec![false; relay_count];
        for r in &reader {
            is_reader[r.index()] = true;
        }
        RouteTable {
            follows,
            follow_index,
            relay_urls: relays.urls,
            relay_index: relays.index,
            reader_relays: reader,
            is_reader_relay: is_reader,
            url_rank,
            has_list,
            write_offsets,
            write_targets,
            relay_offsets: reader_offsets,
            relay_targets: reader_targets,
            hint_offsets,
            hint_targets,
            hint_sources,
            candidates,
            report,
        }
    }
}

/// The hints a table keeps, laid out per follow (offsets, relays, sources): see
/// [`RouteTableBuilder::hint`]. Relays first named by a kept hint are interned in the order
/// those hints were offered, after every list relay.
fn keep_hints(
    mut hints: Vec<(PublicKey, String, HintSource)>,
    follow_index: &FastMap<PublicKey, AuthorId>,
    write_offsets: &[u32],
    write_targets: &[RelayId],
    relays: &mut RelayInterner,
    report: &mut DropReport,
) -> (Vec<u32>, Vec<RelayId>, Vec<HintSource>) {
    if hints.is_empty() {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let follows = write_offsets.len().saturating_sub(1);
    // (author, strongest source first, order offered): each follow's hints in the order kept.
    let mut order: Vec<(AuthorId, std::cmp::Reverse<HintSource>, usize)> =
        Vec::with_capacity(hints.len());
    for (i, (author, _, source)) in hints.iter().enumerate() {
        match follow_index.get(author) {
            Some(&a) => order.push((a, std::cmp::Reverse(*source), i)),
            None => report.hints.entry(*source).or_default().not_followed += 1,
        }
    }
    order.sort_unstable();
    // Decided on URLs first, so a relay is interned only when some hint keeps it.
    let mut kept: Vec<(AuthorId, usize)> = Vec::with_capacity(order.len());
    let mut mine: Vec<&str> = Vec::new();
    let mut per_source = [0usize; 3];
    let mut current = None;
    for &(author, std::cmp::Reverse(source), i) in &order {
        if current != Some(author) {
            current = Some(author);
            mine.clear();
            per_source = [0; 3];
        }
        let url = hints[i].1.as_str();
        let counts = report.hints.entry(source).or_default();
        let a = author.index();
        let declared = relays
            .index
            .get(url)
            .is_some_and(|r| row(write_targets, write_offsets, a).contains(r));
        if declared {
            counts.declared += 1;
        } else if mine.contains(&url) {
            counts.duplicate += 1;
        } else if per_source[source.index()] >= source.per_author_cap() {
            counts.over_author_cap += 1;
        } else {
            counts.kept += 1;
            per_source[source.index()] += 1;
            mine.push(url);
            kept.push((author, i));
        }
    }
    // Interned in the order offered, whatever the follows' order.
    let mut by_offer: Vec<usize> = kept.iter().map(|&(_, i)| i).collect();
    by_offer.sort_unstable();
    let mut ids: HashMap<usize, RelayId> = HashMap::with_capacity(by_offer.len());
    for i in by_offer {
        ids.insert(i, relays.intern(&hints[i].1));
    }
    let mut offsets = Vec::with_capacity(follows + 1);
    let mut targets = Vec::with_capacity(kept.len());
    let mut sources = Vec::with_capacity(kept.len());
    offsets.push(0u32);
    let mut next = kept.iter().peekable();
    for a in 0..follows {
        while let Some(&&(author, i)) = next.peek() {
            if author.index() != a {
                break;
            }
            targets.push(ids[&i]);
            sources.push(hints[i].2);
            next.next();
        }
        offsets.push(targets.len() as u32);
    }
    hints.clear();
    (offsets, targets, sources)
}

/// [`keep_newest_list`], counting the lists it replaces or refuses (route tables and
/// directories report them).
pub fn keep_newest(
    newest: &mut HashMap<PublicKey, RawRelayList>,
    list: RawRelayList,
    report: &mut DropReport,
) {
    if newest.contains_key(&list.author) {
        report.superseded_lists += 1;
    }
    keep_newest_list(newest, list);
}

/// Keeps `list` in `newest` when its author has none there or an older one (on equal
/// `created_at` the list kept first stays): the one rule by which the newest list per author
/// wins, for clients that keep lists as they arrive. Returns whether `list` was kept.
pub fn keep_newest_list(newest: &mut HashMap<PublicKey, RawRelayList>, list: RawRelayList) -> bool {
    match newest.get(&list.author) {
        Some(current) if current.created_at >= list.created_at => false,
        _ => {
            newest.insert(list.author, list);
            true
        }
    }
}

/// The relays of the reader's own list where the reader reads (`read` or unmarked entries):
/// where a client reads what it follows when it knows nothing better.
fn reader_read_relays(list: &RawRelayList, report: &mut DropReport) -> Vec<String> {
    list.tags
        .iter()
        .filter_map(|tag| parse_r_tag(tag, report))
        .filter(|entry| entry.read)
        .map(|entry| entry.url.to_string())
        .collect()
}

/// One NIP-65 `r` tag, read ([`parse_r_tag`]).
pub struct RTag<'a> {
    /// The relay URL as written (not yet canonical).
    pub url: &'a str,
    /// The author writes there (`write` or no marker).
    pub write: bool,
    /// The author reads there (`read` or no marker).
    pub read: bool,
}

/// Reads one tag as a NIP-65 `r` tag; `None` for other tags (malformed `r` tags are counted).
pub fn parse_r_tag<'a>(tag: &'a [String], report: &mut DropReport) -> Option<RTag<'a>> {
    if tag.first().map(String::as_str) != Some("r") {
        return None;
    }
    let Some(url) = tag.get(1) else {
        report.drop(DropReason::MalformedTag, "r");
        return None;
    };
    let (write, read) = match tag.get(2).map(String::as_str) {
        None | Some("") => (true, true),
        Some(marker) => match marker.parse::<RelayMetadata>() {
            Ok(RelayMetadata::Write) => (true, false),
            Ok(RelayMetadata::Read) => (false, true),
            Err(_) => {
                report.drop(DropReason::BadMarker, marker);
                return None;
            }
        },
    };
    Some(RTag { url, write, read })
}

#[derive(Default)]
struct RelayInterner {
    urls: Vec<String>,
    index: FastMap<String, RelayId>,
}

impl RelayInterner {
    fn intern(&mut self, url: &str) -> RelayId {
        if let Some(&id) = self.index.get(url) {
            return id;
        }
        let id = RelayId(self.urls.len() as u32);
        self.urls.push(url.to_string());
        self.index.insert(url.to_string(), id);
        id
    }
}

/// Row `i` of an adjacency kept as CSR: the `targets` from `offsets[i]` up to `offsets[i + 1]`.
#[inline]
fn row<'a, T>(targets: &'a [T], offsets: &[u32], i: usize) -> &'a [T] {
    &targets[offsets[i] as usize..offsets[i + 1] as usize]
}

/// Turns author→relays adjacency (CSR) into relay→authors adjacency (CSR).
fn invert(offsets: &[u32], targets: &[RelayId], relay_count: usize) -> (Vec<u32>, Vec<AuthorId>) {
    let mut counts = vec![0u32; relay_count + 1];
    for r in targets {
        counts[r.index() + 1] += 1;
    }
    for i in 1..counts.len() {
        counts[i] += counts[i - 1];
    }
    let mut fill = counts.clone();
    let mut out = vec![AuthorId(0); targets.len()];
    for author in 0..offsets.len().saturating_sub(1) {
        for r in row(targets, offsets, author) {
            let slot = &mut fill[r.index()];
            out[*slot as usize] = AuthorId(author as u32);
            *slot += 1;
        }
    }
    (counts, out)
}

/// Follows, relays and who writes where, interned.
///
/// Authors are exactly the reader's follows (ids `0..follow_count()`); relays are every relay of
/// a kept list plus the reader's own relays. Adjacency is stored both ways in compressed form;
/// each author's write relays keep their list order.
#[derive(Clone, Debug)]
pub struct RouteTable {
    follows: Vec<PublicKey>,
    follow_index: FastMap<PublicKey, AuthorId>,
    relay_urls: Vec<String>,
    relay_index: FastMap<String, RelayId>,
    reader_relays: Vec<RelayId>,
    is_reader_relay: Vec<bool>,
    url_rank: Vec<u32>,
    has_list: Vec<bool>,
    write_offsets: Vec<u32>,
    write_targets: Vec<RelayId>,
    relay_offsets: Vec<u32>,
    relay_targets: Vec<AuthorId>,
    /// Per follow, its hinted relays and their sources (all empty when nothing was hinted).
    hint_offsets: Vec<u32>,
    hint_targets: Vec<RelayId>,
    hint_sources: Vec<HintSource>,
    /// Declared and hinted relays together, both ways; `None` when nothing was hinted (then
    /// they are the declared ones).
    candidates: Option<Candidates>,
    report: DropReport,
}

/// Every follow's declared and hinted relays, and every relay's follows either way.
#[derive(Clone, Debug)]
struct Candidates {
    offsets: Vec<u32>,
    targets: Vec<RelayId>,
    by_relay_offsets: Vec<u32>,
    by_relay: Vec<AuthorId>,
}

impl RouteTable {
    /// A table with follows and reader relays but no relay lists yet (the first plan of a
    /// session happens before any list is known).
    pub fn without_lists<S: AsRef<str>>(
        policy: UrlPolicy,
        follows: impl IntoIterator<Item = PublicKey>,
        reader_relays: impl IntoIterator<Item = S>,
    ) -> Self {
        RouteTableBuilder::new(policy)
            .follows(follows)
            .reader_relays(reader_relays)
            .build()
    }

    /// Number of follows (authors are `AuthorId(0..n)`).
    #[inline]
    pub fn follow_count(&self) -> usize {
        self.follows.len()
    }

    /// Number of interned relays (relays are `RelayId(0..n)`).
    #[inline]
    pub fn relay_count(&self) -> usize {
        self.relay_urls.len()
    }

    /// Every follow id.
    #[inline]
    pub fn authors(&self) -> impl ExactSizeIterator<Item = AuthorId> + '_ {
        (0..self.follows.len() as u32).map(AuthorId)
    }

    /// Every relay id.
    #[inline]
    pub fn relays(&self) -> impl ExactSizeIterator<Item = RelayId> + '_ {
        (0..self.relay_urls.len() as u32).map(RelayId)
    }

    /// The public key of a follow.
    #[inline]
    pub fn pubkey(&self, author: AuthorId) -> &PublicKey {
        &self.follows[author.index()]
    }

    /// Every follow's public key, indexed by [`AuthorId`].
    pub fn pubkeys(&self) -> &[PublicKey] {
        &self.follows
    }

    /// The id of a follow, if followed.
    pub fn author_id(&self, pk: &PublicKey) -> Option<AuthorId> {
        self.follow_index.get(pk).copied()
    }

    /// The canonical URL of a relay.
    #[inline]
    pub fn url(&self, relay: RelayId) -> &str {
        &self.relay_urls[relay.index()]
    }

    /// The relay's position among all relays sorted by URL: the deterministic tie-breaker,
    /// precomputed so strategies compare integers instead of strings.
    /// An id the table did not issue ranks last (a broken selection must not panic here; the
    /// invariant check reports it).
    #[inline]
    pub fn url_rank(&self, relay: RelayId) -> u32 {
        self.url_rank
            .get(relay.index())
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// The id of a canonical relay URL, if the table knows it.
    pub fn relay_id(&self, canonical_url: &str) -> Option<RelayId> {
        self.relay_index.get(canonical_url).copied()
    }

    /// The reader's own relays.
    pub fn reader_relays(&self) -> &[RelayId] {
        &self.reader_relays
    }

    /// The reader's relays that carry the residual under a pool limit (`None`: all of them):
    /// the first ones in the reader's order, never fewer than one. They are connected for the
    /// residual anyway, so a routed relay among them costs no connection of the routed budget.
    pub fn pool(&self, limit: Option<usize>) -> &[RelayId] {
        let n = limit.map_or(self.reader_relays.len(), |l| l.max(1));
        &self.reader_relays[..n.min(self.reader_relays.len())]
    }

    /// Whether `relay` is one of the reader's own relays.
    #[inline]
    pub fn is_reader_relay(&self, relay: RelayId) -> bool {
        self.is_reader_relay[relay.index()]
    }

    /// Whether a relay list was kept for this follow (possibly with no usable write relay).
    #[inline]
    pub fn has_list(&self, author: AuthorId) -> bool {
        self.has_list[author.index()]
    }

    /// The follow's usable write relays, in list order.
    #[inline]
    pub fn write_relays(&self, author: AuthorId) -> &[RelayId] {
        row(&self.write_targets, &self.write_offsets, author.index())
    }

    /// The follows who write to `relay`, in id order.
    #[inline]
    pub fn writers(&self, relay: RelayId) -> &[AuthorId] {
        row(&self.relay_targets, &self.relay_offsets, relay.index())
    }

    /// How many follows write to `relay`.
    #[inline]
    pub fn popularity(&self, relay: RelayId) -> u32 {
        let i = relay.index();
        self.relay_offsets[i + 1] - self.relay_offsets[i]
    }

    /// Whether `author` lists `relay` as a write relay.
    #[inline]
    pub fn writes_to(&self, author: AuthorId, relay: RelayId) -> bool {
        self.write_relays(author).contains(&relay)
    }

    /// Total author→write-relay edges.
    pub fn edge_count(&self) -> usize {
        self.write_targets.len()
    }

    /// The follow's hinted relays ([`crate::hints`]), strongest source first, none of them a
    /// declared write relay of the follow.
    #[inline]
    pub fn hint_relays(&self, author: AuthorId) -> &[RelayId] {
        match self.hint_range(author) {
            Some(range) => &self.hint_targets[range],
            None => &[],
        }
    }

    /// Where each of [`hint_relays`](Self::hint_relays) was hinted, in the same order.
    #[inline]
    pub fn hint_sources(&self, author: AuthorId) -> &[HintSource] {
        match self.hint_range(author) {
            Some(range) => &self.hint_sources[range],
            None => &[],
        }
    }

    fn hint_range(&self, author: AuthorId) -> Option<std::ops::Range<usize>> {
        let i = author.index();
        let (start, end) = (self.hint_offsets.get(i)?, self.hint_offsets.get(i + 1)?);
        Some(*start as usize..*end as usize)
    }

    /// How `relay` was hinted for `author`, if it was (a declared write relay never is).
    pub fn hint_source(&self, author: AuthorId, relay: RelayId) -> Option<HintSource> {
        let at = self.hint_relays(author).iter().position(|&r| r == relay)?;
        self.hint_sources(author).get(at).copied()
    }

    /// Total author→hinted-relay edges.
    pub fn hint_count(&self) -> usize {
        self.hint_targets.len()
    }

    /// The relays a plan may ask about `author`: its declared write relays in list order, then
    /// its hinted relays ([`hint_relays`](Self::hint_relays)).
    #[inline]
    pub fn candidates(&self, author: AuthorId) -> &[RelayId] {
        match &self.candidates {
            None => self.write_relays(author),
            Some(c) => row(&c.targets, &c.offsets, author.index()),
        }
    }

    /// The follows that declare or were hinted `relay`, in id order.
    #[inline]
    pub fn candidate_writers(&self, relay: RelayId) -> &[AuthorId] {
        match &self.candidates {
            None => self.writers(relay),
            Some(c) => row(&c.by_relay, &c.by_relay_offsets, relay.index()),
        }
    }

    /// How many follows declare or were hinted `relay`.
    #[inline]
    pub fn candidate_popularity(&self, relay: RelayId) -> u32 {
        self.candidate_writers(relay).len() as u32
    }

    /// Whether a plan may ask `relay` about `author`: a declared write relay or a hinted one.
    #[inline]
    pub fn may_route(&self, author: AuthorId, relay: RelayId) -> bool {
        self.writes_to(author, relay) || self.hint_relays(author).contains(&relay)
    }

    /// What the builder dropped, and why.
    pub fn drop_report(&self) -> &DropReport {
        &self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hints::MAX_POINTER_HINTS_PER_AUTHOR;
    use nostr::key::{Keys, SecretKey};

    fn key(n: u8) -> PublicKey {
        let mut sk = [0u8; 32];
        sk[31] = n.max(1);
        sk[0] = 1;
        Keys::new(SecretKey::from_slice(&sk).unwrap()).public_key()
    }

    fn r(url: &str) -> Vec<String> {
        vec!["r".into(), url.into()]
    }

    fn rm(url: &str, marker: &str) -> Vec<String> {
        vec!["r".into(), url.into(), marker.into()]
    }

    #[test]
    fn newest_list_wins_and_markers_are_read() {
        let a = key(1);
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows([a]);
        b.add_list(RawRelayList {
            author: a,
            created_at: 10,
            tags: vec![r("wss://old.example")],
        });
        b.add_list(RawRelayList {
            author: a,
            created_at: 20,
            tags: vec![
                r("wss://both.example"),
                rm("wss://w.example/", "write"),
                rm("wss://read.example", "read"),
            ],
        });
        b.add_list(RawRelayList {
            author: a,
            created_at: 5,
            tags: vec![r("wss://older.example")],
        });
        let t = b.build();
        let urls: Vec<_> = t
            .write_relays(AuthorId(0))
            .iter()
            .map(|&r| t.url(r))
            .collect();
        assert_eq!(urls, ["wss://both.example", "wss://w.example"]);
        assert_eq!(t.drop_report().superseded_lists, 2);
        assert_eq!(t.drop_report().read_only_entries, 1);
        assert_eq!(t.popularity(t.relay_id("wss://w.example").unwrap()), 1);
        assert!(t.relay_id("wss://old.example").is_none());
    }

    #[test]
    fn a_list_is_kept_only_when_newer_than_the_one_kept() {
        let a = key(1);
        let list = |created_at| RawRelayList {
            author: a,
            created_at,
            tags: vec![r(&format!("wss://r{created_at}.example"))],
        };
        let mut newest = HashMap::new();
        assert!(keep_newest_list(&mut newest, list(10)));
        assert!(!keep_newest_list(&mut newest, list(5)));
        let mut same = list(10);
        same.tags.clear();
        assert!(!keep_newest_list(&mut newest, same));
        assert!(keep_newest_list(&mut newest, list(20)));
        assert_eq!(newest[&a], list(20));
    }

    #[test]
    fn hostile_lists_are_dropped_with_counts() {
        let a = key(2);
        let mut tags: Vec<Vec<String>> = (0..1000)
            .map(|i| r(&format!("wss://relay{i}.example")))
            .collect();
        tags.insert(0, r("ws://127.0.0.1:7777"));
        tags.insert(0, r("http://web.example"));
        tags.insert(0, r(&format!("wss://{}.example", "x".repeat(5000))));
        tags.insert(0, r("\u{0}\u{fffd}wss://\u{7f}junk"));
        tags.insert(0, rm("wss://ok.example", "sometimes"));
        tags.insert(0, vec!["r".into()]);
        tags.insert(0, r("wss://relay0.example/"));
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows([a]);
        b.add_list(RawRelayList {
            author: a,
            created_at: 1,
            tags,
        });
        let t = b.build();
        let rep = t.drop_report();
        assert_eq!(
            t.write_relays(AuthorId(0)).len(),
            UrlPolicy::default().max_write_relays
        );
        assert_eq!(rep.by_reason[&DropReason::Localhost], 1);
        assert_eq!(rep.by_reason[&DropReason::NotWebSocket], 1);
        assert_eq!(rep.by_reason[&DropReason::TooLong], 1);
        assert_eq!(rep.by_reason[&DropReason::Unparsable], 1);
        assert_eq!(rep.by_reason[&DropReason::BadMarker], 1);
        assert_eq!(rep.by_reason[&DropReason::MalformedTag], 1);
        assert_eq!(rep.by_reason[&DropReason::Duplicate], 1);
        assert_eq!(rep.by_reason[&DropReason::OverListCap], 1000 - 12);
        // Interning only kept what was considered, not the junk.
        assert!(t.relay_id("wss://relay0.example").is_some());
    }

    #[test]
    fn lists_added_before_the_follows_are_kept() {
        let a = key(1);
        let list = RawRelayList {
            author: a,
            created_at: 1,
            tags: vec![r("wss://x.example")],
        };
        let mut early = RouteTableBuilder::new(UrlPolicy::default());
        early.add_list(list.clone());
        let early = early.follows([a]).build();
        let mut late = RouteTableBuilder::new(UrlPolicy::default()).follows([a]);
        late.add_list(list);
        let late = late.build();
        for t in [&early, &late] {
            assert!(t.has_list(AuthorId(0)));
            assert_eq!(t.url(t.write_relays(AuthorId(0))[0]), "wss://x.example");
        }
        assert_eq!(early.drop_report(), late.drop_report());
    }

    #[test]
    fn events_convert_only_when_kind_and_signature_hold() {
        use nostr::event::{EventBuilder, FinalizeEvent};
        let keys = Keys::generate();
        let list = EventBuilder::new(Kind::RelayList, "")
            .tag(nostr::event::Tag::parse(["r", "wss://x.example"]).unwrap())
            .finalize(&keys)
            .unwrap();
        let raw = RawRelayList::try_from(&list).unwrap();
        assert_eq!(raw.author, keys.public_key());
        assert_eq!(raw.tags, vec![r("wss://x.example")]);
        let note = EventBuilder::new(Kind::TextNote, "hi")
            .finalize(&keys)
            .unwrap();
        assert_eq!(RawRelayList::try_from(&note), Err(NotARelayList::WrongKind));
        let mut forged = list.clone();
        forged.created_at = nostr::types::Timestamp::from_secs(forged.created_at.as_secs() + 1);
        assert_eq!(
            RawRelayList::try_from(&forged),
            Err(NotARelayList::Unverified)
        );
    }

    #[test]
    fn the_readers_own_list_gives_the_readers_relays() {
        let reader = key(7);
        let t = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1)])
            .reader_relays(["wss://given.example"])
            .reader_list(RawRelayList {
                author: reader,
                created_at: 2,
                tags: vec![
                    r("wss://both.example"),
                    rm("wss://inbox.example", "read"),
                    rm("wss://outbox.example", "write"),
                ],
            })
            .reader_list(RawRelayList {
                author: reader,
                created_at: 1,
                tags: vec![r("wss://stale.example")],
            })
            .build();
        let urls: Vec<_> = t.reader_relays().iter().map(|&r| t.url(r)).collect();
        assert_eq!(
            urls,
            [
                "wss://given.example",
                "wss://both.example",
                "wss://inbox.example"
            ]
        );
    }

    #[test]
    fn lists_of_non_follows_are_ignored() {
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows([key(1)]);
        b.add_list(RawRelayList {
            author: key(9),
            created_at: 1,
            tags: vec![r("wss://x.example")],
        });
        let t = b.build();
        assert_eq!(t.drop_report().lists_not_followed, 1);
        assert_eq!(t.edge_count(), 0);
        assert!(!t.has_list(AuthorId(0)));
    }

    #[test]
    fn hints_are_kept_apart_bounded_per_author_and_source_and_counted() {
        let (a, b, stranger) = (key(1), key(2), key(9));
        let mut builder = RouteTableBuilder::new(UrlPolicy::default())
            .follows([a, b])
            .reader_relays(["wss://home.example"]);
        builder.add_list(RawRelayList {
            author: a,
            created_at: 1,
            tags: vec![r("wss://w.example")],
        });
        // Declared already, refused by the policy, of a stranger.
        builder.hint(a, "wss://W.example/", HintSource::SeenOn);
        builder.hint(a, "ws://127.0.0.1:7777", HintSource::Pointer);
        builder.hint(stranger, "wss://s.example", HintSource::Pointer);
        // Two kind:3 hints kept, the third over the cap; the seen-on one beats the kind:3 one.
        for i in 0..3 {
            builder.hint(b, &format!("wss://c{i}.example"), HintSource::ContactList);
        }
        builder.hint(b, "wss://c1.example", HintSource::SeenOn);
        for i in 0..=MAX_POINTER_HINTS_PER_AUTHOR {
            builder.hint(a, &format!("wss://p{i}.example"), HintSource::Pointer);
        }
        let t = builder.build();
        let (fa, fb) = (t.author_id(&a).unwrap(), t.author_id(&b).unwrap());
        let urls = |rs: &[RelayId]| rs.iter().map(|&r| t.url(r).to_string()).collect::<Vec<_>>();
        assert_eq!(urls(t.write_relays(fa)), ["wss://w.example"]);
        assert_eq!(
            urls(t.hint_relays(fb)),
            ["wss://c1.example", "wss://c0.example", "wss://c2.example"]
        );
        assert_eq!(
            t.hint_sources(fb),
            [
                HintSource::SeenOn,
                HintSource::ContactList,
                HintSource::ContactList
            ]
        );
        assert_eq!(t.hint_relays(fa).len(), MAX_POINTER_HINTS_PER_AUTHOR);
        assert!(
            t.relay_id("wss://p4.example").is_none(),
            "a dropped hint interns nothing"
        );
        assert!(t.relay_id("wss://s.example").is_none());
        let report = &t.drop_report().hints;
        let contact = &report[&HintSource::ContactList];
        assert_eq!(
            (contact.offered, contact.kept, contact.duplicate),
            (3, 2, 1)
        );
        let pointer = &report[&HintSource::Pointer];
        assert_eq!(pointer.offered, 2 + MAX_POINTER_HINTS_PER_AUTHOR as u64 + 1);
        assert_eq!(pointer.kept, MAX_POINTER_HINTS_PER_AUTHOR as u64);
        assert_eq!(pointer.over_author_cap, 1);
        assert_eq!(pointer.not_followed, 1);
        assert_eq!(pointer.refused[&DropReason::Localhost], 1);
        let seen = &report[&HintSource::SeenOn];
        assert_eq!((seen.offered, seen.kept, seen.declared), (2, 1, 1));
        // Candidates: declared first, then hinted; both ways agree.
        let w = t.relay_id("wss://w.example").unwrap();
        let c1 = t.relay_id("wss://c1.example").unwrap();
        assert_eq!(t.candidates(fa)[0], w);
        assert_eq!(t.candidates(fa).len(), 1 + MAX_POINTER_HINTS_PER_AUTHOR);
        assert!(t.may_route(fb, c1) && !t.writes_to(fb, c1) && !t.may_route(fa, c1));
        assert_eq!(t.hint_source(fb, c1), Some(HintSource::SeenOn));
        assert_eq!(t.popularity(c1), 0);
        assert_eq!(t.candidate_writers(c1), [fb]);
        for author in t.authors() {
            for &relay in t.candidates(author) {
                assert!(t.candidate_writers(relay).contains(&author));
            }
        }
    }

    #[test]
    fn hints_past_the_source_cap_are_counted_not_held() {
        let a = key(1);
        let mut builder = RouteTableBuilder::new(UrlPolicy::default()).follows([a]);
        for i in 0..MAX_HINTS_PER_SOURCE {
            assert!(builder.hint(a, &format!("wss://h{i}.example"), HintSource::Pointer));
        }
        assert!(!builder.hint(a, "wss://one-more.example", HintSource::Pointer));
        // Another source has its own allowance.
        assert!(builder.hint(a, "wss://seen.example", HintSource::SeenOn));
        let t = builder.build();
        let pointer = &t.drop_report().hints[&HintSource::Pointer];
        assert_eq!(pointer.over_source_cap, 1);
        assert_eq!(pointer.kept, MAX_POINTER_HINTS_PER_AUTHOR as u64);
        assert_eq!(t.hint_count(), MAX_POINTER_HINTS_PER_AUTHOR + 1);
    }

    #[test]
    fn a_table_without_hints_has_its_declared_relays_as_candidates() {
        let keys: Vec<_> = (1..=3).map(key).collect();
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows(keys.iter().copied());
        for (i, k) in keys.iter().enumerate() {
            b.add_list(RawRelayList {
                author: *k,
                created_at: 1,
                tags: (0..=i).map(|j| r(&format!("wss://r{j}.example"))).collect(),
            });
        }
        let t = b.build();
        assert_eq!(t.hint_count(), 0);
        assert!(t.drop_report().hints.is_empty());
        for a in t.authors() {
            assert_eq!(t.candidates(a), t.write_relays(a));
            assert!(t.hint_relays(a).is_empty());
        }
        for r in t.relays() {
            assert_eq!(t.candidate_writers(r), t.writers(r));
        }
    }

    #[test]
    fn adjacency_is_consistent_both_ways() {
        let keys: Vec<_> = (1..=5).map(key).collect();
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows(keys.iter().copied())
            .reader_relays(["wss://home.example"]);
        for (i, k) in keys.iter().enumerate() {
            let tags = (0..=i).map(|j| r(&format!("wss://r{j}.example"))).collect();
            b.add_list(RawRelayList {
                author: *k,
                created_at: 1,
                tags,
            });
        }
        let t = b.build();
        assert!(t.is_reader_relay(t.relay_id("wss://home.example").unwrap()));
        for a in t.authors() {
            for &rel in t.write_relays(a) {
                assert!(t.writers(rel).contains(&a));
            }
        }
        let r0 = t.relay_id("wss://r0.example").unwrap();
        assert_eq!(t.popularity(r0), 5);
        assert_eq!(t.edge_count(), 15);
    }
}

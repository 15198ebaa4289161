//! Routes beyond the feed: the inbox, threads, single events and profiles, and where to
//! publish — the read half of NIP-65 and NIP-17's DM inboxes, as checked plans.
//!
//! Every route is a pure function of a query, a [`RelayDirectory`], learned [`DeliveryStats`]
//! and a [`RouteBudget`]: the query names **candidate groups** ([`Candidates`]) — one per
//! reason a relay may be asked (the author's write relays, a tagged person's read relays, the
//! hints, the reader's read relays, a recipient's DM inbox) with a cap each — and one shared
//! selection ([`select`]) picks relays from them under the connection budget. Within a group
//! relays rank by learned quality ([`relay_quality`]), so dead relays sink, ties broken by URL.
//! Selection is breadth first: every group gets its first relay before any gets a second, so
//! the total cap cuts depth before it cuts people; a group the cap left with no relay is
//! reported in [`RoutePlan::cut_off`]. [`check_route`] checks a plan against its candidates and
//! returns every violation.
//!
//! One file per route kind: [`inbox`], [`dms`], [`thread`], [`pointer`](mod@pointer),
//! [`publish`], and [`filter`] for any filter a client subscribes to; [`lists`] says where a
//! person's own edited relay list goes.
//!
//! ```
//! use nostr_outbox_client::routes::Route;
//! use nostr_outbox_client::{PublishQuery, Reason, RelayDirectory, RouteBudget, RouteContext};
//! use nostr_outbox_core::{DeliveryStats, RawRelayList, UrlPolicy};
//! # let (author, friend) = (nostr::key::Keys::generate().public_key(),
//! #                         nostr::key::Keys::generate().public_key());
//! let r = |url: &str, marker: &str| vec!["r".to_string(), url.to_string(), marker.to_string()];
//! let lists = [
//!     RawRelayList { author, created_at: 1, tags: vec![r("wss://out.example", "write")] },
//!     RawRelayList { author: friend, created_at: 1, tags: vec![r("wss://in.example", "read")] },
//! ];
//! let directory = RelayDirectory::from_relay_lists(UrlPolicy::default(), lists);
//! let stats = DeliveryStats::new();
//! let ctx = RouteContext { directory: &directory, stats: &stats, now: 0,
//!                          budget: RouteBudget::default() };
//! let note = PublishQuery { author, kind: nostr::event::Kind::TextNote,
//!                           tags: vec![vec!["p".into(), friend.to_hex()]] };
//! let (plan, violations) = note.plan_checked(&ctx);
//! assert!(violations.is_empty());
//! assert_eq!(plan.target("wss://in.example").unwrap().reasons, [Reason::TaggedRead(friend)]);
//! assert_eq!(plan.target("wss://out.example").unwrap().reasons, [Reason::AuthorWrite(author)]);
//! ```

use std::fmt;

use nostr::filter::Filter;
use nostr::key::PublicKey;
use serde::Serialize;

use crate::directory::RelayDirectory;
use nostr_outbox_core::stats::DeliveryStats;
use nostr_outbox_core::url_policy::UrlPolicy;

mod check;
pub mod dms;
pub mod filter;
pub mod inbox;
pub mod lists;
pub mod pointer;
pub mod publish;
mod select;
pub mod thread;

pub use check::{check_route, RouteViolation};
pub use dms::{DmQuery, DmSource};
pub use filter::FilterQuery;
pub use inbox::InboxQuery;
pub use lists::{
    edit_list, list_targets, EditedList, ListChange, ListEdit, ListEditError, ListReason,
    ListTarget, ListTargets, Marker,
};
pub use pointer::{Pointer, PointerError};
pub use publish::PublishQuery;
pub use select::select;
pub use thread::{relation, Relation, RepliersQuery, ThreadQuery, THREAD_KINDS};

/// Which route a plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteKind {
    /// Events tagging the reader, from the reader's read relays.
    Inbox,
    /// Gift wraps to the reader (NIP-17 direct messages), from its DM inbox relays.
    Dms,
    /// Replies to, quotes of and reactions to one event.
    Thread,
    /// One event, address or profile.
    Pointer,
    /// Where to send an event.
    Publish,
    /// Any filter, routed by what it names ([`FilterQuery`]).
    Subscription,
}

impl RouteKind {
    /// Whether the route reads (its targets carry filters) rather than publishes.
    pub fn reads(self) -> bool {
        !matches!(self, RouteKind::Publish)
    }
}

impl fmt::Display for RouteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteKind::Inbox => "inbox",
            RouteKind::Dms => "dms",
            RouteKind::Thread => "thread",
            RouteKind::Pointer => "pointer",
            RouteKind::Publish => "publish",
            RouteKind::Subscription => "subscription",
        })
    }
}

/// Why a relay may be (and was) chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "reason", content = "pubkey", rename_all = "snake_case")]
pub enum Reason {
    /// The event's (or pointer's, or a reply's) author writes there (NIP-65 `write`).
    AuthorWrite(PublicKey),
    /// The event's author reads there (NIP-65 `read`): replies to and mentions of the event
    /// are sent and found there.
    AuthorRead(PublicKey),
    /// A tagged person reads there (NIP-65 `read`): mentions of them are sent and found there.
    TaggedRead(PublicKey),
    /// A recipient's NIP-17 DM inbox (kind:10050).
    DmInbox(PublicKey),
    /// A relay hint in a tag or a `nevent`/`nprofile`/`naddr` code.
    Hint,
    /// The reader's own read relay (the reader's kind:10002).
    ReaderRead,
    /// One of the reader's configured relays, used because the reader's list names no read
    /// relay.
    ReaderRelay,
}

impl Reason {
    /// The person the reason is about, if any.
    pub fn person(&self) -> Option<&PublicKey> {
        match self {
            Reason::AuthorWrite(pk)
            | Reason::AuthorRead(pk)
            | Reason::TaggedRead(pk)
            | Reason::DmInbox(pk) => Some(pk),
            Reason::Hint | Reason::ReaderRead | Reason::ReaderRelay => None,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::AuthorWrite(pk) => write!(f, "author-write {pk}"),
            Reason::AuthorRead(pk) => write!(f, "author-read {pk}"),
            Reason::TaggedRead(pk) => write!(f, "tagged-read {pk}"),
            Reason::DmInbox(pk) => write!(f, "dm-inbox {pk}"),
            Reason::Hint => f.write_str("hint"),
            Reason::ReaderRead => f.write_str("reader-read"),
            Reason::ReaderRelay => f.write_str("reader-relay"),
        }
    }
}

/// How many relays a route may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RouteBudget {
    /// Relays in total (connections).
    pub max_relays: usize,
    /// Relays per tagged person or recipient (their read or DM inbox relays).
    pub per_person: usize,
    /// Write relays of the event's or pointer's author (and, for a thread, its read relays;
    /// for a thread's second pass, each replier's write relays).
    pub per_author: usize,
    /// Relay hints taken.
    pub hints: usize,
}

impl Default for RouteBudget {
    /// 16 relays in all; two per tagged person, four of the author's (of each
    /// kind a route asks), three hints.
    fn default() -> Self {
        Self {
            max_relays: 16,
            per_person: 2,
            per_author: 4,
            hints: 3,
        }
    }
}

/// What a route is planned with: who is where, what was learned, and the budget.
#[derive(Clone, Copy, Debug)]
pub struct RouteContext<'a> {
    /// Who writes, reads and takes direct messages where.
    pub directory: &'a RelayDirectory,
    /// Learned relay quality, keyed by canonical URL.
    pub stats: &'a DeliveryStats,
    /// The present (unix seconds), for decaying the stats.
    pub now: u64,
    /// How many relays the route may use.
    pub budget: RouteBudget,
}

/// One reason's relays: the relays it would ask, and how many of them it may use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CandidateGroup {
    /// Why these relays.
    pub reason: Reason,
    /// Canonical URLs, without duplicates, in the order they were named.
    pub urls: Vec<String>,
    /// At most this many of them.
    pub cap: usize,
}

/// Every relay a route may ask, grouped by reason in priority order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Candidates {
    /// The groups, highest priority first (selection serves them in this order).
    pub groups: Vec<CandidateGroup>,
    /// People the route should reach but for whom no relay of the needed kind is known.
    pub unknown: Vec<PublicKey>,
    /// Relay hints whose URL the policy refused.
    pub dropped_hints: usize,
}

impl Candidates {
    /// Adds `urls` under `reason` (merged into an existing group of the same reason; duplicate
    /// URLs kept once). A person's group without any URL records the person as unknown instead.
    pub fn push(&mut self, reason: Reason, urls: impl IntoIterator<Item = String>, cap: usize) {
        let index = match self.groups.iter().position(|g| g.reason == reason) {
            Some(i) => i,
            None => {
                self.groups.push(CandidateGroup {
                    reason,
                    urls: Vec::new(),
                    cap,
                });
                self.groups.len() - 1
            }
        };
        let group = &mut self.groups[index];
        for url in urls {
            if !group.urls.contains(&url) {
                group.urls.push(url);
            }
        }
        if group.urls.is_empty() {
            self.groups.remove(index);
            if let Some(pk) = reason.person() {
                if !self.unknown.contains(pk) {
                    self.unknown.push(*pk);
                }
            }
        }
    }

    /// Adds a reader's configured relays (`raw`, canonicalised by the directory's policy; one
    /// that does not parse is dropped) as [`Reason::ReaderRelay`]: what is asked when its lists
    /// name no relay. With no candidate at all after them, the reader is unknown.
    pub fn push_reader_relays(
        &mut self,
        directory: &RelayDirectory,
        reader: PublicKey,
        raw: &[String],
        cap: usize,
    ) {
        let policy = directory.policy();
        let configured = raw.iter().filter_map(|raw| policy.canonicalize(raw).ok());
        self.push(Reason::ReaderRelay, configured, cap);
        if self.groups.is_empty() {
            self.unknown.push(reader);
        }
    }

    /// Adds each person's read relays as [`Reason::TaggedRead`] (capped at `cap` each): where
    /// what mentions them is sent and found.
    pub fn push_read_relays(
        &mut self,
        directory: &RelayDirectory,
        people: impl IntoIterator<Item = PublicKey>,
        cap: usize,
    ) {
        for person in people {
            self.push(
                Reason::TaggedRead(person),
                directory.read_relays(&person).iter().cloned(),
                cap,
            );
        }
    }

    /// Adds raw hint URLs as [`Reason::Hint`], read under `policy` (refused ones are counted).
    pub fn push_hints<S: AsRef<str>>(
        &mut self,
        policy: &UrlPolicy,
        hints: impl IntoIterator<Item = S>,
        cap: usize,
    ) {
        let mut urls = Vec::new();
        for raw in hints {
            match policy.canonicalize(raw.as_ref()) {
                Ok(url) => urls.push(url),
                Err(_) => self.dropped_hints += 1,
            }
        }
        if !urls.is_empty() {
            self.push(Reason::Hint, urls, cap);
        }
    }

    /// The group of `reason`, if any.
    pub fn group(&self, reason: &Reason) -> Option<&CandidateGroup> {
        self.groups.iter().find(|g| &g.reason == reason)
    }

    /// Whether `url` is a candidate for `reason`.
    pub fn offers(&self, url: &str, reason: &Reason) -> bool {
        self.group(reason)
            .is_some_and(|g| g.urls.iter().any(|u| u == url))
    }
}

/// One relay of a route and why it was chosen.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteTarget {
    /// Canonical URL.
    pub url: String,
    /// The reasons it serves, in the order they were served.
    pub reasons: Vec<Reason>,
    /// Its learned quality when chosen ([`relay_quality`]).
    pub quality: f64,
    /// The REQ filters to send it (empty for a publish route).
    pub filters: Vec<Filter>,
}

/// A route made concrete: which relays, why, and what to ask them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoutePlan {
    /// Which route.
    pub kind: RouteKind,
    /// The chosen relays, sorted by URL.
    pub targets: Vec<RouteTarget>,
    /// Groups that got no relay because the total budget was used up.
    pub cut_off: Vec<Reason>,
    /// Groups with relays that got none because their own cap is 0 (`per_person`,
    /// `per_author` or `hints` set to 0): dropped by choice, and still reported.
    pub left_out: Vec<Reason>,
    /// People the route should reach but for whom no relay is known.
    pub unknown: Vec<PublicKey>,
}

impl RoutePlan {
    /// Narrows each relay chosen only for the write relays of authors `asked` holds to those
    /// authors' filters: such a relay is asked about them alone, any other the whole filter.
    pub fn narrow_to_authors(&mut self, asked: impl Fn(&PublicKey) -> bool) {
        for target in &mut self.targets {
            let mut only: Vec<PublicKey> = Vec::new();
            for reason in &target.reasons {
                match reason {
                    Reason::AuthorWrite(pk) if asked(pk) => only.push(*pk),
                    _ => {
                        only.clear();
                        break;
                    }
                }
            }
            if !only.is_empty() {
                for filter in &mut target.filters {
                    filter.authors = Some(only.iter().copied().collect());
                }
            }
        }
    }

    /// The chosen URLs, sorted.
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.targets.iter().map(|t| t.url.as_str())
    }

    /// The target for `url`, if chosen.
    pub fn target(&self, url: &str) -> Option<&RouteTarget> {
        self.targets.iter().find(|t| t.url == url)
    }
}

/// A route: a query that names its candidates and filters; planning and checking are shared.
pub trait Route {
    /// Which route this is.
    const KIND: RouteKind;

    /// Every relay the route may ask, grouped by reason, capped under `ctx.budget`.
    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates;

    /// The filters each chosen relay is asked (empty for publishing).
    fn filters(&self) -> Vec<Filter>;

    /// The plan: [`select`] over the candidates.
    fn plan(&self, ctx: &RouteContext<'_>) -> RoutePlan {
        select(Self::KIND, &self.candidates(ctx), self.filters(), ctx)
    }

    /// The plan and every invariant it breaks (empty when sound).
    fn plan_checked(&self, ctx: &RouteContext<'_>) -> (RoutePlan, Vec<RouteViolation>) {
        let candidates = self.candidates(ctx);
        let plan = select(Self::KIND, &candidates, self.filters(), ctx);
        let violations = check_route(&plan, &candidates, &ctx.budget);
        (plan, violations)
    }
}

/// How good a relay is for a route, from what was learned: learned liveness times learned
/// delivery (both posterior means, decayed to `now`; a relay never asked reads 0.25, one a
/// monitor saw lately higher, one that keeps failing near 0).
pub fn relay_quality(stats: &DeliveryStats, url: &str, now: u64) -> f64 {
    let s = stats.get_at(url, now);
    s.live_mean() * s.mean()
}

/// The distinct public keys of a list of tags' `p` tags, in order (malformed keys skipped).
pub(crate) fn tagged_people(tags: &[Vec<String>]) -> Vec<PublicKey> {
    let mut out: Vec<PublicKey> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for tag in tags {
        if tag.first().map(String::as_str) != Some("p") {
            continue;
        }
        if let Some(pk) = tag
            .get(1)
            .and_then(|hex| nostr_outbox_core::keys::public_key_from_hex(hex).ok())
        {
            if seen.insert(pk) {
                out.push(pk);
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests;

//! A thread: replies to, quotes of and reactions to one event, where NIP-65 says they are.
//!
//! A reply (or a mention, a reaction, a repost) is sent to the replier's write relays and to
//! the read relays of everyone it tags — the event's author first. So the route asks where the
//! event's author reads (where what answers them is sent) and writes (where their own replies
//! in the thread are), where each person the event tags reads (the conversation's
//! participants), and the relays the event's tags or its `nevent` code hint at. Every relay gets
//! the same filters ([`ThreadQuery::filters`]).
//!
//! Replies kept only on their authors' own write relays are found by a second pass:
//! [`RepliersQuery`] asks the write relays of the people who replied that the first pass did
//! not ask. [`relation`] says what each event found is to the thread.

use std::collections::HashSet;

use nostr::event::{Event, EventId, Kind};
use nostr::filter::{Filter, SingleLetterTag};
use nostr::key::PublicKey;
use nostr::nips::nip19::Nip19Event;
use serde::Serialize;

use super::filter::MAX_ROUTED_PEOPLE;
use super::{tagged_people, Candidates, Reason, Route, RouteContext, RouteKind};

/// The tags whose third entry is a relay hint (NIP-01, NIP-10, NIP-18).
const HINTED_TAGS: [&str; 4] = ["e", "a", "p", "q"];

/// The kinds asked for with `#e`: text-note replies (NIP-10), reposts (NIP-18), reactions
/// (NIP-25), comments (NIP-22) and zap receipts (NIP-57). Quotes (`#q`) are asked for in any
/// kind, deeper comments (`#E`) in kind:1111.
pub const THREAD_KINDS: [Kind; 6] = [
    Kind::TextNote,
    Kind::Repost,
    Kind::Reaction,
    Kind::GenericRepost,
    Kind::Comment,
    Kind::ZapReceipt,
];

/// Replies to (and quotes of) one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadQuery {
    /// The event.
    pub id: EventId,
    /// Its author, when known.
    pub author: Option<PublicKey>,
    /// Its tags, when the event itself is known (people and hints come from them).
    pub tags: Vec<Vec<String>>,
    /// Relay hints from elsewhere (a `nevent` code), raw.
    pub hints: Vec<String>,
    /// Also ask for quotes (`#q`).
    pub quotes: bool,
}

impl ThreadQuery {
    /// The thread of a known event: its author, tags and the hints in them.
    pub fn of_event(event: &Event) -> Self {
        Self {
            id: event.id,
            author: Some(event.pubkey),
            tags: event.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
            hints: Vec::new(),
            quotes: true,
        }
    }

    /// The thread of an event known only by its `nevent` code: its author and relays, if given.
    pub fn of_nevent(code: &Nip19Event) -> Self {
        Self {
            id: code.event_id,
            author: code.author,
            tags: Vec::new(),
            hints: code.relays.iter().map(|r| r.to_string()).collect(),
            quotes: true,
        }
    }
}

impl Route for ThreadQuery {
    const KIND: RouteKind = RouteKind::Thread;

    /// In priority order: the author's write relays, the author's read relays (both up to
    /// `per_author`), the hints (up to `hints`), then each tagged person's read relays (up to
    /// `per_person`; the author is not tagged twice).
    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let budget = ctx.budget;
        let dir = ctx.directory;
        let mut candidates = Candidates::default();
        if let Some(author) = self.author {
            let (write, read) = (dir.write_relays(&author), dir.read_relays(&author));
            // An author with neither is unknown (once, under their write relays); one with
            // either is reached there.
            if !write.is_empty() || read.is_empty() {
                candidates.push(
                    Reason::AuthorWrite(author),
                    write.iter().cloned(),
                    budget.per_author,
                );
            }
            if !read.is_empty() {
                candidates.push(
                    Reason::AuthorRead(author),
                    read.iter().cloned(),
                    budget.per_author,
                );
            }
        }
        let tag_hints = self.tags.iter().filter_map(|t| {
            let name = t.first()?;
            HINTED_TAGS
                .contains(&name.as_str())
                .then(|| t.get(2))
                .flatten()
                .filter(|h| !h.is_empty())
        });
        let hints: Vec<&String> = self.hints.iter().chain(tag_hints).collect();
        candidates.push_hints(dir.policy(), hints, budget.hints);
        let people = tagged_people(&self.tags)
            .into_iter()
            .filter(|p| Some(*p) != self.author);
        candidates.push_read_relays(dir, people, budget.per_person);
        candidates
    }

    /// `#e` = the id, for [`THREAD_KINDS`]; `#E` = the id, for comments deeper in a NIP-22
    /// thread; and, with `quotes`, `#q` = the id in any kind.
    fn filters(&self) -> Vec<Filter> {
        let mut filters = vec![Filter::new().event(self.id).kinds(THREAD_KINDS)];
        if self.quotes {
            filters.push(Filter::new().custom_tag(SingleLetterTag::LOWERCASE_Q, self.id.to_hex()));
        }
        filters.push(
            Filter::new()
                .custom_tag(SingleLetterTag::UPPERCASE_E, self.id.to_hex())
                .kind(Kind::Comment),
        );
        filters
    }
}

/// A thread's second pass: the write relays of the people who replied, those a first pass
/// did not ask, with the thread's filters. A reply is sent to its author's write relays, and
/// a relay that refused it elsewhere (or a reader that never asked there) leaves it only
/// there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepliersQuery {
    /// The thread (its filters are asked again).
    pub thread: ThreadQuery,
    /// The people whose replies were found, in the order found; at most
    /// [`MAX_ROUTED_PEOPLE`] are routed.
    pub repliers: Vec<PublicKey>,
    /// Canonical URLs already asked, left out.
    pub asked: Vec<String>,
}

impl Route for RepliersQuery {
    const KIND: RouteKind = RouteKind::Thread;

    /// Each replier's write relays not yet asked, as [`Reason::AuthorWrite`] of the replier
    /// (up to `per_author`); a replier all of whose write relays were asked is left out, one
    /// without a known list is reported unknown.
    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = Candidates::default();
        let asked: HashSet<&str> = self.asked.iter().map(String::as_str).collect();
        let mut seen = HashSet::new();
        for replier in self.repliers.iter().take(MAX_ROUTED_PEOPLE) {
            if !seen.insert(*replier) {
                continue;
            }
            let write = ctx.directory.write_relays(replier);
            let new: Vec<String> = write
                .iter()
                .filter(|u| !asked.contains(u.as_str()))
                .cloned()
                .collect();
            if !write.is_empty() && new.is_empty() {
                continue;
            }
            candidates.push(Reason::AuthorWrite(*replier), new, ctx.budget.per_author);
        }
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        self.thread.filters()
    }
}

/// What an event found by a thread's filters is to the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    /// A kind:1 note whose `e` tag (not marked `mention`) names the root or an event of the
    /// thread (NIP-10), or a kind:1111 comment whose `E` or `e` tag does (NIP-22).
    Reply,
    /// An event citing the root or an event of the thread in a `q` tag (NIP-18).
    Quote,
    /// A kind:7 reaction (NIP-25).
    Reaction,
    /// A kind:6 or kind:16 repost (NIP-18).
    Repost,
    /// A kind:9735 zap receipt (NIP-57).
    Zap,
    /// Anything else the filters matched: a note naming it as a `mention`, another kind.
    Mention,
}

impl Relation {
    /// Every relation, in the order a summary names them.
    pub const ALL: [Relation; 6] = [
        Relation::Reply,
        Relation::Quote,
        Relation::Reaction,
        Relation::Repost,
        Relation::Zap,
        Relation::Mention,
    ];

    /// Its name: `reply`, `quote`, `reaction`, `repost`, `zap` or `mention`.
    pub fn label(self) -> &'static str {
        match self {
            Relation::Reply => "reply",
            Relation::Quote => "quote",
            Relation::Reaction => "reaction",
            Relation::Repost => "repost",
            Relation::Zap => "zap",
            Relation::Mention => "mention",
        }
    }

    /// Its plural, for counts: `replies`, `quotes`, …
    pub fn plural(self) -> &'static str {
        match self {
            Relation::Reply => "replies",
            Relation::Quote => "quotes",
            Relation::Reaction => "reactions",
            Relation::Repost => "reposts",
            Relation::Zap => "zaps",
            Relation::Mention => "mentions",
        }
    }
}

/// What `event` is to the thread of `root`, whose other events found so far are `thread`
/// (replies to them count as replies in the thread). Reactions, reposts and zaps by kind;
/// then replies by their `e`/`E` tags; then quotes by their `q` tags; anything else is a
/// mention. Malformed tags are passed over.
pub fn relation(event: &Event, root: &EventId, thread: &HashSet<EventId>) -> Relation {
    let names = |value: Option<&String>| {
        value
            .and_then(|hex| EventId::from_hex(hex).ok())
            .is_some_and(|id| id == *root || thread.contains(&id))
    };
    let kind = event.kind;
    if kind == Kind::Reaction {
        return Relation::Reaction;
    }
    if kind == Kind::Repost || kind == Kind::GenericRepost {
        return Relation::Repost;
    }
    if kind == Kind::ZapReceipt {
        return Relation::Zap;
    }
    let tags = || event.tags.iter().map(|t| t.as_slice());
    let replies = match kind {
        Kind::TextNote => tags().any(|t| {
            t.first().is_some_and(|n| n == "e")
                && names(t.get(1))
                && t.get(3).is_none_or(|marker| marker != "mention")
        }),
        Kind::Comment => {
            tags().any(|t| t.first().is_some_and(|n| n == "e" || n == "E") && names(t.get(1)))
        }
        _ => false,
    };
    if replies {
        return Relation::Reply;
    }
    if tags().any(|t| t.first().is_some_and(|n| n == "q") && names(t.get(1))) {
        return Relation::Quote;
    }
    Relation::Mention
}

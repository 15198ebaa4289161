//! A thread: replies to and quotes of one event, where they are likely to be.
//!
//! A reply is sent to the replied author's read relays and the replier's write relays; the
//! route asks where the event's author writes (replies that reach the author's outbox), where
//! each person the event tags reads (the conversation's participants), and the relays the
//! event's tags or its `nevent` code hint at. Every relay gets the same filters: `#e` = the id,
//! and `#q` = the id for quotes.

use nostr::event::{Event, EventId};
use nostr::filter::{Filter, SingleLetterTag};
use nostr::key::PublicKey;
use nostr::nips::nip19::Nip19Event;

use super::{tagged_people, Candidates, Reason, Route, RouteContext, RouteKind};

/// The tags whose third entry is a relay hint (NIP-01, NIP-10, NIP-18).
const HINTED_TAGS: [&str; 4] = ["e", "a", "p", "q"];

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

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let budget = ctx.budget;
        let dir = ctx.directory;
        let mut candidates = Candidates::default();
        if let Some(author) = self.author {
            candidates.push(
                Reason::AuthorWrite(author),
                dir.write_relays(&author).iter().cloned(),
                budget.per_author,
            );
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
        candidates.push_read_relays(dir, tagged_people(&self.tags), budget.per_person);
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        let mut filters = vec![Filter::new().event(self.id)];
        if self.quotes {
            filters.push(Filter::new().custom_tag(SingleLetterTag::LOWERCASE_Q, self.id.to_hex()));
        }
        filters
    }
}

//! Where to publish: the author's write relays and the read relays of everyone the event tags;
//! for private messages only the recipients' DM inboxes.
//!
//! NIP-65: an event goes where its author writes (so followers find it) and where each tagged
//! person reads (so they are notified). NIP-17: a private message (kind:14, or the kind:1059
//! gift wrap that carries it) goes to each recipient's kind:10050 DM inbox relays and nowhere
//! else — public relays would only leak its metadata.

use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;

use super::{tagged_people, Candidates, Reason, Route, RouteContext, RouteKind};

/// An event to publish: who writes it, its kind and its tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishQuery {
    /// The author (for a gift wrap, the throwaway key that signed it; not used).
    pub author: PublicKey,
    /// The kind.
    pub kind: Kind,
    /// The raw tags; `p` tags name the people to reach.
    pub tags: Vec<Vec<String>>,
}

impl PublishQuery {
    /// The route of a signed (or about to be signed) event.
    pub fn of_event(event: &Event) -> Self {
        Self {
            author: event.pubkey,
            kind: event.kind,
            tags: event.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
        }
    }

    /// Whether the event is a private message that goes only to DM inboxes.
    pub fn is_private(&self) -> bool {
        is_private(self.kind)
    }
}

/// Whether events of `kind` are private messages that go only to DM inboxes.
fn is_private(kind: Kind) -> bool {
    matches!(kind, Kind::PrivateDirectMessage | Kind::GiftWrap)
}

/// A publish route's candidates for an event by `author` of `kind` tagging `people` (distinct
/// keys on the curve, in tag order): what [`PublishQuery`]'s [`Route::candidates`] gives once
/// its `p` tags are read. For a caller that routes the same event many times and reads its
/// tags once. Like every route's candidates, they depend on the directory and the budget,
/// never on the stats.
pub fn publish_candidates(
    author: PublicKey,
    kind: Kind,
    people: impl IntoIterator<Item = PublicKey>,
    ctx: &RouteContext<'_>,
) -> Candidates {
    let dir = ctx.directory;
    let budget = ctx.budget;
    let mut candidates = Candidates::default();
    if is_private(kind) {
        for person in people {
            candidates.push(
                Reason::DmInbox(person),
                dir.dm_relays(&person).iter().cloned(),
                budget.per_person,
            );
        }
        return candidates;
    }
    candidates.push(
        Reason::AuthorWrite(author),
        dir.write_relays(&author).iter().cloned(),
        budget.per_author,
    );
    let tagged = people.into_iter().filter(|p| *p != author);
    candidates.push_read_relays(dir, tagged, budget.per_person);
    candidates
}

impl Route for PublishQuery {
    const KIND: RouteKind = RouteKind::Publish;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        publish_candidates(self.author, self.kind, tagged_people(&self.tags), ctx)
    }

    fn filters(&self) -> Vec<Filter> {
        Vec::new()
    }
}

//! The inbox: events that tag the reader, asked of the relays where the reader reads.
//!
//! NIP-65: whoever mentions someone sends the event to that person's read relays, so the
//! reader finds mentions, replies and reactions on its own read relays (its kind:10002
//! `read` or unmarked entries). A reader whose list names none is asked on its configured
//! relays instead. The reader's own kind:10002 is one more list in the directory.

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;

use super::{Candidates, Reason, Route, RouteContext, RouteKind};

/// Events tagging `reader` (`#p`), optionally of some kinds and since a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxQuery {
    /// The reader.
    pub reader: PublicKey,
    /// The reader's configured relays (raw), asked when the reader's list names no read relay.
    pub reader_relays: Vec<String>,
    /// Only these kinds (empty: every kind).
    pub kinds: Vec<Kind>,
    /// Only events at or after this time (unix seconds).
    pub since: Option<u64>,
    /// At most this many events per relay.
    pub limit: Option<usize>,
}

impl InboxQuery {
    /// Every event tagging `reader`, on its read relays.
    pub fn new(reader: PublicKey) -> Self {
        Self {
            reader,
            reader_relays: Vec::new(),
            kinds: Vec::new(),
            since: None,
            limit: None,
        }
    }
}

impl Route for InboxQuery {
    const KIND: RouteKind = RouteKind::Inbox;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = Candidates::default();
        let cap = ctx.budget.max_relays;
        let read = ctx.directory.read_relays(&self.reader);
        if !read.is_empty() {
            candidates.push(Reason::ReaderRead, read.iter().cloned(), cap);
            return candidates;
        }
        candidates.push_reader_relays(ctx.directory, self.reader, &self.reader_relays, cap);
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        let mut filter = Filter::new().pubkey(self.reader);
        if !self.kinds.is_empty() {
            filter = filter.kinds(self.kinds.iter().copied());
        }
        if let Some(since) = self.since {
            filter = filter.since(Timestamp::from_secs(since));
        }
        if let Some(limit) = self.limit {
            filter = filter.limit(limit);
        }
        vec![filter]
    }
}

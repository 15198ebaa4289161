//! What a feed starts from.

use std::sync::Arc;

use nostr::event::Event;
use nostr::key::PublicKey;
use nostr_outbox_client::{MemoryStore, StatsStore};
use nostr_outbox_core::{RawRelayList, Router};

use crate::penalty::PenaltyBox;

/// Everything a feed starts from.
#[derive(Debug)]
pub struct FeedInput {
    /// The strategy, its budget and its URL policy ([`Router::policy`]): which relay URLs are
    /// acceptable, everywhere the feed canonicalises one.
    pub router: Router,
    /// The reader's follows.
    pub follows: Vec<PublicKey>,
    /// The reader's own relays: the residual pool and where relay lists are looked up.
    pub reader_relays: Vec<String>,
    /// Relay lists already known (more are discovered live when enabled).
    pub relay_lists: Vec<RawRelayList>,
    /// Where learned stats are loaded from and saved to.
    pub store: Arc<dyn StatsStore>,
    /// Relays already set aside (e.g. loaded from the last run).
    pub penalties: PenaltyBox,
    /// NIP-66 monitor relays: at start, their kind:30166 reports about the relays of the known
    /// lists seed a liveness prior for relays the stats know nothing about
    /// ([`nostr_outbox_client::apply_monitor_prior`]). Empty: no monitor data.
    pub monitor_relays: Vec<String>,
    /// Relay hints the client knows (the reader's kind:3 `p` tags through
    /// [`nostr_outbox_core::contact_list_hints`], pointers' relays): offered to every route table,
    /// with the relays learned stats saw each follow's notes arrive on, when the router's
    /// config says `hints = true` ([`Router::hints`]). Bounded per follow and source.
    pub hints: Vec<nostr_outbox_core::Hint>,
    /// Per relay, up to when it delivered everything it holds for some follows: what the last
    /// run ended with ([`FeedSummary::marks`](crate::FeedSummary::marks)), or a client's own
    /// event database. A relay asked again about follows its mark names is asked only since
    /// the mark less [`OpenFeed::margin`](crate::OpenFeed::margin) (when that is inside the
    /// window) by a continuing feed; a `--once` run asks the whole window, and ends with marks
    /// for a continuing feed after it. At most 1024 are taken (the newest).
    pub marks: Vec<RelayMark>,
}

/// Up to when a relay delivered everything it holds for some follows (see
/// [`FeedInput::marks`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayMark {
    /// The relay (canonical URL, as the feed names it).
    pub relay: String,
    /// Unix seconds; a mark after the present is taken as the present.
    pub at: u64,
    /// The follows its feed filter named.
    pub authors: Vec<PublicKey>,
}

impl FeedInput {
    /// An input with no relay lists yet and stats kept in memory; URLs go through the router's
    /// policy.
    pub fn new<S: AsRef<str>>(
        router: Router,
        follows: Vec<PublicKey>,
        reader_relays: impl IntoIterator<Item = S>,
    ) -> Self {
        Self {
            router,
            follows,
            reader_relays: reader_relays
                .into_iter()
                .map(|s| s.as_ref().to_string())
                .collect(),
            relay_lists: Vec::new(),
            store: Arc::new(MemoryStore::new()),
            penalties: PenaltyBox::new(),
            monitor_relays: Vec::new(),
            hints: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// Adds a signed kind:10002 event; returns false (and keeps nothing) when it is another kind
    /// or does not verify.
    pub fn add_relay_list_event(&mut self, event: &Event) -> bool {
        match RawRelayList::try_from(event) {
            Ok(list) => {
                self.relay_lists.push(list);
                true
            }
            Err(_) => false,
        }
    }
}

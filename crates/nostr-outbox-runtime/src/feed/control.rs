//! How a feed's handle talks to the running feed.

use nostr::key::PublicKey;
use nostr_outbox_client::routes::{FilterQuery, RouteBudget, RoutePlan};
use nostr_outbox_core::RawRelayList;

/// What a [`FeedHandle`](super::FeedHandle) tells its running feed.
#[derive(Debug)]
pub(crate) enum Control {
    AddLists(Vec<RawRelayList>),
    SetFollows(Vec<PublicKey>),
    /// Plan a client's subscription over what the feed knows now.
    Route {
        query: Box<FilterQuery>,
        budget: RouteBudget,
        reply: tokio::sync::oneshot::Sender<Result<RoutePlan, SubscribeError>>,
    },
    Shutdown,
}

/// Why [`FeedHandle::subscribe`](crate::FeedHandle::subscribe) opened nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubscribeError {
    /// The feed has ended.
    Ended,
    /// No relay to ask: none known for what the filter names, and no usable reader relay.
    NoRelay,
    /// The route broke an invariant (a bug, reported rather than sent).
    Broken(String),
}

impl std::fmt::Display for SubscribeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubscribeError::Ended => f.write_str("the feed has ended"),
            SubscribeError::NoRelay => f.write_str("no relay to ask"),
            SubscribeError::Broken(why) => write!(f, "the route is broken: {why}"),
        }
    }
}

impl std::error::Error for SubscribeError {}

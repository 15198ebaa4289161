//! What a feed's channel carries: notes and status events.

use std::time::Duration;

use nostr::event::Event;
use nostr_outbox_client::Carriers;

use crate::feed::slot::{Failure, FrameDrop};

/// What the feed channel carries.
#[derive(Clone, Debug)]
pub enum FeedEvent {
    /// A verified note of a follow, the first time any relay delivered it.
    Note {
        /// The note.
        event: Box<Event>,
        /// The relay that delivered it first.
        relay: String,
    },
    /// A verified note of a follow that a probe found after the fetch, on a relay the plan did
    /// not ask, the first time any relay delivered it: a note of the feed's window the plan
    /// missed. Apart from [`FeedEvent::Note`] so a client can tell the plan's recall from what
    /// probing added (the notes arrive after the fetch, in a `--once` run at its end); most
    /// clients show both alike.
    Found {
        /// The note.
        event: Box<Event>,
        /// The probed relay that returned it.
        relay: String,
    },
    /// Something happened to a relay or the plan.
    Status(Status),
}

/// Status events, for display and for tests.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// A plan was made and applied.
    Planned {
        /// 1 for the first plan of the feed.
        plan: u64,
        /// The strategy's name.
        strategy: String,
        /// Connections the plan asks.
        connections: usize,
        /// Relay lists known when planning.
        relay_lists: usize,
        /// Relays newly dialled.
        dial: usize,
        /// Relays whose filter was replaced in place.
        replace: usize,
        /// Relays closed.
        close: usize,
        /// Relays left alone.
        unchanged: usize,
    },
    /// A slot's WebSocket is open.
    Connected {
        /// Canonical relay URL.
        relay: String,
        /// Time for TCP, TLS and the WebSocket handshake.
        handshake: Duration,
    },
    /// A relay sent EOSE for the current feed filter.
    Eose {
        /// Canonical relay URL.
        relay: String,
        /// The filter's generation.
        generation: u64,
        /// Time from REQ to EOSE.
        elapsed: Duration,
    },
    /// A relay sent EOSE for the relay-list lookup.
    ListsEose {
        /// Canonical relay URL.
        relay: String,
    },
    /// An attempt on a relay failed; the slot retries after a backoff unless set aside.
    Failed {
        /// Canonical relay URL.
        relay: String,
        /// What went wrong (its `Display` is the text to show; escape it before display).
        reason: Failure,
        /// Consecutive failures so far.
        strikes: u32,
    },
    /// A relay that asked for sign-in (NIP-42) accepted ours; the refused REQs are sent again.
    Authenticated {
        /// Canonical relay URL.
        relay: String,
    },
    /// A relay refused a subscription in a way retrying cannot fix.
    Refused {
        /// Canonical relay URL.
        relay: String,
        /// The CLOSED message.
        reason: String,
    },
    /// A relay was set aside; its authors are re-planned.
    Penalised {
        /// Canonical relay URL.
        relay: String,
        /// Unix seconds until which it stays set aside.
        until: u64,
        /// The last failure.
        reason: String,
    },
    /// A frame was dropped.
    Dropped {
        /// Canonical relay URL.
        relay: String,
        /// Why.
        reason: FrameDrop,
    },
    /// Every slot of the current plan has answered or been set aside.
    Settled,
    /// No reader relay is usable: the residual is carried by others (or by nobody).
    Carriers {
        /// Who carries it now.
        carriers: Carriers,
        /// The relays carrying it.
        relays: Vec<String>,
    },
    /// A plan broke an invariant and was not applied; the last good plan stays.
    PlanRejected {
        /// The violations.
        reason: String,
    },
    /// Relays the plan did not ask were probed and what they returned was learned
    /// ([`FeedSummary::probes`](crate::FeedSummary::probes)).
    Probed {
        /// Relays probed.
        relays: usize,
        /// Of those, relays that answered.
        answered: usize,
        /// Notes they returned (learned from).
        events: u64,
        /// Of those, notes no relay had delivered before, passed on as [`FeedEvent::Found`].
        found: u64,
    },
}

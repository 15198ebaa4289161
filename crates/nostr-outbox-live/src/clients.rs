//! Other clients on the bench's world: a [`LiveClient`] reads the follows' feed from the same
//! local relays, session after session, and the bench scores what it got with the simulator's
//! definitions, beside the runtime's rows.
//!
//! A client is registered with [`register_live_client!`](crate::register_live_client) by a
//! crate the running binary links; `outbox bench --live` runs every registered client. This
//! crate registers none, so clients whose dependencies the published crates should not carry
//! (nostr-sdk's `Client`, for one) live in a crate of their own and run from a binary that
//! links it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use nostr::event::Event;
use nostr::key::PublicKey;
use nostr_outbox_sim::{Window, WindowScore};
use serde::Serialize;

/// What a client's factory is given once, before the first session.
#[derive(Clone, Debug)]
pub struct ClientSetup {
    /// The bench's routed-relay budget (for a client that has one).
    pub budget: usize,
    /// The bench's base planning seed.
    pub seed: u64,
}

/// One session's reads for a client.
#[derive(Debug)]
pub struct ClientSession<'a> {
    /// The session (from 0).
    pub session: u32,
    /// The follows' public keys.
    pub follows: &'a [PublicKey],
    /// The reader's relays, live URLs (`ws://127.0.0.1:PORT`).
    pub reader_relays: &'a [String],
    /// The follows' kind:10002 lists, signed by their keys: the runtime is handed the same
    /// lists, so a client hands them to its engine too rather than looking them up.
    pub relay_lists: &'a [Event],
    /// The reads, in order: per window, the `since` of its filter (unix seconds, live clock).
    /// Each read asks for the follows' kind:1 notes from `since` on.
    pub reads: &'a [(Window, u64)],
    /// The most notes a read can return (every note of the world fits).
    pub max_events: usize,
    /// How long a read may take at most: the runtime's connect timeout and its EOSE timeout
    /// together, as a relay's first answer may take one dial and one page there.
    pub read_timeout: Duration,
}

/// What a client's session returned.
#[derive(Debug, Default)]
pub struct ClientRun {
    /// Per read of [`ClientSession::reads`] (same order), the notes it returned.
    pub reads: Vec<Vec<Event>>,
    /// Relays the client dialled in the session (connected to or tried), the reader's included.
    pub dialled: usize,
}

/// A client the live bench runs on its world, its state (learned relays, lists) carried from
/// session to session as the client would carry it between runs.
pub trait LiveClient: Send + Sync {
    /// The row label.
    fn label(&self) -> String;

    /// Runs one session's reads.
    fn run<'a>(&'a self, session: ClientSession<'a>) -> ClientFuture<'a>;
}

/// What [`LiveClient::run`] returns: the session's reads, to be awaited.
pub type ClientFuture<'a> = Pin<Box<dyn Future<Output = ClientRun> + Send + 'a>>;

/// A registered client; submitted by [`register_live_client!`](crate::register_live_client).
pub struct LiveClientEntry {
    /// Sorts the rows (then the label).
    pub order: u32,
    /// Makes the client for one bench.
    pub make: fn(&ClientSetup) -> Box<dyn LiveClient>,
}

inventory::collect!(LiveClientEntry);

/// Registers a [`LiveClient`] factory: `register_live_client!(order, make)` with
/// `make: fn(&ClientSetup) -> Box<dyn LiveClient>`; rows sort by `order`.
#[macro_export]
macro_rules! register_live_client {
    ($order:expr, $make:expr) => {
        $crate::__inventory::submit! {
            $crate::clients::LiveClientEntry { order: $order, make: $make }
        }
    };
}

/// One client of every registered factory, in their order.
pub fn registered_clients(setup: &ClientSetup) -> Vec<Box<dyn LiveClient>> {
    let mut entries: Vec<&LiveClientEntry> = inventory::iter::<LiveClientEntry>().collect();
    entries.sort_by_key(|e| e.order);
    entries.into_iter().map(|e| (e.make)(setup)).collect()
}

/// One client in one session.
#[derive(Clone, Debug, Serialize)]
pub struct ClientSessionResult {
    /// The session.
    pub session: u32,
    /// Per read, the declared and total recall of what it returned in its window.
    pub windows: Vec<WindowScore>,
    /// Relays the client dialled, as it reports.
    pub dialled: usize,
    /// Relays that were asked for kind:1 notes, as the relays logged it.
    pub asked: usize,
    /// Distinct world notes returned, over the session's reads.
    pub notes: u64,
    /// Wall time of the session.
    pub elapsed: Duration,
}

impl ClientSessionResult {
    /// The score of `window`'s read, if it was read.
    pub fn window(&self, window: Window) -> Option<&WindowScore> {
        self.windows.iter().find(|w| w.window == window)
    }
}

/// One client over every session.
#[derive(Clone, Debug, Serialize)]
pub struct ClientResult {
    /// The label.
    pub label: String,
    /// Per session.
    pub sessions: Vec<ClientSessionResult>,
}

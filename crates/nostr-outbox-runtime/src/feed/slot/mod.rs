//! One slot: one task, one link to one relay's socket, two purposes (the feed, the
//! relay-list lookup), each fetched completely in author chunks and backward pages.
//!
//! A slot owns its link and nothing else (the socket under it may also carry lookups, probes
//! or publishing, each seeing only its own answers). It is told what to do by the coordinator
//! (`SlotCommand`) and reports what happened (`SlotReport`); it never touches the route
//! table, the stats or another slot, so a relay that stalls, floods or lies can only ever
//! stall its own task. It reconnects on its own with exponential backoff and jitter; deciding
//! that a relay has failed too often is the coordinator's business.
//!
//! # Paging
//!
//! Real relays cap each REQ, so one filter per relay fetches only the newest few hundred notes.
//! The slot pages by the rules of [`nostr_outbox_client::paging`] (the simulator pages by the same):
//! a purpose's filter is split into author chunks that fit the relay's limits (its NIP-11
//! document, fetched alongside the connect, or defaults), each chunk is asked with `limit` and
//! then again with an inclusive `until` while its pages come back full, and events are
//! de-duplicated per chunk so page-edge repeats are not counted new. One [`CapEstimate`] per
//! connection learns a relay's silent cap from all its pages. Pages run a few at a time within
//! the relay's subscription limit, one subscription (and one filter) per page, each with its own
//! id (`outbox-feed-7`) and its own EOSE deadline.
//!
//! The coordinator hears of a generation's EOSE once every chunk's paging ended, with what it
//! cost (pages, events received) and whether every chunk ended complete. A continuing feed keeps
//! each chunk's first page open after its EOSE, so live notes keep flowing.
//!
//! A new filter (generation) closes the purpose's subscriptions and starts paging anew; a new
//! connection does the same for every purpose.
//!
//! # One session per connection
//!
//! The slot speaks to the relay only through an `exchange::Session` on its
//! link: every page is an ask on it, and the slot reads the session's typed answers (events
//! admitted, EOSE, how a page ended), never frames. The session is the one reader of the
//! link's frames, as on every other path: it drops bad frames and says so, signs in once per
//! connection for all the pages when one is refused `auth-required:`, waits out
//! `rate-limited:` with one backoff counter per connection, and counts floods (valid events
//! outside the filter asked, the same event again on one subscription, or answers to
//! subscriptions closed longer than the EOSE timeout ago). Its session is
//! policed: past [`RuntimeConfig::max_unrequested`] beyond the events asked
//! for the connection ends as [`Failure::Flooded`], past [`RuntimeConfig::max_bad_frames`] as
//! [`Failure::BadFrames`]. What a page's end means is the slot's: no EOSE in time is
//! [`Failure::EoseTimeout`], a refusal that retrying cannot fix sets the purpose aside
//! (`ReportKind::Refused`), a rate limit that outlasted the waits is
//! [`Failure::RateLimited`], any other refusal [`Failure::Refused`].
//!
//! # Layout
//!
//! This file holds the slot's vocabulary (purposes, commands, reports, failures) and its state;
//! `connection` dials and runs one session per socket, `pages` pages each purpose on it, and
//! `answers` turns the session's answers into reports.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::message::SubscriptionId;
use nostr::types::Timestamp;
use nostr_outbox_client::{
    paging, paging::CapEstimate, paging::Cursor, paging::Next, paging::Page, paging::RelayLimits,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, timeout, Instant};
use tracing::{debug, info, trace, warn, Instrument};

use crate::client::Client;
use crate::config::RuntimeConfig;
use crate::connection::exchange::{AskId, Session};
use crate::connection::refusal::Refusal;
pub use crate::connection::refusal::MAX_RATE_LIMITED_RESENDS;

mod answers;
mod connection;
mod pages;

type Socket = crate::connection::sockets::Link;

/// What a subscription on a slot is for. Each purpose names its subscriptions with its own
/// prefix and a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SubKind {
    /// The feed itself: the plan's filter for this relay.
    Feed,
    /// Discovery of the follows' kind:10002 relay lists (reader relays only).
    Lists,
}

impl SubKind {
    /// The prefix of this purpose's subscription ids on the wire (`outbox-feed-3`).
    pub fn id(self) -> &'static str {
        match self {
            SubKind::Feed => "outbox-feed",
            SubKind::Lists => "outbox-lists",
        }
    }

    fn other(self) -> Self {
        match self {
            SubKind::Feed => SubKind::Lists,
            SubKind::Lists => SubKind::Feed,
        }
    }
}

/// The wire id of subscription number `n` of a purpose.
fn sub_id(kind: SubKind, n: u64) -> SubscriptionId {
    SubscriptionId::new(format!("{}-{n}", kind.id()))
}

pub use crate::connection::exchange::FrameDrop;

/// Why an attempt on a relay failed; the slot backs off and retries after each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// TCP, TLS or WebSocket handshake failed.
    Connect(String),
    /// The handshake took longer than [`RuntimeConfig::connect_timeout`].
    ConnectTimeout,
    /// The connection dropped (error, close frame or end of stream).
    Lost(String),
    /// No EOSE within [`RuntimeConfig::eose_timeout`] of a page's REQ.
    EoseTimeout(SubKind),
    /// Too many unparseable, oversized or badly signed frames on one connection.
    BadFrames(u32),
    /// The relay answered CLOSED with a reason worth retrying later (errors, no known prefix).
    Refused(String),
    /// The relay kept answering `rate-limited:` past [`MAX_RATE_LIMITED_RESENDS`] waits on one
    /// connection: it is up and asks us to slow down, so it is not learned as down.
    RateLimited(String),
    /// More valid but unrequested events on one connection than
    /// [`RuntimeConfig::max_unrequested`] allows: the relay floods.
    Flooded(u64),
}

impl Failure {
    /// The relay misbehaved (bad frames, floods) rather than being down or slow: a later EOSE
    /// does not clear the strike.
    pub fn is_misbehaviour(&self) -> bool {
        matches!(self, Failure::BadFrames(_) | Failure::Flooded(_))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect failed: {e}"),
            Failure::ConnectTimeout => f.write_str("connect timed out"),
            Failure::Lost(e) => write!(f, "connection lost: {e}"),
            Failure::EoseTimeout(sub) => write!(f, "no EOSE in time on {}", sub.id()),
            Failure::BadFrames(n) => write!(f, "{n} bad frames"),
            Failure::Refused(m) | Failure::RateLimited(m) => write!(f, "refused: {m}"),
            Failure::Flooded(n) => write!(f, "misbehaving: {n} unrequested events"),
        }
    }
}

impl From<crate::connection::exchange::Broken> for Failure {
    fn from(broken: crate::connection::exchange::Broken) -> Self {
        use crate::connection::exchange::Broken;
        match broken {
            Broken::Lost(why) => Failure::Lost(why),
            Broken::Flooded(n) => Failure::Flooded(n),
            Broken::BadFrames(n) => Failure::BadFrames(n),
        }
    }
}

/// What a relay may require that the reader cannot give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Requirement {
    /// Payment, and the relay is not among [`RuntimeConfig::paid_relays`].
    Payment,
    /// NIP-42 sign-in, and the client has no signer.
    SignIn,
}

impl Requirement {
    /// What the reader lacks, per a relay's limits, for `client`.
    pub(crate) fn unmet(limits: &RelayLimits, url: &str, client: &Client) -> Option<Self> {
        if limits.payment_required && !client.config().paid_relays.iter().any(|p| p == url) {
            Some(Requirement::Payment)
        } else if limits.auth_required && client.signer().is_none() {
            Some(Requirement::SignIn)
        } else {
            None
        }
    }

    /// The reason shown when the relay is left out.
    pub(crate) fn reason(self, source: &str) -> String {
        match self {
            Requirement::Payment => format!("requires payment ({source})"),
            Requirement::SignIn => format!("auth-required: requires sign-in ({source})"),
        }
    }
}

/// What the coordinator tells a slot.
#[derive(Debug)]
pub(crate) enum SlotCommand {
    /// Subscribe, or replace the filter of a purpose (a new generation: paging starts anew).
    Req {
        sub: SubKind,
        filter: Box<Filter>,
        generation: u64,
    },
    /// End one purpose (the socket stays open for the other).
    Close { sub: SubKind },
    /// Close every subscription and the socket, then end the task.
    Shutdown,
}

/// What a slot tells the coordinator.
#[derive(Debug)]
pub(crate) struct SlotReport {
    pub url: Arc<str>,
    pub kind: ReportKind,
}

#[derive(Debug)]
pub(crate) enum ReportKind {
    /// The slot has a place of the socket budget: its dial began (or it joined a socket).
    Dialling,
    Connected {
        handshake: Duration,
    },
    /// The relay's document says it requires what the reader does not have.
    Requires(Requirement),
    Event {
        sub: SubKind,
        event: Box<Event>,
    },
    /// Every chunk of a generation finished paging on the current connection.
    Eose {
        sub: SubKind,
        generation: u64,
        /// From the generation's first REQ on this connection to its last page's end.
        elapsed: Duration,
        /// From that first REQ to the first EOSE: the relay's answer latency.
        latency: Duration,
        /// REQs sent since the last EOSE report of this purpose: this generation's pages, plus
        /// those of replaced generations or lost connections that were never reported.
        pages: u64,
        /// Matching event frames received over the same span, page-edge repeats included.
        received: u64,
        /// Every chunk's paging ended [`complete`](paging::Ended::is_complete) (none was cut
        /// off by the page budget).
        complete: bool,
    },
    /// The relay accepted our NIP-42 AUTH event on this connection.
    Authenticated,
    /// CLOSED with a reason that retrying will not fix (auth-required, restricted, blocked).
    Refused {
        sub: SubKind,
        message: String,
    },
    Dropped {
        reason: FrameDrop,
    },
    Failed {
        failure: Failure,
    },
}

/// One purpose: the coordinator's filter and its paging on the current connection.
struct Purpose {
    filter: Filter,
    generation: u64,
    /// Refused definitively: never re-sent on reconnect.
    refused: bool,
    /// Answered in a one-shot run whose slot then gave its socket's place up: not asked again
    /// until a new filter comes.
    settled: bool,
    /// The chunks of the current run (connection × generation); empty while offline.
    chunks: Vec<Chunk>,
    /// The run's first REQ, and its first EOSE latency.
    started: Option<Instant>,
    latency: Option<Duration>,
    /// This run's EOSE was reported.
    reported: bool,
    /// Cost since the last report.
    pages: u64,
    received: u64,
}

struct Chunk {
    /// `None` when the filter names no authors (one chunk asks it whole).
    authors: Option<BTreeSet<PublicKey>>,
    cursor: Cursor,
    /// Ids returned so far, to tell page-edge repeats from new events; dropped when done.
    seen: HashSet<EventId>,
    state: ChunkState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// The next page is due.
    Ready,
    /// A page is in flight.
    Asking,
    Done(paging::Ended),
}

/// A subscription open on the current session (one ask of it).
struct OpenSub {
    kind: SubKind,
    chunk: usize,
    /// `None` once answered and kept open for live notes.
    page: Option<PageInFlight>,
}

/// Event ids remembered per open subscription to recognise replays (the session's).
pub use crate::connection::exchange::MAX_SEEN_PER_SUB;

struct PageInFlight {
    first: bool,
    answer: Page,
}

enum Ended {
    Shutdown,
    Failed(Failure),
    /// A one-shot slot answered everything it was asked and gave its place to a link waiting
    /// for one; it dials again when a new filter comes.
    Parked,
}

/// Runs one slot until it is told to shut down or the coordinator goes away.
pub(crate) async fn run_slot(
    url: Arc<str>,
    client: Client,
    mut commands: mpsc::UnboundedReceiver<SlotCommand>,
    reports: mpsc::Sender<SlotReport>,
    seed: u64,
    patient: bool,
) {
    let span = tracing::info_span!("slot", relay = %url);
    async move {
        let mut slot = Slot {
            url,
            cfg: client.config_arc(),
            client,
            reports,
            purposes: BTreeMap::new(),
            open: HashMap::new(),
            next_sub: 0,
            limits: RelayLimits::default(),
            cap: CapEstimate::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            patient,
        };
        slot.run(&mut commands).await;
        debug!("slot task ended");
    }
    .instrument(span)
    .await
}

struct Slot {
    url: Arc<str>,
    /// Its first connection waits for the relay's document up to the fetch's whole timeout
    /// before asking anything: the relay was never heard from.
    patient: bool,
    /// The client's knobs (`client.config()`, kept at hand).
    cfg: Arc<RuntimeConfig>,
    /// Its sockets, signer and relay documents.
    client: Client,
    reports: mpsc::Sender<SlotReport>,
    purposes: BTreeMap<SubKind, Purpose>,
    /// Subscriptions open on the current session, by ask.
    open: HashMap<AskId, OpenSub>,
    /// The next subscription number; never reused in the slot's life, so a late answer to a
    /// closed subscription is never taken for a new one.
    next_sub: u64,
    /// The current connection's limits and cap estimate.
    limits: RelayLimits,
    cap: CapEstimate,
    /// Reconnect jitter, and the seed of each session's rate-limit waits.
    rng: ChaCha8Rng,
}

impl Slot {
    async fn report(&self, kind: ReportKind) -> bool {
        self.reports
            .send(SlotReport {
                url: self.url.clone(),
                kind,
            })
            .await
            .is_ok()
    }

    /// Applies a command while no socket is open. Returns false when the slot must end.
    fn apply_offline(&mut self, cmd: Option<SlotCommand>) -> bool {
        match cmd {
            Some(SlotCommand::Req {
                sub,
                filter,
                generation,
            }) => {
                self.set_purpose(sub, *filter, generation);
                true
            }
            Some(SlotCommand::Close { sub }) => {
                self.purposes.remove(&sub);
                true
            }
            Some(SlotCommand::Shutdown) | None => false,
        }
    }

    fn set_purpose(&mut self, sub: SubKind, filter: Filter, generation: u64) {
        if sub == SubKind::Feed {
            // An event, not a span field: the log's formatter appends every value recorded on
            // a span to it, so a slot open for days would carry every generation it had.
            debug!(generation, "feed filter");
        }
        let purpose = self.purposes.entry(sub).or_insert(Purpose {
            filter: filter.clone(),
            generation,
            refused: false,
            settled: false,
            chunks: Vec::new(),
            started: None,
            latency: None,
            reported: false,
            pages: 0,
            received: 0,
        });
        purpose.filter = filter;
        purpose.generation = generation;
        purpose.refused = false;
        purpose.settled = false;
        purpose.chunks.clear();
    }
}

/// Whether the session goes on after a command or an answer.
enum Handled {
    Ok,
    End(Ended),
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_ids_name_their_purpose_and_number() {
        assert_eq!(sub_id(SubKind::Feed, 3).as_str(), "outbox-feed-3");
        assert_eq!(sub_id(SubKind::Lists, 0).as_str(), "outbox-lists-0");
        assert!(!Failure::EoseTimeout(SubKind::Feed).is_misbehaviour());
        assert!(Failure::Flooded(1).is_misbehaviour());
    }
}

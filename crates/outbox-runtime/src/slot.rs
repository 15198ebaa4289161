//! One slot: one task, one WebSocket to one relay, two purposes (the feed, the relay-list
//! lookup), each fetched completely in author chunks and backward pages.
//!
//! A slot owns its socket and nothing else. It is told what to do by the coordinator
//! (`SlotCommand`) and reports what happened (`SlotReport`); it never touches the route
//! table, the stats or another slot, so a relay that stalls, floods or lies can only ever
//! stall its own task. It reconnects on its own with exponential backoff and jitter; deciding
//! that a relay has failed too often is the coordinator's business.
//!
//! # Paging
//!
//! Real relays cap each REQ, so one filter per relay fetches only the newest few hundred notes.
//! The slot pages by the rules of [`outbox_core::paging`] (the simulator pages by the same):
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
//! connection does the same for every purpose. Answers to closed subscriptions are dropped
//! quietly (they may cross our CLOSE); ids we never issued are unrequested frames.
//!
//! A relay that floods (valid events outside the filter asked, or answers to subscriptions
//! closed longer than the EOSE timeout ago) is counted per connection; past
//! [`RuntimeConfig::max_unrequested`] beyond the events asked for, the connection ends as
//! [`Failure::Flooded`]. Events dated beyond [`RuntimeConfig::future_tolerance`] are bad frames.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, EventId};
use nostr::filter::{Filter, MatchEventOptions};
use nostr::key::PublicKey;
use nostr::message::{ClientMessage, MachineReadablePrefix, RelayMessage, SubscriptionId};
use nostr::types::Timestamp;
use outbox_core::paging::{self, CapEstimate, Cursor, Next, Page, RelayLimits};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::{debug, info, trace, warn, Instrument};

use crate::config::RuntimeConfig;
use crate::nip11::Nip11Cache;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

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

/// The purpose and number of one of our subscription ids.
fn parse_sub_id(id: &SubscriptionId) -> Option<(SubKind, u64)> {
    let (prefix, n) = id.as_str().rsplit_once('-')?;
    let kind = [SubKind::Feed, SubKind::Lists]
        .into_iter()
        .find(|k| k.id() == prefix)?;
    // Only plain decimal numbers: `+1` or ` 1` are not ids we issue.
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((kind, n.parse().ok()?))
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrameDrop {
    /// Longer than [`RuntimeConfig::max_message_bytes`].
    TooLarge,
    /// Not a relay message (bad JSON, wrong shape, binary frame).
    Unparseable,
    /// An event whose id or signature does not verify.
    BadSignature,
    /// An event for a subscription we do not hold, or that does not match our filter.
    Unrequested,
    /// An event dated further in the future than [`RuntimeConfig::future_tolerance`].
    FutureDated,
}

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
    /// The relay answered CLOSED with a reason worth retrying later (rate limits, errors).
    Refused(String),
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
            Failure::Refused(m) => write!(f, "refused: {m}"),
            Failure::Flooded(n) => write!(f, "misbehaving: {n} unrequested events"),
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
    Connected {
        handshake: Duration,
    },
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

/// A subscription open on the current socket.
struct OpenSub {
    kind: SubKind,
    chunk: usize,
    /// The page's filter; events outside it are not ours.
    filter: Filter,
    /// `None` once answered and kept open for live notes.
    page: Option<PageInFlight>,
}

struct PageInFlight {
    deadline: Instant,
    first: bool,
    answer: Page,
}

enum Ended {
    Shutdown,
    Failed(Failure),
}

/// Runs one slot until it is told to shut down or the coordinator goes away.
pub(crate) async fn run_slot(
    url: Arc<str>,
    cfg: Arc<RuntimeConfig>,
    nip11: Arc<Nip11Cache>,
    mut commands: mpsc::UnboundedReceiver<SlotCommand>,
    reports: mpsc::Sender<SlotReport>,
    seed: u64,
) {
    let span = tracing::info_span!("slot", relay = %url, generation = tracing::field::Empty);
    async move {
        let mut slot = Slot {
            url,
            cfg,
            nip11,
            reports,
            purposes: BTreeMap::new(),
            open: HashMap::new(),
            next_sub: 0,
            limits: RelayLimits::default(),
            cap: CapEstimate::default(),
            flood: FloodGuard::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        slot.run(&mut commands).await;
        debug!("slot task ended");
    }
    .instrument(span)
    .await
}

struct Slot {
    url: Arc<str>,
    cfg: Arc<RuntimeConfig>,
    nip11: Arc<Nip11Cache>,
    reports: mpsc::Sender<SlotReport>,
    purposes: BTreeMap<SubKind, Purpose>,
    /// Subscriptions open on the current socket, by number.
    open: HashMap<u64, OpenSub>,
    /// The next subscription number; never reused in the slot's life, so a late answer to a
    /// closed subscription is never taken for a new one.
    next_sub: u64,
    /// The current connection's limits and cap estimate.
    limits: RelayLimits,
    cap: CapEstimate,
    /// The current connection's count of unrequested events.
    flood: FloodGuard,
    rng: ChaCha8Rng,
}

/// Counts valid events a relay sends outside what was asked, per connection.
#[derive(Default)]
struct FloodGuard {
    /// Events asked for on this connection: the sum of the page limits sent.
    asked: u64,
    /// Unrequested events counted so far.
    unrequested: u64,
    /// Answers to closed subscriptions are not counted until then (they may cross our CLOSE,
    /// or answer a filter just replaced).
    grace_until: Option<Instant>,
}

impl FloodGuard {
    fn in_grace(&self, now: Instant) -> bool {
        self.grace_until.is_some_and(|g| now < g)
    }

    /// Counts one unrequested event; the failure once the bound is passed.
    fn count(&mut self, max: u64) -> Option<Failure> {
        self.unrequested += 1;
        (self.unrequested > max.saturating_add(self.asked))
            .then_some(Failure::Flooded(self.unrequested))
    }
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
            tracing::Span::current().record("generation", generation);
        }
        let purpose = self.purposes.entry(sub).or_insert(Purpose {
            filter: filter.clone(),
            generation,
            refused: false,
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
        purpose.chunks.clear();
    }

    /// The relay's document if it comes in time: the fetch runs alongside the connect, and the
    /// first REQ waits for it at most [`Nip11Config::wait`](crate::limits::Nip11Config::wait)
    /// after the socket opened. A late document is cached for the next connection.
    fn start_nip11(&self) -> Option<tokio::task::JoinHandle<Option<RelayLimits>>> {
        let cfg = &self.cfg.limits.nip11;
        if !cfg.enabled {
            return None;
        }
        let (cache, url, cfg) = (self.nip11.clone(), self.url.clone(), cfg.clone());
        Some(tokio::spawn(async move { cache.limits(&url, &cfg).await }))
    }

    async fn run(&mut self, commands: &mut mpsc::UnboundedReceiver<SlotCommand>) {
        let mut attempt: u32 = 0;
        loop {
            // Nothing to ask: wait for work instead of holding a socket open.
            while self.purposes.values().all(|p| p.refused) {
                if !self.apply_offline(commands.recv().await) {
                    return;
                }
            }
            let ws_config = WebSocketConfig::default()
                .max_message_size(Some(self.cfg.hard_frame_limit))
                .max_frame_size(Some(self.cfg.hard_frame_limit));
            let started = Instant::now();
            let mut document = self.start_nip11();
            let url = self.url.to_string();
            let connect = timeout(
                self.cfg.connect_timeout,
                tokio_tungstenite::connect_async_tls_with_config(url, Some(ws_config), true, None),
            );
            tokio::pin!(connect);
            let connected = loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    res = &mut connect => break res,
                }
            };
            let outcome = match connected {
                Err(_) => Ended::Failed(Failure::ConnectTimeout),
                Ok(Err(e)) => Ended::Failed(Failure::Connect(e.to_string())),
                Ok(Ok((ws, _response))) => {
                    let handshake = started.elapsed();
                    info!(handshake_ms = handshake.as_millis() as u64, "connected");
                    if !self.report(ReportKind::Connected { handshake }).await {
                        return;
                    }
                    self.limits = match document.as_mut() {
                        Some(task) => match timeout(self.cfg.limits.nip11.wait, task).await {
                            Ok(Ok(Some(limits))) => limits,
                            _ => RelayLimits::default(),
                        },
                        None => RelayLimits::default(),
                    };
                    debug!(limits = ?self.limits, "relay limits");
                    self.session(ws, commands, &mut attempt).await
                }
            };
            // A fetch still running is left to finish into the cache.
            drop(document);
            match outcome {
                Ended::Shutdown => return,
                Ended::Failed(failure) => {
                    warn!(%failure, attempt, "relay attempt failed");
                    if !self.report(ReportKind::Failed { failure }).await {
                        return;
                    }
                }
            }
            let delay = self.cfg.backoff.delay(attempt, &mut self.rng);
            attempt = attempt.saturating_add(1);
            debug!(delay_ms = delay.as_millis() as u64, "backing off");
            let wake = Instant::now() + delay;
            loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    _ = sleep_until(wake) => break,
                }
            }
        }
    }

    /// Splits a purpose's filter into chunks for this connection and marks every first page due.
    fn start_run(&mut self, kind: SubKind) {
        let paging = self.cfg.limits.paging;
        let limit = paging.limit_for(&self.limits);
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return;
        };
        let since = purpose.filter.since.map(|t| t.as_secs());
        let groups: Vec<Option<BTreeSet<PublicKey>>> = match &purpose.filter.authors {
            None => vec![None],
            Some(authors) => {
                let authors: Vec<PublicKey> = authors.iter().copied().collect();
                paging::chunk(&authors, &self.limits, &paging)
                    .into_iter()
                    .map(|c| Some(c.into_iter().collect()))
                    .collect()
            }
        };
        purpose.chunks = groups
            .into_iter()
            .map(|authors| Chunk {
                authors,
                cursor: Cursor::new(limit, since),
                seen: HashSet::new(),
                state: ChunkState::Ready,
            })
            .collect();
        purpose.started = None;
        purpose.latency = None;
        purpose.reported = false;
        debug!(
            sub = kind.id(),
            chunks = purpose.chunks.len(),
            limit,
            "paging"
        );
    }

    /// Most subscriptions the relay keeps open per connection.
    fn sub_budget(&self) -> usize {
        let n = self
            .limits
            .max_subscriptions
            .unwrap_or(self.cfg.limits.default_max_subscriptions);
        usize::try_from(n).unwrap_or(usize::MAX).max(1)
    }

    /// Whether `kind` may open one more page: within the relay's subscription budget, leaving
    /// one for the other purpose while it is active, and within the pages-in-flight bound.
    fn may_open(&self, kind: SubKind) -> bool {
        let budget = self.sub_budget();
        let own = self.open.values().filter(|s| s.kind == kind).count();
        let in_flight = self
            .open
            .values()
            .filter(|s| s.kind == kind && s.page.is_some())
            .count();
        let other_active = self.purposes.get(&kind.other()).is_some_and(|p| !p.refused);
        let own_cap = if other_active {
            budget.saturating_sub(1).max(1)
        } else {
            budget
        };
        self.open.len() < budget
            && own < own_cap
            && in_flight < self.cfg.limits.concurrent_pages.max(1)
    }

    /// Whether an answered first page may stay open for live notes: live subscriptions leave
    /// two of the budget to paging (one per purpose).
    fn may_keep_live(&self) -> bool {
        let live = self.open.values().filter(|s| s.page.is_none()).count();
        !self.cfg.once && live + 2 < self.sub_budget()
    }

    /// Sends every due page of `kind` the budget allows.
    async fn pump(&mut self, ws: &mut Socket, kind: SubKind) -> Result<(), Failure> {
        while self.may_open(kind) {
            let Some(purpose) = self.purposes.get(&kind) else {
                return Ok(());
            };
            if purpose.refused {
                return Ok(());
            }
            let Some(index) = purpose
                .chunks
                .iter()
                .position(|c| c.state == ChunkState::Ready)
            else {
                return Ok(());
            };
            self.send_page(ws, kind, index).await?;
        }
        Ok(())
    }

    async fn send_page(
        &mut self,
        ws: &mut Socket,
        kind: SubKind,
        index: usize,
    ) -> Result<(), Failure> {
        let n = self.next_sub;
        self.next_sub += 1;
        let eose_timeout = self.cfg.eose_timeout;
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Ok(());
        };
        let generation = purpose.generation;
        let Some(chunk) = purpose.chunks.get_mut(index) else {
            return Ok(());
        };
        let mut filter = purpose.filter.clone();
        filter.authors = chunk.authors.clone();
        filter.limit = Some(chunk.cursor.limit() as usize);
        if let Some(until) = chunk.cursor.until() {
            filter.until = Some(Timestamp::from(until));
        }
        let first = chunk.cursor.pages() == 0;
        chunk.state = ChunkState::Asking;
        self.flood.asked = self.flood.asked.saturating_add(chunk.cursor.limit() as u64);
        let json = ClientMessage::req(sub_id(kind, n), filter.clone())
            .try_as_json()
            .map_err(|e| Failure::Lost(format!("cannot encode REQ: {e}")))?;
        let now = Instant::now();
        purpose.started.get_or_insert(now);
        purpose.pages += 1;
        debug!(
            sub = n,
            purpose = kind.id(),
            generation,
            chunk = index,
            until = ?filter.until.map(|t| t.as_secs()),
            bytes = json.len(),
            "REQ"
        );
        self.open.insert(
            n,
            OpenSub {
                kind,
                chunk: index,
                filter,
                page: Some(PageInFlight {
                    deadline: now + eose_timeout,
                    first,
                    answer: Page::default(),
                }),
            },
        );
        ws.send(Message::text(json))
            .await
            .map_err(|e| Failure::Lost(e.to_string()))
    }

    async fn close_sub(&mut self, ws: &mut Socket, n: u64) -> Result<(), Failure> {
        let Some(open) = self.open.remove(&n) else {
            return Ok(());
        };
        self.flood.grace_until = Some(Instant::now() + self.cfg.eose_timeout);
        let close = ClientMessage::close(sub_id(open.kind, n));
        ws.send(Message::text(close.as_json()))
            .await
            .map_err(|e| Failure::Lost(e.to_string()))
    }

    /// Closes every open subscription of `kind`.
    async fn close_purpose(&mut self, ws: &mut Socket, kind: SubKind) -> Result<(), Failure> {
        let mut subs: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(n, _)| *n)
            .collect();
        subs.sort_unstable();
        for n in subs {
            self.close_sub(ws, n).await?;
        }
        Ok(())
    }

    /// Reports the purpose's EOSE once every chunk's paging ended. Returns false when the
    /// coordinator is gone.
    async fn report_if_done(&mut self, kind: SubKind) -> bool {
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return true;
        };
        let done = purpose
            .chunks
            .iter()
            .all(|c| matches!(c.state, ChunkState::Done(_)));
        if !done || purpose.reported || purpose.refused {
            return true;
        }
        purpose.reported = true;
        let complete = purpose.chunks.iter().all(|c| match c.state {
            ChunkState::Done(why) => why.is_complete(),
            _ => false,
        });
        let elapsed = purpose.started.map(|t| t.elapsed()).unwrap_or_default();
        let latency = purpose.latency.unwrap_or(elapsed);
        let (pages, received) = (
            std::mem::take(&mut purpose.pages),
            std::mem::take(&mut purpose.received),
        );
        let generation = purpose.generation;
        debug!(
            sub = kind.id(),
            generation,
            pages,
            received,
            complete,
            elapsed_ms = elapsed.as_millis() as u64,
            "EOSE"
        );
        if !complete {
            warn!(
                sub = kind.id(),
                pages, "page budget ran out: older events may remain on the relay"
            );
        }
        self.report(ReportKind::Eose {
            sub: kind,
            generation,
            elapsed,
            latency,
            pages,
            received,
            complete,
        })
        .await
    }

    /// Starts paging `kind` on this socket and reports at once if there is nothing to ask.
    async fn begin(&mut self, ws: &mut Socket, kind: SubKind) -> Result<bool, Failure> {
        self.start_run(kind);
        self.pump(ws, kind).await?;
        Ok(self.report_if_done(kind).await)
    }

    async fn session(
        &mut self,
        mut ws: Socket,
        commands: &mut mpsc::UnboundedReceiver<SlotCommand>,
        attempt: &mut u32,
    ) -> Ended {
        // A fresh socket knows no subscriptions: page every purpose from the start.
        self.open.clear();
        self.cap = CapEstimate::new(&self.limits);
        self.flood = FloodGuard::default();
        let kinds: Vec<SubKind> = self
            .purposes
            .iter()
            .filter(|(_, p)| !p.refused)
            .map(|(k, _)| *k)
            .collect();
        for kind in kinds {
            match self.begin(&mut ws, kind).await {
                Ok(true) => {}
                Ok(false) => return Ended::Shutdown,
                Err(f) => return Ended::Failed(f),
            }
        }
        let mut bad_frames: u32 = 0;
        loop {
            let deadline = self
                .open
                .values()
                .filter_map(|s| s.page.as_ref().map(|p| p.deadline))
                .min();
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(SlotCommand::Req { sub, filter, generation }) => {
                        if let Err(f) = self.close_purpose(&mut ws, sub).await {
                            return Ended::Failed(f);
                        }
                        self.set_purpose(sub, *filter, generation);
                        match self.begin(&mut ws, sub).await {
                            Ok(true) => {}
                            Ok(false) => return Ended::Shutdown,
                            Err(f) => return Ended::Failed(f),
                        }
                    }
                    Some(SlotCommand::Close { sub }) => {
                        if let Err(f) = self.close_purpose(&mut ws, sub).await {
                            return Ended::Failed(f);
                        }
                        self.purposes.remove(&sub);
                        // The other purpose may use the freed subscriptions.
                        if let Err(f) = self.pump(&mut ws, sub.other()).await {
                            return Ended::Failed(f);
                        }
                    }
                    Some(SlotCommand::Shutdown) | None => {
                        self.close_socket(&mut ws).await;
                        return Ended::Shutdown;
                    }
                },
                frame = ws.next() => {
                    let text = match frame {
                        None => return Ended::Failed(Failure::Lost("end of stream".into())),
                        Some(Err(e)) => return Ended::Failed(Failure::Lost(e.to_string())),
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Close(frame))) => {
                            let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                            return Ended::Failed(Failure::Lost(format!("closed by relay {why}")));
                        }
                        Some(Ok(Message::Binary(_))) => {
                            trace!("dropping binary frame");
                            bad_frames += 1;
                            if !self.report(ReportKind::Dropped { reason: FrameDrop::Unparseable }).await {
                                return Ended::Shutdown;
                            }
                            if bad_frames > self.cfg.max_bad_frames {
                                return Ended::Failed(Failure::BadFrames(bad_frames));
                            }
                            continue;
                        }
                        Some(Ok(_)) => continue,
                    };
                    match self.handle_text(&mut ws, text.as_str(), attempt).await {
                        Handled::Ok => {}
                        Handled::Bad => {
                            bad_frames += 1;
                            if bad_frames > self.cfg.max_bad_frames {
                                return Ended::Failed(Failure::BadFrames(bad_frames));
                            }
                        }
                        Handled::End(ended) => return ended,
                    }
                },
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    let expired = self
                        .open
                        .values()
                        .find(|s| s.page.as_ref().is_some_and(|p| p.deadline <= now))
                        .map(|s| s.kind);
                    if let Some(kind) = expired {
                        return Ended::Failed(Failure::EoseTimeout(kind));
                    }
                }
            }
        }
    }

    async fn close_socket(&mut self, ws: &mut Socket) {
        let grace = self.cfg.shutdown_grace;
        let mut subs: Vec<(u64, SubKind)> = self.open.iter().map(|(n, s)| (*n, s.kind)).collect();
        subs.sort_unstable();
        self.open.clear();
        let polite = async {
            for (n, kind) in subs {
                let close = ClientMessage::close(sub_id(kind, n));
                ws.send(Message::text(close.as_json())).await?;
            }
            ws.close(None).await
        };
        match timeout(grace, polite).await {
            Ok(Ok(())) => debug!("closed"),
            Ok(Err(e)) => debug!(error = %e, "close failed; dropping the socket"),
            Err(_) => debug!("close timed out; dropping the socket"),
        }
    }

    async fn drop_frame(&self, reason: FrameDrop) -> Handled {
        trace!(?reason, "dropping frame");
        if self.report(ReportKind::Dropped { reason }).await {
            Handled::Bad
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    /// Which open subscription an id names: `Err(true)` for one of ours that is closed (a late
    /// answer), `Err(false)` for an id we never issued.
    fn lookup(&self, id: &SubscriptionId) -> Result<u64, bool> {
        match parse_sub_id(id) {
            Some((kind, n)) if self.open.get(&n).is_some_and(|s| s.kind == kind) => Ok(n),
            Some((_, n)) => Err(n < self.next_sub),
            None => Err(false),
        }
    }

    async fn handle_text(&mut self, ws: &mut Socket, text: &str, attempt: &mut u32) -> Handled {
        if text.len() > self.cfg.max_message_bytes {
            return self.drop_frame(FrameDrop::TooLarge).await;
        }
        let msg = match RelayMessage::from_json(text) {
            Ok(msg) => msg,
            Err(e) => {
                trace!(error = %e, "unparseable frame");
                return self.drop_frame(FrameDrop::Unparseable).await;
            }
        };
        match msg {
            RelayMessage::Event {
                subscription_id,
                event,
            } => {
                let n = match self.lookup(&subscription_id) {
                    Ok(n) => n,
                    // Arrived after our CLOSE: harmless, not the relay's fault, unless it keeps
                    // coming long after.
                    Err(true) => {
                        if self.flood.in_grace(Instant::now()) {
                            return Handled::Ok;
                        }
                        return match self.flood.count(self.cfg.max_unrequested) {
                            Some(failure) => Handled::End(Ended::Failed(failure)),
                            None => Handled::Ok,
                        };
                    }
                    Err(false) => return self.drop_frame(FrameDrop::Unrequested).await,
                };
                let horizon = Timestamp::now()
                    .as_secs()
                    .saturating_add(self.cfg.future_tolerance.as_secs());
                if event.created_at.as_secs() > horizon {
                    trace!(id = %event.id, created_at = event.created_at.as_secs(), "future-dated event");
                    return self.drop_frame(FrameDrop::FutureDated).await;
                }
                let event = event.into_owned();
                if self.cfg.verify_signatures && event.verify().is_err() {
                    return self.drop_frame(FrameDrop::BadSignature).await;
                }
                self.on_event(n, event).await
            }
            RelayMessage::EndOfStoredEvents(subscription_id) => {
                let Ok(n) = self.lookup(&subscription_id) else {
                    return Handled::Ok;
                };
                *attempt = 0;
                match self.on_eose(ws, n).await {
                    Ok(true) => Handled::Ok,
                    Ok(false) => Handled::End(Ended::Shutdown),
                    Err(f) => Handled::End(Ended::Failed(f)),
                }
            }
            RelayMessage::Closed {
                subscription_id,
                message,
            } => {
                let Ok(n) = self.lookup(&subscription_id) else {
                    return Handled::Ok;
                };
                let message = message.into_owned();
                let Some(kind) = self.open.remove(&n).map(|s| s.kind) else {
                    return Handled::Ok;
                };
                info!(sub = %subscription_id, reason = %message, "CLOSED");
                if !is_definitive_refusal(&message) {
                    return Handled::End(Ended::Failed(Failure::Refused(message)));
                }
                if let Err(f) = self.close_purpose(ws, kind).await {
                    return Handled::End(Ended::Failed(f));
                }
                if let Some(purpose) = self.purposes.get_mut(&kind) {
                    purpose.refused = true;
                    purpose.chunks.clear();
                }
                if self
                    .report(ReportKind::Refused { sub: kind, message })
                    .await
                {
                    Handled::Ok
                } else {
                    Handled::End(Ended::Shutdown)
                }
            }
            RelayMessage::Notice(notice) => {
                debug!(notice = %truncate(&notice), "NOTICE");
                Handled::Ok
            }
            RelayMessage::Auth { .. } => {
                debug!("AUTH challenge ignored (this client does not authenticate)");
                Handled::Ok
            }
            _ => Handled::Ok,
        }
    }

    /// A verified event on open subscription `n`: counted for its page, passed on the first
    /// time its chunk sees it (live notes always).
    async fn on_event(&mut self, n: u64, event: Event) -> Handled {
        let Some(open) = self.open.get_mut(&n) else {
            return Handled::Ok;
        };
        if !open.filter.match_event(&event, MatchEventOptions::new()) {
            // Not what this subscription asked: not counted as bad, but not passed on either.
            trace!(id = %event.id, "event outside the subscription's filter");
            if let Some(failure) = self.flood.count(self.cfg.max_unrequested) {
                return Handled::End(Ended::Failed(failure));
            }
            return if self
                .report(ReportKind::Dropped {
                    reason: FrameDrop::Unrequested,
                })
                .await
            {
                Handled::Ok
            } else {
                Handled::End(Ended::Shutdown)
            };
        }
        let kind = open.kind;
        let fresh = match open.page.as_mut() {
            Some(page) => {
                let Some(purpose) = self.purposes.get_mut(&kind) else {
                    return Handled::Ok;
                };
                let Some(chunk) = purpose.chunks.get_mut(open.chunk) else {
                    return Handled::Ok;
                };
                purpose.received += 1;
                let answer = &mut page.answer;
                answer.returned = answer.returned.saturating_add(1);
                let at = event.created_at.as_secs();
                answer.oldest = Some(answer.oldest.map_or(at, |o| o.min(at)));
                let fresh = chunk.seen.insert(event.id);
                if fresh {
                    answer.new = answer.new.saturating_add(1);
                }
                fresh
            }
            None => true,
        };
        if !fresh {
            return Handled::Ok;
        }
        let report = ReportKind::Event {
            sub: kind,
            event: Box::new(event),
        };
        if self.report(report).await {
            Handled::Ok
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    /// EOSE of open subscription `n`: the page is answered; the chunk asks again or ends, and
    /// the subscription is closed or (a first page of a continuing feed) kept for live notes.
    async fn on_eose(&mut self, ws: &mut Socket, n: u64) -> Result<bool, Failure> {
        let paging = self.cfg.limits.paging;
        let keep_live = self.may_keep_live();
        let Some(open) = self.open.get_mut(&n) else {
            return Ok(true);
        };
        let Some(page) = open.page.take() else {
            // A live subscription's EOSE was long ago; a repeat means nothing.
            return Ok(true);
        };
        let (kind, index) = (open.kind, open.chunk);
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Ok(true);
        };
        if purpose.latency.is_none() {
            purpose.latency = purpose.started.map(|t| t.elapsed());
        }
        let Some(chunk) = purpose.chunks.get_mut(index) else {
            return Ok(true);
        };
        match chunk.cursor.answer(page.answer, &mut self.cap, &paging) {
            Next::Page { until } => {
                trace!(
                    chunk = index,
                    until,
                    returned = page.answer.returned,
                    "next page"
                );
                chunk.state = ChunkState::Ready;
            }
            Next::Done(why) => {
                trace!(
                    chunk = index,
                    ?why,
                    pages = chunk.cursor.pages(),
                    "chunk done"
                );
                chunk.state = ChunkState::Done(why);
                chunk.seen = HashSet::new();
            }
        }
        if page.first && !keep_live && !self.cfg.once {
            warn!(
                sub = kind.id(),
                chunk = index,
                "subscription limit reached: this chunk's authors are not followed live"
            );
        }
        if !(page.first && keep_live) {
            self.close_sub(ws, n).await?;
        }
        self.pump(ws, kind).await?;
        if !self.report_if_done(kind).await {
            return Ok(false);
        }
        // A finished purpose frees subscriptions for the other.
        self.pump(ws, kind.other()).await?;
        Ok(true)
    }
}

enum Handled {
    Ok,
    Bad,
    End(Ended),
}

/// Whether a CLOSED reason means retrying cannot help without something we do not do
/// (authenticating, paying, being allowed).
pub(crate) fn is_definitive_refusal(message: &str) -> bool {
    matches!(
        MachineReadablePrefix::parse(message.trim_start()),
        Some(
            MachineReadablePrefix::AuthRequired
                | MachineReadablePrefix::Restricted
                | MachineReadablePrefix::Blocked
        )
    )
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_reasons_are_classified() {
        assert!(is_definitive_refusal("auth-required: sign in"));
        assert!(is_definitive_refusal("restricted: paid relay"));
        assert!(is_definitive_refusal("blocked: go away"));
        assert!(!is_definitive_refusal("rate-limited: slow down"));
        assert!(!is_definitive_refusal("error: database"));
        assert!(!is_definitive_refusal("whatever"));
        assert!(!is_definitive_refusal(""));
    }

    #[test]
    fn the_flood_bound_grows_with_what_was_asked_and_closes_grant_grace() {
        let mut guard = FloodGuard::default();
        for _ in 0..10 {
            assert_eq!(guard.count(10), None);
        }
        assert_eq!(guard.count(10), Some(Failure::Flooded(11)));
        let mut guard = FloodGuard {
            asked: 500,
            ..FloodGuard::default()
        };
        for _ in 0..510 {
            assert_eq!(guard.count(10), None);
        }
        assert_eq!(guard.count(10), Some(Failure::Flooded(511)));
        assert!(Failure::Flooded(511).is_misbehaviour());
        assert!(!Failure::EoseTimeout(SubKind::Feed).is_misbehaviour());

        let now = Instant::now();
        assert!(!guard.in_grace(now));
        guard.grace_until = Some(now + Duration::from_secs(1));
        assert!(guard.in_grace(now));
        assert!(!guard.in_grace(now + Duration::from_secs(1)));
    }

    #[test]
    fn subscription_ids_round_trip_and_strangers_are_not_ours() {
        for kind in [SubKind::Feed, SubKind::Lists] {
            for n in [0u64, 7, u64::MAX] {
                assert_eq!(parse_sub_id(&sub_id(kind, n)), Some((kind, n)));
            }
        }
        assert_eq!(sub_id(SubKind::Feed, 3).as_str(), "outbox-feed-3");
        for stranger in [
            "outbox-feed",
            "outbox-feed-",
            "outbox-feed-+1",
            "outbox-feed- 1",
            "outbox-feed-99999999999999999999999",
            "outbox-other-1",
            "x-1",
            "",
        ] {
            assert_eq!(
                parse_sub_id(&SubscriptionId::new(stranger)),
                None,
                "{stranger}"
            );
        }
    }
}

//! The live runtime: a feed from real relays, routed by an outbox strategy.
//!
//! A client hands [`start`] its follows, its own relays, whatever kind:10002 relay lists it
//! already has, a [`Router`] (a strategy from config, with the URL policy every relay URL of the
//! feed goes through) and a [`StatsStore`]. It gets back a
//! [`FeedHandle`] and a channel of [`FeedEvent`]s: verified, de-duplicated notes and status
//! events (connected, EOSE, failed, set aside, re-planned).
//!
//! # How it works
//!
//! - **One coordinator task owns all state**: the relay lists, the route table, the plan's
//!   [`Slots`](outbox_client::Slots), the learned stats and the penalty box. Everything else talks
//!   to it with messages. The crate's two locks are leaves outside that state, never held
//!   across an `.await` nor together: the table of the shared sockets ([`Sockets`]) and the
//!   shared cache of relay documents ([`Nip11Cache`]).
//! - **One task per relay** (a slot) owns a link to that relay. It sends REQ/CLOSE when told,
//!   reports events, EOSE and failures, and reconnects with backoff by itself. A relay that stalls
//!   or floods only ever blocks its own task.
//! - **One client, one socket per relay, one budget** ([`Client`], its [`Sockets`]): slots,
//!   route feeds, lookups, probes and publishing share a relay's socket, and the sockets open
//!   at once stay within the budget, a reserve of it kept for short work.
//! - **Paging**: relays cap each REQ, so a slot splits its filter into author chunks that fit
//!   the relay's limits (its NIP-11 document, else defaults) and pages each backwards until the
//!   window is complete or the page budget runs out ([`slot`], `outbox_client::paging`).
//! - **The first REQ goes out before any relay list is known**: with lists missing, the plan
//!   asks the reader's relays about everyone (the residual). Those relays are also asked for the
//!   follows' kind:10002 lists; when lists arrive (debounced) the coordinator re-plans and
//!   applies the [`PlanDiff`](outbox_client::PlanDiff): new relays are dialled, dropped ones closed,
//!   changed filters replaced in place (paged again on the open socket), and the rest
//!   left alone.
//! - **Faults**: connect and EOSE timeouts, reconnects with exponential backoff and jitter, a
//!   [`PenaltyBox`] for relays that keep failing (or refuse with `auth-required:`/`restricted:`/
//!   `blocked:`); a relay set aside is left out of the next plan, so its authors move to other
//!   relays or the residual and stay covered.
//! - **Refusals**: one reading of a relay's `CLOSED`, refused `OK` or `NOTICE` ([`Refusal::of`],
//!   leading whitespace ignored) for the feed, lookups, route feeds and publishing.
//!   `rate-limited:` is waited out with the config's backoff and asked again a bounded number
//!   of times on every path. A relay that needs sign-in without a key, needs payment or keeps
//!   asking to slow down is set aside as such ([`PenaltyEntry`]) and never learned as down; one
//!   that will not serve the reader (`restricted:`, `blocked:`) is learned as not answering.
//!   Lookups say what each relay did ([`lookup`], [`LookupOutcome`]).
//! - **Sign-in**: with a signer ([`Client::with`]), a relay that answers `auth-required:` gets a
//!   NIP-42 AUTH event (for its own URL and challenge), signed once per connection for every
//!   purpose on it, and is asked again once; only if that fails is it set aside
//!   ([`FeedSummary::auth`], [`Status::Authenticated`]).
//! - **Learning**: once every slot of a plan has answered or been set aside, the coordinator
//!   builds one [`RoundReport`](outbox_core::stats::RoundReport) — per asked relay, whether it
//!   answered and how many distinct events it returned for each author it was asked about — and
//!   calls [`DeliveryStats::record_round`], the same call the simulator makes. Relays that failed
//!   or were set aside are in that report as not answered; that is the only place a failure is
//!   learned, so none is counted twice. EOSE latency goes to
//!   [`DeliveryStats::record_latency`] as it arrives. Stats are saved on a timer and at shutdown.
//! - **Probes**: after the fetch, a few relays the run did not ask are asked a short question
//!   each ([`outbox_core::probe`], up to the config's `probe_connections`, at most the routed
//!   budget of sockets at once), and what they returned is learned like any round; their notes
//!   are never delivered ([`FeedSummary::probes`]). A `--once` run probes after its slots
//!   closed, before the stats are saved; a continuing feed probes in a task of its own after
//!   each settle.
//!
//! ```no_run
//! # async fn demo(router: outbox_core::Router, follows: Vec<nostr::key::PublicKey>) {
//! use outbox_runtime::{Client, FeedEvent, FeedInput, RuntimeConfig};
//! let input = FeedInput::new(router, follows, ["wss://relay.example"]);
//! let client = Client::new(RuntimeConfig { once: true, ..RuntimeConfig::default() });
//! let (handle, mut events) = client.feed(input).await;
//! while let Some(event) = events.recv().await {
//!     if let FeedEvent::Note { event, .. } = event {
//!         println!("{}", event.content);
//!     }
//! }
//! let summary = handle.wait().await;
//! println!("{} events from {} relays", summary.events, summary.relays_answered);
//! # }
//! ```

pub mod client;
pub mod config;
mod coordinator;
mod deadline;
mod dedup;
pub mod limits;
pub mod monitor;
pub mod nip11;
pub mod penalty;
pub mod places;
mod probe;
pub mod publish;
pub mod query;
pub mod refusal;
pub mod route_feed;
mod signin;
pub mod slot;
pub mod sockets;
pub mod store;
mod tls;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use outbox_client::routes::{FilterQuery, RouteBudget, RoutePlan};
use outbox_client::{MemoryStore, StatsStore};
use outbox_core::{DeliveryStats, RawRelayList, Router};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use client::Client;
pub use config::{Backoff, PenaltyPolicy, RuntimeConfig};
pub use limits::{LimitsConfig, Nip11Config};
pub use nip11::Nip11Cache;
pub use outbox_client::Carriers;
pub use penalty::{PenaltyBox, PenaltyEntry};
pub use places::Places;
pub use publish::{
    publish, rebroadcast, PublishConfig, PublishOutcome, PublishReport, RelayPublish,
};
pub use query::{fetch_events, lookup, Lookup, LookupOutcome};
pub use refusal::Refusal;
pub use route_feed::{start_route, RouteEvent, RouteFeed};
pub use slot::{Failure, FrameDrop, SubKind};
pub use sockets::{Role, SocketBudget, SocketStats, Sockets};

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
    /// ([`outbox_client::apply_monitor_prior`]). Empty: no monitor data.
    pub monitor_relays: Vec<String>,
    /// Relay hints the client knows (the reader's kind:3 `p` tags through
    /// [`outbox_core::contact_list_hints`], pointers' relays): offered to every route table,
    /// with the relays learned stats saw each follow's notes arrive on, when the router's
    /// config says `hints = true` ([`Router::hints`]). Bounded per follow and source.
    pub hints: Vec<outbox_core::Hint>,
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
    /// ([`FeedSummary::probes`]).
    Probed {
        /// Relays probed.
        relays: usize,
        /// Of those, relays that answered.
        answered: usize,
        /// Notes they returned (learned from, never delivered).
        events: u64,
    },
}

/// What a relay did during the feed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RelayOutcome {
    /// Authors in its last feed filter.
    pub authors: usize,
    /// Feed REQs sent to it (first REQs and in-place replacements).
    pub reqs: u64,
    /// Notes it delivered first.
    pub events: u64,
    /// Whether its last feed filter reached EOSE.
    pub answered: bool,
    /// Failed attempts.
    pub failures: u32,
    /// Successful connections.
    pub connections: u32,
    /// Feed REQs sent: every page of every author chunk, as reported at each EOSE.
    pub pages: u64,
    /// Relay-list lookup REQs sent, counted the same way.
    pub lookup_pages: u64,
    /// Feed events received, page-edge repeats and notes other relays delivered first
    /// included: what the relay made us transfer.
    pub received: u64,
    /// Its last answered feed filter was fetched completely (no chunk was cut off by the page
    /// budget).
    pub complete: bool,
    /// A re-plan closed its feed REQ before it answered (its follows went to other relays).
    pub replanned_away: bool,
}

/// How a relay that asked for sign-in (NIP-42, `auth-required:`) was answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthOutcome {
    /// It accepted our AUTH event and was asked again.
    SignedIn,
    /// The client has no signer ([`Client::signer`]): it was set aside.
    NoKeys,
    /// Signing in did not help (refused, no challenge or no `OK` in time, or still refused
    /// after): it was set aside. The reason is the relay's text; escape it before display.
    Failed(String),
}

/// One probed relay ([`outbox_core::probe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeOutcome {
    /// Follows it was asked about.
    pub authors: usize,
    /// It sent EOSE.
    pub answered: bool,
    /// Distinct notes of the asked follows it returned within the window (learned from, never
    /// delivered).
    pub events: u64,
    /// Why it did not answer, as the socket or the relay said it; escape it before display.
    pub failure: Option<String>,
}

/// What probing did: relays the run did not ask, each asked after the fetch about the follows
/// who list it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeSummary {
    /// Per probed relay whose probe answered or failed, by canonical URL.
    pub relays: BTreeMap<String, ProbeOutcome>,
}

impl ProbeSummary {
    /// Relays probed.
    pub fn probed(&self) -> usize {
        self.relays.len()
    }

    /// Relays that answered their probe.
    pub fn answered(&self) -> usize {
        self.relays.values().filter(|r| r.answered).count()
    }

    /// Notes the probes returned.
    pub fn events(&self) -> u64 {
        self.relays.values().map(|r| r.events).sum()
    }
}

/// The `format` of a serialised [`FeedSummary`] document (`outbox feed --summary-json`):
/// `{"format": SUMMARY_FORMAT, "summary": {...}}`.
pub const SUMMARY_FORMAT: &str = "outbox-feed-summary/1";

/// The outcome of a feed, returned when it ends.
///
/// It serialises (`serde`) for tools, durations as serde's `{"secs", "nanos"}`, without the
/// learned [`stats`](Self::stats) and the [`lists`](Self::lists), which are large and kept by
/// the store.
#[derive(Clone, Debug, Serialize)]
pub struct FeedSummary {
    /// Distinct notes delivered.
    pub events: u64,
    /// Follows.
    pub follows: usize,
    /// Follows named in the filter of a relay whose last feed REQ reached EOSE.
    pub authors_covered: usize,
    /// Relays sent a feed REQ.
    pub relays_asked: usize,
    /// Relays whose feed REQ reached EOSE (the last one, or one a re-plan closed afterwards).
    pub relays_answered: usize,
    /// Relays asked that did not answer (set aside, or still failing at the end).
    pub relays_failed: usize,
    /// Relays asked whose feed REQ a re-plan closed before they answered: not failures.
    pub relays_replanned_away: usize,
    /// Relays set aside during the feed.
    pub penalised: Vec<String>,
    /// Relays that asked for sign-in (NIP-42), by canonical URL, and how the last request
    /// was answered.
    pub auth: BTreeMap<String, AuthOutcome>,
    /// Relay lists known at the end.
    pub relay_lists: usize,
    /// Relay lists (new, or newer than the one known) that an indexer delivered before any of
    /// the reader's relays did: what the indexers added.
    pub lists_from_indexers: usize,
    /// Plans made.
    pub plans: u64,
    /// From start to the first note.
    pub time_to_first_event: Option<Duration>,
    /// From start until 90% of the notes that arrived before the plan settled had arrived.
    pub time_to_90_percent: Option<Duration>,
    /// From start to the first moment every slot had answered or been set aside.
    pub time_to_full_eose: Option<Duration>,
    /// The run stopped at the end of its EOSE race, before every relay answered.
    pub raced: bool,
    /// The run stopped at its [`RuntimeConfig::deadline`]: before every relay answered or was
    /// set aside, or while probing after the fetch.
    pub deadline_reached: bool,
    /// Relays still awaited (a feed or lookup not answered) when the run stopped at its
    /// deadline or at the end of its EOSE race, by canonical URL.
    pub pending: Vec<String>,
    /// The planning seed of this run (see [`RuntimeConfig::seed`]).
    pub seed: u64,
    /// Who carried the residual in the last plan.
    pub carriers: Carriers,
    /// Follows asked of no relay because no plan could be applied (0 when every follow was
    /// asked somewhere).
    pub uncovered: usize,
    /// Plans that broke an invariant and were not applied.
    pub plans_rejected: u64,
    /// The relay lists known at the end (persist them so the next run plans routed at once).
    #[serde(skip)]
    pub lists: Vec<RawRelayList>,
    /// From start to the end.
    pub elapsed: Duration,
    /// REQs sent to fetch the feed and the relay lists (pages of every chunk on every relay).
    pub round_trips: u64,
    /// Feed events received from all relays, duplicates included (the transfer behind
    /// [`events`](Self::events)).
    pub events_received: u64,
    /// Relays whose last answered feed filter was cut off by the page budget.
    pub relays_incomplete: usize,
    /// Frames dropped, by reason.
    pub dropped: BTreeMap<FrameDrop, u64>,
    /// Per relay, by canonical URL.
    pub relays: BTreeMap<String, RelayOutcome>,
    /// The sockets when the feed ended: the most open at once (for every purpose that shares
    /// them), dials and joins.
    pub sockets: SocketStats,
    /// How the feed's relays fit the socket budget: a place each, time-shared, or cut.
    pub places: Places,
    /// What probing did (relays probed are not among [`relays`](Self::relays) nor counted in
    /// [`relays_asked`](Self::relays_asked): the run did not ask them for its feed).
    pub probes: ProbeSummary,
    /// The learned stats at the end (also saved to the store).
    #[serde(skip)]
    pub stats: DeliveryStats,
    /// The penalty box at the end (persist it to remember set-aside relays).
    pub penalties: PenaltyBox,
    /// Why saving the stats failed, if it did.
    pub stats_error: Option<String>,
}

#[derive(Debug)]
enum Control {
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

/// Why [`FeedHandle::subscribe`] opened nothing.
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

/// A client's own subscription on a running feed's sockets ([`FeedHandle::subscribe`]).
#[derive(Debug)]
pub struct Subscription {
    /// Where it asks, and why.
    pub plan: RoutePlan,
    /// Stop it with [`RouteFeed::shutdown`] (or let it end at EOSE with `once`).
    pub feed: RouteFeed,
    /// Verified events that match the filter, each once, with EOSE and failures per relay.
    pub events: mpsc::Receiver<RouteEvent>,
}

/// Controls a running feed.
#[derive(Debug)]
pub struct FeedHandle {
    control: mpsc::UnboundedSender<Control>,
    task: JoinHandle<FeedSummary>,
    /// The feed's client: subscriptions share its sockets, knobs and signer.
    client: Client,
    reader_relays: Vec<String>,
}

impl FeedHandle {
    /// Opens a subscription for `filter`, routed by what it names over the relay lists the
    /// feed knows and what it learned ([`FilterQuery`]): `authors` to their write relays,
    /// `#p` to the tagged people's read relays, and always the reader's relays. It runs on the
    /// feed's sockets (a relay the feed holds is not dialled again), live unless the feed is
    /// `once`; close it with [`RouteFeed::shutdown`].
    ///
    /// ```no_run
    /// # async fn demo(router: outbox_core::Router, follows: Vec<nostr::key::PublicKey>) {
    /// use nostr::{event::Kind, filter::Filter};
    /// use outbox_runtime::{Client, FeedInput, RouteEvent, RuntimeConfig, SocketBudget};
    /// let client = Client::with(RuntimeConfig::default(), SocketBudget::mobile(), None);
    /// let input = FeedInput::new(router, follows.clone(), ["wss://relay.example"]);
    /// let (feed, _notes) = client.feed(input).await;
    /// // Reactions to the follows' notes, on the feed's sockets.
    /// let filter = Filter::new().authors(follows).kind(Kind::Reaction);
    /// let mut reactions = feed.subscribe(filter).await.expect("a relay to ask");
    /// while let Some(RouteEvent::Note { event, relay }) = reactions.events.recv().await {
    ///     println!("{relay}: {}", event.content);
    /// }
    /// # }
    /// ```
    pub async fn subscribe(&self, filter: Filter) -> Result<Subscription, SubscribeError> {
        self.subscribe_with(filter, RouteBudget::default()).await
    }

    /// [`subscribe`](Self::subscribe) within `budget` relays.
    pub async fn subscribe_with(
        &self,
        filter: Filter,
        budget: RouteBudget,
    ) -> Result<Subscription, SubscribeError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let query = Box::new(FilterQuery::new(filter, &self.reader_relays));
        self.control
            .send(Control::Route {
                query,
                budget,
                reply,
            })
            .map_err(|_| SubscribeError::Ended)?;
        let plan = answer.await.map_err(|_| SubscribeError::Ended)??;
        let (feed, events) = start_route(&plan, &self.client);
        Ok(Subscription { plan, feed, events })
    }

    /// Adds relay lists learned elsewhere; the feed re-plans (debounced) and applies the diff.
    pub fn add_relay_lists(&self, lists: Vec<RawRelayList>) {
        let _ = self.control.send(Control::AddLists(lists));
    }

    /// Replaces the follow list; the feed re-plans.
    pub fn set_follows(&self, follows: Vec<PublicKey>) {
        let _ = self.control.send(Control::SetFollows(follows));
    }

    /// Asks the feed to end (every slot closed, stats saved) without waiting; keep draining
    /// the channel until it closes, then [`wait`](Self::wait) for the summary.
    pub fn request_shutdown(&self) {
        let _ = self.control.send(Control::Shutdown);
    }

    /// Closes every slot, saves the stats and returns the summary. The channel must still be
    /// drained (or dropped) meanwhile, as the feed may be waiting to deliver.
    pub async fn shutdown(self) -> FeedSummary {
        let _ = self.control.send(Control::Shutdown);
        self.wait().await
    }

    /// Waits for the feed to end by itself (`once` mode) and returns the summary.
    pub async fn wait(self) -> FeedSummary {
        let FeedHandle { control, task, .. } = self;
        let summary = task.await;
        drop(control);
        match summary {
            Ok(summary) => summary,
            // The coordinator does not panic on bad input; a panic here is a bug, surfaced.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("feed task cancelled: {e}"),
        }
    }
}

/// Starts a feed: loads the stats, makes the first plan (before any list is known, unless lists
/// were given) and dials its slots. Drain the returned channel; the feed waits for it.
///
/// A store that cannot be read (the medium failing, not bad content, which stores repair) is
/// logged and the feed starts with fresh stats: a feed is more useful than an error.
pub async fn start(
    mut input: FeedInput,
    client: &Client,
) -> (FeedHandle, mpsc::Receiver<FeedEvent>) {
    let config = client.config();
    let now = config
        .clock
        .unwrap_or_else(|| nostr::types::Timestamp::now().as_secs());
    // A kept deadline is never believed beyond the longest set-aside; with a key, relays that
    // only needed sign-in are asked again.
    input.penalties.clamp(now, &config.penalty);
    let (mut input, places) = places::fit(input, client);
    if client.signer().is_some() {
        input.penalties.retry_sign_in();
    }
    // A relay the reader now pays for gets a fresh chance, whatever was kept about it.
    for url in &config.paid_relays {
        input.penalties.forget(url);
    }
    let store = input.store.clone();
    // A task of its own: a store that panics costs the stored stats, not the feed.
    let stats = match tokio::spawn(async move { store.load().await }).await {
        Ok(Ok(loaded)) => loaded.stats,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "stats store unreadable; starting with fresh stats");
            DeliveryStats::new()
        }
        Err(e) => {
            tracing::warn!(error = %e, "stats load task failed; starting with fresh stats");
            DeliveryStats::new()
        }
    };
    let mut stats = stats;
    apply_monitors(&mut input, client, &mut stats).await;
    coordinator::spawn(input, client.clone(), stats, places)
}

/// Fetches the monitor reports about the relays of the known lists and seeds the prior; a
/// monitor that fails or knows nothing leaves the stats as they were.
async fn apply_monitors(input: &mut FeedInput, client: &Client, stats: &mut DeliveryStats) {
    let config = client.config();
    let policy = input.router.policy();
    let monitors: Vec<String> = input
        .monitor_relays
        .iter()
        .filter_map(|m| match policy.canonicalize(m) {
            Ok(url) => Some(url),
            Err(reason) => {
                tracing::warn!(relay = %m, %reason, "monitor relay not usable");
                None
            }
        })
        .collect();
    if monitors.is_empty() {
        return;
    }
    let relays = monitor::list_relays(&input.relay_lists, &input.follows, policy);
    let reports = monitor::fetch_monitor_reports(&monitors, &relays, client).await;
    let now = config
        .clock
        .unwrap_or_else(|| nostr::types::Timestamp::now().as_secs());
    let summary = outbox_client::apply_monitor_prior(stats, &reports, policy, now);
    tracing::info!(
        reports = reports.len(),
        alive = summary.alive,
        dead = summary.dead,
        own_evidence = summary.own_evidence,
        "monitor reports applied"
    );
    // Relays a monitor says require what the reader lacks are left out of plans.
    let mut left_out = Vec::new();
    for report in &reports {
        let Ok(url) = policy.canonicalize(&report.url) else {
            continue;
        };
        let limits = outbox_client::paging::RelayLimits {
            payment_required: report.requires_payment == Some(true),
            auth_required: report.requires_auth == Some(true),
            ..Default::default()
        };
        if let Some(lacking) = slot::Requirement::unmet(&limits, &url, client) {
            left_out.push((url, lacking));
        }
    }
    for (url, lacking) in left_out {
        let reason = lacking.reason("NIP-66 monitor");
        tracing::info!(relay = %url, %reason, "left out of plans");
        match lacking {
            slot::Requirement::SignIn => {
                input
                    .penalties
                    .needs_sign_in(&url, &reason, now, &config.penalty);
            }
            slot::Requirement::Payment => {
                input
                    .penalties
                    .needs_payment(&url, &reason, now, &config.penalty);
            }
        }
    }
}

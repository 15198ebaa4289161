//! The live runtime: a feed from real relays, routed by an outbox strategy.
//!
//! A client hands [`start`] its follows, its own relays, whatever kind:10002 relay lists it
//! already has, a [`Router`](nostr_outbox_core::Router) (a strategy from config, with the URL policy every relay URL of the
//! feed goes through) and a [`StatsStore`](nostr_outbox_client::StatsStore). It gets back a
//! [`FeedHandle`] and a channel of [`FeedEvent`]s: verified, de-duplicated notes and status
//! events (connected, EOSE, failed, set aside, re-planned).
//!
//! # How it works
//!
//! - **One coordinator task owns all state**: the relay lists, the route table, the plan's
//!   [`Slots`](nostr_outbox_client::Slots), the learned stats and the penalty box. Everything else talks
//!   to it with messages. The crate's three locks are leaves outside that state, never held
//!   across an `.await` nor together: the table of the shared sockets ([`Sockets`]), the
//!   shared cache of relay documents ([`Nip11Cache`]) and what was learned of the extensions
//!   each relay speaks ([`Extensions`]).
//! - **One task per relay** (a slot) owns a link to that relay. It sends REQ/CLOSE when told,
//!   reports events, EOSE and failures, and reconnects with backoff by itself. A relay that stalls
//!   or floods only ever blocks its own task.
//! - **One client, one socket per relay, one budget** ([`Client`], its [`Sockets`]): slots,
//!   route feeds, lookups, probes and publishing share a relay's socket, and the sockets open
//!   at once stay within the budget, a reserve of it kept for short work.
//! - **Paging**: relays cap each REQ, so a slot splits its filter into author chunks that fit
//!   the relay's limits (its NIP-11 document, else defaults) and pages each backwards until the
//!   window is complete or the page budget runs out ([`slot`](feed::slot), `nostr_outbox_client::paging`).
//! - **The first REQ goes out before any relay list is known**: with lists missing, the plan
//!   asks the reader's relays about everyone (the residual). Those relays are also asked for the
//!   follows' kind:10002 lists; when lists arrive (debounced) the coordinator re-plans and
//!   applies the [`PlanDiff`](nostr_outbox_client::PlanDiff): new relays are dialled, dropped ones closed,
//!   changed filters replaced in place (paged again on the open socket), and the rest
//!   left alone.
//! - **Faults**: connect and EOSE timeouts, reconnects with exponential backoff and jitter, a
//!   [`PenaltyBox`] for relays that keep failing (or refuse with `auth-required:`/`restricted:`/
//!   `blocked:`); a relay set aside is left out of the next plan, so its authors move to other
//!   relays or the residual and stay covered.
//! - **Refusals**: one reading of a relay's `CLOSED`, refused `OK` or `NOTICE` ([`Refusal::of`],
//!   leading whitespace ignored) for the feed, lookups, route feeds and publishing.
//!   `rate-limited:` of a request is waited out with the config's backoff and asked again a
//!   bounded number of times, in one place for every path; a published event is sent again
//!   only by publishing's next attempt. A relay that needs sign-in without a key, needs payment or keeps
//!   asking to slow down is set aside as such ([`PenaltyEntry`]) and never learned as down; one
//!   that will not serve the reader (`restricted:`, `blocked:`) is learned as not answering.
//!   Lookups say what each relay did ([`lookup`], [`LookupOutcome`]).
//! - **Sign-in**: with a signer ([`Client::with`]), a relay that answers `auth-required:` gets a
//!   NIP-42 AUTH event (for its own URL and challenge), signed once per connection for every
//!   purpose on it, and is asked again once; only if that fails is it set aside
//!   ([`FeedSummary::auth`], [`Status::Authenticated`]).
//! - **Learning**: once every slot of a plan has answered or been set aside, the coordinator
//!   builds one [`RoundReport`](nostr_outbox_core::stats::RoundReport) — per asked relay, whether it
//!   answered and how many distinct events it returned for each author it was asked about — and
//!   calls [`DeliveryStats::record_round`](nostr_outbox_core::DeliveryStats::record_round), the same call the simulator makes. Relays that failed
//!   or were set aside are in that report as not answered; that is the only place a failure is
//!   learned, so none is counted twice. EOSE latency goes to
//!   [`DeliveryStats::record_latency`](nostr_outbox_core::DeliveryStats::record_latency) as it arrives. Stats are saved on a timer and at shutdown.
//! - **Probes**: after the fetch, a few relays the run did not ask are asked a short question
//!   each ([`nostr_outbox_core::probe`], up to the config's `probe_connections`, at most the routed
//!   budget of sockets at once), and what they returned is learned like any round; the notes no
//!   relay delivered before reach the feed as [`FeedEvent::Found`] ([`FeedSummary::probes`]
//!   counts them). A `--once` run probes after its slots
//!   closed, before the stats are saved; a continuing feed probes in a task of its own after
//!   each settle.
//!
//! ```no_run
//! # async fn demo(router: nostr_outbox_core::Router, follows: Vec<nostr::key::PublicKey>) {
//! use nostr_outbox_runtime::{Client, FeedEvent, FeedInput, RuntimeConfig};
//! let input = FeedInput::new(router, follows, ["wss://relay.example"]);
//! let client = Client::new(RuntimeConfig { once: true, ..RuntimeConfig::default() });
//! let (handle, mut events) = nostr_outbox_runtime::start(input, &client).await;
//! while let Some(event) = events.recv().await {
//!     match event {
//!         // The plan's notes, then the ones probes found after the fetch.
//!         FeedEvent::Note { event, .. } | FeedEvent::Found { event, .. } => {
//!             println!("{}", event.content)
//!         }
//!         FeedEvent::Status(_) => {}
//!     }
//! }
//! let summary = handle.wait().await;
//! println!("{} events from {} relays", summary.events, summary.relays_answered);
//! # }
//! ```

pub mod asks;
pub mod client;
pub mod config;
pub mod connection;
mod deadline;
mod dedup;
pub mod feed;
pub mod penalty;
pub mod signer;
pub mod store;

pub use asks::count::{count, Counts};
pub use asks::dms::{
    find_dm_lists, read_wraps, unwrap_dm, wrap_dm, DirectMessage, DmLists, DmRead, DmRelayOutcome,
    OutgoingDm, UnwrapError, Wrap, WrapError,
};
pub use asks::lookup::{fetch_events, lookup, Lookup, LookupOutcome};
pub use asks::publish::{
    publish, rebroadcast, PublishConfig, PublishOutcome, PublishReport, RelayPublish,
};
pub use asks::route_feed::{start_route, RouteEvent, RouteFeed};
pub use asks::sync::{sync, SyncOutcome, Synced};
pub use client::Client;
pub use config::{Backoff, OpenFeed, PenaltyPolicy, RuntimeConfig, Schedule};
pub use connection::exchange::FrameDrop;
pub use connection::extensions::{Extension, Extensions, Learned, Verdict};
pub use connection::limits::{LimitsConfig, Nip11Config};
pub use connection::nip11::Nip11Cache;
pub use connection::refusal::Refusal;
pub use connection::sockets::{Role, SocketBudget, SocketStats, Sockets};
pub use feed::places::Places;
pub use feed::slot::{Failure, SubKind};
pub use feed::start;
pub use feed::{
    AuthOutcome, FeedEvent, FeedHandle, FeedInput, FeedSummary, ProbeOutcome, ProbeSummary,
    RelayMark, RelayOutcome, Status, SubscribeError, Subscription, SUMMARY_FORMAT,
};
pub use nostr_outbox_client::Carriers;
pub use penalty::{PenaltyBox, PenaltyEntry};
pub use signer::{Signer, SignerBackend, SignerError};

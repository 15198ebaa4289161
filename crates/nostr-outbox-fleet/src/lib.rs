//! Test support shared by the workspace's tests: what the runtime's, the CLI's and the nostr-sdk
//! engine's tests start, build and wait on. Dev-only (`publish = false`).
//!
//! - [`relay`]: real relays (nostr-relay-builder's `LocalRelay`) on 127.0.0.1 with an
//!   in-memory database tests seed (and publish to live subscribers), counting the REQs and
//!   connections they see; one can be shut down and restarted on its port
//!   ([`RealRelay`], [`Counter`]), and [`dead_url`], where nothing listens.
//! - [`fault`]: tiny WebSocket servers that misbehave in one way each ([`FaultServer`],
//!   [`Fault`]), for what a real relay does not do on demand: also a publisher's slow relay
//!   ([`slow_oks`]) and a relay redirecting its document ([`Redirect`]).
//! - [`scripted`]: a server answering every REQ with the frames it was given ([`Scripted`]).
//! - [`auth`]: relays asking for NIP-42 sign-in in one of several ways ([`AuthRelay`]).
//! - [`capped`]: a relay capping its answers and refusing long messages, logging what it was
//!   sent ([`CappedRelay`]).
//! - [`proxy`](mod@proxy): a TCP proxy counting the connections through it ([`Gauge`], [`proxy()`]),
//!   and one slow to let them through ([`slow_to_accept`]).
//! - [`echo`]: a relay with nothing stored that answers at once and counts its sockets
//!   ([`Echo`]).
//! - [`plain`]: a minimal relay that serves REQs (search among them) and a NIP-11 document of
//!   the NIPs it is told to name, and ignores every other ask ([`PlainRelay`]).
//! - [`cli`]: running the command-line binary, bounded, with a clean environment
//!   ([`cli::command`], [`cli::run`]).
//! - [`events`]: fixed keys and signed notes, relay lists and other events.
//! - [`world`]: where a test world's notes live and what a plan should fetch of them
//!   ([`World`]), route tables and routers.
//! - [`feed`]: collecting a feed's channel ([`drain`], [`Collected`]), bounded waits
//!   ([`wait_for`], [`wait_until`]), and one-shot feeds run to the end ([`run_once`],
//!   [`start_once`]).
//!
//! Nothing here asserts timings: waits are bounded generously and report whether the condition
//! came, for the test to assert.

pub mod auth;
pub mod capped;
pub mod cli;
pub mod echo;
pub mod events;
pub mod fault;
pub mod feed;
pub mod plain;
pub mod proxy;
pub mod relay;
pub mod scripted;
pub mod signer;
mod task;
mod wire;
pub mod world;

pub use auth::{AuthRelay, AuthScript, AuthSeen};
pub use capped::{CappedRelay, SeenMessage};
pub use cli::{assert_says, strings, texts, RUN_WITHIN};
pub use echo::Echo;
pub use events::{
    dm_list, follows_file, key, keys, note, now, raw, relay_list, sealed_as, signed, DAY,
};
pub use fault::{
    slow_oks, BlackHole, Fault, FaultServer, Redirect, DUPLICATES, FLOOD, RATE_LIMITED,
};
pub use feed::{
    drain, given_lists, run_once, start_drained, start_once, start_once_on, start_settled,
    wait_for, wait_for_note, wait_until, Collected, ONCE_WITHIN, SETTLED_WITHIN,
};
pub use nostr_outbox_live::fleet::SeenFilter;
pub use plain::PlainRelay;
pub use proxy::{proxy, slow_to_accept, Gauge};
pub use relay::{dead_url, Counter, RealRelay};
pub use scripted::{End, Scripted};
pub use signer::{silent_bunker, RemoteSigner};
pub use world::{inbox_plan, local_input, plan_over, reader_target, router, table, World};

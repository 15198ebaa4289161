//! The outbox router as nostr-sdk's gossip engine.
//!
//! nostr-sdk's `Client` picks relays per author through the [`NostrGossip`] trait: before a
//! REQ that names `authors`, it asks the engine for each author's best relays and sends the
//! author to each relay it gets back. [`OutboxGossip`] answers from one budgeted plan over
//! every public key nostr-sdk has asked about, made by an `nostr_outbox_core::Router` (any
//! registered strategy, picked from TOML), so the union of the relays a feed read opens stays
//! within `max_connections` routed relays plus the reader's own relays.
//!
//! It keeps the newest kind:10002 (and kind:10050) list per author from the events nostr-sdk
//! hands it, learns delivery from the notes relays send (through `nostr_outbox_client`'s
//! `RoundRecorder` and `DeliveryStats::record_round`, the rules the project's runtime and
//! simulator learn by), and keeps what it learned in a `StateStore` (the JSON `FileStore` or
//! the `SqliteStore` of `nostr-outbox-stats`).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use nostr_outbox_gossip::OutboxGossip;
//!
//! let gossip = OutboxGossip::from_toml("max_connections = 8\n[strategy]\ntype = \"recall\"")?
//!     .reader_relays(["wss://home.example"])
//!     .json_store("stats.json")
//!     .open()
//!     .await?;
//! // nostr_sdk::Client::builder().gossip(gossip.clone()).build() reads the feed; then:
//! gossip.end_round(None); // learn from what arrived
//! gossip.save().await?; // keep it for the next run
//! # Ok(())
//! # }
//! ```
//!
//! A *round* is one fetch of the feed: call [`OutboxGossip::end_round`] after each (with the
//! relays the client reached, if it knows them), so the next plan knows what was learned.
//!
//! [`NostrGossip`]: nostr_gossip::NostrGossip

mod engine;
mod state;

pub use engine::{Error, OutboxGossip, OutboxGossipBuilder, PlanSummary, DEFAULT_CONFIG};
pub use state::{
    DEFAULT_LIST_TTL, MAX_KEPT_LISTS, MAX_PLANNED_KEYS, MAX_ROUND_EVENTS, MAX_TRACKED_KEYS,
};

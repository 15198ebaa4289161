//! What the CLI's end-to-end tests share: local relays (nostr-relay-builder) on 127.0.0.1 and
//! fixed keys.

#![allow(dead_code)]

use std::sync::Arc;

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::{Keys, SecretKey};
use nostr::types::Timestamp;
use nostr_relay_builder::prelude as rb;

/// A local relay with an in-memory database that tests fill directly.
pub struct Relay {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    db: Arc<rb::MemoryDatabase>,
    _relay: rb::LocalRelay,
}

impl Relay {
    /// A relay listening on a free loopback port.
    pub async fn start() -> Self {
        Self::start_with(|builder| builder).await
    }

    /// A relay built with extra options (e.g. NIP-42 sign-in required).
    pub async fn start_with(options: impl Fn(rb::RelayBuilder) -> rb::RelayBuilder) -> Self {
        let db = Arc::new(rb::MemoryDatabase::with_opts(rb::MemoryDatabaseOptions {
            events: true,
            max_events: None,
        }));
        // The relay picks its own port; another test process may take it first: try again.
        let mut attempts = 0;
        let relay = loop {
            let relay =
                rb::LocalRelay::new(options(rb::RelayBuilder::default().database(db.clone())));
            match relay.run().await {
                Ok(()) => break relay,
                Err(e) if attempts < 5 => {
                    attempts += 1;
                    eprintln!("local relay did not start ({e}); trying another port");
                }
                Err(e) => panic!("local relay did not start: {e}"),
            }
        };
        let url = relay
            .url()
            .await
            .to_string()
            .trim_end_matches('/')
            .to_string();
        Self {
            url,
            db,
            _relay: relay,
        }
    }

    /// Whether the relay holds the event with this id (hex).
    pub async fn has(&self, id: &str) -> bool {
        use rb::NostrDatabase;
        let theirs = rb::EventId::from_hex(id).unwrap();
        self.db.event_by_id(&theirs).await.unwrap().is_some()
    }

    /// Stores an event as if it had been published.
    pub async fn store(&self, event: &Event) {
        use rb::{JsonUtil, NostrDatabase};
        let theirs = rb::Event::from_json(event.as_json()).unwrap();
        self.db.save_event(&theirs).await.unwrap();
    }
}

/// The `n`th fixed test key.
pub fn key(n: u32) -> Keys {
    let mut sk = [0x21u8; 32];
    sk[28..].copy_from_slice(&n.to_be_bytes());
    Keys::new(SecretKey::from_slice(&sk).unwrap())
}

/// A signed event of `kind` by `keys` with `tags`, dated `age` seconds ago.
pub fn signed(keys: &Keys, kind: Kind, content: &str, tags: Vec<Tag>, age: u64) -> Event {
    EventBuilder::new(kind, content)
        .tags(tags)
        .custom_created_at(Timestamp::from(Timestamp::now().as_secs() - age))
        .finalize(keys)
        .unwrap()
}

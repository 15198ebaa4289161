//! Real relays on 127.0.0.1: nostr-relay-builder's `LocalRelay` with an in-memory database
//! tests seed, and a query hook counting what it was asked.

use std::collections::HashSet;
use std::sync::Arc;

use nostr::event::Event;
use nostr_outbox_live::fleet::{memory_database, ReqLog, SeenFilter};
use nostr_relay_builder::prelude as rb;

/// Counts what a real relay was asked, from its own query-policy hook.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    log: ReqLog,
}

impl Counter {
    /// Every REQ filter seen so far, in order.
    pub fn reqs(&self) -> Vec<SeenFilter> {
        self.log.seen()
    }

    /// How many REQ filters asked for notes (kind 1) alone: the feed's.
    pub fn feed_reqs(&self) -> usize {
        self.reqs().iter().filter(|r| r.kinds == [1]).count()
    }

    /// How many connections sent a REQ.
    pub fn connections(&self) -> usize {
        self.reqs()
            .iter()
            .map(|r| r.peer)
            .collect::<HashSet<_>>()
            .len()
    }
}

/// A real relay on 127.0.0.1 with an in-memory database tests seed.
pub struct RealRelay {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// What the relay was asked.
    pub counter: Counter,
    db: Arc<rb::MemoryDatabase>,
    relay: rb::LocalRelay,
}

impl RealRelay {
    /// A relay listening on a free loopback port.
    pub async fn start() -> Self {
        Self::start_with(|b| b).await
    }

    /// A relay built with extra options (e.g. NIP-42 sign-in required). Its database, query
    /// hook and a rate limit no test reaches are set before `configure` runs.
    pub async fn start_with(configure: impl Fn(rb::RelayBuilder) -> rb::RelayBuilder) -> Self {
        let db = memory_database();
        let counter = Counter::default();
        // The relay picks its own port; another test process may take it first: try again.
        let mut attempts = 0;
        let relay = loop {
            let relay = rb::LocalRelay::new(configure(builder(&db, &counter)));
            match relay.run().await {
                Ok(()) => break relay,
                Err(e) if attempts < 5 => {
                    attempts += 1;
                    eprintln!("local relay did not start ({e}); trying another port");
                }
                Err(e) => panic!("local relay did not start: {e}"),
            }
        };
        let url = relay.url().await.to_string();
        let url = url.trim_end_matches('/').to_string();
        Self {
            url,
            counter,
            db,
            relay,
        }
    }

    /// `N` relays, started one after another: `let [reader, a, b] = RealRelay::several().await`.
    pub async fn several<const N: usize>() -> [Self; N] {
        let mut relays = Vec::with_capacity(N);
        for _ in 0..N {
            relays.push(Self::start().await);
        }
        relays.try_into().ok().expect("as many relays as asked")
    }

    /// Stores an event directly in the relay's database (the relay serves it like any other).
    pub async fn store(&self, event: &Event) {
        use rb::{JsonUtil, NostrDatabase};
        let theirs = rb::Event::from_json(event.as_json()).expect("same wire format");
        self.db.save_event(&theirs).await.expect("saved");
    }

    /// Stores `count` notes by `author`, the `n`th reading `{text}{n}` and dated `60 + n`
    /// seconds ago.
    pub async fn store_notes(&self, author: &nostr::key::Keys, count: u64, text: &str) {
        for n in 0..count {
            let note = crate::signed(
                author,
                nostr::event::Kind::TextNote,
                &format!("{text}{n}"),
                vec![],
                60 + n,
            );
            self.store(&note).await;
        }
    }

    /// Whether the relay holds the event with this id (hex).
    pub async fn has(&self, id: &str) -> bool {
        use rb::NostrDatabase;
        let theirs = rb::EventId::from_hex(id).expect("a hex event id");
        self.db.event_by_id(&theirs).await.expect("read").is_some()
    }

    /// Stores an event and passes it to the subscriptions open on the relay, as if a client
    /// had just published it there.
    pub async fn publish(&self, event: &Event) {
        use rb::JsonUtil;
        self.store(event).await;
        let theirs = rb::Event::from_json(event.as_json()).expect("same wire format");
        // No subscriber listening is not an error: the note is stored.
        let _ = self.relay.notify_event(theirs);
    }

    /// Stops listening and drops every connection. What it stores is kept: events stored
    /// meanwhile are served after [`restart`](Self::restart).
    pub fn shutdown(&self) {
        self.relay.shutdown();
    }

    /// Listens again on the same port with the same database and counter.
    pub async fn restart(&mut self) {
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a loopback URL with a port");
        // The old listener closes a moment after `stop`: try the port again until it is free.
        for attempt in 0.. {
            let relay = rb::LocalRelay::new(builder(&self.db, &self.counter).port(port));
            match relay.run().await {
                Ok(()) => {
                    self.relay = relay;
                    return;
                }
                Err(e) if attempt < 100 => {
                    if attempt % 20 == 0 {
                        eprintln!("relay did not restart on port {port} ({e}); trying again");
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("relay did not restart on port {port}: {e}"),
            }
        }
    }
}

/// A relay on `db` whose query hook records into `counter`, with a rate limit no test reaches.
fn builder(db: &Arc<rb::MemoryDatabase>, counter: &Counter) -> rb::RelayBuilder {
    rb::RelayBuilder::default()
        .database(db.clone())
        .query_policy(counter.log.clone())
        .rate_limit(rb::RateLimit {
            max_reqs: 100,
            notes_per_minute: 100_000,
        })
}

/// A URL on 127.0.0.1 where nothing listens.
pub async fn dead_url() -> String {
    // Bound and never listening: every connection is refused, and the port stays taken for the
    // rest of the test binary, so no relay of a test running beside it can be handed it.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    std::mem::forget(socket);
    format!("ws://127.0.0.1:{port}")
}

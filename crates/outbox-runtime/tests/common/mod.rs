//! Test harness: real relays (nostr-relay-builder's `LocalRelay`) on 127.0.0.1, seeded from a
//! small world, with a query hook that counts REQs and connections; and tiny misbehaving
//! WebSocket servers for the faults a real relay does not produce on demand.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, EventBuilder, EventId, FinalizeEvent, Kind, Tag};
use nostr::key::{Keys, PublicKey, SecretKey};
use nostr::types::Timestamp;
use nostr_relay_builder::prelude as rb;
use outbox_core::{Plan, RawRelayList, RouteTable, RouteTableBuilder, UrlPolicy};
use outbox_runtime::{FeedEvent, FeedHandle, FeedSummary, Status};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// The present of every test world.
pub fn now() -> u64 {
    Timestamp::now().as_secs()
}

pub const DAY: u64 = 86_400;

/// A deterministic key per index.
pub fn keys(n: u8) -> Keys {
    let mut sk = [0x11u8; 32];
    sk[31] = n;
    sk[0] = 0x42;
    Keys::new(SecretKey::from_slice(&sk).expect("valid secret key"))
}

/// One REQ as the relay's query hook saw it.
#[derive(Clone, Debug)]
pub struct SeenReq {
    pub peer: SocketAddr,
    pub authors: usize,
    pub kinds: Vec<u16>,
}

/// Counts what a real relay was asked, from its own query-policy hook.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    // Test-only shared log; the lock is taken briefly and never across an await.
    reqs: Arc<Mutex<Vec<SeenReq>>>,
}

impl Counter {
    pub fn reqs(&self) -> Vec<SeenReq> {
        self.reqs.lock().unwrap().clone()
    }

    pub fn feed_reqs(&self) -> usize {
        self.reqs().iter().filter(|r| r.kinds == [1]).count()
    }

    pub fn connections(&self) -> usize {
        self.reqs()
            .iter()
            .map(|r| r.peer)
            .collect::<HashSet<_>>()
            .len()
    }
}

impl rb::QueryPolicy for Counter {
    fn admit_query<'a>(
        &'a self,
        query: &'a rb::Filter,
        addr: &'a SocketAddr,
    ) -> rb::BoxedFuture<'a, rb::PolicyResult> {
        let seen = SeenReq {
            peer: *addr,
            authors: query.authors.as_ref().map_or(0, |a| a.len()),
            kinds: query
                .kinds
                .as_ref()
                .map(|k| k.iter().map(|k| k.as_u16()).collect())
                .unwrap_or_default(),
        };
        self.reqs.lock().unwrap().push(seen);
        Box::pin(async { rb::PolicyResult::Accept })
    }
}

/// A real relay on 127.0.0.1 with an in-memory database we can seed.
pub struct RealRelay {
    pub url: String,
    pub counter: Counter,
    db: Arc<rb::MemoryDatabase>,
    relay: rb::LocalRelay,
}

impl RealRelay {
    pub async fn start() -> Self {
        Self::start_with(|b| b).await
    }

    pub async fn start_with(configure: impl Fn(rb::RelayBuilder) -> rb::RelayBuilder) -> Self {
        let db = Arc::new(rb::MemoryDatabase::with_opts(rb::MemoryDatabaseOptions {
            events: true,
            max_events: None,
        }));
        let counter = Counter::default();
        // The relay picks its own port; another test process may take it first: try again.
        let mut attempts = 0;
        let relay = loop {
            let builder = rb::RelayBuilder::default()
                .database(db.clone())
                .query_policy(counter.clone())
                .rate_limit(rb::RateLimit {
                    max_reqs: 100,
                    notes_per_minute: 100_000,
                });
            let relay = rb::LocalRelay::new(configure(builder));
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

    /// Stores an event directly in the relay's database (the relay serves it like any other).
    pub async fn store(&self, event: &Event) {
        use rb::{JsonUtil, NostrDatabase};
        let theirs = rb::Event::from_json(event.as_json()).expect("same wire format");
        self.db.save_event(&theirs).await.expect("saved");
    }

    pub fn shutdown(&self) {
        self.relay.shutdown();
    }
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

/// How a misbehaving server misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Sends the stored events for a REQ, never EOSE.
    NeverEose,
    /// Sends one event, then drops the TCP connection.
    DropMidStream,
    /// Sends garbage: not JSON, wrong shapes, a binary frame, an oversized frame, an event
    /// with a broken signature. Never EOSE.
    Garbage,
    /// Answers a REQ with the first event and EOSE, then floods the subscription with the
    /// other events over and over (valid, but not what was asked) until the socket fails or
    /// [`FLOOD`] frames were sent.
    Flood,
    /// Answers a REQ with its events and EOSE, then sends the same events again and again on
    /// the subscription (valid, asked for, already sent) until the socket fails or [`FLOOD`]
    /// frames were sent.
    Replay,
    /// Answers a REQ with the first event [`DUPLICATES`] times, then EOSE.
    Duplicates,
    /// Refuses the first [`RATE_LIMITED`] REQs of every connection with `CLOSED`
    /// `rate-limited:`, then answers each with its events and EOSE.
    RateLimited,
}

/// REQs a [`Fault::RateLimited`] server refuses on each connection before serving.
pub const RATE_LIMITED: usize = 2;

/// Most frames one [`Fault::Flood`] or [`Fault::Replay`] answer sends.
pub const FLOOD: usize = 300_000;

/// Copies of one event a [`Fault::Duplicates`] page carries.
pub const DUPLICATES: usize = 100_000;

/// A tiny WebSocket server that misbehaves in one way; counts connections.
pub struct FaultServer {
    pub url: String,
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultServer {
    pub async fn start(fault: Fault, events: Vec<Event>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let events = events.clone();
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    let mut reqs = 0usize;
                    while let Some(Ok(msg)) = ws.next().await {
                        let Message::Text(text) = msg else { continue };
                        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
                            continue;
                        };
                        if value[0] != "REQ" {
                            continue;
                        }
                        reqs += 1;
                        let sub = value[1].as_str().unwrap_or_default().to_string();
                        let event_frame =
                            |e: &Event| format!(r#"["EVENT","{sub}",{}]"#, e.as_json());
                        match fault {
                            Fault::NeverEose => {
                                for e in &events {
                                    let _ = ws.send(Message::text(event_frame(e))).await;
                                }
                            }
                            Fault::DropMidStream => {
                                if let Some(e) = events.first() {
                                    let _ = ws.send(Message::text(event_frame(e))).await;
                                }
                                // Drop the socket without a close frame.
                                return;
                            }
                            Fault::Garbage => {
                                if let Some(e) = events.first() {
                                    let mut forged = serde_json::to_value(e).unwrap();
                                    forged["content"] = "forged".into();
                                    let frame = format!(r#"["EVENT","{sub}",{forged}]"#);
                                    let _ = ws.send(Message::text(frame)).await;
                                }
                                let _ = ws.send(Message::text("not json at all")).await;
                                let huge = format!(r#"["NOTICE","{}"]"#, "x".repeat(300_000));
                                let _ = ws.send(Message::text(huge)).await;
                                let _ = ws.send(Message::text(r#"["EVENT"]"#)).await;
                                let _ = ws.send(Message::binary(vec![0u8, 1, 2])).await;
                            }
                            Fault::Replay => {
                                let eose = format!(r#"["EOSE","{sub}"]"#);
                                let answer = events.iter().map(event_frame).chain([eose]);
                                for frame in answer {
                                    if ws.send(Message::text(frame)).await.is_err() {
                                        return;
                                    }
                                }
                                for e in events.iter().cycle().take(FLOOD) {
                                    if ws.send(Message::text(event_frame(e))).await.is_err() {
                                        return;
                                    }
                                }
                            }
                            Fault::Duplicates => {
                                if let Some(e) = events.first() {
                                    let frame = event_frame(e);
                                    for _ in 0..DUPLICATES {
                                        if ws.send(Message::text(frame.clone())).await.is_err() {
                                            return;
                                        }
                                    }
                                }
                                let eose = format!(r#"["EOSE","{sub}"]"#);
                                if ws.send(Message::text(eose)).await.is_err() {
                                    return;
                                }
                            }
                            Fault::RateLimited => {
                                let mut frames = Vec::new();
                                if reqs <= RATE_LIMITED {
                                    frames.push(format!(
                                        r#"["CLOSED","{sub}","rate-limited: slow down"]"#
                                    ));
                                } else {
                                    frames.extend(events.iter().map(event_frame));
                                    frames.push(format!(r#"["EOSE","{sub}"]"#));
                                }
                                for frame in frames {
                                    if ws.send(Message::text(frame)).await.is_err() {
                                        return;
                                    }
                                }
                            }
                            Fault::Flood => {
                                if let Some(e) = events.first() {
                                    let _ = ws.send(Message::text(event_frame(e))).await;
                                }
                                let eose = format!(r#"["EOSE","{sub}"]"#);
                                if ws.send(Message::text(eose)).await.is_err() {
                                    return;
                                }
                                let rest = &events[1.min(events.len())..];
                                for e in rest.iter().cycle().take(FLOOD) {
                                    if ws.send(Message::text(event_frame(e))).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        Self {
            url,
            connections,
            task,
        }
    }
}

/// A note by `author` at `created_at`.
pub fn note(author: &Keys, created_at: u64, text: &str) -> Event {
    EventBuilder::new(Kind::TextNote, text)
        .custom_created_at(Timestamp::from(created_at))
        .finalize(author)
        .expect("signs")
}

/// A kind:10002 list: `(url, marker)` pairs.
pub fn relay_list(author: &Keys, created_at: u64, entries: &[(&str, Option<&str>)]) -> Event {
    let tags = entries.iter().map(|(url, marker)| {
        let mut t = vec!["r".to_string(), url.to_string()];
        if let Some(m) = marker {
            t.push(m.to_string());
        }
        Tag::parse(t).expect("valid tag")
    });
    EventBuilder::new(Kind::RelayList, "")
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .finalize(author)
        .expect("signs")
}

/// Where every note lives: the world the relays are seeded from.
#[derive(Default)]
pub struct World {
    pub notes: Vec<(Event, Vec<String>)>,
}

impl World {
    /// Adds a note stored on `relays` and stores it there.
    pub async fn put(&mut self, event: Event, relays: &[&RealRelay]) {
        for r in relays {
            r.store(&event).await;
        }
        self.notes
            .push((event, relays.iter().map(|r| r.url.clone()).collect()));
    }

    /// What a plan fetches from this world: notes whose author some relay is asked about and
    /// that relay stores, at or after `since` (the rule of `docs/formats.md`, every relay up).
    pub fn predict(&self, plan: &Plan, table: &RouteTable, since: u64) -> BTreeSet<EventId> {
        let asked: HashMap<PublicKey, HashSet<&str>> = {
            let mut m: HashMap<PublicKey, HashSet<&str>> = HashMap::new();
            for e in plan.entries(table) {
                for a in &e.authors {
                    m.entry(*table.pubkey(*a))
                        .or_default()
                        .insert(table.url(e.relay));
                }
            }
            m
        };
        self.notes
            .iter()
            .filter(|(e, on)| {
                e.created_at.as_secs() >= since
                    && asked
                        .get(&e.pubkey)
                        .is_some_and(|rs| on.iter().any(|u| rs.contains(u.as_str())))
            })
            .map(|(e, _)| e.id)
            .collect()
    }
}

/// The table a client would build from these lists.
pub fn table(follows: &[PublicKey], readers: &[&str], lists: &[RawRelayList]) -> RouteTable {
    let mut b = RouteTableBuilder::new(UrlPolicy::allow_local())
        .follows(follows.iter().copied())
        .reader_relays(readers);
    for l in lists {
        b.add_list(l.clone());
    }
    b.build()
}

/// Everything the feed channel carried, collected by a drain task.
#[derive(Default, Debug)]
pub struct Collected {
    pub notes: BTreeMap<EventId, (Event, String)>,
    pub statuses: Vec<Status>,
    /// The feed channel closed: the coordinator ended and everything it sent is here.
    pub closed: bool,
}

/// Drains the feed channel into shared storage, so a test can look while the feed runs.
pub fn drain(mut rx: mpsc::Receiver<FeedEvent>) -> Arc<Mutex<Collected>> {
    let out = Arc::new(Mutex::new(Collected::default()));
    let sink = out.clone();
    tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            let mut c = sink.lock().unwrap();
            match ev {
                FeedEvent::Note { event, relay } => {
                    c.notes.insert(event.id, (*event, relay));
                }
                FeedEvent::Status(s) => c.statuses.push(s),
            }
        }
        sink.lock().unwrap().closed = true;
    });
    out
}

/// Waits (bounded) until `pred` holds on the collected output.
pub async fn wait_for(
    collected: &Arc<Mutex<Collected>>,
    within: Duration,
    pred: impl Fn(&Collected) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if pred(&collected.lock().unwrap()) {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs a `--once` feed to the end, bounded by `within`, and waits until everything it sent
/// has been collected.
pub async fn run_once(
    handle: FeedHandle,
    collected: &Arc<Mutex<Collected>>,
    within: Duration,
) -> FeedSummary {
    let summary = tokio::time::timeout(within, handle.wait())
        .await
        .expect("the feed completes within its timeouts");
    assert!(
        wait_for(collected, Duration::from_secs(5), |c| c.closed).await,
        "the feed channel closes when the feed ends"
    );
    summary
}

/// A router from TOML with every built-in strategy linked.
pub fn router(toml: &str) -> outbox_core::Router {
    outbox_strategies::link();
    outbox_core::Router::from_toml(toml).expect("valid config")
}

pub fn raw(event: &Event) -> RawRelayList {
    RawRelayList::try_from(event).expect("a valid relay list")
}

/// Connections open now and the most at once, over every proxy that shares it.
#[derive(Clone, Default)]
pub struct Gauge {
    pub open: Arc<AtomicUsize>,
    pub peak: Arc<AtomicUsize>,
    pub accepted: Arc<AtomicUsize>,
}

impl Gauge {
    fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let now = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn closed(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A TCP proxy in front of `upstream` (a `ws://host:port` URL) that counts the client's
/// connections in `gauge`, each from its accept until either end closed it; returns its URL.
pub async fn proxy(upstream: &str, gauge: Gauge) -> String {
    let target = upstream.trim_start_matches("ws://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            gauge.opened();
            let (target, gauge) = (target.clone(), gauge.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&target).await else {
                    gauge.closed();
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                // Closed as soon as either side closed: the relay's end or the client's.
                tokio::select! {
                    _ = tokio::io::copy(&mut server_read, &mut client_write) => {}
                    _ = tokio::io::copy(&mut client_read, &mut server_write) => {}
                }
                gauge.closed();
                let _ = client_write.shutdown().await;
                let _ = server_write.shutdown().await;
            });
        }
    });
    url
}

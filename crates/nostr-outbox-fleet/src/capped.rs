//! A relay that caps its answers and refuses long messages, as strfry and most relays do, and
//! serves a NIP-11 document saying so: what paging and author chunking are tested against.
//! It logs every client message, so a test can check what the client sent.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::SinkExt;
use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;

use crate::plain::{arrive, Arrival};

use crate::task::Task;
use crate::wire::next_json;

/// What one client message looked like to a [`CappedRelay`].
#[derive(Clone, Debug)]
pub struct SeenMessage {
    /// Its length in bytes.
    pub bytes: usize,
    /// Whether it was a REQ.
    pub req: bool,
    /// The `limit` of its first filter.
    pub limit: Option<usize>,
    /// How many authors its first filter names.
    pub authors: usize,
    /// The kinds its first filter names.
    pub kinds: Vec<u16>,
}

/// What the relay holds and heard.
#[derive(Default)]
struct ServerLog {
    // Test-only state; each lock is taken briefly, alone, and never across an await.
    messages: Mutex<Vec<SeenMessage>>,
    events: Mutex<Vec<Event>>,
    documents: AtomicUsize,
    max_open: AtomicUsize,
}

/// A small relay on one port: a plain GET gets `document` (when given) as NIP-11 JSON; a
/// WebSocket upgrade gets a relay that returns at most `cap` events per REQ, newest first, and
/// answers a message longer than `refuse_over` bytes with CLOSED.
pub struct CappedRelay {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    log: Arc<ServerLog>,
    _task: Task,
}

impl CappedRelay {
    /// A relay serving `document` (NIP-11 JSON, or a 404), at most `cap` events per REQ,
    /// refusing messages over `refuse_over` bytes; stops when dropped.
    pub async fn start(document: Option<String>, cap: usize, refuse_over: usize) -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let log = Arc::new(ServerLog::default());
        let shared = (Arc::new(document), log.clone());
        let _task = Task::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (document, log) = shared.clone();
                tokio::spawn(serve(stream, document, log, cap, refuse_over));
            }
        });
        Self { url, log, _task }
    }

    /// Adds events it serves.
    pub fn put(&self, events: impl IntoIterator<Item = Event>) {
        self.log.events.lock().unwrap().extend(events);
    }

    /// Every client message so far, in order.
    pub fn messages(&self) -> Vec<SeenMessage> {
        self.log.messages.lock().unwrap().clone()
    }

    /// NIP-11 documents served so far.
    pub fn documents(&self) -> usize {
        self.log.documents.load(Ordering::SeqCst)
    }

    /// The most subscriptions open at once on one connection.
    pub fn max_open(&self) -> usize {
        self.log.max_open.load(Ordering::SeqCst)
    }
}

/// One connection: a WebSocket upgrade is served as a relay; any other request gets the document.
async fn serve(
    stream: TcpStream,
    document: Arc<Option<String>>,
    log: Arc<ServerLog>,
    cap: usize,
    refuse_over: usize,
) {
    let mut ws = match arrive(stream, document.as_deref()).await {
        Some(Arrival::Socket(ws)) => ws,
        Some(Arrival::Answered(true)) => {
            log.documents.fetch_add(1, Ordering::SeqCst);
            return;
        }
        _ => return,
    };
    let mut open: HashSet<String> = HashSet::new();
    while let Some((text, value)) = next_json(&mut ws).await {
        let sub = value[1].as_str().unwrap_or_default().to_string();
        let filter: Option<Filter> = serde_json::from_value(value[2].clone()).ok();
        let req = value[0] == "REQ";
        log.messages.lock().unwrap().push(SeenMessage {
            bytes: text.len(),
            req,
            limit: filter.as_ref().and_then(|f| f.limit),
            authors: filter
                .as_ref()
                .and_then(|f| f.authors.as_ref())
                .map_or(0, |a| a.len()),
            kinds: filter
                .as_ref()
                .and_then(|f| f.kinds.as_ref())
                .map(|k| k.iter().map(|k| k.as_u16()).collect())
                .unwrap_or_default(),
        });
        if value[0] == "CLOSE" {
            open.remove(&sub);
            continue;
        }
        if !req {
            continue;
        }
        if text.len() > refuse_over {
            let closed = serde_json::json!(["CLOSED", sub, "error: message too large"]);
            let _ = ws.send(Message::text(closed.to_string())).await;
            continue;
        }
        open.insert(sub.clone());
        log.max_open.fetch_max(open.len(), Ordering::SeqCst);
        let Some(filter) = filter else { continue };
        let mut matching: Vec<Event> = log
            .events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| filter.match_event(e, MatchEventOptions::new()))
            .cloned()
            .collect();
        matching.sort_by(|x, y| y.created_at.cmp(&x.created_at).then(x.id.cmp(&y.id)));
        let take = filter.limit.unwrap_or(cap).min(cap);
        for e in matching.into_iter().take(take) {
            let frame = format!(r#"["EVENT","{sub}",{}]"#, e.as_json());
            let _ = ws.send(Message::text(frame)).await;
        }
        let _ = ws.send(Message::text(format!(r#"["EOSE","{sub}"]"#))).await;
    }
}

//! A minimal relay of the most common kind: answers REQs (search filters among them, NIP-50)
//! from the events it was given, never answers anything else (`COUNT`, `NEG-OPEN`: silence,
//! as many relays do), and serves a NIP-11 document on the same port naming the NIPs it was
//! told to, or none. nostr-relay-builder's local relay serves no NIP-11 document, so a client
//! that reads documents needs this one.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::SinkExt;
use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::task::Task;
use crate::wire::next_json;

/// A relay that searches its events (NIP-50: `search` matched as text in the content, as
/// nostr's filter matching does) and says so, or not, in its NIP-11 document.
pub struct PlainRelay {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// REQ filters with a `search` field received so far.
    pub searches: Arc<AtomicUsize>,
    /// REQs received so far.
    pub reqs: Arc<AtomicUsize>,
    /// Asks other than `REQ` received so far (`COUNT`, `NEG-OPEN`, …; not `CLOSE` or
    /// `NEG-CLOSE`): asks it ignored.
    pub ignored: Arc<AtomicUsize>,
    _task: Task,
}

impl PlainRelay {
    /// A relay holding `events`; its document lists NIP-50 when `advertises` is set.
    pub async fn start(events: Vec<Event>, advertises: bool) -> Self {
        let nips: &'static [u16] = if advertises { &[1, 11, 50] } else { &[1, 11] };
        Self::documented(events, Some(nips)).await
    }

    /// A relay holding `events` whose document names `nips` (`None`: it serves no document,
    /// every HTTP request gets a 404).
    pub async fn documented(events: Vec<Event>, nips: Option<&'static [u16]>) -> Self {
        let document =
            nips.map(|nips| serde_json::json!({"name": "test relay", "supported_nips": nips}));
        Self::with_document(events, document).await
    }

    /// A relay holding `events` that serves `document` as its NIP-11 document (`None`: a 404).
    pub async fn with_document(events: Vec<Event>, document: Option<serde_json::Value>) -> Self {
        let document: Option<Arc<str>> = document.map(|d| Arc::from(d.to_string()));
        let (listener, url) = crate::task::listen_locally().await;
        let searches = Arc::new(AtomicUsize::new(0));
        let reqs = Arc::new(AtomicUsize::new(0));
        let ignored = Arc::new(AtomicUsize::new(0));
        let heard = Heard {
            searches: searches.clone(),
            reqs: reqs.clone(),
            ignored: ignored.clone(),
        };
        let events = Arc::new(events);
        let _task = Task::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(
                    stream,
                    events.clone(),
                    document.clone(),
                    heard.clone(),
                ));
            }
        });
        Self {
            url,
            searches,
            reqs,
            ignored,
            _task,
        }
    }

    /// How many asks other than `REQ` it received (and ignored).
    pub fn ignored(&self) -> usize {
        self.ignored.load(Ordering::SeqCst)
    }

    /// How many search filters it was sent.
    pub fn searches(&self) -> usize {
        self.searches.load(Ordering::SeqCst)
    }

    /// How many REQs it received.
    pub fn reqs(&self) -> usize {
        self.reqs.load(Ordering::SeqCst)
    }
}

/// What a relay's connections count.
#[derive(Clone)]
struct Heard {
    searches: Arc<AtomicUsize>,
    reqs: Arc<AtomicUsize>,
    ignored: Arc<AtomicUsize>,
}

/// What came on a connection to a relay that also serves a NIP-11 document.
pub(crate) enum Arrival {
    /// A WebSocket connection.
    Socket(Box<WebSocketStream<TcpStream>>),
    /// An HTTP request, answered: with the document (`true`) or a 404.
    Answered(bool),
}

/// Reads a connection's request head: a WebSocket upgrade becomes a socket; any other request
/// gets `document` when it asks for NIP-11 JSON (as every document fetch does), else a 404.
/// `None`: the connection failed.
pub(crate) async fn arrive(mut stream: TcpStream, document: Option<&str>) -> Option<Arrival> {
    let mut head = vec![0u8; 8192];
    let mut seen = 0;
    // Peek until the request head is in, so the WebSocket handshake can still read it all.
    for _ in 0..100 {
        match stream.peek(&mut head).await {
            Ok(n) if head[..n].windows(4).any(|w| w == b"\r\n\r\n") => {
                seen = n;
                break;
            }
            Ok(n) if n == head.len() => return None,
            Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            Err(_) => return None,
        }
    }
    let text = String::from_utf8_lossy(&head[..seen]).to_ascii_lowercase();
    if text.contains("upgrade: websocket") {
        let ws = tokio_tungstenite::accept_async(stream).await.ok()?;
        return Some(Arrival::Socket(Box::new(ws)));
    }
    // Read what was peeked, so closing does not reset the connection under the answer.
    let _ = stream.read(&mut head).await;
    let served = document.filter(|_| text.contains("accept: application/nostr+json"));
    let response = match served {
        Some(body) => format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/nostr+json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
        None => {
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    Some(Arrival::Answered(served.is_some()))
}

/// One connection: a WebSocket upgrade is served as a relay; any other request gets the document.
async fn serve(
    stream: TcpStream,
    events: Arc<Vec<Event>>,
    document: Option<Arc<str>>,
    heard: Heard,
) {
    let Some(Arrival::Socket(mut ws)) = arrive(stream, document.as_deref()).await else {
        return;
    };
    while let Some((_, value)) = next_json(&mut ws).await {
        if value[0] != "REQ" {
            if value[0] != "CLOSE" && value[0] != "NEG-CLOSE" {
                heard.ignored.fetch_add(1, Ordering::SeqCst);
            }
            continue;
        }
        let sub = value[1].as_str().unwrap_or_default().to_string();
        let filters: Vec<Filter> = value
            .as_array()
            .map(|a| a.iter().skip(2))
            .into_iter()
            .flatten()
            .filter_map(|f| Filter::from_json(f.to_string()).ok())
            .collect();
        heard.reqs.fetch_add(1, Ordering::SeqCst);
        heard.searches.fetch_add(
            filters.iter().filter(|f| f.search.is_some()).count(),
            Ordering::SeqCst,
        );
        let mut frames = Vec::new();
        for filter in &filters {
            let limit = filter.limit.unwrap_or(usize::MAX);
            let matching = events
                .iter()
                .filter(|e| filter.match_event(e, MatchEventOptions::new()))
                .take(limit);
            frames.extend(matching.map(|e| format!(r#"["EVENT","{sub}",{}]"#, e.as_json())));
        }
        frames.push(format!(r#"["EOSE","{sub}"]"#));
        for frame in frames {
            if ws.send(Message::text(frame)).await.is_err() {
                return;
            }
        }
    }
}

//! Tiny WebSocket servers that misbehave in one way each: the faults a real relay does not
//! produce on demand.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::Event;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

use crate::proxy::Gauge;
use crate::task::Task;
use crate::wire::next_json;

/// How a misbehaving server misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Sends the stored events for a REQ, never EOSE (with none: a relay that completes the
    /// handshake and never answers).
    NeverEose,
    /// Answers every REQ (and COUNT) with `["CLOSED", sub, message]`.
    Refuse(&'static str),
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
    /// Answers each REQ with its events and EOSE after this many milliseconds: a slow relay.
    Late(u64),
    /// Answers the n-th EVENT it receives (over all connections) with the n-th `OK` of the
    /// script, `(accepted, message)`, the last one repeating; each after a `NOTICE` and an `OK`
    /// for another event. REQs get nothing.
    Oks(&'static [(bool, &'static str)]),
    /// Answers every COUNT with this count marked `"approximate": true` (NIP-45), and each
    /// REQ with its events and EOSE.
    ApproximateCount(u64),
}

/// REQs a [`Fault::RateLimited`] server refuses on each connection before serving.
pub const RATE_LIMITED: usize = 2;

/// Most frames one [`Fault::Flood`] or [`Fault::Replay`] answer sends.
pub const FLOOD: usize = 300_000;

/// Copies of one event a [`Fault::Duplicates`] page carries.
pub const DUPLICATES: usize = 100_000;

/// A tiny WebSocket server that misbehaves in one way; counts connections and the EVENTs it
/// received.
pub struct FaultServer {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// EVENT frames received so far, over all connections.
    pub events: Arc<AtomicUsize>,
    _task: Task,
}

impl FaultServer {
    /// A server holding nothing that refuses every REQ with a CLOSED giving `reason`.
    pub async fn refusing(reason: &'static str) -> Self {
        Self::start(Fault::Refuse(reason), Vec::new()).await
    }

    /// A server misbehaving by `fault`, answering REQs with `events` (whatever they ask);
    /// stops when dropped.
    pub async fn start(fault: Fault, events: Vec<Event>) -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let received_by_task = received.clone();
        let _task = Task::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let events = events.clone();
                let received = received_by_task.clone();
                tokio::spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    let mut reqs = 0usize;
                    while let Some((_, value)) = next_json(&mut ws).await {
                        if value[0] == "EVENT" {
                            let n = received.fetch_add(1, Ordering::SeqCst);
                            if let Fault::Oks(script) = fault {
                                if ok_after_noise(&mut ws, &value, script, n).await.is_err() {
                                    return;
                                }
                            }
                            continue;
                        }
                        let refused_count = value[0] == "COUNT"
                            && matches!(fault, Fault::Refuse(_) | Fault::ApproximateCount(_));
                        if value[0] != "REQ" && !refused_count {
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
                            Fault::ApproximateCount(n) if value[0] == "COUNT" => {
                                let answer = serde_json::json!({"count": n, "approximate": true});
                                let frame = serde_json::json!(["COUNT", sub, answer]).to_string();
                                if ws.send(Message::text(frame)).await.is_err() {
                                    return;
                                }
                            }
                            Fault::ApproximateCount(_) => {
                                let eose = format!(r#"["EOSE","{sub}"]"#);
                                for frame in events.iter().map(event_frame).chain([eose]) {
                                    if ws.send(Message::text(frame)).await.is_err() {
                                        return;
                                    }
                                }
                            }
                            Fault::Late(ms) => {
                                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                                let eose = format!(r#"["EOSE","{sub}"]"#);
                                for frame in events.iter().map(event_frame).chain([eose]) {
                                    if ws.send(Message::text(frame)).await.is_err() {
                                        return;
                                    }
                                }
                            }
                            Fault::Refuse(message) => {
                                let frame = serde_json::json!(["CLOSED", sub, message]).to_string();
                                if ws.send(Message::text(frame)).await.is_err() {
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
                            Fault::Oks(_) => {}
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
            events: received,
            _task,
        }
    }

    /// EVENT frames received so far, over all connections.
    pub fn events(&self) -> usize {
        self.events.load(Ordering::SeqCst)
    }
}

/// A [`Fault::Oks`] answer to the `n`-th EVENT (`value`): a `NOTICE`, an `OK` for another
/// event, then the script's `OK` for this one.
async fn ok_after_noise<S>(
    ws: &mut S,
    value: &serde_json::Value,
    script: &[(bool, &str)],
    n: usize,
) -> Result<(), tokio_tungstenite::tungstenite::Error>
where
    S: futures_util::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
{
    let Some(&(ok, message)) = script.get(n).or(script.last()) else {
        return Ok(());
    };
    let id = value[1]["id"].as_str().unwrap_or_default();
    let other = "0".repeat(64);
    let frames = [
        r#"["NOTICE","hello"]"#.to_string(),
        format!(r#"["OK","{other}",false,"blocked: not yours"]"#),
        serde_json::json!(["OK", id, ok, message]).to_string(),
    ];
    for frame in frames {
        ws.send(Message::text(frame)).await?;
    }
    Ok(())
}

/// A listener that accepts sockets and holds them without reading or writing; counts accepts.
pub struct BlackHole {
    /// Where it listens (`ws://127.0.0.1:port`).
    pub url: String,
    /// Sockets accepted so far.
    pub accepts: Arc<AtomicUsize>,
    _task: Task,
}

impl BlackHole {
    /// Listens on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let accepts = Arc::new(AtomicUsize::new(0));
        let count = accepts.clone();
        let _task = Task::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        Self {
            url,
            accepts,
            _task,
        }
    }
}

/// A relay that holds each EVENT `delay` before accepting it; `waiting` counts the EVENTs
/// waiting for their OK (open now, the most at once) over every server sharing it, which is
/// how many sockets a publisher holds at once. Returns its URL.
pub async fn slow_oks(delay: Duration, waiting: Gauge) -> String {
    let (listener, url) = crate::task::listen_locally().await;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let waiting = waiting.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                    return;
                };
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                    if value[0] != "EVENT" {
                        continue;
                    }
                    waiting.opened();
                    tokio::time::sleep(delay).await;
                    waiting.closed();
                    let id = value[1]["id"].as_str().unwrap().to_string();
                    let answer = serde_json::json!(["OK", id, true, ""]).to_string();
                    let _ = ws.send(Message::text(answer)).await;
                }
            });
        }
    });
    url
}

/// A relay whose every HTTP answer (the NIP-11 document's among them) is a redirect to an
/// observer on 127.0.0.1 that counts what reaches it: a client following the redirect shows.
pub struct Redirect {
    /// `ws://127.0.0.1:PORT` of the redirecting relay.
    pub url: String,
    /// Connections that reached the observer.
    pub followed: Arc<AtomicUsize>,
    _tasks: [Task; 2],
}

impl Redirect {
    /// The relay and its observer, each on a free port; stop when dropped.
    pub async fn start() -> Self {
        let observer = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let observer_port = observer.local_addr().unwrap().port();
        let followed = Arc::new(AtomicUsize::new(0));
        let seen = followed.clone();
        let observer_task = Task::spawn(async move {
            while let Ok((mut stream, _)) = observer.accept().await {
                // Counted before it answers: a followed redirect shows by the time it returns.
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\n\r\n").await;
            }
        });
        let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", relay.local_addr().unwrap());
        let relay_task = Task::spawn(async move {
            while let Ok((mut stream, _)) = relay.accept().await {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                // A cloud metadata path: where a followed redirect would do harm.
                let answer = format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{observer_port}/latest/meta-data/iam\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        Self {
            url,
            followed,
            _tasks: [observer_task, relay_task],
        }
    }

    /// Connections that reached the observer so far.
    pub fn followed(&self) -> usize {
        self.followed.load(Ordering::SeqCst)
    }
}

//! A relay with nothing stored that answers at once, counting its sockets: for the socket
//! pool's tests, which watch sockets open, close and be shared.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

use crate::task::Task;

/// A relay that answers every REQ with EOSE, every EVENT with OK and every NOTICE with itself,
/// and counts its sockets and the CLOSEs it was sent. It ends a socket at its first frame that
/// is not text.
pub struct Echo {
    /// `ws://127.0.0.1:port`.
    pub url: String,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
    _accepting: Task,
}

impl Echo {
    /// Starts one on a free port.
    pub async fn start() -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let closes = Arc::new(AtomicUsize::new(0));
        let (a, o, c) = (accepted.clone(), open.clone(), closes.clone());
        let accepting = Task::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let (open, closes) = (o.clone(), c.clone());
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await {
                        while let Some(Ok(Message::Text(text))) = ws.next().await {
                            let Some(reply) = reply(text.as_str(), &closes) else {
                                continue;
                            };
                            if ws.send(Message::text(reply.to_string())).await.is_err() {
                                break;
                            }
                        }
                    }
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            url,
            accepted,
            open,
            closes,
            _accepting: accepting,
        }
    }

    /// Sockets accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Sockets open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// CLOSEs sent to it so far.
    pub fn closes(&self) -> usize {
        self.closes.load(Ordering::SeqCst)
    }
}

/// The answer to one message, if it has one; counts a CLOSE.
fn reply(text: &str, closes: &AtomicUsize) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    match v[0].as_str() {
        Some("REQ") => Some(serde_json::json!(["EOSE", v[1]])),
        Some("EVENT") => Some(serde_json::json!(["OK", v[1]["id"], true, ""])),
        Some("NOTICE") => Some(serde_json::json!(["NOTICE", v[1]])),
        Some("CLOSE") => {
            closes.fetch_add(1, Ordering::SeqCst);
            None
        }
        _ => None,
    }
}

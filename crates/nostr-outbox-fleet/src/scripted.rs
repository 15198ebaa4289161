//! A WebSocket server that answers every REQ with the same frames: hostile relays written
//! frame by frame (property tests generate the frames).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message;

use crate::task::Task;
use crate::wire::next_json;

/// How a [`Scripted`] answer ends.
#[derive(Clone, Copy, Debug)]
pub enum End {
    /// EOSE for the subscription: the page is answered.
    Eose,
    /// Nothing more: the client's EOSE timeout strikes.
    Silence,
    /// A close frame.
    Close,
    /// The TCP connection is dropped.
    Drop,
}

/// A server answering every REQ with its frames (`{sub}` in a text frame becomes the REQ's
/// subscription id), then its [`End`]; counts REQs.
pub struct Scripted {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// REQs received so far, over all connections.
    pub reqs: Arc<AtomicUsize>,
    _task: Task,
}

impl Scripted {
    /// A server sending `frames` then `end` to every REQ; stops when dropped.
    pub async fn start(frames: Vec<Message>, end: End) -> Self {
        let (listener, url) = crate::task::listen_locally().await;
        let reqs = Arc::new(AtomicUsize::new(0));
        let asked = reqs.clone();
        let _task = Task::spawn(async move {
            // Held here so dropping the server ends its connections too.
            let mut sockets = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let (frames, asked) = (frames.clone(), asked.clone());
                sockets.spawn(async move {
                    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                        return;
                    };
                    while let Some((_, req)) = next_json(&mut ws).await {
                        if req[0] != "REQ" {
                            continue;
                        }
                        asked.fetch_add(1, Ordering::SeqCst);
                        let sub = req[1].as_str().unwrap_or_default().to_string();
                        for frame in &frames {
                            let msg = match frame {
                                Message::Text(t) => Message::text(t.replace("{sub}", &sub)),
                                other => other.clone(),
                            };
                            if ws.send(msg).await.is_err() {
                                return;
                            }
                        }
                        match end {
                            End::Eose => {
                                let eose = format!(r#"["EOSE",{}]"#, serde_json::json!(sub));
                                if ws.send(Message::text(eose)).await.is_err() {
                                    return;
                                }
                            }
                            End::Silence => {}
                            End::Close => {
                                let _ = ws.close(None).await;
                                return;
                            }
                            End::Drop => return,
                        }
                    }
                });
            }
        });
        Self { url, reqs, _task }
    }

    /// REQs received so far.
    pub fn reqs(&self) -> usize {
        self.reqs.load(Ordering::SeqCst)
    }
}

//! A link: one purpose's view of a shared socket. It sends frames and reads the frames meant
//! for it as if the socket were its own.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::connection::{Command, Incoming, Read, Sub};
use super::{frame, Inner};

/// The socket is gone (closed by the relay, failed, or abandoned by another link).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LinkClosed;

impl std::fmt::Display for LinkClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection is closed")
    }
}

/// One purpose's handle on a relay's socket ([`Sockets::link`](super::Sockets)). Dropping
/// it leaves the socket to the other links (or to the idle timer).
pub(crate) struct Link {
    url: String,
    link: u64,
    socket: u64,
    commands: mpsc::UnboundedSender<Command>,
    frames: mpsc::Receiver<Incoming>,
    pool: Arc<Inner>,
    left: bool,
}

impl Link {
    pub(super) fn new(
        url: &str,
        link: u64,
        socket: u64,
        commands: mpsc::UnboundedSender<Command>,
        frames: mpsc::Receiver<Incoming>,
        pool: Arc<Inner>,
    ) -> Self {
        Self {
            url: url.to_string(),
            link,
            socket,
            commands,
            frames,
            pool,
            left: false,
        }
    }

    /// Sends a frame. Subscription ids are made this link's own on the wire; an event's id is
    /// remembered so its `OK` comes back here. Never waits for the socket: a frame the socket
    /// cannot write ends it, and the link then reads its end.
    pub(crate) async fn send(&mut self, msg: Message) -> Result<(), LinkClosed> {
        let (msg, ok_id, sub) = match &msg {
            Message::Text(text) => {
                let text = text.as_str();
                match frame::head(text) {
                    Some((
                        ty @ ("REQ" | "CLOSE" | "COUNT" | "NEG-OPEN" | "NEG-MSG" | "NEG-CLOSE"),
                        Some(id),
                    )) => {
                        let wire = frame::tag(&text[id.clone()], self.link);
                        let sub = match ty {
                            "REQ" => Some(Sub::Open(wire.clone())),
                            "CLOSE" => Some(Sub::Close(wire.clone())),
                            _ => None,
                        };
                        (Message::text(frame::splice(text, id, &wire)), None, sub)
                    }
                    Some(("EVENT" | "AUTH", _)) => (msg.clone(), frame::sent_event_id(text), None),
                    _ => (msg.clone(), None, None),
                }
            }
            _ => (msg, None, None),
        };
        self.commands
            .send(Command::Send {
                link: self.link,
                msg,
                ok_id,
                sub,
            })
            .map_err(|_| LinkClosed)
    }

    /// The relay's published subscription limit (NIP-11 `max_subscriptions`): REQs of every
    /// link on the socket beyond it wait until one of them is closed.
    pub(crate) fn limit_subscriptions(&mut self, max: usize) {
        let _ = self.commands.send(Command::Limit { max });
    }

    /// The next frame (or sign-in answer) for this link; `None` once the socket ended. An
    /// error says how it ended.
    pub(crate) async fn recv(&mut self) -> Option<Result<Read, String>> {
        self.frames.recv().await
    }

    /// Asks the socket to sign in (NIP-42), after the relay refused this link a request with
    /// `auth-required:`. The answer is read like a frame, as [`Read::SignedIn`]: at once when
    /// the connection already signed in (or failed to), else when the relay answered the
    /// AUTH event, which the socket sends once for every link that asks.
    pub(crate) fn sign_in(&mut self) -> Result<(), LinkClosed> {
        self.commands
            .send(Command::SignIn { link: self.link })
            .map_err(|_| LinkClosed)
    }

    /// Leaves the socket politely (the link's subscriptions should be closed first).
    pub(crate) async fn close(&mut self) -> Result<(), LinkClosed> {
        self.leave(None);
        Ok(())
    }

    /// Ends the socket for every link on it: the relay misbehaved (`why` is logged).
    pub(crate) fn abandon(&mut self, why: String) {
        self.leave(Some(why));
    }

    fn leave(&mut self, kill: Option<String>) {
        if self.left {
            return;
        }
        self.left = true;
        // The socket hears of the leave before the pool does: a link the pool then wakes may
        // ask the socket to close, and that request must find this link already gone.
        let _ = self.commands.send(Command::Detach {
            link: self.link,
            kill,
        });
        self.pool.left(&self.url, self.socket);
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.leave(None);
    }
}

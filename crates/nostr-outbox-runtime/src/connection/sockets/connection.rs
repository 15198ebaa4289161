//! One socket's task: dials, then writes what its links send and hands each frame read to the
//! link it is for (every link when it names none of them), until the relay closes it, a link
//! abandons it, or it has been unused for the budget's idle time.

use std::collections::{HashMap, VecDeque};
use std::sync::Weak;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::Message;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use nostr::event::Event;
use nostr::message::RelayMessage;

use super::auth::{Auth, Step};
use crate::signer::{Signer, SignerError};

/// The signer's work on this connection's AUTH event, polled beside the frames.
type Signing = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Event, SignerError>> + Send + 'static>,
>;
use super::{frame, Dial, DialError, Inner, MAX_PENDING_OKS};

/// An open relay socket.
type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// REQs that wait at once for the relay's subscription limit; past this they are sent anyway
/// (the relay then refuses or closes what it cannot hold, as it would without the wait).
const MAX_WAITING_REQS: usize = 1024;

/// How the reason of a socket a link abandoned starts.
const ABANDONED: &str = "abandoned: ";

/// What a link reads: a frame or the answer to its sign-in, or how the socket ended.
pub(crate) type Incoming = Result<Read, String>;

/// Something for a link to read.
#[derive(Debug)]
pub(crate) enum Read {
    /// A frame from the relay.
    Frame(Message),
    /// How the connection's sign-in ended, for a link that asked
    /// ([`Link::sign_in`](super::Link::sign_in)).
    SignedIn(Result<(), String>),
}

/// A subscription a frame opens (`REQ`) or closes (`CLOSE`), by its id on the wire.
pub(crate) enum Sub {
    Open(String),
    Close(String),
}

/// What links (and [`Sockets`](super::Sockets)) tell a socket's task.
pub(crate) enum Command {
    /// A link joins; `ready` says whether the socket opened.
    Attach {
        link: u64,
        frames: mpsc::Sender<Incoming>,
        ready: oneshot::Sender<Result<(), DialError>>,
    },
    /// A frame to write; `ok_id` is the id of the event it carries, whose `OK` goes back to
    /// this link; `sub` the subscription it opens or closes.
    Send {
        link: u64,
        msg: Message,
        ok_id: Option<String>,
        sub: Option<Sub>,
    },
    /// The relay's subscription limit.
    Limit { max: usize },
    /// A link leaves; with `kill`, the socket ends for every link.
    Detach { link: u64, kill: Option<String> },
    /// Close now if no link uses the socket: someone waits for its place.
    CloseIdle,
    /// A link asks to be signed in (NIP-42); the answer comes as [`Read::SignedIn`].
    SignIn { link: u64 },
}

pub(super) struct Connection {
    url: String,
    socket: u64,
    dial: Dial,
    idle: Duration,
    pool: Weak<Inner>,
    links: HashMap<u64, mpsc::Sender<Incoming>>,
    /// Event id → the link that sent it, oldest first in `ok_order`.
    oks: HashMap<String, u64>,
    ok_order: VecDeque<String>,
    /// The connection's sign-in, shared by every link on it.
    auth: Auth,
    /// The AUTH event the signer is signing, if any: never awaited inline, so frames keep
    /// flowing to the links while a remote signer thinks.
    signing: Option<Signing>,
    /// Subscriptions open on the relay, by wire id, with the link that opened them.
    open: HashMap<String, u64>,
    /// The relay's subscription limit, once a link read it.
    max_subs: Option<usize>,
    /// REQs waiting for a subscription to close, oldest first.
    waiting: VecDeque<(u64, String, Message)>,
}

/// How a socket ended.
enum End {
    /// Nobody needs it: close politely.
    Quiet,
    /// Failed or closed by the relay; every link is told why.
    Broken(String),
}

impl Connection {
    pub(super) fn new(
        url: String,
        socket: u64,
        dial: Dial,
        signer: Option<Signer>,
        idle: Duration,
        pool: Weak<Inner>,
    ) -> Self {
        Self {
            auth: Auth::new(signer, dial.sign_in_timeout),
            signing: None,
            url,
            socket,
            dial,
            idle,
            pool,
            links: HashMap::new(),
            oks: HashMap::new(),
            ok_order: VecDeque::new(),
            open: HashMap::new(),
            max_subs: None,
            waiting: VecDeque::new(),
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let dialled = self.dial(&mut commands).await;
        match dialled {
            Some(Ok(mut ws)) => {
                let end = self.serve(&mut ws, &mut commands).await;
                // No link joins or writes any more; the place stays taken until it is closed.
                if let Some(pool) = self.pool.upgrade() {
                    pool.closing(&self.url, self.socket);
                }
                commands.close();
                let open = match &end {
                    End::Quiet => true,
                    End::Broken(why) => {
                        tracing::debug!(relay = %self.url, reason = %why, "socket ended");
                        for frames in self.links.values() {
                            let _ = frames.try_send(Err(why.clone()));
                        }
                        why.starts_with(ABANDONED)
                    }
                };
                if open {
                    // The closing handshake: the place is freed once the relay closed its end
                    // too, so the relay never sees more sockets than the budget.
                    let grace = self.dial.shutdown_grace.min(Duration::from_secs(1));
                    let _ = timeout(grace, async {
                        let _ = ws.close(None).await;
                        while let Some(Ok(_)) = ws.next().await {}
                    })
                    .await;
                }
                drop(ws);
                self.finish(&mut commands, None);
            }
            Some(Err(e)) => self.finish(&mut commands, Some(e)),
            None => self.finish(&mut commands, None),
        }
    }

    /// Dials while collecting the links that join meanwhile; `None` when every link left
    /// before the socket opened.
    async fn dial(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Option<Result<Socket, DialError>> {
        crate::connection::tls::install_crypto_provider();
        // A frame or message above the hard limit kills the connection.
        let limits = WebSocketConfig::default()
            .max_message_size(Some(self.dial.hard_frame_limit))
            .max_frame_size(Some(self.dial.hard_frame_limit));
        let connect = tokio_tungstenite::connect_async_tls_with_config(
            self.url.clone(),
            Some(limits),
            true,
            None,
        );
        let connect = timeout(self.dial.connect_timeout, connect);
        tokio::pin!(connect);
        let mut waiting: Vec<(u64, mpsc::Sender<Incoming>, oneshot::Sender<_>)> = Vec::new();
        let mut joined = false;
        let result = loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Attach { link, frames, ready }) => {
                        joined = true;
                        waiting.push((link, frames, ready));
                    }
                    Some(Command::Detach { link, .. }) => {
                        waiting.retain(|(l, _, _)| *l != link);
                        if joined && waiting.is_empty() {
                            return None;
                        }
                    }
                    Some(Command::SignIn { link }) => {
                        // Not open yet: nothing to sign; the link asks again once it is.
                        if let Some(i) = waiting.iter().position(|(l, _, _)| *l == link) {
                            let _ = waiting[i].1.try_send(Ok(Read::SignedIn(Err(
                                "the connection is not open yet".into(),
                            ))));
                        }
                    }
                    Some(Command::Send { .. } | Command::CloseIdle | Command::Limit { .. }) => {}
                    None => return None,
                },
                res = &mut connect => break match res {
                    Err(_) => Err(DialError::TimedOut),
                    Ok(Err(e)) => Err(DialError::Failed(e.to_string())),
                    Ok(Ok((ws, _))) => Ok(ws),
                },
            }
        };
        for (link, frames, ready) in waiting {
            match &result {
                Ok(_) => {
                    if ready.send(Ok(())).is_ok() {
                        self.links.insert(link, frames);
                    }
                }
                Err(e) => {
                    let _ = ready.send(Err(e.clone()));
                }
            }
        }
        Some(result)
    }

    async fn serve(
        &mut self,
        ws: &mut Socket,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> End {
        let mut unused_since = self.links.is_empty().then(Instant::now);
        // Asked to close while a link was still attached (its detach was on the way): the
        // pool marked the socket closing, so nobody joins it and someone waits for its place.
        let mut close_when_unused = false;
        loop {
            let idle_at = unused_since.map(|t| crate::deadline::offset(t, self.idle));
            let auth_at = self.auth.deadline();
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Command::Attach { link, frames, ready }) => {
                        if ready.send(Ok(())).is_ok() {
                            self.links.insert(link, frames);
                            unused_since = None;
                        }
                    }
                    Some(Command::Send { link, msg, ok_id, sub }) => {
                        if !self.links.contains_key(&link) {
                            continue;
                        }
                        if let Some(id) = ok_id {
                            self.expect_ok(id, link);
                        }
                        if let Err(e) = self.write(ws, link, msg, sub).await {
                            return End::Broken(format!("sending failed: {e}"));
                        }
                    }
                    Some(Command::Limit { max }) => {
                        self.max_subs = Some(max.max(1));
                        if let Err(e) = self.flush(ws).await {
                            return End::Broken(format!("sending failed: {e}"));
                        }
                    }
                    Some(Command::Detach { link, kill }) => {
                        self.links.remove(&link);
                        self.forget_oks(link);
                        self.auth.forget(link);
                        if kill.is_none() {
                            if let Err(e) = self.close_subs_of(ws, link).await {
                                return End::Broken(format!("sending failed: {e}"));
                            }
                        }
                        if let Some(why) = kill {
                            return End::Broken(format!("{ABANDONED}{why}"));
                        }
                        if self.links.is_empty() {
                            if close_when_unused {
                                return End::Quiet;
                            }
                            unused_since = Some(Instant::now());
                        }
                    }
                    Some(Command::CloseIdle) => {
                        if self.links.is_empty() {
                            return End::Quiet;
                        }
                        close_when_unused = true;
                    }
                    Some(Command::SignIn { link }) => {
                        let step = self.auth.ask(link, &self.url);
                        if let Err(e) = self.sign_in(ws, step).await {
                            return End::Broken(format!("sending failed: {e}"));
                        }
                    }
                    None => return End::Quiet,
                },
                frame = ws.next() => match frame {
                    None => return End::Broken("end of stream".into()),
                    Some(Err(e)) => return End::Broken(e.to_string()),
                    Some(Ok(Message::Close(close))) => {
                        self.broadcast(Message::Close(close.clone())).await;
                        let why = close.map(|f| f.reason.to_string()).unwrap_or_default();
                        return End::Broken(format!("closed by relay {why}"));
                    }
                    Some(Ok(Message::Text(text))) => {
                        if let Some(step) = self.auth_frame(text.as_str()) {
                            if let Err(e) = self.sign_in(ws, step).await {
                                return End::Broken(format!("sending failed: {e}"));
                            }
                            continue;
                        }
                        let freed = self.route(text.as_str(), Message::Text(text.clone())).await;
                        if freed {
                            if let Err(e) = self.flush(ws).await {
                                return End::Broken(format!("sending failed: {e}"));
                            }
                        }
                    }
                    Some(Ok(msg @ Message::Binary(_))) => self.broadcast(msg).await,
                    Some(Ok(_)) => {}
                },
                _ = sleep_until(idle_at.unwrap_or_else(Instant::now)), if idle_at.is_some() => {
                    return End::Quiet;
                }
                signed = async { self.signing.as_mut().expect("polled only when set").await }, if self.signing.is_some() => {
                    self.signing = None;
                    let step = self.auth.signed(signed);
                    if let Err(e) = self.sign_in(ws, step).await {
                        return End::Broken(format!("sending failed: {e}"));
                    }
                }
                _ = sleep_until(auth_at.unwrap_or_else(Instant::now)), if auth_at.is_some() => {
                    let step = self.auth.expired();
                    if let Err(e) = self.sign_in(ws, step).await {
                        return End::Broken(format!("sending failed: {e}"));
                    }
                }
            }
        }
    }

    /// Writes a link's frame, keeping the relay's open subscriptions within its limit: a REQ
    /// for a new subscription past the limit waits for one to close.
    async fn write(
        &mut self,
        ws: &mut Socket,
        link: u64,
        msg: Message,
        sub: Option<Sub>,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        match sub {
            Some(Sub::Open(wire)) => {
                let full = self.max_subs.is_some_and(|max| self.open.len() >= max);
                if full && !self.open.contains_key(&wire) && self.waiting.len() < MAX_WAITING_REQS {
                    self.waiting.push_back((link, wire, msg));
                    return Ok(());
                }
                self.open.insert(wire, link);
                ws.send(msg).await
            }
            Some(Sub::Close(wire)) => {
                self.waiting.retain(|(_, w, _)| *w != wire);
                let was_open = self.open.remove(&wire).is_some();
                ws.send(msg).await?;
                if was_open {
                    self.flush(ws).await?;
                }
                Ok(())
            }
            None => ws.send(msg).await,
        }
    }

    /// Sends waiting REQs while the relay's limit allows.
    async fn flush(
        &mut self,
        ws: &mut Socket,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        while self.max_subs.is_none_or(|max| self.open.len() < max) {
            let Some((link, wire, msg)) = self.waiting.pop_front() else {
                break;
            };
            if !self.links.contains_key(&link) {
                continue;
            }
            self.open.insert(wire, link);
            ws.send(msg).await?;
        }
        Ok(())
    }

    /// A link left: its subscriptions still open on the relay are closed for it (a lookup cut
    /// short leaves nothing behind), and its waiting REQs dropped.
    async fn close_subs_of(
        &mut self,
        ws: &mut Socket,
        link: u64,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        self.waiting.retain(|(l, _, _)| *l != link);
        let mut ids: Vec<String> = self
            .open
            .iter()
            .filter(|(_, l)| **l == link)
            .map(|(w, _)| w.clone())
            .collect();
        ids.sort();
        for wire in ids {
            self.open.remove(&wire);
            let close = serde_json::json!(["CLOSE", wire]).to_string();
            ws.send(Message::text(close)).await?;
        }
        self.flush(ws).await
    }

    /// Hands a text frame to the link it names, or to every link; whether it was a `CLOSED`
    /// that freed one of the relay's subscriptions (waiting REQs may go).
    async fn route(&mut self, text: &str, msg: Message) -> bool {
        let head = frame::head(text);
        // The relay ended it: its place is free.
        let freed = match &head {
            Some(("CLOSED", Some(id))) => self.open.remove(&text[id.clone()]).is_some(),
            _ => false,
        };
        let target = match head {
            Some((ty, Some(id))) if frame::names_subscription(ty) => {
                match frame::untag(&text[id.clone()]) {
                    Some((link, own)) if self.links.contains_key(&link) => {
                        let msg = Message::text(frame::splice(text, id, own));
                        Some((link, msg))
                    }
                    // Ours, for a link that left: nobody is listening.
                    Some(_) => return freed,
                    None => None,
                }
            }
            Some(("OK", Some(id))) => self.oks.get(&text[id]).map(|link| (*link, msg.clone())),
            _ => None,
        };
        match target {
            Some((link, msg)) => self.deliver(link, msg).await,
            None => self.broadcast(msg).await,
        }
        freed
    }

    /// The sign-in's part of a text frame: a challenge, or the `OK` for our AUTH event (which
    /// no link sent, so none reads it). `None`: the frame is for the links.
    fn auth_frame(&mut self, text: &str) -> Option<Step> {
        match frame::head(text)? {
            ("AUTH", _) => match RelayMessage::from_json(text) {
                Ok(RelayMessage::Auth { challenge }) => {
                    Some(self.auth.challenge(&challenge, &self.url))
                }
                _ => None,
            },
            ("OK", Some(id)) if self.auth.awaits(&text[id.clone()]) => {
                match RelayMessage::from_json(text) {
                    Ok(RelayMessage::Ok {
                        status, message, ..
                    }) => Some(self.auth.ok(status, &message)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Carries out a sign-in step: the AUTH frame to the relay, or the answer to the links
    /// that asked.
    async fn sign_in(
        &mut self,
        ws: &mut Socket,
        step: Step,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        match step {
            Step::Wait => Ok(()),
            Step::Sign(unsigned) => {
                let signer = self.auth.signer().cloned();
                self.signing = signer.map(|signer| -> Signing {
                    Box::pin(async move { signer.sign(unsigned).await })
                });
                Ok(())
            }
            Step::Send(msg) => ws.send(msg).await,
            Step::Answer(links, result) => {
                for link in links {
                    if let Some(frames) = self.links.get(&link) {
                        let _ = frames.send(Ok(Read::SignedIn(result.clone()))).await;
                    }
                }
                Ok(())
            }
        }
    }

    async fn deliver(&mut self, link: u64, msg: Message) {
        let Some(frames) = self.links.get(&link) else {
            return;
        };
        if frames.send(Ok(Read::Frame(msg))).await.is_err() {
            self.links.remove(&link);
            self.forget_oks(link);
        }
    }

    async fn broadcast(&mut self, msg: Message) {
        let mut gone = Vec::new();
        for (link, frames) in &self.links {
            if frames.send(Ok(Read::Frame(msg.clone()))).await.is_err() {
                gone.push(*link);
            }
        }
        for link in gone {
            self.links.remove(&link);
            self.forget_oks(link);
        }
    }

    fn expect_ok(&mut self, id: String, link: u64) {
        if self.oks.insert(id.clone(), link).is_none() {
            self.ok_order.push_back(id);
        }
        while self.ok_order.len() > MAX_PENDING_OKS {
            if let Some(old) = self.ok_order.pop_front() {
                self.oks.remove(&old);
            }
        }
    }

    fn forget_oks(&mut self, link: u64) {
        self.oks.retain(|_, l| *l != link);
        let oks = &self.oks;
        self.ok_order.retain(|id| oks.contains_key(id));
    }

    /// Frees the socket's place, then answers every link still joining with `error` (or with
    /// a closed socket): no link is left waiting.
    fn finish(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
        error: Option<DialError>,
    ) {
        if let Some(pool) = self.pool.upgrade() {
            pool.ended(&self.url, self.socket);
        }
        commands.close();
        while let Ok(cmd) = commands.try_recv() {
            if let Command::Attach { ready, .. } = cmd {
                if let Some(e) = &error {
                    let _ = ready.send(Err(e.clone()));
                }
            }
        }
        self.links.clear();
    }
}

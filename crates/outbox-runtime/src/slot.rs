//! One slot: one task, one WebSocket to one relay, at most one subscription per purpose.
//!
//! A slot owns its socket and nothing else. It is told what to do by the coordinator
//! (`SlotCommand`) and reports what happened (`SlotReport`); it never touches the route
//! table, the stats or another slot, so a relay that stalls, floods or lies can only ever
//! stall its own task. It reconnects on its own with exponential backoff and jitter; deciding
//! that a relay has failed too often is the coordinator's business.
//!
//! Replacing a filter sends `REQ` again under the same subscription id on the open socket (no
//! reconnect). A relay may or may not send EOSE for a REQ that was replaced before its EOSE, so
//! the slot counts outstanding REQs and, at the EOSE deadline, treats "at least one EOSE since
//! the latest REQ" as done rather than as a timeout.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use nostr::message::{ClientMessage, MachineReadablePrefix, RelayMessage, SubscriptionId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tracing::{debug, info, trace, warn, Instrument};

use crate::config::RuntimeConfig;

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What a subscription on a slot is for. Each purpose has a fixed subscription id, so a
/// replaced filter reuses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SubKind {
    /// The feed itself: the plan's filter for this relay.
    Feed,
    /// Discovery of the follows' kind:10002 relay lists (reader relays only).
    Lists,
}

impl SubKind {
    /// The subscription id used on the wire.
    pub fn id(self) -> &'static str {
        match self {
            SubKind::Feed => "outbox-feed",
            SubKind::Lists => "outbox-lists",
        }
    }

    fn from_id(id: &SubscriptionId) -> Option<Self> {
        match id.as_str() {
            "outbox-feed" => Some(SubKind::Feed),
            "outbox-lists" => Some(SubKind::Lists),
            _ => None,
        }
    }
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrameDrop {
    /// Longer than [`RuntimeConfig::max_message_bytes`].
    TooLarge,
    /// Not a relay message (bad JSON, wrong shape, binary frame).
    Unparseable,
    /// An event whose id or signature does not verify.
    BadSignature,
    /// An event for a subscription we do not hold, or that does not match our filter.
    Unrequested,
}

/// Why an attempt on a relay failed; the slot backs off and retries after each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// TCP, TLS or WebSocket handshake failed.
    Connect(String),
    /// The handshake took longer than [`RuntimeConfig::connect_timeout`].
    ConnectTimeout,
    /// The connection dropped (error, close frame or end of stream).
    Lost(String),
    /// No EOSE within [`RuntimeConfig::eose_timeout`] of a REQ.
    EoseTimeout(SubKind),
    /// Too many unparseable, oversized or badly signed frames on one connection.
    BadFrames(u32),
    /// The relay answered CLOSED with a reason worth retrying later (rate limits, errors).
    Refused(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect failed: {e}"),
            Failure::ConnectTimeout => f.write_str("connect timed out"),
            Failure::Lost(e) => write!(f, "connection lost: {e}"),
            Failure::EoseTimeout(sub) => write!(f, "no EOSE in time on {}", sub.id()),
            Failure::BadFrames(n) => write!(f, "{n} bad frames"),
            Failure::Refused(m) => write!(f, "refused: {m}"),
        }
    }
}

/// What the coordinator tells a slot.
#[derive(Debug)]
pub(crate) enum SlotCommand {
    /// Subscribe, or replace the filter of an existing subscription in place.
    Req {
        sub: SubKind,
        filter: Box<Filter>,
        generation: u64,
    },
    /// End one subscription (the socket stays open for the other).
    Close { sub: SubKind },
    /// Close every subscription and the socket, then end the task.
    Shutdown,
}

/// What a slot tells the coordinator.
#[derive(Debug)]
pub(crate) struct SlotReport {
    pub url: Arc<str>,
    pub kind: ReportKind,
}

#[derive(Debug)]
pub(crate) enum ReportKind {
    Connected {
        handshake: Duration,
    },
    Event {
        sub: SubKind,
        event: Box<Event>,
    },
    Eose {
        sub: SubKind,
        generation: u64,
        elapsed: Duration,
    },
    /// CLOSED with a reason that retrying will not fix (auth-required, restricted, blocked).
    Refused {
        sub: SubKind,
        message: String,
    },
    Dropped {
        reason: FrameDrop,
    },
    Failed {
        failure: Failure,
    },
}

struct SubState {
    filter: Filter,
    generation: u64,
    sent_at: Option<Instant>,
    outstanding: u32,
    eose_since_req: bool,
    deadline: Option<Instant>,
    /// Refused definitively: never re-sent on reconnect.
    refused: bool,
}

enum Ended {
    Shutdown,
    Failed(Failure),
}

/// Runs one slot until it is told to shut down or the coordinator goes away.
pub(crate) async fn run_slot(
    url: Arc<str>,
    cfg: Arc<RuntimeConfig>,
    mut commands: mpsc::UnboundedReceiver<SlotCommand>,
    reports: mpsc::Sender<SlotReport>,
    seed: u64,
) {
    let span = tracing::info_span!("slot", relay = %url, generation = tracing::field::Empty);
    async move {
        let mut slot = Slot {
            url,
            cfg,
            reports,
            subs: BTreeMap::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        slot.run(&mut commands).await;
        debug!("slot task ended");
    }
    .instrument(span)
    .await
}

struct Slot {
    url: Arc<str>,
    cfg: Arc<RuntimeConfig>,
    reports: mpsc::Sender<SlotReport>,
    subs: BTreeMap<SubKind, SubState>,
    rng: ChaCha8Rng,
}

impl Slot {
    async fn report(&self, kind: ReportKind) -> bool {
        self.reports
            .send(SlotReport {
                url: self.url.clone(),
                kind,
            })
            .await
            .is_ok()
    }

    /// Applies a command while no socket is open. Returns false when the slot must end.
    fn apply_offline(&mut self, cmd: Option<SlotCommand>) -> bool {
        match cmd {
            Some(SlotCommand::Req {
                sub,
                filter,
                generation,
            }) => {
                self.set_sub(sub, *filter, generation);
                true
            }
            Some(SlotCommand::Close { sub }) => {
                self.subs.remove(&sub);
                true
            }
            Some(SlotCommand::Shutdown) | None => false,
        }
    }

    fn set_sub(&mut self, sub: SubKind, filter: Filter, generation: u64) {
        if sub == SubKind::Feed {
            tracing::Span::current().record("generation", generation);
        }
        let state = self.subs.entry(sub).or_insert(SubState {
            filter: filter.clone(),
            generation,
            sent_at: None,
            outstanding: 0,
            eose_since_req: false,
            deadline: None,
            refused: false,
        });
        state.filter = filter;
        state.generation = generation;
        state.refused = false;
    }

    async fn run(&mut self, commands: &mut mpsc::UnboundedReceiver<SlotCommand>) {
        let mut attempt: u32 = 0;
        loop {
            // Nothing to ask: wait for work instead of holding a socket open.
            while self.subs.values().all(|s| s.refused) {
                if !self.apply_offline(commands.recv().await) {
                    return;
                }
            }
            let ws_config = WebSocketConfig::default()
                .max_message_size(Some(self.cfg.hard_frame_limit))
                .max_frame_size(Some(self.cfg.hard_frame_limit));
            let started = Instant::now();
            let url = self.url.to_string();
            let connect = timeout(
                self.cfg.connect_timeout,
                tokio_tungstenite::connect_async_tls_with_config(url, Some(ws_config), true, None),
            );
            tokio::pin!(connect);
            let connected = loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    res = &mut connect => break res,
                }
            };
            let outcome = match connected {
                Err(_) => Ended::Failed(Failure::ConnectTimeout),
                Ok(Err(e)) => Ended::Failed(Failure::Connect(e.to_string())),
                Ok(Ok((ws, _response))) => {
                    let handshake = started.elapsed();
                    info!(handshake_ms = handshake.as_millis() as u64, "connected");
                    if !self.report(ReportKind::Connected { handshake }).await {
                        return;
                    }
                    self.session(ws, commands, &mut attempt).await
                }
            };
            match outcome {
                Ended::Shutdown => return,
                Ended::Failed(failure) => {
                    warn!(%failure, attempt, "relay attempt failed");
                    if !self.report(ReportKind::Failed { failure }).await {
                        return;
                    }
                }
            }
            let delay = self.cfg.backoff.delay(attempt, &mut self.rng);
            attempt = attempt.saturating_add(1);
            debug!(delay_ms = delay.as_millis() as u64, "backing off");
            let wake = Instant::now() + delay;
            loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    _ = sleep_until(wake) => break,
                }
            }
        }
    }

    async fn send_req(&mut self, ws: &mut Socket, sub: SubKind) -> Result<(), Failure> {
        let Some(state) = self.subs.get_mut(&sub) else {
            return Ok(());
        };
        let msg = ClientMessage::req(SubscriptionId::new(sub.id()), state.filter.clone());
        let json = msg
            .try_as_json()
            .map_err(|e| Failure::Lost(format!("cannot encode REQ: {e}")))?;
        let now = Instant::now();
        state.sent_at = Some(now);
        state.outstanding = state.outstanding.saturating_add(1);
        state.eose_since_req = false;
        state.deadline = Some(now + self.cfg.eose_timeout);
        debug!(sub = sub.id(), generation = state.generation, "REQ");
        ws.send(Message::text(json))
            .await
            .map_err(|e| Failure::Lost(e.to_string()))
    }

    async fn session(
        &mut self,
        mut ws: Socket,
        commands: &mut mpsc::UnboundedReceiver<SlotCommand>,
        attempt: &mut u32,
    ) -> Ended {
        // A fresh socket knows no subscriptions: forget old counters, then REQ everything.
        let kinds: Vec<SubKind> = self
            .subs
            .iter()
            .filter(|(_, s)| !s.refused)
            .map(|(k, _)| *k)
            .collect();
        for state in self.subs.values_mut() {
            state.outstanding = 0;
            state.deadline = None;
        }
        for sub in kinds {
            if let Err(f) = self.send_req(&mut ws, sub).await {
                return Ended::Failed(f);
            }
        }
        let mut bad_frames: u32 = 0;
        loop {
            let deadline = self.subs.values().filter_map(|s| s.deadline).min();
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(SlotCommand::Req { sub, filter, generation }) => {
                        self.set_sub(sub, *filter, generation);
                        if let Err(f) = self.send_req(&mut ws, sub).await {
                            return Ended::Failed(f);
                        }
                    }
                    Some(SlotCommand::Close { sub }) => {
                        if self.subs.remove(&sub).is_some() {
                            let close = ClientMessage::close(SubscriptionId::new(sub.id()));
                            if let Err(e) = ws.send(Message::text(close.as_json())).await {
                                return Ended::Failed(Failure::Lost(e.to_string()));
                            }
                        }
                    }
                    Some(SlotCommand::Shutdown) | None => {
                        self.close_socket(&mut ws).await;
                        return Ended::Shutdown;
                    }
                },
                frame = ws.next() => {
                    let text = match frame {
                        None => return Ended::Failed(Failure::Lost("end of stream".into())),
                        Some(Err(e)) => return Ended::Failed(Failure::Lost(e.to_string())),
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Close(frame))) => {
                            let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                            return Ended::Failed(Failure::Lost(format!("closed by relay {why}")));
                        }
                        Some(Ok(Message::Binary(_))) => {
                            trace!("dropping binary frame");
                            bad_frames += 1;
                            if !self.report(ReportKind::Dropped { reason: FrameDrop::Unparseable }).await {
                                return Ended::Shutdown;
                            }
                            if bad_frames > self.cfg.max_bad_frames {
                                return Ended::Failed(Failure::BadFrames(bad_frames));
                            }
                            continue;
                        }
                        Some(Ok(_)) => continue,
                    };
                    match self.handle_text(text.as_str(), attempt).await {
                        Handled::Ok => {}
                        Handled::Bad => {
                            bad_frames += 1;
                            if bad_frames > self.cfg.max_bad_frames {
                                return Ended::Failed(Failure::BadFrames(bad_frames));
                            }
                        }
                        Handled::End(ended) => return ended,
                    }
                },
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    let now = Instant::now();
                    let expired: Vec<SubKind> = self
                        .subs
                        .iter()
                        .filter(|(_, s)| s.deadline.is_some_and(|d| d <= now))
                        .map(|(k, _)| *k)
                        .collect();
                    for sub in expired {
                        let Some(state) = self.subs.get_mut(&sub) else { continue };
                        state.deadline = None;
                        if state.eose_since_req {
                            // The relay answered the latest REQ but skipped the EOSE of a
                            // replaced one: that is done, not a timeout.
                            state.outstanding = 0;
                            let (generation, elapsed) = (state.generation, state.sent_at.map(|t| t.elapsed()).unwrap_or_default());
                            if !self.report(ReportKind::Eose { sub, generation, elapsed }).await {
                                return Ended::Shutdown;
                            }
                        } else {
                            return Ended::Failed(Failure::EoseTimeout(sub));
                        }
                    }
                }
            }
        }
    }

    async fn close_socket(&mut self, ws: &mut Socket) {
        let grace = self.cfg.shutdown_grace;
        let subs: Vec<SubKind> = self.subs.keys().copied().collect();
        let polite = async {
            for sub in subs {
                let close = ClientMessage::close(SubscriptionId::new(sub.id()));
                ws.send(Message::text(close.as_json())).await?;
            }
            ws.close(None).await
        };
        match timeout(grace, polite).await {
            Ok(Ok(())) => debug!("closed"),
            Ok(Err(e)) => debug!(error = %e, "close failed; dropping the socket"),
            Err(_) => debug!("close timed out; dropping the socket"),
        }
    }

    async fn drop_frame(&self, reason: FrameDrop) -> Handled {
        trace!(?reason, "dropping frame");
        if self.report(ReportKind::Dropped { reason }).await {
            Handled::Bad
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    async fn handle_text(&mut self, text: &str, attempt: &mut u32) -> Handled {
        if text.len() > self.cfg.max_message_bytes {
            return self.drop_frame(FrameDrop::TooLarge).await;
        }
        let msg = match RelayMessage::from_json(text) {
            Ok(msg) => msg,
            Err(e) => {
                trace!(error = %e, "unparseable frame");
                return self.drop_frame(FrameDrop::Unparseable).await;
            }
        };
        match msg {
            RelayMessage::Event {
                subscription_id,
                event,
            } => {
                let Some(sub) = SubKind::from_id(&subscription_id) else {
                    return self.drop_frame(FrameDrop::Unrequested).await;
                };
                let Some(state) = self.subs.get(&sub) else {
                    // Arrived after our CLOSE: harmless, not the relay's fault.
                    return Handled::Ok;
                };
                let event = event.into_owned();
                if self.cfg.verify_signatures && event.verify().is_err() {
                    return self.drop_frame(FrameDrop::BadSignature).await;
                }
                if !state.filter.match_event(&event, MatchEventOptions::new()) {
                    // Possibly an answer to a replaced filter still in flight: not counted
                    // as bad, but not passed on either.
                    trace!(id = %event.id, "event outside the current filter");
                    return if self
                        .report(ReportKind::Dropped {
                            reason: FrameDrop::Unrequested,
                        })
                        .await
                    {
                        Handled::Ok
                    } else {
                        Handled::End(Ended::Shutdown)
                    };
                }
                let report = ReportKind::Event {
                    sub,
                    event: Box::new(event),
                };
                if self.report(report).await {
                    Handled::Ok
                } else {
                    Handled::End(Ended::Shutdown)
                }
            }
            RelayMessage::EndOfStoredEvents(subscription_id) => {
                let Some(sub) = SubKind::from_id(&subscription_id) else {
                    return Handled::Ok;
                };
                let Some(state) = self.subs.get_mut(&sub) else {
                    return Handled::Ok;
                };
                state.outstanding = state.outstanding.saturating_sub(1);
                state.eose_since_req = true;
                if state.outstanding > 0 || state.deadline.is_none() {
                    return Handled::Ok;
                }
                state.deadline = None;
                *attempt = 0;
                let elapsed = state.sent_at.map(|t| t.elapsed()).unwrap_or_default();
                let generation = state.generation;
                debug!(
                    sub = sub.id(),
                    generation,
                    elapsed_ms = elapsed.as_millis() as u64,
                    "EOSE"
                );
                if self
                    .report(ReportKind::Eose {
                        sub,
                        generation,
                        elapsed,
                    })
                    .await
                {
                    Handled::Ok
                } else {
                    Handled::End(Ended::Shutdown)
                }
            }
            RelayMessage::Closed {
                subscription_id,
                message,
            } => {
                let Some(sub) = SubKind::from_id(&subscription_id) else {
                    return Handled::Ok;
                };
                let Some(state) = self.subs.get_mut(&sub) else {
                    return Handled::Ok;
                };
                let message = message.into_owned();
                info!(sub = sub.id(), reason = %message, "CLOSED");
                state.deadline = None;
                state.outstanding = 0;
                if is_definitive_refusal(&message) {
                    state.refused = true;
                    if self.report(ReportKind::Refused { sub, message }).await {
                        Handled::Ok
                    } else {
                        Handled::End(Ended::Shutdown)
                    }
                } else {
                    Handled::End(Ended::Failed(Failure::Refused(message)))
                }
            }
            RelayMessage::Notice(notice) => {
                debug!(notice = %truncate(&notice), "NOTICE");
                Handled::Ok
            }
            RelayMessage::Auth { .. } => {
                debug!("AUTH challenge ignored (this client does not authenticate)");
                Handled::Ok
            }
            _ => Handled::Ok,
        }
    }
}

enum Handled {
    Ok,
    Bad,
    End(Ended),
}

/// Whether a CLOSED reason means retrying cannot help without something we do not do
/// (authenticating, paying, being allowed).
pub(crate) fn is_definitive_refusal(message: &str) -> bool {
    matches!(
        MachineReadablePrefix::parse(message.trim_start()),
        Some(
            MachineReadablePrefix::AuthRequired
                | MachineReadablePrefix::Restricted
                | MachineReadablePrefix::Blocked
        )
    )
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_reasons_are_classified() {
        assert!(is_definitive_refusal("auth-required: sign in"));
        assert!(is_definitive_refusal("restricted: paid relay"));
        assert!(is_definitive_refusal("blocked: go away"));
        assert!(!is_definitive_refusal("rate-limited: slow down"));
        assert!(!is_definitive_refusal("error: database"));
        assert!(!is_definitive_refusal("whatever"));
        assert!(!is_definitive_refusal(""));
    }
}

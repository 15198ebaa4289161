//! Live subscriptions for the reads of a route plan (`outbox_client::routes`): the inbox (events
//! tagging the reader), a thread, a pointer.
//!
//! A route plan is small and fixed (a handful of relays, one set of filters each), so there is
//! no re-planning here: one task per target relay dials it, sends its filters as one REQ, and
//! forwards what matches; one merging task drops the notes a second relay delivers again. With
//! `once` a relay is done at EOSE; without, its subscription stays open for new events and a
//! lost socket is dialled again with backoff, asking only for what is newer than the newest
//! event seen. A REQ refused `rate-limited:` before its EOSE is sent again after the config's
//! backoff (within the EOSE timeout, at most [`MAX_RATE_LIMITED_RESENDS`] times); after the
//! EOSE, the socket is dialled again as when lost. Refusals are read by [`Refusal::of`].

use std::time::Duration;

use nostr::event::Event;
use nostr::filter::{Filter, MatchEventOptions};
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use nostr::types::Timestamp;
use outbox_client::routes::RoutePlan;
use rand::SeedableRng;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::client::Client;
use crate::config::RuntimeConfig;
use crate::dedup::Dedup;
use crate::refusal::{Refusal, MAX_RATE_LIMITED_RESENDS};
use crate::signin::{SignIn, Step};
use crate::sockets::{Link, Read, Role};

/// Events one relay may send before its EOSE (stored events); the rest are not read, so what a
/// relay can make us hold is bounded. A filter's own `limit` lowers it.
pub const MAX_STORED_EVENTS: usize = 5_000;

/// The subscription id every route REQ uses (one subscription per socket).
const SUB_ID: &str = "outbox-route";

/// Longest wait for each of the CLOSE and the WebSocket close when a subscription ends.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// What a route feed reports.
#[derive(Clone, Debug, PartialEq)]
pub enum RouteEvent {
    /// An event no other relay delivered first.
    Note {
        /// The event (verified unless the config says not to; matching the relay's filters).
        event: Box<Event>,
        /// The relay that delivered it first.
        relay: String,
    },
    /// A relay finished sending its stored events.
    Eose {
        /// The relay.
        relay: String,
        /// Events it sent before EOSE (duplicates included).
        events: usize,
    },
    /// A relay could not be asked, refused, or did not finish in time.
    Failed {
        /// The relay.
        relay: String,
        /// Why, as the relay or the socket said it (not escaped).
        reason: String,
    },
}

/// A running route feed: stop it, or wait for it to end by itself (`once`).
#[derive(Debug)]
pub struct RouteFeed {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl RouteFeed {
    /// Closes every subscription and waits for the tasks to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Asks every subscription to close without waiting; the channel closes when they have.
    pub fn request_shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits for every relay task to end (with `once`: each relay at EOSE or failure).
    pub async fn wait(mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Starts one subscription per target of a reading route plan. Drain the channel: it closes
/// when every relay is done. The client's knobs give the timeouts, frame limits, signature
/// checks, `once` and the backoff between dials; the plan's filters say what is asked.
pub fn start_route(plan: &RoutePlan, client: &Client) -> (RouteFeed, mpsc::Receiver<RouteEvent>) {
    let cfg = client.config();
    let (stop, stop_rx) = watch::channel(false);
    let (raw_tx, mut raw_rx) = mpsc::channel::<RouteEvent>(cfg.channel_capacity.max(1));
    let (tx, rx) = mpsc::channel::<RouteEvent>(cfg.channel_capacity.max(1));
    let mut tasks = JoinSet::new();
    for (i, target) in plan.targets.iter().enumerate() {
        if target.filters.is_empty() {
            continue;
        }
        let relay = Relay {
            url: target.url.clone(),
            filters: target.filters.clone(),
            client: client.clone(),
            tx: raw_tx.clone(),
            stop: stop_rx.clone(),
            seed: relay_seed(cfg.seed, i),
            sub: SUB_ID,
            role: Role::Route,
        };
        tasks.spawn(relay.run());
    }
    drop(raw_tx);
    let capacity = cfg.dedup_capacity;
    tasks.spawn(async move {
        let mut seen = Dedup::new(capacity);
        while let Some(event) = raw_rx.recv().await {
            if let RouteEvent::Note { event: note, .. } = &event {
                if !seen.insert(note.id) {
                    continue;
                }
            }
            if tx.send(event).await.is_err() {
                // Nobody listens: the relay tasks end when their sends fail.
                break;
            }
        }
    });
    (RouteFeed { stop, tasks }, rx)
}

/// The reconnect jitter seed of the `i`-th relay task of a feed with base `seed`.
pub(crate) fn relay_seed(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// One relay's subscription: one socket at a time, one REQ with every filter, verified events
/// that match them sent to `tx` (each relay's copy: de-duplication across relays is the
/// caller's), then `Eose` or `Failed`. Shared by route feeds and probes (`crate::probe`).
pub(crate) struct Relay {
    /// Canonical relay URL.
    pub(crate) url: String,
    /// What is asked, as one REQ.
    pub(crate) filters: Vec<Filter>,
    /// The sockets and signer; its knobs give the timeouts, frame limits, signature checks,
    /// `once` and the backoff.
    pub(crate) client: Client,
    /// Where events, the EOSE and failures go.
    pub(crate) tx: mpsc::Sender<RouteEvent>,
    /// `true` ends the subscription.
    pub(crate) stop: watch::Receiver<bool>,
    /// Reconnect jitter.
    pub(crate) seed: u64,
    /// The subscription id of the REQ.
    pub(crate) sub: &'static str,
    /// What the link is for, in the socket budget.
    pub(crate) role: Role,
}

/// How one socket's session ended.
enum Ended {
    /// EOSE reached in `once` mode, stopped, or the listener is gone: no new dial.
    Done,
    /// The relay refused the subscription (CLOSED): dialling again would not help.
    Refused(String),
    /// The socket failed or timed out: dial again unless `once`.
    Lost(String),
}

impl Relay {
    /// The client's knobs.
    fn cfg(&self) -> &RuntimeConfig {
        self.client.config()
    }

    /// Runs the subscription until it is done: with `once`, at EOSE or the first failure;
    /// otherwise until stopped or nobody listens.
    pub(crate) async fn run(mut self) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let mut newest: Option<Timestamp> = None;
        let mut attempt = 0u32;
        loop {
            let ended = self.session(&mut newest, &mut attempt).await;
            let reason = match ended {
                Ended::Done => return,
                Ended::Refused(reason) => {
                    self.fail(reason).await;
                    return;
                }
                Ended::Lost(reason) => reason,
            };
            self.fail(reason).await;
            if self.cfg().once || *self.stop.borrow() {
                return;
            }
            let delay = self.cfg().backoff.delay(attempt, &mut rng);
            attempt = attempt.saturating_add(1);
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.stop.changed() => return,
            }
        }
    }

    /// Acts on a sign-in step: sends the AUTH or the REQ again (the EOSE wait starts anew), or
    /// ends the session when the refusal stands.
    async fn sign_in_step(
        &self,
        ws: &mut Link,
        step: Step,
        req: &ClientMessage<'_>,
        eose_deadline: &mut Instant,
    ) -> Option<Ended> {
        let frame = match step {
            Step::Wait => return None,
            Step::Ask => {
                if ws.sign_in().is_err() {
                    return Some(Ended::Lost("the connection is closed".into()));
                }
                *eose_deadline = crate::deadline::after(self.cfg().eose_timeout);
                return None;
            }
            Step::Retry => req.as_json(),
            Step::GiveUp(why) => return Some(Ended::Refused(format!("closed: {why}"))),
        };
        if let Err(e) = ws.send(Message::text(frame)).await {
            return Some(Ended::Lost(format!("sending failed: {e}")));
        }
        *eose_deadline = crate::deadline::after(self.cfg().eose_timeout);
        None
    }

    /// A REQ refused `rate-limited:` before its EOSE (the `times`-th time): waits the config's
    /// backoff and sends it again, within the EOSE deadline and at most
    /// [`MAX_RATE_LIMITED_RESENDS`] times. `Err` says how the session ends instead, given the
    /// refusal's text: refused when no wait is left, lost when the socket is.
    async fn slow_down(
        &self,
        ws: &mut Link,
        req: &ClientMessage<'_>,
        eose_deadline: Instant,
        times: u32,
    ) -> Result<(), fn(String) -> Ended> {
        if times >= MAX_RATE_LIMITED_RESENDS {
            return Err(Ended::Refused);
        }
        let mut rng =
            rand_chacha::ChaCha8Rng::seed_from_u64(self.seed.wrapping_add(u64::from(times) + 1));
        let delay = self.cfg().backoff.delay(times, &mut rng);
        let resume = crate::deadline::after(delay);
        if resume >= eose_deadline {
            return Err(Ended::Refused);
        }
        tracing::debug!(relay = %self.url, delay_ms = delay.as_millis() as u64, "rate-limited: asking again later");
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep_until(resume) => {}
            _ = stop.changed() => return Err(|_| Ended::Done),
        }
        match ws.send(Message::text(req.as_json())).await {
            Ok(()) => Ok(()),
            Err(_) => Err(Ended::Lost),
        }
    }

    async fn fail(&self, reason: String) {
        let _ = self
            .tx
            .send(RouteEvent::Failed {
                relay: self.url.clone(),
                reason,
            })
            .await;
    }

    /// One socket: dial, REQ, stored events until EOSE, then (without `once`) live events.
    async fn session(&mut self, newest: &mut Option<Timestamp>, attempt: &mut u32) -> Ended {
        let mut ws = tokio::select! {
            dialled = self.client.sockets().link(&self.url, self.role, self.cfg().dial()) => match dialled {
                Ok(ws) => ws,
                Err(why) => return Ended::Lost(why.to_string()),
            },
            _ = self.stop.changed() => return Ended::Done,
        };
        // A reconnect asks only for what is newer than what was already delivered.
        let filters: Vec<Filter> = self
            .filters
            .iter()
            .map(|f| match newest {
                Some(t) => f.clone().since(*t),
                None => f.clone(),
            })
            .collect();
        let stored_cap = filters
            .iter()
            .map(|f| f.limit.unwrap_or(MAX_STORED_EVENTS))
            .sum::<usize>()
            .min(MAX_STORED_EVENTS);
        let sub = SubscriptionId::new(self.sub);
        let req = ClientMessage::req(sub.clone(), filters.clone());
        let mut eose_deadline = crate::deadline::after(self.cfg().eose_timeout);
        let mut sign_in = SignIn::new(self.client.signer().is_some());
        match timeout_at(eose_deadline, ws.send(Message::text(req.as_json()))).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Ended::Lost(format!("sending the REQ failed: {e}")),
            Err(_) => return Ended::Lost("sending the REQ timed out".into()),
        }
        let mut stored = 0usize;
        let mut live = false;
        let mut rate_limited = 0u32;
        let ended = loop {
            let next = async {
                if live {
                    Some(ws.recv().await)
                } else {
                    timeout_at(eose_deadline, ws.recv()).await.ok()
                }
            };
            let frame = tokio::select! {
                frame = next => frame,
                _ = self.stop.changed() => break Ended::Done,
            };
            let text = match frame {
                None if sign_in.waiting() => break Ended::Refused(sign_in.timed_out()),
                None => break Ended::Lost("no EOSE in time".into()),
                Some(None) => break Ended::Lost("the relay closed the connection".into()),
                Some(Some(Err(e))) => break Ended::Lost(format!("socket error: {e}")),
                Some(Some(Ok(Read::Frame(Message::Text(text))))) => text,
                Some(Some(Ok(Read::SignedIn(result)))) => {
                    let step = sign_in.answered(result);
                    if let Some(ended) = self
                        .sign_in_step(&mut ws, step, &req, &mut eose_deadline)
                        .await
                    {
                        break ended;
                    }
                    continue;
                }
                Some(Some(Ok(Read::Frame(_)))) => continue,
            };
            if text.len() > self.cfg().max_message_bytes {
                continue;
            }
            match RelayMessage::from_json(text.as_str()) {
                Ok(RelayMessage::Event {
                    subscription_id,
                    event,
                }) if *subscription_id == sub => {
                    if !live {
                        if stored >= stored_cap {
                            continue;
                        }
                        stored += 1;
                    }
                    let event = event.into_owned();
                    let verified = !self.cfg().verify_signatures || event.verify().is_ok();
                    let asked = filters
                        .iter()
                        .any(|f| f.match_event(&event, MatchEventOptions::new()));
                    if !(verified && asked) {
                        continue;
                    }
                    if newest.is_none_or(|t| event.created_at > t) {
                        *newest = Some(event.created_at);
                    }
                    let note = RouteEvent::Note {
                        event: Box::new(event),
                        relay: self.url.clone(),
                    };
                    if self.tx.send(note).await.is_err() {
                        break Ended::Done;
                    }
                }
                Ok(RelayMessage::EndOfStoredEvents(id)) if *id == sub && !live => {
                    *attempt = 0;
                    let eose = RouteEvent::Eose {
                        relay: self.url.clone(),
                        events: stored,
                    };
                    if self.tx.send(eose).await.is_err() || self.cfg().once {
                        break Ended::Done;
                    }
                    live = true;
                }
                Ok(RelayMessage::Closed {
                    subscription_id,
                    message,
                }) if *subscription_id == sub => {
                    let refusal = Refusal::of(&message);
                    if refusal == Refusal::RateLimited {
                        if live {
                            // Answered already: dialled again after the backoff, asking only
                            // for what is newer.
                            break Ended::Lost(format!("closed: {message}"));
                        }
                        match self
                            .slow_down(&mut ws, &req, eose_deadline, rate_limited)
                            .await
                        {
                            Ok(()) => {
                                rate_limited += 1;
                                continue;
                            }
                            Err(ended) => break ended(format!("closed: {message}")),
                        }
                    }
                    if refusal != Refusal::SignIn {
                        break Ended::Refused(format!("closed: {message}"));
                    }
                    let step = sign_in.refused(&message);
                    if let Some(ended) = self
                        .sign_in_step(&mut ws, step, &req, &mut eose_deadline)
                        .await
                    {
                        break ended;
                    }
                }
                _ => {}
            }
        };
        let close = ClientMessage::close(sub);
        let _ = tokio::time::timeout(CLOSE_WAIT, ws.send(Message::text(close.as_json()))).await;
        let _ = tokio::time::timeout(CLOSE_WAIT, ws.close()).await;
        ended
    }
}

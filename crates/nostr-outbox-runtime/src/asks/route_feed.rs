//! Live subscriptions for the reads of a route plan (`nostr_outbox_client::routes`): the inbox (events
//! tagging the reader), a thread, a pointer.
//!
//! A route plan is small and fixed (a handful of relays, one set of filters each), so there is
//! no re-planning here: one task per target relay dials it, sends its filters as one REQ, and
//! forwards what matches; one merging task drops the notes a second relay delivers again. With
//! `once` a relay is done at EOSE; without, its subscription stays open for new events and a
//! lost socket is dialled again with backoff, asking only for what is newer than the newest
//! event seen. The REQ is one exchange (`crate::connection::exchange`, the runtime's one conversation with
//! a relay: sign-in, rate limits and refusals); a `rate-limited:` after the EOSE dials again
//! as when lost.

use std::time::Duration;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr::message::SubscriptionId;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::RoutePlan;
use rand::SeedableRng;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::client::Client;
use crate::config::RuntimeConfig;
use crate::connection::exchange::{self, Answer, Ask, Exchange};
use crate::connection::refusal::Refusal;
use crate::connection::sockets::Role;
use crate::dedup::Dedup;

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
        /// When the relay refused (`CLOSED`): what its prefix says ([`Refusal::of`]), so a
        /// relay that needs sign-in or payment is told from one that is down.
        refusal: Option<Refusal>,
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
/// caller's), then `Eose` or `Failed`. Shared by route feeds and probes (`crate::asks::probe`).
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
    Refused(Refusal, String),
    /// The socket failed or timed out, or (already answered) the relay asked us to slow down:
    /// dial again unless `once`.
    Lost(Option<Refusal>, String),
    /// The relay flooded the subscription (replays, events not asked for):
    /// dialling again would only invite more.
    Flooded(String),
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
            match ended {
                Ended::Done => return,
                Ended::Refused(refusal, reason) => {
                    self.fail(reason, Some(refusal)).await;
                    return;
                }
                Ended::Lost(refusal, reason) => self.fail(reason, refusal).await,
                Ended::Flooded(reason) => {
                    self.fail(reason, None).await;
                    return;
                }
            }
            if self.cfg().once || *self.stop.borrow() {
                return;
            }
            let delay = self.cfg().backoff.redial(attempt, &mut rng);
            attempt = attempt.saturating_add(1);
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.stop.changed() => return,
            }
        }
    }

    async fn fail(&self, reason: String, refusal: Option<Refusal>) {
        let _ = self
            .tx
            .send(RouteEvent::Failed {
                relay: self.url.clone(),
                reason,
                refusal,
            })
            .await;
    }

    /// One socket: dial, REQ, stored events until EOSE, then (without `once`) live events.
    async fn session(&mut self, newest: &mut Option<Timestamp>, attempt: &mut u32) -> Ended {
        let mut ws = tokio::select! {
            dialled = self.client.sockets().link(&self.url, self.role, self.cfg().dial()) => match dialled {
                Ok(ws) => ws,
                Err(why) => return Ended::Lost(None, why.to_string()),
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
        let cap = filters
            .iter()
            .map(|f| f.limit.unwrap_or(MAX_STORED_EVENTS))
            .sum::<usize>()
            .min(MAX_STORED_EVENTS);
        let ask = Ask::Req {
            sub: SubscriptionId::new(self.sub),
            filters,
            cap,
        };
        let (wait, seed) = (
            self.cfg().eose_timeout,
            self.seed.wrapping_add(u64::from(*attempt)),
        );
        let mut exchange = match Exchange::send(&mut ws, ask, &self.client, wait, seed).await {
            Ok(exchange) => exchange,
            Err(ended) => return Ended::Lost(None, ended.to_string()),
        };
        let mut stored = 0usize;
        let mut live = false;
        let ended = loop {
            let answer = tokio::select! {
                answer = exchange.next() => answer,
                _ = self.stop.changed() => break Ended::Done,
            };
            match answer {
                Answer::Event(event) => {
                    if !live {
                        stored += 1;
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
                Answer::Eose => {
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
                // Answered already, then asked to slow down: dialled again after the
                // backoff, asking only for what is newer.
                Answer::Ended(
                    ended @ exchange::Ended::Refused {
                        refusal: Refusal::RateLimited,
                        ..
                    },
                ) if live => break Ended::Lost(Some(Refusal::RateLimited), ended.to_string()),
                Answer::Ended(ended @ exchange::Ended::Refused { refusal, .. }) => {
                    break Ended::Refused(refusal, ended.to_string())
                }
                Answer::Ended(ended @ exchange::Ended::Flooded(_)) => {
                    break Ended::Flooded(ended.to_string())
                }
                Answer::Ended(ended) => break Ended::Lost(None, ended.to_string()),
                Answer::Ok { .. } | Answer::Count(_) | Answer::Reconcile(_) => {}
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, exchange.close()).await;
        let _ = tokio::time::timeout(CLOSE_WAIT, ws.close()).await;
        ended
    }
}

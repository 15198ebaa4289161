//! One exchange with a relay: a request sent on a link and the relay's answers to it — the
//! runtime's one conversation with a relay, spoken the same way by lookups, route feeds,
//! probes, publishing and counts.
//!
//! An [`Exchange`] sends one [`Ask`] (a `REQ`, an `EVENT`, a `COUNT` or a `NEG-OPEN`) and reads
//! what comes back for it as [`Answer`]s: events (each [`admit`]ted first: bounded, dated,
//! verified and matching what was asked), the `EOSE`, the `OK`, the count, the relay's
//! negentropy messages, or how it [`Ended`]. Everything
//! between is the exchange's and the same on every path:
//!
//! - a frame above the config's size limit, or not a relay message, is skipped;
//! - a refusal is read by [`Refusal::of`]; `auth-required:` is answered by the socket's
//!   sign-in ([`SignIn`]) and the ask is sent again, once; `rate-limited:` is waited out with
//!   the config's backoff and the ask sent again, at most [`MAX_RATE_LIMITED_RESENDS`] times
//!   and within the answer's deadline; any other refusal ends the exchange;
//! - no answer by the deadline (restarted by every resend) ends it, saying whether it was the
//!   sign-in that was not answered.
//!
//! The feed's slots page many requests on one link at once (`slot`); they read frames and
//! events with the same [`parse`] and [`admit`], and refusals with the same [`SignIn`] and
//! [`Refusal`], keeping one sign-in per connection for all their pages.

mod admit;
mod signin;

use std::time::Duration;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use crate::client::Client;
use crate::flood::{FloodGuard, Verdict};
use crate::refusal::{Refusal, MAX_RATE_LIMITED_RESENDS};
use crate::sockets::{Link, Read};

pub use admit::FrameDrop;
pub(crate) use admit::{admit, parse};
pub(crate) use signin::{SignIn, Step};

/// What is asked of a relay.
#[derive(Clone, Debug)]
pub(crate) enum Ask {
    /// `REQ`: stored events up to the `EOSE`, then (when the caller goes [`live`]) new ones.
    ///
    /// [`live`]: Exchange::live
    Req {
        /// Our id for it (the link makes it its own on the wire).
        sub: SubscriptionId,
        /// Every filter, in one REQ.
        filters: Vec<Filter>,
        /// Stored events read before the `EOSE`; the rest are skipped, so what a relay can
        /// make us hold is bounded.
        cap: usize,
    },
    /// `EVENT`: publish it, and read the relay's `OK`.
    Event(Box<Event>),
    /// `COUNT` (NIP-45): how many events match the filters.
    Count {
        /// Our id for it.
        sub: SubscriptionId,
        /// What is counted.
        filters: Vec<Filter>,
    },
    /// `NEG-OPEN` (NIP-77): set reconciliation of the events matching `filter`, opened with
    /// our first negentropy message; the relay's messages come as [`Answer::Reconcile`] and
    /// ours go back with [`Exchange::reply`].
    Sync {
        /// Our id for it.
        sub: SubscriptionId,
        /// Which events are reconciled.
        filter: Filter,
        /// The first message (raw; hex on the wire).
        initial: Vec<u8>,
    },
}

impl Ask {
    /// The frame that asks it.
    fn json(&self) -> String {
        match self {
            Ask::Req { sub, filters, .. } => {
                ClientMessage::req(sub.clone(), filters.clone()).as_json()
            }
            Ask::Event(event) => ClientMessage::event(event.as_ref().clone()).as_json(),
            // NIP-45 takes filters as a REQ does; the `nostr` message type carries one.
            Ask::Count { sub, filters } => {
                let mut frame = vec![serde_json::json!("COUNT"), serde_json::json!(sub.as_str())];
                frame.extend(filters.iter().map(|f| serde_json::json!(f)));
                serde_json::Value::Array(frame).to_string()
            }
            Ask::Sync {
                sub,
                filter,
                initial,
            } => {
                ClientMessage::neg_open(sub.clone(), filter.clone(), hex::encode(initial)).as_json()
            }
        }
    }
}

/// What the relay said to an [`Ask`].
#[derive(Debug)]
pub(crate) enum Answer {
    /// A stored or new event for a `REQ`, [`admit`]ted.
    Event(Event),
    /// The `REQ`'s stored events are all sent.
    Eose,
    /// The relay's `OK` to an `EVENT`: accepted or not, and its text (an `auth-required:` or
    /// `rate-limited:` refusal only once sign-in or waiting could not help).
    Ok {
        /// `true` when the relay took the event.
        accepted: bool,
        /// The relay's text (not escaped).
        message: String,
    },
    /// The relay's count.
    Count(Counted),
    /// The relay's next negentropy message (decoded from hex).
    Reconcile(Vec<u8>),
    /// The exchange is over.
    Ended(Ended),
}

/// A relay's answer to a `COUNT` (NIP-45).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The count.
    pub(crate) count: u64,
    /// The relay said the count is an estimate (`"approximate": true`).
    pub(crate) approximate: bool,
}

/// Whether a `COUNT` frame says its count is approximate (NIP-45). The parsed message drops
/// the field, so it is read from the frame itself.
fn approximate(frame: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(frame)
        .ok()
        .and_then(|v| v.get(2)?.get("approximate")?.as_bool())
        .unwrap_or(false)
}

/// How an exchange ended without its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The relay refused the ask and signing in or waiting did not help: the refusal and the
    /// relay's text with what was tried (`… (no key to sign in with)`; not escaped).
    Refused {
        /// The refusal's prefix.
        refusal: Refusal,
        /// The relay's text.
        message: String,
    },
    /// The socket ended (not escaped).
    Lost(String),
    /// No answer by the deadline (not escaped).
    TimedOut(String),
    /// The relay sent more unrequested events (sent again on the subscription, or not what
    /// was asked) than the config allows ([`crate::flood`]): this many.
    Flooded(u64),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Refused { message, .. } => write!(f, "closed: {message}"),
            Ended::Lost(why) | Ended::TimedOut(why) => f.write_str(why),
            Ended::Flooded(n) => write!(f, "misbehaving: {n} unrequested events"),
        }
    }
}

/// The end of the exchange when the guard says the relay floods.
fn flood_answer(verdict: Verdict) -> Option<Answer> {
    match verdict {
        Verdict::Flooded(n) => Some(Answer::Ended(Ended::Flooded(n))),
        Verdict::New | Verdict::Skip => None,
    }
}

/// One [`Ask`] on a link and its answers (see the [module docs](self)).
pub(crate) struct Exchange<'l> {
    link: &'l mut Link,
    ask: Ask,
    client: Client,
    /// How long an answer may take after each send.
    wait: Duration,
    /// When the answer is due; `None` once live: new events come when they come.
    deadline: Option<Instant>,
    /// The `REQ`'s stored events are in.
    live: bool,
    sign_in: SignIn,
    rate_limited: u32,
    rng: ChaCha8Rng,
    /// Stored events read so far.
    read: usize,
    /// A `REQ`'s replays and unrequested events, counted ([`crate::flood`]).
    guard: Option<FloodGuard>,
}

impl<'l> Exchange<'l> {
    /// Sends `ask` on `link`; answers are due within `wait` of it (and of every resend).
    /// `seed` draws the rate-limit waits.
    pub(crate) async fn send(
        link: &'l mut Link,
        ask: Ask,
        client: &Client,
        wait: Duration,
        seed: u64,
    ) -> Result<Exchange<'l>, Ended> {
        let guard = match &ask {
            Ask::Req { cap, .. } => Some(FloodGuard::new(*cap, client.config().max_unrequested)),
            _ => None,
        };
        let mut exchange = Exchange {
            guard,
            link,
            ask,
            client: client.clone(),
            wait,
            deadline: None,
            live: false,
            sign_in: SignIn::new(client.signer().is_some()),
            rate_limited: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            read: 0,
        };
        exchange.resend().await?;
        Ok(exchange)
    }

    /// Stored events are all in: new ones come without a deadline or a cap, and a later
    /// `rate-limited:` ends the exchange (the caller asks again later, for what is newer).
    pub(crate) fn live(&mut self) {
        self.live = true;
        self.deadline = None;
    }

    /// Sends the ask (again); the deadline starts anew.
    async fn resend(&mut self) -> Result<(), Ended> {
        let json = self.ask.json();
        self.link
            .send(Message::text(json))
            .await
            .map_err(|e| Ended::Lost(format!("sending failed: {e}")))?;
        if !self.live {
            self.deadline = Some(crate::deadline::after(self.wait));
        }
        Ok(())
    }

    /// The next answer. Cancel-safe between answers: a caller may race it against a stop.
    pub(crate) async fn next(&mut self) -> Answer {
        loop {
            let read = match self.deadline {
                Some(deadline) => match timeout_at(deadline, self.link.recv()).await {
                    Ok(read) => read,
                    Err(_) if self.sign_in.waiting() => {
                        return Answer::Ended(Ended::Refused {
                            refusal: Refusal::SignIn,
                            message: self.sign_in.timed_out(),
                        })
                    }
                    Err(_) => return Answer::Ended(Ended::TimedOut(self.late())),
                },
                None => self.link.recv().await,
            };
            let text = match read {
                None => {
                    return Answer::Ended(Ended::Lost("the relay closed the connection".into()))
                }
                Some(Err(e)) => return Answer::Ended(Ended::Lost(format!("socket error: {e}"))),
                Some(Ok(Read::SignedIn(result))) => {
                    let step = self.sign_in.answered(result);
                    if let Err(ended) = self.step(step).await {
                        return Answer::Ended(ended);
                    }
                    continue;
                }
                Some(Ok(Read::Frame(Message::Text(text)))) => text,
                Some(Ok(Read::Frame(_))) => continue,
            };
            let cfg = self.client.config();
            let Ok(msg) = parse(text.as_str(), cfg) else {
                continue;
            };
            let refused = match (&self.ask, msg) {
                (
                    Ask::Req { sub, filters, cap },
                    RelayMessage::Event {
                        subscription_id,
                        event,
                    },
                ) if *subscription_id == *sub => {
                    let guard = self.guard.as_mut();
                    // A replay is known by its id, before anything is verified.
                    let verdict = guard.map_or(Verdict::New, |g| g.arrived(&event.id));
                    if let Some(answer) = flood_answer(verdict) {
                        return answer;
                    }
                    if verdict == Verdict::Skip {
                        continue;
                    }
                    if !self.live {
                        if self.read >= *cap {
                            continue;
                        }
                        self.read += 1;
                    }
                    match admit(event.into_owned(), filters, cfg) {
                        Ok(event) => {
                            if let Some(guard) = self.guard.as_mut() {
                                guard.admitted(event.id);
                            }
                            return Answer::Event(event);
                        }
                        Err(FrameDrop::Unrequested) => {
                            let verdict = self.guard.as_mut().map(FloodGuard::unrequested);
                            if let Some(answer) = verdict.and_then(flood_answer) {
                                return answer;
                            }
                            continue;
                        }
                        Err(_) => continue,
                    }
                }
                (Ask::Req { sub, .. }, RelayMessage::EndOfStoredEvents(id))
                    if *id == *sub && !self.live =>
                {
                    return Answer::Eose
                }
                (
                    Ask::Count { sub, .. },
                    RelayMessage::Count {
                        subscription_id,
                        count,
                    },
                ) if *subscription_id == *sub => {
                    return Answer::Count(Counted {
                        count: count as u64,
                        approximate: approximate(text.as_str()),
                    })
                }
                (
                    Ask::Sync { sub, .. },
                    RelayMessage::NegMsg {
                        subscription_id,
                        message,
                    },
                ) if *subscription_id == *sub => match hex::decode(message.as_bytes()) {
                    Ok(bytes) => return Answer::Reconcile(bytes),
                    Err(_) => {
                        return Answer::Ended(Ended::Refused {
                            refusal: Refusal::Invalid,
                            message: "the relay's negentropy message is not hex".into(),
                        })
                    }
                },
                // NIP-77's own refusal (`blocked:`, `closed:`, or not supported).
                (
                    Ask::Sync { sub, .. },
                    RelayMessage::NegErr {
                        subscription_id,
                        message,
                    },
                ) if *subscription_id == *sub => message.into_owned(),
                (
                    Ask::Req { sub, .. } | Ask::Count { sub, .. } | Ask::Sync { sub, .. },
                    RelayMessage::Closed {
                        subscription_id,
                        message,
                    },
                ) if *subscription_id == *sub => message.into_owned(),
                (
                    Ask::Event(event),
                    RelayMessage::Ok {
                        event_id,
                        status,
                        message,
                    },
                ) if event_id == event.id => {
                    let refusal = Refusal::of(&message);
                    if status || !matches!(refusal, Refusal::SignIn | Refusal::RateLimited) {
                        return Answer::Ok {
                            accepted: status,
                            message: message.into_owned(),
                        };
                    }
                    message.into_owned()
                }
                (_, RelayMessage::Notice(notice)) => {
                    tracing::debug!(notice = %notice.chars().take(200).collect::<String>(), refusal = %Refusal::of(&notice), "NOTICE");
                    continue;
                }
                _ => continue,
            };
            if let Err(ended) = self.refused(refused).await {
                return Answer::Ended(ended);
            }
        }
    }

    /// The relay refused the ask (`message`): signed in, waited out, or the end.
    async fn refused(&mut self, message: String) -> Result<(), Ended> {
        match Refusal::of(&message) {
            Refusal::SignIn => {
                let signed_in = self.sign_in.is_signed_in();
                let step = self.sign_in.refused(&message, signed_in);
                self.step(step).await
            }
            Refusal::RateLimited => self.slow_down(message).await,
            refusal => Err(Ended::Refused { refusal, message }),
        }
    }

    /// `rate-limited:`: waits the config's backoff and sends the ask again, within the
    /// deadline and at most [`MAX_RATE_LIMITED_RESENDS`] times.
    async fn slow_down(&mut self, message: String) -> Result<(), Ended> {
        let refused = |why: &str| Ended::Refused {
            refusal: Refusal::RateLimited,
            message: format!("{message}{why}"),
        };
        let Some(deadline) = self.deadline.filter(|_| !self.live) else {
            // Live: the caller asks again later.
            return Err(refused(""));
        };
        if self.rate_limited >= MAX_RATE_LIMITED_RESENDS {
            return Err(refused(""));
        }
        let delay = self
            .client
            .config()
            .backoff
            .delay(self.rate_limited, &mut self.rng);
        self.rate_limited += 1;
        let resume = crate::deadline::after(delay);
        if resume >= deadline {
            return Err(refused(" (no time left to wait)"));
        }
        tracing::debug!(
            delay_ms = delay.as_millis() as u64,
            "rate-limited: asking again later"
        );
        tokio::time::sleep_until(resume).await;
        self.resend().await?;
        // Waiting out a rate limit does not stretch the answer's deadline.
        self.deadline = Some(deadline);
        Ok(())
    }

    /// Carries out a sign-in step.
    async fn step(&mut self, step: Step) -> Result<(), Ended> {
        match step {
            Step::Wait => Ok(()),
            Step::Ask => {
                self.link
                    .sign_in()
                    .map_err(|e| Ended::Lost(e.to_string()))?;
                if !self.live {
                    self.deadline = Some(crate::deadline::after(self.wait));
                }
                Ok(())
            }
            Step::Retry => self.resend().await,
            Step::GiveUp(message) => Err(Ended::Refused {
                refusal: Refusal::SignIn,
                message,
            }),
        }
    }

    /// What no answer in time means for this ask.
    fn late(&self) -> String {
        match self.ask {
            Ask::Req { .. } => "no EOSE in time".into(),
            Ask::Event(_) => "no OK in time".into(),
            Ask::Count { .. } => "no COUNT in time".into(),
            Ask::Sync { .. } => "no NEG-MSG in time".into(),
        }
    }

    /// Our next negentropy message of a [`Ask::Sync`]; the answer's deadline starts anew.
    pub(crate) async fn reply(&mut self, message: &[u8]) -> Result<(), Ended> {
        let Ask::Sync { sub, .. } = &self.ask else {
            return Ok(());
        };
        let frame = serde_json::json!(["NEG-MSG", sub.as_str(), hex::encode(message)]);
        self.link
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|e| Ended::Lost(format!("sending failed: {e}")))?;
        self.deadline = Some(crate::deadline::after(self.wait));
        Ok(())
    }

    /// Ends a `REQ` (`CLOSE`) or a reconciliation (`NEG-CLOSE`) politely, without waiting for
    /// the socket. (A `COUNT` ends with its answer.)
    pub(crate) async fn close(self) {
        let frame = match &self.ask {
            Ask::Req { sub, .. } => ClientMessage::close(sub.clone()).as_json(),
            Ask::Sync { sub, .. } => serde_json::json!(["NEG-CLOSE", sub.as_str()]).to_string(),
            Ask::Event(_) | Ask::Count { .. } => return,
        };
        let _ = self.link.send(Message::text(frame)).await;
    }
}

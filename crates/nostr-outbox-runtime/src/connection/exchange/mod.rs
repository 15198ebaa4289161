//! The runtime's one conversation with a relay: asks sent on a link and the relay's answers to
//! them, spoken the same way by the feed's pages, lookups, route feeds, probes, publishing,
//! counts and reconciliation.
//!
//! A [`Session`] is the one reader of a link's frames. It carries any number of [`Ask`]s at
//! once (a `REQ`, an `EVENT`, a `COUNT` or a `NEG-OPEN`), routes what comes back to its ask
//! by subscription id (by event id for an `OK`), and gives it out as [`Answer`]s: events (each
//! [`admit`]ted first: bounded, dated, verified, matching what was asked and not sent on that
//! subscription before), the `EOSE`, the `OK`, the count, the relay's negentropy messages, or
//! how the ask [`Ended`]. What is the link's rather than an ask's comes beside them
//! ([`Heard`]): dropped frames, an accepted sign-in, a link that is over. Everything between
//! is the session's, once per link:
//!
//! - a frame above the config's size limit, not a relay message, or an event for an id never
//!   issued is dropped and said ([`FrameDrop`]); an event on a subscription just closed is
//!   dropped quietly for an EOSE timeout, then counted as unrequested with repeats on one
//!   subscription and events outside its filter. A [policed](Session::policed) link (the
//!   feed's) breaks past the config's bounds on bad frames and unrequested events;
//! - a refusal (`CLOSED`, `NEG-ERR`, a refused `OK`) is read by [`Refusal::of`].
//!   `auth-required:` is answered by the link's one sign-in ([`SignIn`]): with keys the socket
//!   is asked to sign in once, asks are held meanwhile, and each refused ask is sent again
//!   once; without keys, or when signing in fails, the refusal stands and says why.
//!   `rate-limited:` of a request is waited out with the config's backoff (the link sends
//!   nothing meanwhile) and the request sent again, within its answer's deadline and at most
//!   [`MAX_RATE_LIMITED_RESENDS`] times per link; a live `REQ` ends instead. Any other refusal
//!   ends the ask;
//! - no answer by an ask's deadline (restarted by every send, not by waiting out a rate limit)
//!   ends it. An ask held for the sign-in waits longer than the socket's own sign-in waits, so
//!   the socket's answer (signed in, or why not) comes first; past that it ends saying the
//!   sign-in was not answered.
//!
//! An `EVENT` is never sent again for `rate-limited:`: its refused `OK` is the answer, and
//! publishing (`crate::asks::publish`) decides, attempt by attempt with its backoff, whether to
//! send it again. So one publish sends an event to a relay at most once per attempt, plus
//! once more per attempt after signing in.
//!
//! An [`Exchange`] is a session with one ask, the shape of every path but the feed's: lookups
//! (`query.rs`), route feeds and probes (`route_feed.rs`), publishing (`publish.rs`), counts
//! (`count.rs`) and reconciliation (`sync.rs`). The feed's slots (`slot`) page many `REQ`s on
//! one session.

mod admit;
mod session;
mod signin;

use std::time::Duration;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr::message::{ClientMessage, SubscriptionId};

use crate::client::Client;
use crate::connection::extensions::Outcome;
use crate::connection::refusal::Refusal;
#[cfg(doc)]
use crate::connection::refusal::MAX_RATE_LIMITED_RESENDS;
use crate::connection::sockets::Link;

pub use admit::FrameDrop;
pub(crate) use admit::{admit, parse};
pub use session::MAX_SEEN_PER_SUB;
pub(crate) use session::{AskId, Broken, Heard, Session};
pub(crate) use signin::{SignIn, Step};

/// What is asked of a relay.
#[derive(Clone, Debug)]
pub(crate) enum Ask {
    /// `REQ`: stored events up to the `EOSE`, then new ones until it is closed.
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
    /// ours go back with [`Session::reply`].
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
    fn json(&self) -> Result<String, String> {
        let json = match self {
            Ask::Req { sub, filters, .. } => {
                ClientMessage::req(sub.clone(), filters.clone()).try_as_json()
            }
            Ask::Event(event) => ClientMessage::event(event.as_ref().clone()).try_as_json(),
            // NIP-45 takes filters as a REQ does; the `nostr` message type carries one.
            Ask::Count { sub, filters } => {
                let mut frame = vec![serde_json::json!("COUNT"), serde_json::json!(sub.as_str())];
                for filter in filters {
                    frame.push(serde_json::to_value(filter).map_err(|e| e.to_string())?);
                }
                return Ok(serde_json::Value::Array(frame).to_string());
            }
            Ask::Sync {
                sub,
                filter,
                initial,
            } => ClientMessage::neg_open(sub.clone(), filter.clone(), hex::encode(initial))
                .try_as_json(),
        };
        json.map_err(|e| e.to_string())
    }
}

/// What the relay said to an [`Ask`].
#[derive(Debug)]
pub(crate) enum Answer {
    /// A stored or new event for a `REQ`, [`admit`]ted.
    Event(Event),
    /// The `REQ`'s stored events are all sent.
    Eose,
    /// The relay's `OK` to an `EVENT`: accepted or not, and its text (an `auth-required:`
    /// refusal only once signing in could not help; `rate-limited:` as it came).
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
    /// The ask is over.
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

/// How an ask ended without its answer.
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
    /// was asked) than the config allows ([`RuntimeConfig::max_unrequested`](crate::RuntimeConfig::max_unrequested)
    /// beyond what was asked): this many.
    Flooded(u64),
}

impl Ended {
    /// What the end says about the relay's support of the extension asked for: a refusal
    /// about the reader (sign-in, payment, rate, a ban) or a lost socket says nothing.
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        match self {
            Ended::TimedOut(_) => Some(Outcome::Ignored),
            Ended::Refused { refusal, .. } => match refusal {
                Refusal::Unsupported | Refusal::Invalid | Refusal::Error | Refusal::Other => {
                    Some(Outcome::Ignored)
                }
                Refusal::SignIn
                | Refusal::Payment
                | Refusal::RateLimited
                | Refusal::Restricted
                | Refusal::Blocked
                | Refusal::Pow
                | Refusal::Duplicate => None,
            },
            Ended::Lost(_) | Ended::Flooded(_) => None,
        }
    }
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

/// One [`Ask`] on a link and its answers: a [`Session`] with that one ask (see the
/// [module docs](self)).
pub(crate) struct Exchange<'l> {
    session: Session<'l>,
    id: AskId,
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
        let mut session = Session::new(link, client, seed).flood_guarded();
        let id = session.ask(ask, wait).await.map_err(Ended::from)?;
        Ok(Exchange { session, id })
    }

    /// The next answer. Cancel-safe between answers: a caller may race it against a stop.
    pub(crate) async fn next(&mut self) -> Answer {
        loop {
            match self.session.next().await {
                Heard::Answer(id, answer) if id == self.id => return answer,
                Heard::Broken(broken) => return Answer::Ended(broken.into()),
                Heard::Answer(..) | Heard::Dropped(_) | Heard::SignedIn => {}
            }
        }
    }

    /// Later answers are due within `wait` of each send.
    pub(crate) fn rewait(&mut self, wait: Duration) {
        self.session.rewait(self.id, wait);
    }

    /// Our next negentropy message of a [`Ask::Sync`]; the answer's deadline starts anew.
    pub(crate) async fn reply(&mut self, message: &[u8]) -> Result<(), Ended> {
        self.session
            .reply(self.id, message)
            .await
            .map_err(Ended::from)
    }

    /// Ends a `REQ` (`CLOSE`) or a reconciliation (`NEG-CLOSE`) politely, without waiting for
    /// the socket. (A `COUNT` ends with its answer.)
    pub(crate) async fn close(mut self) {
        let _ = self.session.close(self.id).await;
    }
}

impl From<Broken> for Ended {
    fn from(broken: Broken) -> Self {
        match broken {
            Broken::Flooded(n) => Ended::Flooded(n),
            broken => Ended::Lost(broken.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_about_the_extension_is_learned() {
        let refused = |refusal| Ended::Refused {
            refusal,
            message: String::new(),
        };
        assert_eq!(
            Ended::TimedOut("x".into()).outcome(),
            Some(Outcome::Ignored)
        );
        assert_eq!(
            refused(Refusal::Unsupported).outcome(),
            Some(Outcome::Ignored)
        );
        assert_eq!(refused(Refusal::SignIn).outcome(), None);
        assert_eq!(refused(Refusal::RateLimited).outcome(), None);
        assert_eq!(Ended::Lost("x".into()).outcome(), None);
    }
}

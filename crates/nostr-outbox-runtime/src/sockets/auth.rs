//! NIP-42 sign-in, once per connection: NIP-42 authenticates a connection, so every link on a
//! socket shares one sign-in.
//!
//! The socket keeps the relay's latest `["AUTH", challenge]` and signs it only when a link asks
//! ([`Link::sign_in`](super::Link::sign_in)), which a link does after the relay refused one of
//! its requests with `auth-required:`: a relay that serves anonymous readers never learns who
//! reads. The kind:22242 event (tags `relay`, this socket's URL, and `challenge`) goes to this
//! relay alone; the relay's `OK` for it answers every link that asked meanwhile, and links that
//! ask later get the same answer at once. No challenge yet: the sign-in waits for one. No
//! challenge or no `OK` within the timeout, or a refused sign-in: the sign-in failed on this
//! connection, and says why. A new socket starts anonymous.

use std::time::Duration;

use nostr::event::{Event, EventBuilder, EventId, FinalizeEvent, Kind, Tag};
use nostr::key::Keys;
use nostr::message::ClientMessage;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The longest challenge answered. Real challenges are a few dozen characters; a longer one is
/// ignored rather than signed and echoed back.
pub const MAX_CHALLENGE_BYTES: usize = 1024;

/// The signed kind:22242 event answering `challenge` on `relay`: its `relay` tag names exactly
/// the relay that challenged.
pub(super) fn auth_event(keys: &Keys, relay: &str, challenge: &str) -> Result<Event, String> {
    let tags = [["relay", relay], ["challenge", challenge]]
        .into_iter()
        .map(|t| Tag::parse(t).map_err(|e| format!("cannot build the AUTH tags: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    EventBuilder::new(Kind::Authentication, "")
        .tags(tags)
        .finalize(keys)
        .map_err(|e| format!("cannot sign the AUTH event: {e}"))
}

/// Where one connection's sign-in stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// No link asked.
    Anonymous,
    /// Asked before any challenge came: waiting for one.
    AwaitingChallenge { deadline: Instant },
    /// AUTH sent: waiting for the relay's `OK` for it.
    Pending { event: EventId, deadline: Instant },
    /// The relay accepted the AUTH event.
    SignedIn,
    /// Sign-in failed on this connection, and why.
    Failed(String),
}

/// What the socket does after a link asked, a challenge came or an `OK` was read.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Nothing yet.
    Wait,
    /// Send this AUTH frame to the relay.
    Send(Message),
    /// Tell these links how the sign-in ended.
    Answer(Vec<u64>, Result<(), String>),
}

/// One connection's sign-in (see the [module docs](self)).
pub(super) struct Auth {
    signer: Option<Keys>,
    /// How long a sign-in may wait for a challenge, then for the `OK`.
    timeout: Duration,
    challenge: Option<String>,
    state: State,
    /// Links waiting for the answer.
    asking: Vec<u64>,
}

impl Auth {
    pub(super) fn new(signer: Option<Keys>, timeout: Duration) -> Self {
        Self {
            signer,
            timeout,
            challenge: None,
            state: State::Anonymous,
            asking: Vec::new(),
        }
    }

    /// `link` asks to be signed in on the connection to `url`.
    pub(super) fn ask(&mut self, link: u64, url: &str) -> Step {
        match &self.state {
            State::SignedIn => Step::Answer(vec![link], Ok(())),
            State::Failed(why) => Step::Answer(vec![link], Err(why.clone())),
            State::AwaitingChallenge { .. } | State::Pending { .. } => {
                self.asking.push(link);
                Step::Wait
            }
            State::Anonymous => {
                self.asking.push(link);
                if self.challenge.is_some() {
                    self.sign(url)
                } else {
                    tracing::debug!(relay = %url, "sign-in asked; waiting for the relay's challenge");
                    self.state = State::AwaitingChallenge {
                        deadline: crate::deadline::after(self.timeout),
                    };
                    Step::Wait
                }
            }
        }
    }

    /// An `["AUTH", challenge]` from the relay: kept, and signed at once if a sign-in waits for
    /// it. Empty or oversized challenges are ignored: never signed or echoed back.
    pub(super) fn challenge(&mut self, challenge: &str, url: &str) -> Step {
        if challenge.is_empty() || challenge.len() > MAX_CHALLENGE_BYTES {
            tracing::debug!(
                bytes = challenge.len(),
                "AUTH challenge ignored (empty or too long)"
            );
            return Step::Wait;
        }
        self.challenge = Some(challenge.to_string());
        if matches!(self.state, State::AwaitingChallenge { .. }) {
            return self.sign(url);
        }
        Step::Wait
    }

    /// Whether `id` is the AUTH event this connection awaits an `OK` for.
    pub(super) fn awaits(&self, id: &str) -> bool {
        matches!(&self.state, State::Pending { event, .. } if event.to_hex() == id)
    }

    /// The relay's `OK` for our AUTH event.
    pub(super) fn ok(&mut self, accepted: bool, message: &str) -> Step {
        if !matches!(self.state, State::Pending { .. }) {
            return Step::Wait;
        }
        if accepted {
            tracing::info!("signed in");
            self.state = State::SignedIn;
            Step::Answer(std::mem::take(&mut self.asking), Ok(()))
        } else {
            let shown: String = message.chars().take(200).collect();
            self.fail(format!("sign-in refused: {shown}"))
        }
    }

    /// When the sign-in under way gives up.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::AwaitingChallenge { deadline } | State::Pending { deadline, .. } => {
                Some(deadline)
            }
            _ => None,
        }
    }

    /// The sign-in under way ran out of time.
    pub(super) fn expired(&mut self) -> Step {
        match self.state {
            State::AwaitingChallenge { .. } => self.fail("no AUTH challenge came in time".into()),
            State::Pending { .. } => self.fail("no OK for the AUTH event in time".into()),
            _ => Step::Wait,
        }
    }

    /// A link left: it waits for nothing.
    pub(super) fn forget(&mut self, link: u64) {
        self.asking.retain(|l| *l != link);
    }

    fn sign(&mut self, url: &str) -> Step {
        let Some(keys) = &self.signer else {
            return self.fail("no key to sign in with".into());
        };
        let Some(challenge) = &self.challenge else {
            return Step::Wait;
        };
        match auth_event(keys, url, challenge) {
            Ok(event) => {
                tracing::info!(relay = %url, pubkey = %keys.public_key(), "signing in (NIP-42)");
                self.state = State::Pending {
                    event: event.id,
                    deadline: crate::deadline::after(self.timeout),
                };
                Step::Send(Message::text(ClientMessage::auth(event).as_json()))
            }
            Err(why) => self.fail(why),
        }
    }

    fn fail(&mut self, why: String) -> Step {
        tracing::info!(reason = %why, "sign-in failed");
        self.state = State::Failed(why.clone());
        Step::Answer(std::mem::take(&mut self.asking), Err(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "wss://relay.example";

    fn auth(signer: bool) -> Auth {
        Auth::new(signer.then(Keys::generate), Duration::from_secs(5))
    }

    fn sent_id(step: &Step) -> String {
        let Step::Send(Message::Text(text)) = step else {
            panic!("no AUTH sent: {step:?}");
        };
        let value: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
        assert_eq!(value[0], "AUTH");
        value[1]["id"].as_str().unwrap().to_string()
    }

    #[test]
    fn one_sign_in_answers_every_link_that_asked_and_every_later_one() {
        let mut a = auth(true);
        assert_eq!(
            a.challenge("c1", URL),
            Step::Wait,
            "nobody asked: nothing signed"
        );
        let id = sent_id(&a.ask(1, URL));
        assert_eq!(a.ask(2, URL), Step::Wait, "one AUTH per connection");
        assert!(a.awaits(&id));
        assert_eq!(a.ok(true, ""), Step::Answer(vec![1, 2], Ok(())));
        assert_eq!(a.ask(3, URL), Step::Answer(vec![3], Ok(())));
    }

    #[test]
    fn a_sign_in_waits_for_the_challenge_and_fails_without_one() {
        let mut a = auth(true);
        assert_eq!(a.ask(1, URL), Step::Wait);
        assert!(a.deadline().is_some());
        assert_eq!(
            a.challenge("", URL),
            Step::Wait,
            "an empty challenge is not signed"
        );
        let id = sent_id(&a.challenge("c2", URL));
        assert!(a.awaits(&id));
        let mut b = auth(true);
        assert_eq!(b.ask(1, URL), Step::Wait);
        b.forget(1);
        assert_eq!(b.ask(2, URL), Step::Wait);
        assert_eq!(
            b.expired(),
            Step::Answer(vec![2], Err("no AUTH challenge came in time".into()))
        );
    }

    #[test]
    fn refusals_and_missing_keys_are_answers_too() {
        let mut a = auth(true);
        a.challenge("c", URL);
        sent_id(&a.ask(1, URL));
        assert_eq!(
            a.ok(false, "restricted: not you"),
            Step::Answer(vec![1], Err("sign-in refused: restricted: not you".into()))
        );
        assert!(
            matches!(a.ask(2, URL), Step::Answer(_, Err(_))),
            "failed stays failed"
        );
        let mut none = auth(false);
        none.challenge("c", URL);
        assert_eq!(
            none.ask(1, URL),
            Step::Answer(vec![1], Err("no key to sign in with".into()))
        );
        let long = "x".repeat(MAX_CHALLENGE_BYTES + 1);
        let mut c = auth(true);
        assert_eq!(c.challenge(&long, URL), Step::Wait);
        assert_eq!(
            c.ask(1, URL),
            Step::Wait,
            "an oversized challenge is not kept"
        );
    }
}

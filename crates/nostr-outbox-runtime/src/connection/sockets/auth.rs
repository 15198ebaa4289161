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
//!
//! The signer may be remote and slow, so the socket's task never waits on it: it hands the
//! unsigned event out ([`Step::Sign`]), keeps reading frames, and is given the result
//! ([`Auth::signed`]); the signer's own timeout bounds the wait.

use std::time::Duration;

use nostr::event::{Event, EventBuilder, EventId, FinalizeUnsignedEvent, Kind, Tag, UnsignedEvent};
use nostr::key::PublicKey;
use nostr::message::ClientMessage;

use crate::signer::{Signer, SignerError};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

/// The longest challenge answered. Real challenges are a few dozen characters; a longer one is
/// ignored rather than signed and echoed back.
pub const MAX_CHALLENGE_BYTES: usize = 1024;

/// The kind:22242 event answering `challenge` on `relay`, to be signed: its `relay` tag names
/// exactly the relay that challenged.
pub(super) fn auth_event(
    author: PublicKey,
    relay: &str,
    challenge: &str,
) -> Result<UnsignedEvent, String> {
    let tags = [["relay", relay], ["challenge", challenge]]
        .into_iter()
        .map(|t| Tag::parse(t).map_err(|e| format!("cannot build the AUTH tags: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(EventBuilder::new(Kind::Authentication, "")
        .tags(tags)
        .finalize_unsigned(author))
}

/// Where one connection's sign-in stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// No link asked.
    Anonymous,
    /// Asked before any challenge came: waiting for one.
    AwaitingChallenge { deadline: Instant },
    /// The AUTH event is with the signer (bounded by the signer's timeout).
    Signing,
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
    /// Have the signer sign this AUTH event, then hand the result to [`Auth::signed`].
    Sign(UnsignedEvent),
    /// Send this AUTH frame to the relay.
    Send(Message),
    /// Tell these links how the sign-in ended.
    Answer(Vec<u64>, Result<(), String>),
}

/// One connection's sign-in (see the [module docs](self)).
pub(super) struct Auth {
    signer: Option<Signer>,
    /// How long a sign-in may wait for a challenge, then for the `OK`.
    timeout: Duration,
    challenge: Option<String>,
    state: State,
    /// Links waiting for the answer.
    asking: Vec<u64>,
}

impl Auth {
    pub(super) fn new(signer: Option<Signer>, timeout: Duration) -> Self {
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
            State::AwaitingChallenge { .. } | State::Signing | State::Pending { .. } => {
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

    /// The signer, for a [`Step::Sign`].
    pub(super) fn signer(&self) -> Option<&Signer> {
        self.signer.as_ref()
    }

    /// The signer's answer to a [`Step::Sign`]: the AUTH frame to send, or the sign-in failed.
    pub(super) fn signed(&mut self, signed: Result<Event, SignerError>) -> Step {
        if !matches!(self.state, State::Signing) {
            return Step::Wait;
        }
        match signed {
            Ok(event) => {
                self.state = State::Pending {
                    event: event.id,
                    deadline: crate::deadline::after(self.timeout),
                };
                Step::Send(Message::text(ClientMessage::auth(event).as_json()))
            }
            Err(e) => self.fail(format!("cannot sign the AUTH event: {e}")),
        }
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
        let Some(signer) = &self.signer else {
            return self.fail("no key to sign in with".into());
        };
        let Some(challenge) = &self.challenge else {
            return Step::Wait;
        };
        match auth_event(signer.public_key(), url, challenge) {
            Ok(unsigned) => {
                tracing::info!(relay = %url, pubkey = %signer.public_key(), signer = %signer.name(), "signing in (NIP-42)");
                self.state = State::Signing;
                Step::Sign(unsigned)
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
        let signer = signer.then(|| Signer::from_keys(nostr::key::Keys::generate()));
        Auth::new(signer, Duration::from_secs(5))
    }

    /// Carries a [`Step::Sign`] out as the socket's task does, returning the next step.
    fn sign(a: &mut Auth, step: Step) -> Step {
        let Step::Sign(unsigned) = step else {
            return step;
        };
        let signer = a.signer().unwrap().clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let signed = runtime.block_on(signer.sign(unsigned));
        a.signed(signed)
    }

    fn sent_id(a: &mut Auth, step: Step) -> String {
        let step = sign(a, step);
        let Step::Send(Message::Text(text)) = &step else {
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
        let step = a.ask(1, URL);
        let id = sent_id(&mut a, step);
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
        let step = a.challenge("c2", URL);
        let id = sent_id(&mut a, step);
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
        let step = a.ask(1, URL);
        sent_id(&mut a, step);
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
        // A signer that did not answer: the sign-in fails, naming it.
        let mut slow = auth(true);
        slow.challenge("c", URL);
        assert!(matches!(slow.ask(1, URL), Step::Sign(_)));
        let late = SignerError::TimedOut {
            signer: "bunker x".into(),
            what: "sign an event",
            after: Duration::from_secs(1),
        };
        let Step::Answer(links, Err(why)) = slow.signed(Err(late)) else {
            panic!("no answer");
        };
        assert_eq!(links, [1]);
        assert!(
            why.contains("bunker x") && why.contains("did not answer"),
            "{why}"
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

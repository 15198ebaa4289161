//! NIP-42 sign-in for one request on one link: lookups, route feeds and publishing. (The feed's
//! slots page many requests at once and keep their own, richer state: `slot::auth`.)
//!
//! A relay that refuses with `auth-required:` is answered, when keys are configured, by signing
//! its latest `AUTH` challenge (waiting for one if none came yet) and, once the relay accepts the
//! AUTH event, asking again — once. Without keys, or when signing in did not help, the refusal
//! stands and says why. Only a relay that refused ever sees the signed event.

use nostr::event::EventId;
use nostr::key::Keys;
use nostr::message::ClientMessage;

use crate::slot::{auth_event, MAX_CHALLENGE_BYTES};

/// Where sign-in stands on one link.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Not asked.
    Anonymous,
    /// Refused for want of sign-in; no challenge yet.
    AwaitingChallenge,
    /// AUTH sent: waiting for its OK.
    Pending(EventId),
    /// Accepted; the request was sent again.
    SignedIn,
}

/// What the caller does next.
#[derive(Debug)]
pub(crate) enum Step {
    /// Keep reading.
    Wait,
    /// Send this AUTH message, then keep reading.
    Send(Box<ClientMessage<'static>>),
    /// Signed in: send the refused request again.
    Retry,
    /// The refusal stands; the text says why.
    GiveUp(String),
}

/// One request's sign-in (see the [module docs](self)).
pub(crate) struct SignIn<'a> {
    keys: Option<&'a Keys>,
    url: &'a str,
    challenge: Option<String>,
    state: State,
    refusal: String,
}

impl<'a> SignIn<'a> {
    /// Sign-in on `url` with `keys` (none: refusals stand).
    pub(crate) fn new(keys: Option<&'a Keys>, url: &'a str) -> Self {
        Self {
            keys,
            url,
            challenge: None,
            state: State::Anonymous,
            refusal: String::new(),
        }
    }

    /// Whether a refusal waits for a challenge or for the OK to our AUTH: the caller's deadline
    /// for an answer then applies to that.
    pub(crate) fn waiting(&self) -> bool {
        matches!(self.state, State::AwaitingChallenge | State::Pending(_))
    }

    /// Why the wait ended without an answer, for a caller whose deadline passed while
    /// [`waiting`](Self::waiting).
    pub(crate) fn timed_out(&self) -> String {
        match self.state {
            State::AwaitingChallenge => {
                format!("{} (no AUTH challenge came in time)", self.refusal)
            }
            State::Pending(_) => format!("{} (no OK for the AUTH event in time)", self.refusal),
            _ => self.refusal.clone(),
        }
    }

    /// An `["AUTH", challenge]` frame. Empty or oversized challenges are ignored: never signed
    /// or echoed back.
    pub(crate) fn challenge(&mut self, challenge: &str) -> Step {
        if challenge.is_empty() || challenge.len() > MAX_CHALLENGE_BYTES {
            return Step::Wait;
        }
        self.challenge = Some(challenge.to_string());
        if self.state == State::AwaitingChallenge {
            return self.sign();
        }
        Step::Wait
    }

    /// The relay refused the request with `auth-required:` (`message` is its text).
    pub(crate) fn refused(&mut self, message: &str) -> Step {
        match self.state {
            State::Anonymous if self.keys.is_some() => {
                self.refusal = message.to_string();
                if self.challenge.is_some() {
                    self.sign()
                } else {
                    self.state = State::AwaitingChallenge;
                    Step::Wait
                }
            }
            State::Anonymous => Step::GiveUp(format!("{message} (no key to sign in with)")),
            State::SignedIn => Step::GiveUp(format!("{message} (still refused after signing in)")),
            // A second refusal while signing in: the first one's answer is awaited.
            State::AwaitingChallenge | State::Pending(_) => Step::Wait,
        }
    }

    /// An `OK`: `Some` when it answers our AUTH event.
    pub(crate) fn ok(&mut self, id: &EventId, accepted: bool, message: &str) -> Option<Step> {
        if self.state != State::Pending(*id) {
            return None;
        }
        if accepted {
            self.state = State::SignedIn;
            Some(Step::Retry)
        } else {
            Some(Step::GiveUp(format!(
                "{} (sign-in refused: {message})",
                self.refusal
            )))
        }
    }

    fn sign(&mut self) -> Step {
        let (Some(keys), Some(challenge)) = (self.keys, self.challenge.as_deref()) else {
            return Step::Wait;
        };
        match auth_event(keys, self.url, challenge) {
            Ok(auth) => {
                self.state = State::Pending(auth.id);
                Step::Send(Box::new(ClientMessage::auth(auth)))
            }
            Err(why) => Step::GiveUp(format!("{} ({why})", self.refusal)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_id(step: Step) -> EventId {
        match step {
            Step::Send(msg) => match *msg {
                ClientMessage::Auth(event) => event.id,
                other => panic!("expected an AUTH, got {other:?}"),
            },
            other => panic!("expected an AUTH, got {other:?}"),
        }
    }

    #[test]
    fn a_refusal_is_signed_once_the_challenge_is_known_and_asked_again_once() {
        let keys = Keys::generate();
        let mut s = SignIn::new(Some(&keys), "wss://r.example");
        assert!(matches!(s.challenge("c1"), Step::Wait));
        let id = auth_id(s.refused("auth-required: who"));
        assert!(s.waiting());
        assert!(s.ok(&EventId::from_byte_array([0; 32]), true, "").is_none());
        assert!(matches!(s.ok(&id, true, ""), Some(Step::Retry)));
        match s.refused("auth-required: still") {
            Step::GiveUp(why) => assert!(why.contains("still refused after signing in")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_refusal_before_the_challenge_waits_for_it_and_without_keys_stands() {
        let keys = Keys::generate();
        let mut s = SignIn::new(Some(&keys), "wss://r.example");
        assert!(matches!(s.refused("auth-required: x"), Step::Wait));
        assert!(s.timed_out().contains("no AUTH challenge"));
        assert!(matches!(s.challenge(""), Step::Wait));
        let id = auth_id(s.challenge("c"));
        match s.ok(&id, false, "bad") {
            Some(Step::GiveUp(why)) => assert!(why.contains("sign-in refused: bad"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut anonymous = SignIn::new(None, "wss://r.example");
        anonymous.challenge("c");
        match anonymous.refused("auth-required: x") {
            Step::GiveUp(why) => assert!(why.contains("no key"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

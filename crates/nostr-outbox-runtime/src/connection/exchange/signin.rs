//! What a request does when a relay refuses it with `auth-required:`, on every path: one per
//! [`Session`](super::Session), for all the asks on its link.
//!
//! Signing in is the socket's ([`Link::sign_in`](crate::connection::sockets::Link::sign_in)): it signs the
//! relay's challenge once for every link on the connection. A request asks for it when refused
//! and the client has a signer, waits for the answer, and is sent again — once. Without a
//! signer, or when signing in failed or did not help, the refusal stands and says why.

/// Where one request stands.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Not refused for want of sign-in.
    Anonymous,
    /// Refused; the socket was asked to sign in.
    Asked,
    /// Signed in; refused requests are sent again.
    SignedIn,
    /// Signing in failed, and why: later refusals stand.
    Failed(String),
}

/// What the caller does next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep reading.
    Wait,
    /// Ask the socket to sign in ([`Link::sign_in`](crate::connection::sockets::Link::sign_in)), then
    /// keep reading: its answer comes as a read.
    Ask,
    /// Signed in: send the refused request again.
    Retry,
    /// The refusal stands; the text says why.
    GiveUp(String),
}

/// The answer to `auth-required:` of one request, or of one connection's pages (see the
/// [module docs](self)).
pub(crate) struct SignIn {
    signer: bool,
    state: State,
    refusal: String,
}

impl SignIn {
    /// A request of a client with (`signer`) or without a signer.
    pub(crate) fn new(signer: bool) -> Self {
        Self {
            signer,
            state: State::Anonymous,
            refusal: String::new(),
        }
    }

    /// Whether a refusal waits for the socket's sign-in: the caller's deadline for an answer
    /// then applies to that.
    pub(crate) fn waiting(&self) -> bool {
        self.state == State::Asked
    }

    /// The relay accepted the sign-in.
    pub(crate) fn is_signed_in(&self) -> bool {
        self.state == State::SignedIn
    }

    /// Why signing in failed, once it has.
    pub(crate) fn failure(&self) -> Option<&str> {
        match &self.state {
            State::Failed(why) => Some(why),
            _ => None,
        }
    }

    /// Why the wait ended without an answer, for a caller whose deadline passed while
    /// [`waiting`](Self::waiting).
    pub(crate) fn timed_out(&self) -> String {
        format!("{} (the sign-in was not answered in time)", self.refusal)
    }

    /// The relay refused a request with `auth-required:` (`message` is its text);
    /// `sent_signed_in`: that request went out after the relay accepted the sign-in.
    pub(crate) fn refused(&mut self, message: &str, sent_signed_in: bool) -> Step {
        match &self.state {
            State::Anonymous if self.signer => {
                self.refusal = message.to_string();
                self.state = State::Asked;
                Step::Ask
            }
            State::Anonymous => Step::GiveUp(format!("{message} (no key to sign in with)")),
            State::SignedIn if sent_signed_in => {
                Step::GiveUp(format!("{message} (still refused after signing in)"))
            }
            // Sent before the sign-in was answered: send it again now.
            State::SignedIn => Step::Retry,
            State::Failed(why) => Step::GiveUp(format!("{message} ({why})")),
            // A second refusal while signing in: the first one's answer is awaited.
            State::Asked => Step::Wait,
        }
    }

    /// The socket's answer to the sign-in.
    pub(crate) fn answered(&mut self, result: Result<(), String>) -> Step {
        if self.state != State::Asked {
            return Step::Wait;
        }
        match result {
            Ok(()) => {
                self.state = State::SignedIn;
                Step::Retry
            }
            Err(why) => {
                let step = Step::GiveUp(format!("{} ({why})", self.refusal));
                self.state = State::Failed(why);
                step
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_asks_for_a_sign_in_and_the_request_goes_again_once() {
        let mut s = SignIn::new(true);
        assert_eq!(s.answered(Ok(())), Step::Wait, "nothing was asked");
        assert_eq!(s.refused("auth-required: who", false), Step::Ask);
        assert!(s.waiting());
        assert_eq!(s.refused("auth-required: again", false), Step::Wait);
        assert!(s.timed_out().starts_with("auth-required: who"));
        assert_eq!(s.answered(Ok(())), Step::Retry);
        assert!(s.is_signed_in());
        assert_eq!(
            s.refused("auth-required: crossed the answer", false),
            Step::Retry,
            "a request sent before the answer goes again"
        );
        match s.refused("auth-required: still", true) {
            Step::GiveUp(why) => assert!(why.contains("still refused after signing in")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_sign_in_or_no_signer_lets_the_refusal_stand() {
        let mut s = SignIn::new(true);
        assert_eq!(s.refused("auth-required: x", false), Step::Ask);
        assert_eq!(
            s.answered(Err("sign-in refused: bad".into())),
            Step::GiveUp("auth-required: x (sign-in refused: bad)".into())
        );
        assert_eq!(s.failure(), Some("sign-in refused: bad"));
        assert_eq!(
            s.refused("auth-required: y", false),
            Step::GiveUp("auth-required: y (sign-in refused: bad)".into()),
            "a failed sign-in is not asked again on the connection"
        );
        let mut anonymous = SignIn::new(false);
        match anonymous.refused("auth-required: x", false) {
            Step::GiveUp(why) => assert!(why.contains("no key"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

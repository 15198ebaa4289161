//! What a relay's refusal means: the one reading of the machine-readable prefix (NIP-01,
//! NIP-42) of a `CLOSED`, a refused `OK` or a `NOTICE`, shared by the feed's slots, lookups,
//! route feeds, probes and publishing.
//!
//! Leading whitespace is ignored; the prefix is the text before the first `:`, matched exactly
//! (`auth-required: members only` needs sign-in, `sign in: auth-required` is [`Other`]).
//! What each path does with it:
//!
//! - [`SignIn`]: signed in (NIP-42) and asked once more when keys are given; without keys the
//!   relay *needs sign-in*. Not a failure of the relay.
//! - [`Payment`]: the relay *needs payment*. Not a failure of the relay either.
//! - [`RateLimited`]: a request is waited out with the config's backoff and asked again, a
//!   bounded number of times ([`MAX_RATE_LIMITED_RESENDS`]), in one place for every path (the
//!   exchange's session); a published event is sent again only by publishing's next attempt. A
//!   relay that keeps asking to slow down is left alone for a while, never learned as down.
//! - [`Restricted`], [`Blocked`]: the relay will not serve this reader; retrying cannot help.
//! - the rest ([`Invalid`], [`Pow`], [`Unsupported`], [`Duplicate`], [`Error`], [`Other`]):
//!   the request or the relay went wrong this time.
//!
//! [`SignIn`]: Refusal::SignIn
//! [`Payment`]: Refusal::Payment
//! [`RateLimited`]: Refusal::RateLimited
//! [`Restricted`]: Refusal::Restricted
//! [`Blocked`]: Refusal::Blocked
//! [`Invalid`]: Refusal::Invalid
//! [`Pow`]: Refusal::Pow
//! [`Unsupported`]: Refusal::Unsupported
//! [`Duplicate`]: Refusal::Duplicate
//! [`Error`]: Refusal::Error
//! [`Other`]: Refusal::Other

use serde::Serialize;

/// `rate-limited:` refusals of requests one link answers by waiting (the config's backoff) and
/// asking again; one more and the relay is left alone for a while.
pub const MAX_RATE_LIMITED_RESENDS: u32 = 3;

/// What a refusal's prefix says ([`Refusal::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// `auth-required:`: serves only readers signed in with NIP-42.
    SignIn,
    /// `payment-required:` (not in NIP-01; paid relays send it): serves only readers who paid.
    Payment,
    /// `rate-limited:`: asks the client to slow down.
    RateLimited,
    /// `restricted:`: this reader is not allowed.
    Restricted,
    /// `blocked:`: this reader (or its address) is banned.
    Blocked,
    /// `invalid:`: the request or event is malformed.
    Invalid,
    /// `pow:`: the event lacks proof of work.
    Pow,
    /// `unsupported:`: the relay does not do what was asked.
    Unsupported,
    /// `duplicate:`: the relay already has the event.
    Duplicate,
    /// `error:`: the relay failed.
    Error,
    /// No known prefix.
    Other,
}

impl Refusal {
    /// Reads the machine-readable prefix of a `CLOSED`, `OK` or `NOTICE` message.
    pub fn of(message: &str) -> Self {
        let Some((prefix, _)) = message.trim_start().split_once(':') else {
            return Self::Other;
        };
        match prefix {
            "auth-required" => Self::SignIn,
            "payment-required" => Self::Payment,
            "rate-limited" => Self::RateLimited,
            "restricted" => Self::Restricted,
            "blocked" => Self::Blocked,
            "invalid" => Self::Invalid,
            "pow" => Self::Pow,
            "unsupported" => Self::Unsupported,
            "duplicate" => Self::Duplicate,
            "error" => Self::Error,
            _ => Self::Other,
        }
    }

    /// The prefix, as relays write it (`other` for none known).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SignIn => "auth-required",
            Self::Payment => "payment-required",
            Self::RateLimited => "rate-limited",
            Self::Restricted => "restricted",
            Self::Blocked => "blocked",
            Self::Invalid => "invalid",
            Self::Pow => "pow",
            Self::Unsupported => "unsupported",
            Self::Duplicate => "duplicate",
            Self::Error => "error",
            Self::Other => "other",
        }
    }

    /// Asking again as we are cannot help: the relay wants something we do not do (sign in,
    /// pay) or will not serve us.
    pub fn is_definitive(self) -> bool {
        matches!(
            self,
            Self::SignIn | Self::Payment | Self::Restricted | Self::Blocked
        )
    }

    /// The relay is up and would serve a reader who signs in, pays or waits: not a failure
    /// of the relay, so nothing about its liveness is learned from it.
    pub fn is_requirement(self) -> bool {
        matches!(self, Self::SignIn | Self::Payment | Self::RateLimited)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_read_after_leading_whitespace_and_only_before_the_colon() {
        let cases = [
            ("auth-required: sign in", Refusal::SignIn),
            ("  auth-required: sign in", Refusal::SignIn),
            ("\tpayment-required: $5", Refusal::Payment),
            (" rate-limited: slow down", Refusal::RateLimited),
            ("restricted: paid relay", Refusal::Restricted),
            ("blocked: go away", Refusal::Blocked),
            ("invalid: bad", Refusal::Invalid),
            ("pow: 20", Refusal::Pow),
            ("unsupported: search", Refusal::Unsupported),
            ("duplicate: have it", Refusal::Duplicate),
            ("error: database", Refusal::Error),
            ("sign in: auth-required", Refusal::Other),
            ("auth-required", Refusal::Other),
            ("whatever", Refusal::Other),
            ("", Refusal::Other),
        ];
        for (message, refusal) in cases {
            assert_eq!(Refusal::of(message), refusal, "{message:?}");
        }
        for definitive in [
            Refusal::SignIn,
            Refusal::Payment,
            Refusal::Restricted,
            Refusal::Blocked,
        ] {
            assert!(definitive.is_definitive());
        }
        assert!(!Refusal::RateLimited.is_definitive());
        assert!(!Refusal::Error.is_definitive());
        assert!(Refusal::RateLimited.is_requirement());
        assert!(!Refusal::Blocked.is_requirement());
        assert_eq!(Refusal::of("rate-limited: x").to_string(), "rate-limited");
    }
}

//! The penalty box: relays that keep failing or refusing are set aside for a while.
//!
//! A relay that is down, never sends EOSE, drops connections or answers CLOSED costs a socket
//! and a timeout on every plan. After [`PenaltyPolicy::strikes`] consecutive failures (or one
//! definitive refusal such as `restricted:` or an `auth-required:` that signing in did not
//! cure) it is set aside until a deadline; plans built
//! while it is set aside leave it out, so its authors move to other relays or the residual.
//! The first set-aside is short and each one in a row lasts longer
//! ([`PenaltyPolicy::length`]); a successful EOSE clears the strikes and the escalation. The box
//! is plain data and can be persisted beside the stats so the next run remembers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::PenaltyPolicy;

/// The state of one relay in the box.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PenaltyEntry {
    /// Consecutive failures since the last success.
    pub strikes: u32,
    /// Unix seconds until which the relay is set aside, if it is.
    pub until: Option<u64>,
    /// The last failure, for explanations.
    pub last_reason: String,
    /// Set-asides in a row without a success in between (how long the next one lasts).
    pub times: u32,
    /// A strike was for misbehaviour (bad frames, floods): a success does not clear the
    /// strikes, since a relay that floods after its EOSE succeeds on every connection.
    pub misbehaved: bool,
    /// Set aside because it refused to serve without sign-in (NIP-42) and no key was given:
    /// not a failure of the relay. Runs without a key skip it until `until`; a run with a key
    /// asks it at once ([`PenaltyBox::retry_sign_in`]).
    pub needs_sign_in: bool,
    /// Set aside because it requires payment the reader has not made (its CLOSED, its NIP-11
    /// document or a NIP-66 monitor's report): not a failure of the relay, no strike or
    /// escalation. Paying for it ([`RuntimeConfig::paid_relays`]) clears the entry.
    ///
    /// [`RuntimeConfig::paid_relays`]: crate::RuntimeConfig::paid_relays
    pub needs_payment: bool,
    /// The last strikes were `rate-limited:` refusals the waits did not cure: the relay is up
    /// and asks us to slow down, so it is left alone for a while without being learned as down.
    pub rate_limited: bool,
}

/// Relays with recent failures, keyed by canonical URL.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PenaltyBox {
    relays: BTreeMap<String, PenaltyEntry>,
}

impl PenaltyBox {
    /// An empty box.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one failure; returns the deadline if this strike set the relay aside.
    pub fn strike(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
    ) -> Option<u64> {
        let entry = self.relays.entry(url.to_string()).or_default();
        entry.strikes = entry.strikes.saturating_add(1);
        entry.last_reason = reason.chars().take(200).collect();
        if entry.strikes >= policy.strikes.max(1) {
            let until = now.saturating_add(policy.length(entry.times).as_secs());
            entry.times = entry.times.saturating_add(1);
            entry.strikes = 0;
            entry.until = Some(until);
            Some(until)
        } else {
            None
        }
    }

    /// Counts one failure for misbehaviour, which a later success does not forgive; returns
    /// the deadline if this strike set the relay aside.
    pub fn strike_misbehaving(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
    ) -> Option<u64> {
        self.strike_marked(url, reason, now, policy, |e| e.misbehaved = true)
    }

    /// Sets a relay aside at once for the full duration (a refusal that retrying cannot fix);
    /// returns the deadline.
    pub fn penalise(&mut self, url: &str, reason: &str, now: u64, policy: &PenaltyPolicy) -> u64 {
        let entry = self.relays.entry(url.to_string()).or_default();
        entry.strikes = 0;
        entry.times = entry.times.saturating_add(1);
        entry.last_reason = reason.chars().take(200).collect();
        let until = now.saturating_add(policy.duration.as_secs());
        entry.until = Some(until);
        until
    }

    /// A relay refused to serve without sign-in and no key was given: it is skipped by runs
    /// without a key for the longest set-aside, with no strike or escalation (nothing is wrong
    /// with it); returns the deadline.
    pub fn needs_sign_in(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
    ) -> u64 {
        self.hold_back(url, reason, now, policy, |e| e.needs_sign_in = true)
    }

    /// A relay requires payment the reader has not made: it is skipped for the longest
    /// set-aside, with no strike or escalation (nothing is wrong with it); returns the deadline.
    pub fn needs_payment(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
    ) -> u64 {
        self.hold_back(url, reason, now, policy, |e| e.needs_payment = true)
    }

    /// Skips `url` for the longest set-aside without a strike, marked by `mark` (what it
    /// wants that the reader lacks); returns the deadline.
    fn hold_back(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
        mark: impl FnOnce(&mut PenaltyEntry),
    ) -> u64 {
        let entry = self.relays.entry(url.to_string()).or_default();
        mark(entry);
        entry.last_reason = reason.chars().take(200).collect();
        let until = now.saturating_add(policy.duration.as_secs());
        entry.until = Some(entry.until.map_or(until, |u| u.max(until)));
        until
    }

    /// Counts one connection ended by `rate-limited:` refusals the waits did not cure, like a
    /// [`strike`](Self::strike), and marks the entry [`rate_limited`](PenaltyEntry::rate_limited);
    /// returns the deadline if this strike set the relay aside.
    pub fn strike_rate_limited(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
    ) -> Option<u64> {
        self.strike_marked(url, reason, now, policy, |e| e.rate_limited = true)
    }

    /// A [`strike`](Self::strike) that also marks the entry by `mark` (why it keeps failing).
    fn strike_marked(
        &mut self,
        url: &str,
        reason: &str,
        now: u64,
        policy: &PenaltyPolicy,
        mark: impl FnOnce(&mut PenaltyEntry),
    ) -> Option<u64> {
        let until = self.strike(url, reason, now, policy);
        if let Some(entry) = self.relays.get_mut(url) {
            mark(entry);
        }
        until
    }

    /// A run with a key: relays set aside only because they needed sign-in are asked again
    /// at once. Returns how many.
    pub fn retry_sign_in(&mut self) -> usize {
        let before = self.relays.len();
        self.relays.retain(|_, e| !e.needs_sign_in);
        before - self.relays.len()
    }

    /// Brings deadlines beyond the longest set-aside from `now` back to it: a stored deadline
    /// far in the future (a hostile or damaged file, or one written while the clock ran years
    /// ahead) would set a relay aside forever. Returns how many were brought back.
    pub fn clamp(&mut self, now: u64, policy: &PenaltyPolicy) -> usize {
        let horizon = now.saturating_add(policy.duration.as_secs());
        let mut clamped = 0;
        for (url, e) in self.relays.iter_mut() {
            if e.until.is_some_and(|u| u > horizon) {
                tracing::warn!(relay = %url, until = ?e.until, horizon, "stored set-aside deadline too far ahead; shortened");
                e.until = Some(horizon);
                clamped += 1;
            }
        }
        clamped
    }

    /// Every relay in the box with its entry, by URL.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &PenaltyEntry)> {
        self.relays.iter().map(|(url, e)| (url.as_str(), e))
    }

    /// A success: the relay's strikes and escalation are forgotten (a deadline already set
    /// still holds).
    pub fn succeed(&mut self, url: &str) {
        if let Some(entry) = self.relays.get_mut(url) {
            if entry.misbehaved {
                return;
            }
            entry.strikes = 0;
            entry.times = 0;
            entry.rate_limited = false;
            if entry.until.is_none() {
                self.relays.remove(url);
            }
        }
    }

    /// Whether the relay is set aside at `now`.
    pub fn is_penalised(&self, url: &str, now: u64) -> bool {
        self.relays
            .get(url)
            .and_then(|e| e.until)
            .is_some_and(|until| until > now)
    }

    /// Every relay set aside at `now`.
    pub fn penalised(&self, now: u64) -> impl Iterator<Item = &str> {
        self.relays
            .iter()
            .filter(move |(_, e)| e.until.is_some_and(|u| u > now))
            .map(|(url, _)| url.as_str())
    }

    /// Drops a relay from the box; returns whether it was in it.
    pub fn forget(&mut self, url: &str) -> bool {
        self.relays.remove(url).is_some()
    }

    /// The entry of a relay, if it has failed recently.
    pub fn get(&self, url: &str) -> Option<&PenaltyEntry> {
        self.relays.get(url)
    }

    /// Lifts set-asides whose deadline passed. The escalation is remembered (the next
    /// set-aside in a row lasts longer) until the relay succeeds, or until it has been quiet for
    /// the longest set-aside after its deadline, when the entry is dropped.
    pub fn expire(&mut self, now: u64, policy: &PenaltyPolicy) {
        let forget = policy.duration.as_secs();
        self.relays.retain(|_, e| match e.until {
            Some(until) if until <= now => {
                if now.saturating_sub(until) >= forget || e.times == 0 {
                    return false;
                }
                e.until = None;
                e.strikes = 0;
                true
            }
            Some(_) => true,
            None => e.strikes > 0 || e.times > 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Three strikes; a minute at first, four times longer each time, an hour at most.
    fn policy() -> PenaltyPolicy {
        PenaltyPolicy {
            strikes: 3,
            initial: Duration::from_secs(60),
            growth: 4,
            duration: Duration::from_secs(3600),
        }
    }

    #[test]
    fn forget_drops_one_relay_only() {
        let mut b = PenaltyBox::new();
        b.penalise("wss://a.example", "x", 10, &policy());
        b.penalise("wss://b.example", "y", 10, &policy());
        assert!(b.forget("wss://a.example"));
        assert!(!b.forget("wss://a.example"));
        assert!(b.get("wss://a.example").is_none() && b.get("wss://b.example").is_some());
    }

    #[test]
    fn three_strikes_set_aside_briefly_then_longer_and_success_resets() {
        let policy = policy();
        let mut b = PenaltyBox::new();
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        b.succeed("wss://a.example");
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        assert!(!b.is_penalised("wss://a.example", 10));
        // A blip: one minute, not hours.
        assert_eq!(
            b.strike("wss://a.example", "timeout", 10, &policy),
            Some(70)
        );
        assert!(b.is_penalised("wss://a.example", 69));
        assert!(!b.is_penalised("wss://a.example", 70));
        assert_eq!(b.penalised(20).collect::<Vec<_>>(), ["wss://a.example"]);
        // Failing again right after: four minutes, then sixteen, then the cap.
        b.expire(70, &policy);
        for _ in 0..3 {
            b.strike("wss://a.example", "timeout", 100, &policy);
        }
        assert_eq!(b.get("wss://a.example").and_then(|e| e.until), Some(340));
        b.expire(340, &policy);
        for _ in 0..3 {
            b.strike("wss://a.example", "timeout", 400, &policy);
        }
        assert_eq!(b.get("wss://a.example").and_then(|e| e.until), Some(1360));
        // A success ends the escalation.
        b.expire(1360, &policy);
        b.succeed("wss://a.example");
        assert!(b.get("wss://a.example").is_none());
        for _ in 0..3 {
            b.strike("wss://a.example", "timeout", 2000, &policy);
        }
        assert_eq!(b.get("wss://a.example").and_then(|e| e.until), Some(2060));
        // Quiet for the longest set-aside after the deadline: forgotten.
        b.expire(2060 + 3600, &policy);
        assert!(b.get("wss://a.example").is_none());

        let until = b.penalise("wss://b.example", "auth-required: x", 5, &policy);
        assert_eq!(until, 3605);
        assert!(b.is_penalised("wss://b.example", 6));
    }

    #[test]
    fn misbehaviour_strikes_survive_successes() {
        let policy = policy();
        let mut b = PenaltyBox::new();
        let url = "wss://flood.example";
        for _ in 0..2 {
            assert_eq!(b.strike_misbehaving(url, "misbehaving", 10, &policy), None);
            b.succeed(url);
        }
        assert_eq!(
            b.strike_misbehaving(url, "misbehaving", 10, &policy),
            Some(70)
        );
    }

    #[test]
    fn a_deadline_far_ahead_is_brought_back_to_the_longest_set_aside() {
        let policy = policy();
        let b: PenaltyBox = serde_json::from_str(
            r#"{"relays":{"wss://a.example":{"until":18446744073709551615,"last_reason":"x"},
                          "wss://b.example":{"until":500,"last_reason":"y"}}}"#,
        )
        .unwrap();
        let mut b = b;
        assert_eq!(b.clamp(100, &policy), 1);
        assert_eq!(b.get("wss://a.example").and_then(|e| e.until), Some(3700));
        assert_eq!(b.get("wss://b.example").and_then(|e| e.until), Some(500));
        assert!(!b.is_penalised("wss://a.example", 3700));
    }

    #[test]
    fn needing_sign_in_is_no_failure_and_a_key_retries_at_once() {
        let policy = policy();
        let mut b = PenaltyBox::new();
        b.needs_sign_in("wss://private.example", "auth-required: x", 10, &policy);
        b.strike("wss://down.example", "timeout", 10, &policy);
        let e = b.get("wss://private.example").unwrap();
        assert!(e.needs_sign_in && e.times == 0 && e.strikes == 0);
        assert!(b.is_penalised("wss://private.example", 11));
        assert_eq!(b.retry_sign_in(), 1);
        assert!(!b.is_penalised("wss://private.example", 11));
        assert!(b.get("wss://down.example").is_some());
    }

    #[test]
    fn needing_payment_and_rate_limits_are_kept_as_such() {
        let policy = policy();
        let mut b = PenaltyBox::new();
        assert_eq!(
            b.needs_payment("wss://paid.example", "restricted: pay", 10, &policy),
            3610
        );
        let e = b.get("wss://paid.example").unwrap();
        assert!(e.needs_payment && e.times == 0 && e.strikes == 0);
        assert!(b.is_penalised("wss://paid.example", 11));
        let slow = "wss://slow.example";
        assert_eq!(
            b.strike_rate_limited(slow, "rate-limited: x", 10, &policy),
            None
        );
        assert!(b.get(slow).unwrap().rate_limited);
        b.succeed(slow);
        assert!(b.get(slow).is_none());
    }

    #[test]
    fn old_files_without_escalation_load() {
        let b: PenaltyBox = serde_json::from_str(
            r#"{"relays":{"wss://a.example":{"strikes":2,"until":null,"last_reason":"x"}}}"#,
        )
        .expect("loads");
        assert_eq!(b.get("wss://a.example").map(|e| e.times), Some(0));
    }
}

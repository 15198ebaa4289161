//! The penalty box: relays that keep failing or refusing are set aside for a while.
//!
//! A relay that is down, never sends EOSE, drops connections or answers CLOSED costs a socket
//! and a timeout on every plan. After [`PenaltyPolicy::strikes`] consecutive failures (or one
//! definitive refusal such as `auth-required:`) it is set aside until a deadline; plans built
//! while it is set aside leave it out, so its authors move to other relays or the residual.
//! A successful EOSE clears the strikes. The box is plain data and can be persisted beside the
//! stats so the next run remembers.

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
            let until = now.saturating_add(policy.duration.as_secs());
            entry.until = Some(until);
            Some(until)
        } else {
            None
        }
    }

    /// Sets a relay aside at once (a refusal that retrying cannot fix); returns the deadline.
    pub fn penalise(&mut self, url: &str, reason: &str, now: u64, policy: &PenaltyPolicy) -> u64 {
        let entry = self.relays.entry(url.to_string()).or_default();
        entry.strikes = entry.strikes.max(policy.strikes.max(1));
        entry.last_reason = reason.chars().take(200).collect();
        let until = now.saturating_add(policy.duration.as_secs());
        entry.until = Some(until);
        until
    }

    /// A success: the relay's strikes are forgotten (a deadline already set still holds).
    pub fn succeed(&mut self, url: &str) {
        if let Some(entry) = self.relays.get_mut(url) {
            entry.strikes = 0;
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

    /// The entry of a relay, if it has failed recently.
    pub fn get(&self, url: &str) -> Option<&PenaltyEntry> {
        self.relays.get(url)
    }

    /// Drops entries whose deadline passed and that have no strikes left to remember.
    pub fn expire(&mut self, now: u64) {
        self.relays.retain(|_, e| match e.until {
            Some(until) if until <= now => {
                e.until = None;
                e.strikes = 0;
                false
            }
            _ => true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn three_strikes_set_aside_until_the_deadline_and_success_resets() {
        let policy = PenaltyPolicy {
            strikes: 3,
            duration: Duration::from_secs(3600),
        };
        let mut b = PenaltyBox::new();
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        b.succeed("wss://a.example");
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        assert_eq!(b.strike("wss://a.example", "timeout", 10, &policy), None);
        assert!(!b.is_penalised("wss://a.example", 10));
        assert_eq!(
            b.strike("wss://a.example", "timeout", 10, &policy),
            Some(3610)
        );
        assert!(b.is_penalised("wss://a.example", 3609));
        assert!(!b.is_penalised("wss://a.example", 3610));
        assert_eq!(b.penalised(20).collect::<Vec<_>>(), ["wss://a.example"]);
        b.expire(4000);
        assert!(b.get("wss://a.example").is_none());

        let until = b.penalise("wss://b.example", "auth-required: x", 5, &policy);
        assert_eq!(until, 3605);
        assert!(b.is_penalised("wss://b.example", 6));
    }
}

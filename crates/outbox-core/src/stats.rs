//! Learned delivery statistics: a Beta(α, β) prior and a latency estimate per relay.
//!
//! What a client can observe after EOSE, and what [`DeliveryStats::record_delivery`] is fed:
//! for the authors a relay was asked about, `expected` is how many of them *some* asked relay
//! (this one or another asked about the same author in the same run) returned at least one event
//! for, and `delivered` is how many of those this relay returned events for. No oracle knowledge:
//! an author nobody returned anything for says nothing about any relay. A relay that could not be
//! reached or refused the REQ is recorded with [`DeliveryStats::record_failure`].
//!
//! Every value decays toward the uniform prior, `x ← 1 + (x − 1) · d^hours`, on read and on
//! write, so old evidence fades and a relay that changed gets a fresh look.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The default hourly decay factor toward the uniform prior.
pub const DEFAULT_HOURLY_DECAY: f64 = 0.95;

/// Largest α or β kept; beyond it a value is treated as corrupt.
pub const MAX_PARAM: f64 = 1.0e6;

/// Weight of the newest sample in the latency moving average.
const LATENCY_EWMA_WEIGHT: f64 = 0.3;

/// What is known about one relay's delivery.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayStats {
    /// Beta prior α (1 + weighted successes).
    pub alpha: f64,
    /// Beta prior β (1 + weighted failures).
    pub beta: f64,
    /// Exponentially weighted latency estimate, if the relay ever answered.
    pub latency_ms: Option<f64>,
    /// Unix seconds of the last update.
    pub updated_at: u64,
    /// Times the relay was asked.
    pub asked: u64,
    /// Times it could not be reached or refused.
    pub failures: u64,
}

impl Default for RelayStats {
    /// The uniform prior, Beta(1, 1): nothing known.
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 1.0,
            latency_ms: None,
            updated_at: 0,
            asked: 0,
            failures: 0,
        }
    }
}

impl RelayStats {
    /// The posterior mean α / (α + β).
    pub fn mean(&self) -> f64 {
        self.alpha / (self.alpha + self.beta)
    }

    /// Whether the values are usable (finite, α and β in `[1, MAX_PARAM]`, latency finite and
    /// non-negative).
    pub fn is_sane(&self) -> bool {
        let param_ok = |x: f64| x.is_finite() && (1.0..=MAX_PARAM).contains(&x);
        param_ok(self.alpha)
            && param_ok(self.beta)
            && self
                .latency_ms
                .is_none_or(|l| l.is_finite() && (0.0..=1.0e7).contains(&l))
    }

    /// These stats decayed from `updated_at` to `now` with hourly factor `decay`.
    pub fn decayed(&self, now: u64, decay: f64) -> Self {
        let hours = now.saturating_sub(self.updated_at) as f64 / 3600.0;
        if hours <= 0.0 || decay >= 1.0 {
            return *self;
        }
        let f = decay.clamp(0.0, 1.0).powf(hours);
        Self {
            alpha: 1.0 + (self.alpha - 1.0) * f,
            beta: 1.0 + (self.beta - 1.0) * f,
            updated_at: now,
            ..*self
        }
    }
}

/// Per-relay delivery statistics keyed by canonical relay URL.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct DeliveryStats {
    relays: HashMap<String, RelayStats>,
    /// Hourly decay factor toward the uniform prior (1.0 = never forget).
    pub hourly_decay: f64,
}

impl Default for DeliveryStats {
    fn default() -> Self {
        Self {
            relays: HashMap::new(),
            hourly_decay: DEFAULT_HOURLY_DECAY,
        }
    }
}

impl DeliveryStats {
    /// No history: every relay has the uniform prior.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stats for a relay decayed to `now`, or the uniform prior when nothing (or nothing
    /// sane) is known.
    pub fn get_at(&self, url: &str, now: u64) -> RelayStats {
        match self.relays.get(url) {
            Some(s) if s.is_sane() => s.decayed(now, self.hourly_decay),
            Some(_) => {
                tracing::warn!(url, "corrupt relay stats read as the uniform prior");
                RelayStats::default()
            }
            None => RelayStats::default(),
        }
    }

    /// The stored stats for a relay, undecayed, or the uniform prior.
    pub fn get(&self, url: &str) -> RelayStats {
        self.relays.get(url).copied().unwrap_or_default()
    }

    /// Replaces the stats of one relay; corrupt values are replaced by the uniform prior.
    pub fn set(&mut self, url: impl Into<String>, stats: RelayStats) {
        let url = url.into();
        let stats = if stats.is_sane() {
            stats
        } else {
            tracing::warn!(url, "corrupt relay stats replaced by the uniform prior");
            RelayStats {
                updated_at: stats.updated_at,
                ..RelayStats::default()
            }
        };
        self.relays.insert(url, stats);
    }

    /// Records what a relay returned after EOSE (see the module docs for what `delivered` and
    /// `expected` mean). One run counts as one trial, split by the delivered share, so a relay
    /// asked about many authors does not drown one asked about few.
    pub fn record_delivery(&mut self, url: &str, delivered: u32, expected: u32, now: u64) {
        let mut s = self.get_at(url, now);
        s.asked += 1;
        s.updated_at = now;
        if expected > 0 {
            let share = f64::from(delivered.min(expected)) / f64::from(expected);
            s.alpha = (s.alpha + share).min(MAX_PARAM);
            s.beta = (s.beta + (1.0 - share)).min(MAX_PARAM);
        }
        self.relays.insert(url.to_string(), s);
    }

    /// Records that a relay could not be reached, timed out or refused the REQ.
    pub fn record_failure(&mut self, url: &str, now: u64) {
        let mut s = self.get_at(url, now);
        s.asked += 1;
        s.failures += 1;
        s.updated_at = now;
        s.beta = (s.beta + 1.0).min(MAX_PARAM);
        self.relays.insert(url.to_string(), s);
    }

    /// Folds a measured latency into the relay's moving average.
    pub fn record_latency(&mut self, url: &str, latency_ms: f64, now: u64) {
        if !latency_ms.is_finite() || latency_ms < 0.0 {
            tracing::debug!(url, latency_ms, "ignoring absurd latency sample");
            return;
        }
        let mut s = self.get_at(url, now);
        s.latency_ms = Some(match s.latency_ms {
            Some(old) => old + LATENCY_EWMA_WEIGHT * (latency_ms - old),
            None => latency_ms,
        });
        s.updated_at = now;
        self.relays.insert(url.to_string(), s);
    }

    /// Number of relays with recorded stats.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }

    /// Every relay with recorded stats (stored values, undecayed).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RelayStats)> {
        self.relays.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_moves_the_mean_and_decay_pulls_it_back() {
        let mut s = DeliveryStats::new();
        for t in 0..5 {
            s.record_delivery("wss://good.example", 10, 10, t);
            s.record_delivery("wss://bad.example", 0, 10, t);
        }
        let good = s.get_at("wss://good.example", 5);
        let bad = s.get_at("wss://bad.example", 5);
        assert!(good.mean() > 0.8 && bad.mean() < 0.2, "{good:?} {bad:?}");
        let later = s.get_at("wss://good.example", 5 + 48 * 3600);
        assert!((later.mean() - 0.5).abs() < good.mean() - 0.5);
        assert!(later.alpha > 1.0);
    }

    #[test]
    fn corrupt_values_read_as_uniform() {
        let mut s = DeliveryStats::new();
        let bad = RelayStats {
            alpha: f64::NAN,
            ..RelayStats::default()
        };
        s.relays.insert("wss://x.example".into(), bad);
        assert_eq!(s.get_at("wss://x.example", 0), RelayStats::default());
        s.set(
            "wss://y.example",
            RelayStats {
                beta: -3.0,
                ..RelayStats::default()
            },
        );
        assert!(s.get("wss://y.example").is_sane());
    }
}

//! Learned delivery statistics, as seen by scorers.
//!
//! This module holds only the read side that planning needs: a Beta(α, β) prior and a latency
//! estimate per relay URL. How the numbers are learned, decayed and stored lives with the
//! learning code.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

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
}

impl Default for RelayStats {
    /// The uniform prior, Beta(1, 1): nothing known.
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 1.0,
            latency_ms: None,
            updated_at: 0,
        }
    }
}

/// Per-relay delivery statistics keyed by canonical relay URL.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeliveryStats {
    relays: HashMap<String, RelayStats>,
}

impl DeliveryStats {
    /// No history: every relay has the uniform prior.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stats for a relay, or the uniform prior when nothing is known.
    pub fn get(&self, url: &str) -> RelayStats {
        self.relays.get(url).copied().unwrap_or_default()
    }

    /// Replaces the stats of one relay.
    pub fn set(&mut self, url: impl Into<String>, stats: RelayStats) {
        self.relays.insert(url.into(), stats);
    }

    /// Number of relays with recorded stats.
    pub fn len(&self) -> usize {
        self.relays.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.relays.is_empty()
    }

    /// Every relay with recorded stats.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &RelayStats)> {
        self.relays.iter().map(|(k, v)| (k.as_str(), v))
    }
}

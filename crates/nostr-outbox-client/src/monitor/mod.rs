//! NIP-66 relay-monitor reports as a liveness prior for relays the reader never tried.
//!
//! On a cold start a client knows nothing about the relays of its follows' lists, and on the
//! real network only 35–60% of them are alive; every dead one asked costs a connect timeout.
//! NIP-66 monitors check relays continuously and publish one kind:30166 event per relay they
//! found online, its `created_at` the last time they saw it so. A [`MonitorReport`] is what this
//! crate keeps of one such event ([`event`] parses them), and [`apply_monitor_prior`] turns
//! reports into a prior on the liveness of relays the reader has no evidence about.
//!
//! # The rule
//!
//! For a relay the reader never asked (`asked == 0` in its [`RelayStats`]), with `age` the
//! seconds between the newest report's `last_seen` and `now`:
//!
//! ```text
//! lean = MONITOR_PRIOR_WEIGHT · (2 · ½^(age / MONITOR_NEUTRAL_AGE_SECS) − 1)   ∈ (−W, W]
//! ```
//!
//! A positive lean adds that many pseudo-answers (liveness α and delivery α), a negative one
//! that many pseudo-failures (liveness β and delivery β, as a failed round counts in both): seen
//! online just now leans alive with the full weight, seen a day ago is neutral, not seen for
//! days leans dead. The prior *replaces* any earlier prior of the relay (applying reports every
//! start never piles up), and it is a stand-in only: the reader's own first round of a relay
//! starts that relay from the uniform prior again (see `DeliveryStats::record_round`), and a
//! relay with any own observations is left alone. Relays missing from the reports stay at the
//! uninformed prior. The prior decays like any evidence.

use nostr::key::PublicKey;
use serde::{Deserialize, Serialize};

use nostr_outbox_core::stats::{DeliveryStats, RelayStats};
use nostr_outbox_core::url_policy::UrlPolicy;

pub mod event;

pub use event::{MonitorAnnouncement, NotAMonitorEvent};

/// Pseudo-observations of a report seen online just now (or of one not seen for very long):
/// eight. The prior never competes with the reader's own evidence (a relay's first own round
/// replaces it), so its weight only says how far a report outranks popularity and coverage on a
/// cold start. A Beta(9, 1) or Beta(1, 9) moves a relay's score by a factor of about nine either
/// way, enough for coverage-ranked strategies to leave a popular relay that is reported dead;
/// on generated worlds weights of 4 to 16 gave about the same first-session gains, 2 about
/// two thirds of them.
pub const MONITOR_PRIOR_WEIGHT: f64 = 8.0;

/// Report age at which the lean is zero. Monitors publish about hourly (NIP-66 `frequency`,
/// typically 3,600 s), so a relay not reported online for a day has missed some twenty checks.
pub const MONITOR_NEUTRAL_AGE_SECS: u64 = 86_400;

/// Most reports [`apply_monitor_prior`] reads; the rest are ignored with a warning.
pub const MAX_MONITOR_REPORTS: usize = 50_000;

/// What one monitor said about one relay (one kind:30166 event).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorReport {
    /// The relay, as the `d` tag spelt it (canonicalised when applied).
    pub url: String,
    /// Unix seconds when the monitor last saw the relay online (the event's `created_at`).
    pub last_seen: u64,
    /// Connect round-trip time the monitor measured (`rtt-open`), milliseconds.
    pub rtt_open_ms: Option<u32>,
    /// Read round-trip time the monitor measured (`rtt-read`), milliseconds.
    pub rtt_read_ms: Option<u32>,
    /// Network (`n`: `clearnet`, `tor`, `i2p`, `loki`), as written (bounded).
    pub network: Option<String>,
    /// `R auth` / `R !auth`: whether the relay requires NIP-42 authentication.
    pub requires_auth: Option<bool>,
    /// `R payment` / `R !payment`: whether the relay requires payment.
    pub requires_payment: Option<bool>,
    /// The monitor that published the report.
    pub monitor: Option<PublicKey>,
}

impl MonitorReport {
    /// A report with only the relay and when it was last seen online.
    pub fn seen(url: impl Into<String>, last_seen: u64) -> Self {
        Self {
            url: url.into(),
            last_seen,
            rtt_open_ms: None,
            rtt_read_ms: None,
            network: None,
            requires_auth: None,
            requires_payment: None,
            monitor: None,
        }
    }
}

/// The rule's lean for a report `age` seconds old: positive leans alive, negative dead, in
/// pseudo-observations (see the module docs).
pub fn monitor_lean(age: u64) -> f64 {
    let half_lives = age as f64 / MONITOR_NEUTRAL_AGE_SECS as f64;
    MONITOR_PRIOR_WEIGHT * (2.0 * 0.5f64.powf(half_lives) - 1.0)
}

/// What [`apply_monitor_prior`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PriorSummary {
    /// Relays given a prior leaning alive.
    pub alive: usize,
    /// Relays given a prior leaning dead.
    pub dead: usize,
    /// Relays left alone because the reader has its own evidence about them.
    pub own_evidence: usize,
    /// Reports whose URL the policy refused.
    pub refused: usize,
}

/// Seeds the liveness of every relay the reports name and the reader never asked, by the rule
/// of the module docs, as of `now`; reports beyond [`MAX_MONITOR_REPORTS`] are ignored. When
/// several reports name one relay the newest counts.
pub fn apply_monitor_prior(
    stats: &mut DeliveryStats,
    reports: &[MonitorReport],
    policy: &UrlPolicy,
    now: u64,
) -> PriorSummary {
    let mut summary = PriorSummary::default();
    if reports.len() > MAX_MONITOR_REPORTS {
        tracing::warn!(
            reports = reports.len(),
            kept = MAX_MONITOR_REPORTS,
            "too many monitor reports; the rest are ignored"
        );
    }
    let mut newest: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for r in reports.iter().take(MAX_MONITOR_REPORTS) {
        match policy.canonicalize(&r.url) {
            Ok(url) => {
                let seen = newest.entry(url).or_insert(r.last_seen);
                *seen = (*seen).max(r.last_seen);
            }
            Err(_) => summary.refused += 1,
        }
    }
    let session = stats.session();
    let mut urls: Vec<(String, u64)> = newest.into_iter().collect();
    urls.sort_unstable();
    for (url, last_seen) in urls {
        let known = stats.get(&url);
        if known.asked > 0 {
            summary.own_evidence += 1;
            continue;
        }
        let lean = monitor_lean(now.saturating_sub(last_seen));
        let (yes, no) = if lean > 0.0 {
            summary.alive += 1;
            (1.0 + lean, 1.0)
        } else {
            summary.dead += 1;
            (1.0, 1.0 - lean)
        };
        stats.set(
            url,
            RelayStats {
                alpha: yes,
                beta: no,
                live_alpha: yes,
                live_beta: no,
                kept_alpha: 1.0,
                kept_beta: 1.0,
                updated_at: now,
                session,
                ..known
            },
        );
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_767_225_600;
    const HOUR: u64 = 3_600;

    #[test]
    fn the_lean_falls_with_age_through_zero_at_the_neutral_age() {
        assert!((monitor_lean(0) - MONITOR_PRIOR_WEIGHT).abs() < 1e-12);
        assert!(monitor_lean(HOUR) > 0.9 * MONITOR_PRIOR_WEIGHT);
        assert!(monitor_lean(MONITOR_NEUTRAL_AGE_SECS).abs() < 1e-12);
        assert!(monitor_lean(7 * 24 * HOUR) < -0.95 * MONITOR_PRIOR_WEIGHT);
        assert!(monitor_lean(u64::MAX) >= -MONITOR_PRIOR_WEIGHT);
        let mut last = f64::INFINITY;
        for h in 0..200 {
            let l = monitor_lean(h * HOUR);
            assert!(l < last, "{h}h");
            last = l;
        }
    }

    #[test]
    fn fresh_reports_lean_alive_stale_ones_dead_and_missing_relays_stay_uninformed() {
        let mut stats = DeliveryStats::new();
        let reports = [
            MonitorReport::seen("wss://fresh.example/", NOW - HOUR),
            MonitorReport::seen("wss://stale.example", NOW - 30 * 24 * HOUR),
            MonitorReport::seen("http://not-a-relay.example", NOW),
        ];
        let summary = apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        assert_eq!(
            summary,
            PriorSummary {
                alive: 1,
                dead: 1,
                own_evidence: 0,
                refused: 1
            }
        );
        let fresh = stats.get_at("wss://fresh.example", NOW);
        let stale = stats.get_at("wss://stale.example", NOW);
        assert!(fresh.live_mean() > 0.7 && fresh.mean() > 0.7, "{fresh:?}");
        assert!(stale.live_mean() < 0.3 && stale.mean() < 0.3, "{stale:?}");
        assert_eq!(fresh.asked, 0);
        assert!(stats.get_at("wss://missing.example", NOW).is_uniform());
        // A stand-in of bounded strength: at most the weight in pseudo-observations.
        assert!(fresh.live_alpha + fresh.live_beta <= 2.0 + MONITOR_PRIOR_WEIGHT + 1e-9);
    }

    #[test]
    fn the_newest_report_of_a_relay_counts_and_a_new_prior_replaces_the_old() {
        let mut stats = DeliveryStats::new();
        let reports = [
            MonitorReport::seen("wss://a.example", NOW - 40 * 24 * HOUR),
            MonitorReport::seen("wss://a.example", NOW),
        ];
        apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        let a = stats.get("wss://a.example");
        assert!(
            (a.live_alpha - 1.0 - MONITOR_PRIOR_WEIGHT).abs() < 1e-9,
            "{a:?}"
        );
        assert_eq!(a.live_beta, 1.0);
    }

    #[test]
    fn own_evidence_wins_over_any_report() {
        use nostr_outbox_core::stats::{RelayRound, RoundReport};
        let mut stats = DeliveryStats::new();
        let round = |answered: bool| RoundReport {
            relays: ["wss://failed.example", "wss://answered.example"]
                .iter()
                .map(|url| {
                    RelayRound::new(
                        (*url).to_string(),
                        answered == (*url == "wss://answered.example"),
                        Vec::new(),
                    )
                })
                .collect(),
        };
        for _ in 0..5 {
            stats.record_round(&round(true), NOW - HOUR);
        }
        let before = stats.clone();
        let reports = [
            // The monitor says the failing relay is online and the answering one long gone.
            MonitorReport::seen("wss://failed.example", NOW),
            MonitorReport::seen("wss://answered.example", NOW - 60 * 24 * HOUR),
        ];
        let summary = apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        assert_eq!(summary.own_evidence, 2);
        assert_eq!(stats, before);
        assert!(stats.get_at("wss://failed.example", NOW).live_mean() < 0.3);
        assert!(stats.get_at("wss://answered.example", NOW).live_mean() > 0.7);
    }

    #[test]
    fn the_first_own_round_replaces_the_prior() {
        use nostr_outbox_core::stats::{RelayRound, RoundReport};
        let mut stats = DeliveryStats::new();
        apply_monitor_prior(
            &mut stats,
            &[MonitorReport::seen("wss://a.example", NOW)],
            &UrlPolicy::default(),
            NOW,
        );
        let report = RoundReport {
            relays: vec![RelayRound::new("wss://a.example", false, Vec::new())],
        };
        stats.record_round(&report, NOW);
        let a = stats.get("wss://a.example");
        assert_eq!((a.live_alpha, a.live_beta), (1.0, 2.0), "{a:?}");
        assert_eq!((a.alpha, a.beta), (1.0, 2.0), "{a:?}");
    }

    #[test]
    fn too_many_reports_are_cut_at_the_bound() {
        let mut stats = DeliveryStats::new();
        let reports: Vec<MonitorReport> = (0..MAX_MONITOR_REPORTS + 10)
            .map(|i| MonitorReport::seen(format!("wss://r{i}.example"), NOW))
            .collect();
        let summary = apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        assert_eq!(summary.alive, MAX_MONITOR_REPORTS);
        assert_eq!(stats.len(), MAX_MONITOR_REPORTS);
    }
}

//! One planning run's outcome, as a client observes it, and how it is learned from.
//!
//! The live runtime, the simulator and any client with its own relay pool build a
//! [`RoundReport`] with a [`RoundRecorder`](super::RoundRecorder) and call
//! [`DeliveryStats::record_round`]: one code path for everything learned from delivery.

use std::collections::{HashMap, HashSet};

use nostr::key::PublicKey;

use super::{DeliveryStats, PairStats, MAX_PARAM};

/// How fast an author's remembered volume fades when a later run sees fewer notes (per run).
const VOLUME_FADE: f64 = 0.8;

/// What every relay asked in one run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundReport {
    /// One entry per asked relay.
    pub relays: Vec<RelayRound>,
}

/// What one asked relay did in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayRound {
    /// Canonical relay URL.
    pub url: String,
    /// Whether it answered (EOSE). `false`: unreachable, timed out or refused.
    pub answered: bool,
    /// Every author the relay was asked about, with what it returned for each (zero events
    /// when it returned nothing for that author).
    pub authors: Vec<AuthorRound>,
    /// Only a yardstick: the relay's counts inform `best(a)` but nothing is recorded for it
    /// (no liveness, delivery, completeness or pair update). For a relay already learned from
    /// in an earlier round whose current answer is still valid: a later round that asks only
    /// a few relays (a live feed after a re-plan) is then still compared with it, instead of
    /// a relay alone in its round looking complete because it is compared with nobody.
    pub compare_only: bool,
}

/// What one relay returned for one author in a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AuthorRound {
    /// The author.
    pub author: PublicKey,
    /// Distinct events returned for the author.
    pub events: u32,
}

impl DeliveryStats {
    /// Learns from one run. For every asked relay:
    ///
    /// - not answered: a full failed delivery trial per author defined in the
    ///   [module docs](super) (at least one), and one failed liveness trial;
    /// - answered: one liveness success; a delivery trial per such author, split by the share
    ///   of its notes the relay returned; and one *completeness* trial split by the
    ///   event-weighted share `Σ events(relay, a) / Σ best(a)` over its authors `a` with
    ///   `best(a) > 0`, where `best(a)` is the most events any answering relay returned for `a`
    ///   in this run, counting [`compare_only`](RelayRound::compare_only) relays. Per
    ///   (relay, author) the same share is added to that pair's hits.
    ///
    /// Compare-only relays are not recorded at all. Per author asked of an answering relay that
    /// is recorded, the remembered volume becomes `max(best(a), fade · previous)`; authors only
    /// compare-only relays were asked about keep their volume (that answer was learned already).
    /// Nothing here knows where events are stored; it only compares relays asked about the same
    /// authors.
    pub fn record_round(&mut self, report: &RoundReport, now: u64) {
        let mut best: HashMap<PublicKey, u32> = HashMap::new();
        for relay in report.relays.iter().filter(|r| r.answered) {
            for a in &relay.authors {
                let b = best.entry(a.author).or_default();
                *b = (*b).max(a.events);
            }
        }
        let seen: HashSet<PublicKey> = report
            .relays
            .iter()
            .filter(|r| r.answered && !r.compare_only)
            .flat_map(|r| r.authors.iter().map(|a| a.author))
            .collect();
        for relay in report.relays.iter().filter(|r| !r.compare_only) {
            if !relay.answered {
                let trials = relay
                    .authors
                    .iter()
                    .filter(|a| best.get(&a.author).is_some_and(|b| *b > 0))
                    .count();
                self.record_failure(&relay.url, u32::try_from(trials).unwrap_or(u32::MAX), now);
                let mut s = self.entry_at(&relay.url, now);
                s.live_beta = (s.live_beta + 1.0).min(MAX_PARAM);
                self.relays.insert(relay.url.clone(), s);
                continue;
            }
            let mut expected = 0u32;
            // Summed in key order, so the same round learns the same bits whatever order its
            // authors were reported in.
            let mut shares: Vec<(PublicKey, f64)> = Vec::with_capacity(relay.authors.len());
            let mut got = 0u64;
            let mut wanted = 0u64;
            for a in &relay.authors {
                let b = best.get(&a.author).copied().unwrap_or(0);
                if b == 0 {
                    continue;
                }
                expected += 1;
                got += u64::from(a.events.min(b));
                wanted += u64::from(b);
                let share = f64::from(a.events.min(b)) / f64::from(b);
                shares.push((a.author, share));
                let author = self.authors.entry(a.author).or_default();
                let pair = author.relays.entry(relay.url.clone()).or_default();
                pair.hits = (pair.hits + share).min(MAX_PARAM);
                pair.misses = (pair.misses + 1.0 - share).min(MAX_PARAM);
            }
            shares.sort_unstable_by_key(|x| x.0);
            let hits: f64 = shares.iter().map(|(_, share)| share).sum();
            self.record_delivery(&relay.url, hits, expected, now);
            let mut s = self.entry_at(&relay.url, now);
            s.live_alpha = (s.live_alpha + 1.0).min(MAX_PARAM);
            if wanted > 0 {
                let share = got as f64 / wanted as f64;
                s.kept_alpha = (s.kept_alpha + share).min(MAX_PARAM);
                s.kept_beta = (s.kept_beta + 1.0 - share).min(MAX_PARAM);
            }
            self.relays.insert(relay.url.clone(), s);
        }
        for (author, b) in best {
            if !seen.contains(&author) {
                continue;
            }
            let entry = self.authors.entry(author).or_default();
            entry.volume = f64::from(b).max(entry.volume * VOLUME_FADE).min(MAX_PARAM);
            entry.updated_at = now;
        }
    }

    /// What was learned about `author` on `relay` (uniform when nothing is known).
    pub fn pair(&self, author: &PublicKey, relay: &str) -> PairStats {
        self.authors
            .get(author)
            .and_then(|a| a.relays.get(relay))
            .copied()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::key::{Keys, SecretKey};

    fn key(n: u8) -> PublicKey {
        let mut sk = [3u8; 32];
        sk[31] = n;
        Keys::new(SecretKey::from_slice(&sk).unwrap()).public_key()
    }

    fn relay(url: &str, answered: bool, authors: &[(u8, u32)]) -> RelayRound {
        RelayRound {
            url: url.into(),
            answered,
            authors: authors
                .iter()
                .map(|&(k, events)| AuthorRound {
                    author: key(k),
                    events,
                })
                .collect(),
            compare_only: false,
        }
    }

    fn compare_only(url: &str, authors: &[(u8, u32)]) -> RelayRound {
        RelayRound {
            compare_only: true,
            ..relay(url, true, authors)
        }
    }

    #[test]
    fn pruning_relays_lose_completeness_and_dead_ones_liveness() {
        let mut stats = DeliveryStats::new();
        for t in 0..4 {
            let report = RoundReport {
                relays: vec![
                    relay("wss://deep.example", true, &[(1, 40), (2, 10)]),
                    relay("wss://prunes.example", true, &[(1, 4), (2, 1), (3, 0)]),
                    relay("wss://dead.example", false, &[(3, 0)]),
                ],
            };
            stats.record_round(&report, t);
        }
        let deep = stats.get_at("wss://deep.example", 4);
        let prunes = stats.get_at("wss://prunes.example", 4);
        let dead = stats.get_at("wss://dead.example", 4);
        assert!(deep.kept_mean() > 0.8, "{deep:?}");
        assert!(prunes.kept_mean() < 0.3, "{prunes:?}");
        // Both answered every run and returned something for every author anyone had notes of;
        // delivery counts the share of each author's notes, so the pruning relay earns a tenth.
        assert!(
            prunes.mean() < 0.3 && deep.mean() > 0.8,
            "{prunes:?} {deep:?}"
        );
        assert!(dead.live_mean() < 0.2 && deep.live_mean() > 0.8);
        // Author 3: nobody returned anything, so nothing was learned about the pair.
        assert_eq!(
            stats.pair(&key(3), "wss://prunes.example"),
            PairStats::default()
        );
        assert!(stats.pair(&key(1), "wss://prunes.example").mean() < 0.3);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 40.0);
    }

    #[test]
    fn volume_fades_slowly_when_later_runs_see_less() {
        let mut stats = DeliveryStats::new();
        let run = |events| RoundReport {
            relays: vec![relay("wss://a.example", true, &[(1, events)])],
        };
        stats.record_round(&run(50), 0);
        stats.record_round(&run(5), 1);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 40.0);
    }

    #[test]
    fn a_relay_alone_in_a_round_is_compared_with_compare_only_relays() {
        let mut stats = DeliveryStats::new();
        let deep = relay("wss://deep.example", true, &[(1, 40), (2, 10)]);
        stats.record_round(
            &RoundReport {
                relays: vec![deep.clone()],
            },
            0,
        );
        let deep_before = stats.get("wss://deep.example");
        let pair_before = stats.pair(&key(1), "wss://deep.example");
        let alone = |stats: &mut DeliveryStats, with_deep: bool, t| {
            let mut relays = vec![relay("wss://shallow.example", true, &[(1, 4), (2, 1)])];
            if with_deep {
                relays.push(compare_only("wss://deep.example", &[(1, 40), (2, 10)]));
            }
            stats.record_round(&RoundReport { relays }, t);
        };
        for t in 1..4 {
            alone(&mut stats, true, t);
        }
        let shallow = stats.get_at("wss://shallow.example", 4);
        assert!(shallow.kept_mean() < 0.3, "{shallow:?}");
        assert!(stats.pair(&key(1), "wss://shallow.example").mean() < 0.3);
        // Nothing was recorded for the compare-only relay, and the volume it already taught
        // did not fade because the shallow relay saw less.
        assert_eq!(stats.get("wss://deep.example"), deep_before);
        assert_eq!(stats.pair(&key(1), "wss://deep.example"), pair_before);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 40.0);

        // Without the yardstick the same relay alone looks complete.
        let mut fresh = DeliveryStats::new();
        for t in 1..4 {
            alone(&mut fresh, false, t);
        }
        assert!(fresh.get_at("wss://shallow.example", 4).kept_mean() > 0.7);
    }

    #[test]
    fn each_author_is_a_delivery_trial_and_a_failure_counts_for_every_author_asked() {
        let mut stats = DeliveryStats::new();
        let report = RoundReport {
            relays: vec![
                // Half of author 1's notes, all of author 2's, none of author 3's.
                relay("wss://half.example", true, &[(1, 5), (2, 4), (3, 0)]),
                relay("wss://full.example", true, &[(1, 10), (3, 6)]),
                // Asked about three authors others had notes of, and one nobody had.
                relay(
                    "wss://down.example",
                    false,
                    &[(1, 0), (2, 0), (3, 0), (4, 0)],
                ),
            ],
        };
        stats.record_round(&report, 0);
        let half = stats.get_at("wss://half.example", 0);
        assert!((half.alpha - (1.0 + 0.5 + 1.0)).abs() < 1e-9, "{half:?}");
        assert!((half.beta - (1.0 + 0.5 + 1.0)).abs() < 1e-9, "{half:?}");
        let full = stats.get_at("wss://full.example", 0);
        assert_eq!((full.alpha, full.beta), (3.0, 1.0));
        let down = stats.get_at("wss://down.example", 0);
        assert_eq!((down.alpha, down.beta), (1.0, 4.0));
    }
}

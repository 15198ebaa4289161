//! One planning run's outcome, as a client observes it, and how it is learned from.
//!
//! The live runtime, the simulator and any client with its own relay pool build a
//! [`RoundReport`] with a `RoundRecorder` (`nostr-outbox-client`) and call
//! [`DeliveryStats::record_round`]: one code path for everything learned from delivery.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use nostr::key::PublicKey;

use super::{
    share_younger, DeliveryStats, PairStats, CENSOR_MARGIN_SECS, MAX_DEPTH_SECS, MAX_PARAM,
    MIN_RATE_SPAN_SECS,
};

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
    /// `created_at` of the oldest event returned (0: none, or not noted).
    pub oldest: u64,
    /// `created_at` of the newest event returned (0: none, or not noted).
    pub newest: u64,
    /// The answer was a sample, not the whole window: a probe's page that reached its limit
    /// ([`crate::probe`]). It shows the relay alive and the author's rate there, but neither
    /// what share of the author's notes the relay holds nor how far back its history reaches.
    pub capped: bool,
    /// Notes of the author that other relays of the round returned and this one did not (0:
    /// none, or not known). Two relays may each return 70 of 77 notes, each missing others:
    /// counts alone would show both complete.
    pub missed: u32,
}

impl AuthorRound {
    /// `events` returned for `author`, their ages not noted.
    pub fn counted(author: PublicKey, events: u32) -> Self {
        Self {
            author,
            events,
            oldest: 0,
            newest: 0,
            capped: false,
            missed: 0,
        }
    }

    /// The `created_at` range of what was returned, if noted.
    fn ages(&self) -> Option<(u64, u64)> {
        (self.events > 0 && self.newest > 0 && self.oldest <= self.newest)
            .then_some((self.oldest, self.newest))
    }
}

/// What the answering relays of one round returned for one author together.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The most events any answering relay returned.
    best: u32,
    /// The most notes the round's relays returned together, as far as they say
    /// ([`AuthorRound::missed`]); at least `best`.
    union: u32,
    /// The `created_at` range of everything returned, when noted.
    ages: Option<(u64, u64)>,
    /// The most notes a capped page implies over the author's known history: its rate times
    /// that span ([`capped_volume`]). A page of the newest 20 is not the author's volume.
    implied: f64,
}

/// The shortest span a capped page's rate is read over: twenty notes in an hour are a burst,
/// not a rate.
const MIN_PAGE_SPAN_SECS: f64 = 86_400.0;

/// What a capped page of `events` notes back to `page_oldest` implies the author posted since
/// `known_oldest` (the oldest of its notes any relay ever returned), and over
/// [`MIN_RATE_SPAN_SECS`] at least, as a rate is read when planning, so that twenty notes of
/// the last day read as a day's rate, not a week's: the page's rate over that span, never
/// less than the page.
fn capped_volume(events: u32, page_oldest: u64, known_oldest: u64, now: u64) -> f64 {
    let page = (now.saturating_sub(page_oldest) as f64).max(MIN_PAGE_SPAN_SECS);
    let known = (now.saturating_sub(known_oldest.min(page_oldest)) as f64).max(MIN_RATE_SPAN_SECS);
    (f64::from(events) * known / page).max(f64::from(events))
}

impl Seen {
    /// How many of the author's notes a relay whose history reaches back `depth` seconds (at
    /// `now`) should hold: `best` spread evenly over the ages seen. Without ages or depth, all.
    fn reachable(&self, depth: Option<f64>, now: u64) -> f64 {
        self.reachable_of(self.best, depth, now)
    }

    /// [`reachable`](Self::reachable) out of `count` notes.
    fn reachable_of(&self, count: u32, depth: Option<f64>, now: u64) -> f64 {
        let best = f64::from(count);
        let (Some((oldest, newest)), Some(depth)) = (self.ages, depth) else {
            return best;
        };
        let young = now.saturating_sub(newest) as f64;
        let old = now.saturating_sub(oldest) as f64;
        let share = share_younger(depth, young, old);
        best * share
    }
}

impl RelayRound {
    /// A relay of a round that is learned from (not [`compare_only`](Self::compare_only)):
    /// whether it `answered`, and what it returned for each author it was asked about.
    pub fn new(url: impl Into<String>, answered: bool, authors: Vec<AuthorRound>) -> Self {
        Self {
            url: url.into(),
            answered,
            authors,
            compare_only: false,
        }
    }

    /// Whether some page of the answer was a capped sample ([`AuthorRound::capped`]).
    fn sampled(&self) -> bool {
        self.authors.iter().any(|a| a.capped && a.events > 0)
    }
}

/// Whether a sampled answer shows where `relay`'s history ends at `oldest` (its oldest note
/// outside the capped pages): another relay of the round returned an older note of a follow
/// whose newer notes it returned. Otherwise the answer's oldest note is only where the few
/// follows it had whole pages of begin there; a capped follow's older notes may reach past it,
/// so a probe would teach a relay that keeps a year a depth of weeks.
fn history_ends(
    relay: &RelayRound,
    seen: &HashMap<PublicKey, Seen>,
    oldest: u64,
    now: u64,
) -> bool {
    let age = now.saturating_sub(oldest) as f64;
    let margin = CENSOR_MARGIN_SECS.max(0.1 * age);
    relay.authors.iter().filter(|a| !a.capped).any(|a| {
        let elsewhere = seen.get(&a.author).and_then(|s| s.ages);
        a.ages().is_some()
            && elsewhere.is_some_and(|(o, _)| now.saturating_sub(o) as f64 > age + margin)
    })
}

/// Below this many notes expected within a relay's history, a pair says nothing of its writes.
const MIN_REACHABLE: f64 = 1.0;

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
    ///   (relay, author) the share of what the round's relays returned together
    ///   ([`AuthorRound::missed`]) is added to that pair's hits.
    ///
    /// Compare-only relays are not recorded at all. Per author asked of an answering relay that
    /// is recorded, the remembered volume becomes `max(best(a), fade · previous)`; authors only
    /// compare-only relays were asked about keep their volume (that answer was learned already).
    /// Nothing here knows where events are stored; it only compares relays asked about the same
    /// authors.
    pub fn record_round(&mut self, report: &RoundReport, now: u64) {
        self.note_day(now);
        let mut seen: HashMap<PublicKey, Seen> = HashMap::new();
        for relay in report.relays.iter().filter(|r| r.answered) {
            for a in &relay.authors {
                let s = seen.entry(a.author).or_default();
                s.best = s.best.max(a.events);
                s.union = s.union.max(a.events.saturating_add(a.missed)).max(s.best);
                if let Some((o, n)) = a.ages() {
                    s.ages = Some(s.ages.map_or((o, n), |(so, sn)| (so.min(o), sn.max(n))));
                }
            }
        }
        // A capped page's rate, read over the author's whole known history.
        for relay in report.relays.iter().filter(|r| r.answered) {
            for a in relay.authors.iter().filter(|a| a.capped) {
                let Some((page_oldest, _)) = a.ages() else {
                    continue;
                };
                let Some(s) = seen.get_mut(&a.author) else {
                    continue;
                };
                let known = self.authors.get(&a.author).map_or(0, |x| x.first);
                let round = s.ages.map_or(page_oldest, |(o, _)| o);
                let oldest = if known == 0 { round } else { known.min(round) };
                s.implied = s
                    .implied
                    .max(capped_volume(a.events, page_oldest, oldest, now));
            }
        }
        let learned: HashSet<PublicKey> = report
            .relays
            .iter()
            .filter(|r| r.answered && !r.compare_only)
            .flat_map(|r| r.authors.iter().map(|a| a.author))
            .collect();
        // Per author, the deepest history among the answering relays asked about it.
        let mut probed: HashMap<PublicKey, f64> = HashMap::new();
        // Per author, the deepest history among the answering relays asked for its whole
        // window, whether or not they returned any of its notes.
        let mut reached: HashMap<PublicKey, f64> = HashMap::new();
        for relay in report.relays.iter().filter(|r| !r.compare_only) {
            if !relay.answered {
                let trials = relay
                    .authors
                    .iter()
                    .filter(|a| seen.get(&a.author).is_some_and(|s| s.best > 0))
                    .count();
                self.record_failure(&relay.url, u32::try_from(trials).unwrap_or(u32::MAX), now);
                let mut s = self.entry_at(&relay.url, now);
                s.live_beta = (s.live_beta + 1.0).min(MAX_PARAM);
                self.relays.insert(relay.url.clone(), s);
                continue;
            }
            // How far back this relay's history reaches: the oldest note it ever returned. A
            // capped sample's oldest note is where the page ended, not where the history does.
            let oldest = relay
                .authors
                .iter()
                .filter(|a| !a.capped)
                .filter_map(|a| a.ages())
                .map(|(o, _)| o)
                .min()
                .filter(|&oldest| !relay.sampled() || history_ends(relay, &seen, oldest, now));
            let mut depth_secs = self.get_at(&relay.url, now).depth_secs;
            if let Some(oldest) = oldest {
                depth_secs = depth_secs
                    .max(now.saturating_sub(oldest) as f64)
                    .min(MAX_DEPTH_SECS);
            }
            let depth = (depth_secs > 0.0).then_some(depth_secs);
            // Only a relay that returned some of the author's notes shows where the author's
            // history starts; one that returned none may have lost the author's writes.
            // A capped page shows the newest notes only, never where the history starts.
            for a in relay.authors.iter().filter(|a| a.events > 0 && !a.capped) {
                let p = probed.entry(a.author).or_default();
                *p = p.max(depth_secs);
            }
            for a in relay.authors.iter().filter(|a| !a.capped) {
                let r = reached.entry(a.author).or_default();
                *r = r.max(depth_secs);
            }
            let mut expected = 0u32;
            // Summed in key order, so the same round learns the same bits whatever order its
            // authors were reported in.
            let mut shares: Vec<(PublicKey, f64)> = Vec::with_capacity(relay.authors.len());
            // (author, held, reachable) per author judged on its writes.
            let mut kept: Vec<(PublicKey, f64, f64)> = Vec::with_capacity(relay.authors.len());
            // The relay's URL as every author's pairs share it.
            let mut pair_url: Option<Arc<str>> = None;
            for a in &relay.authors {
                let Some(seen) = seen.get(&a.author).filter(|s| s.best > 0) else {
                    continue;
                };
                // A sample says nothing of the share of the author's notes the relay holds.
                if a.capped {
                    continue;
                }
                let b = seen.best;
                expected += 1;
                shares.push((a.author, f64::from(a.events.min(b)) / f64::from(b)));
                // Completeness and the pair judge writes within the relay's history only: a
                // relay that keeps a month is not faulted for last year.
                let reachable = seen.reachable(depth, now);
                if reachable < MIN_REACHABLE {
                    continue;
                }
                let held = f64::from(a.events).min(reachable);
                kept.push((a.author, held, reachable));
                // The pair is judged against every note the round's relays returned together,
                // so a relay is complete for a follow only where it lacked none another had.
                let together = seen.reachable_of(seen.union, depth, now).max(reachable);
                let share = f64::from(a.events).min(together) / together;
                let url = pair_url.get_or_insert_with(|| self.pair_urls.get(&relay.url));
                let author = self.authors.entry(a.author).or_default();
                let pair = author.relays.entry(url);
                pair.hits = (pair.hits + share).min(MAX_PARAM);
                pair.misses = (pair.misses + 1.0 - share).min(MAX_PARAM);
            }
            shares.sort_unstable_by_key(|x| x.0);
            let hits: f64 = shares.iter().map(|(_, share)| share).sum();
            kept.sort_unstable_by_key(|x| x.0);
            let (got, wanted) = kept
                .iter()
                .fold((0.0, 0.0), |(g, w), &(_, held, reachable)| {
                    (g + held, w + reachable)
                });
            self.record_delivery(&relay.url, hits, expected, now);
            let mut s = self.entry_at(&relay.url, now);
            s.depth_secs = depth_secs;
            s.live_alpha = (s.live_alpha + 1.0).min(MAX_PARAM);
            if wanted > 0.0 {
                let share = got / wanted;
                s.kept_alpha = (s.kept_alpha + share).min(MAX_PARAM);
                s.kept_beta = (s.kept_beta + 1.0 - share).min(MAX_PARAM);
            }
            self.relays.insert(relay.url.clone(), s);
        }
        for (author, seen) in seen {
            if !learned.contains(&author) {
                continue;
            }
            let entry = self.authors.entry(author).or_default();
            // Fewer notes than remembered say the author posts less only where some relay
            // returned its notes and the relays asked reach back over its whole known
            // history: a run that asked only relays that never had its notes, or keep a
            // month, cannot show a year's volume, and fading on it would forget a prolific
            // follow whose own relay this run did not ask.
            let known = if entry.first == 0 {
                0.0
            } else {
                now.saturating_sub(entry.first) as f64
            };
            let fade = if seen.best > 0 && reached.get(&author).is_some_and(|&d| d >= known) {
                VOLUME_FADE
            } else {
                1.0
            };
            entry.volume = f64::from(seen.best)
                .max(seen.implied)
                .max(entry.volume * fade)
                .min(MAX_PARAM);
            if let Some((oldest, newest)) = seen.ages {
                entry.first = if entry.first == 0 {
                    oldest
                } else {
                    entry.first.min(oldest)
                };
                entry.last = entry.last.max(newest);
            }
            if let Some(&p) = probed.get(&author) {
                entry.probed_secs = entry.probed_secs.max(p);
            }
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
        let counted = authors
            .iter()
            .map(|&(k, n)| AuthorRound::counted(key(k), n));
        RelayRound::new(url, answered, counted.collect())
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
        assert!(deep.completeness_mean() > 0.8, "{deep:?}");
        assert!(prunes.completeness_mean() < 0.3, "{prunes:?}");
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
        assert!(shallow.completeness_mean() < 0.3, "{shallow:?}");
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
        assert!(fresh.get_at("wss://shallow.example", 4).completeness_mean() > 0.7);
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

    const DAY: u64 = 86_400;
    const NOW: u64 = 1_800_000_000;

    /// `events` notes of author `k`, spread over the last `days` days.
    fn aged(k: u8, events: u32, days: u64) -> AuthorRound {
        AuthorRound {
            author: key(k),
            events,
            oldest: NOW - days * DAY,
            newest: NOW - DAY,
            capped: false,
            missed: 0,
        }
    }

    fn answered(url: &str, authors: Vec<AuthorRound>) -> RelayRound {
        RelayRound::new(url, true, authors)
    }

    #[test]
    fn a_pair_is_judged_against_what_the_relays_returned_together() {
        let mut stats = DeliveryStats::new();
        // Each relay returned 70 of the 77 notes the two returned together.
        let lacking = |url: &str| {
            let mut a = aged(1, 70, 360);
            a.missed = 7;
            answered(url, vec![a])
        };
        let report = RoundReport {
            relays: vec![lacking("wss://a.example"), lacking("wss://b.example")],
        };
        stats.record_round(&report, NOW);
        for url in ["wss://a.example", "wss://b.example"] {
            let pair = stats.pair(&key(1), url);
            assert!((pair.hits - 70.0 / 77.0).abs() < 1e-9, "{url}: {pair:?}");
            assert!((pair.misses - 7.0 / 77.0).abs() < 1e-9, "{url}: {pair:?}");
        }
    }

    #[test]
    fn a_relay_that_keeps_a_month_is_judged_on_that_month_and_its_depth_learned() {
        let mut stats = DeliveryStats::new();
        // A year of notes from both authors on the deep relay; the pruning relay returns the
        // month it keeps, and the lossy relay keeps a year but lost most of author 2's notes.
        let report = RoundReport {
            relays: vec![
                answered(
                    "wss://deep.example",
                    vec![aged(1, 360, 360), aged(2, 120, 360)],
                ),
                answered(
                    "wss://month.example",
                    vec![aged(1, 30, 30), aged(2, 10, 30)],
                ),
                answered(
                    "wss://lossy.example",
                    vec![aged(1, 360, 360), aged(2, 30, 360)],
                ),
            ],
        };
        stats.record_round(&report, NOW);
        let month = stats.get_at("wss://month.example", NOW);
        assert!(
            (month.depth_secs - 30.0 * DAY as f64).abs() < 1.0,
            "{month:?}"
        );
        assert!(
            month.completeness_mean() > 0.6,
            "not faulted for notes it never kept: {month:?}"
        );
        assert!(stats.pair(&key(1), "wss://month.example").mean() > 0.6);
        assert!(stats.pair(&key(2), "wss://lossy.example").mean() < 0.5);
        assert!(stats.pair(&key(1), "wss://lossy.example").mean() > 0.6);
        let a = stats.author(&key(1)).unwrap();
        assert_eq!((a.first, a.last), (NOW - 360 * DAY, NOW - DAY));
        assert!((a.probed_secs - 360.0 * DAY as f64).abs() < 1.0, "{a:?}");
        // Delivery (the scorer's prior) still counts the share of everything seen.
        assert!(month.mean() < 0.4, "{month:?}");
    }

    #[test]
    fn an_author_asked_only_of_pruning_relays_is_probed_no_deeper_than_they_keep() {
        let mut stats = DeliveryStats::new();
        let report = RoundReport {
            relays: vec![answered("wss://month.example", vec![aged(1, 30, 30)])],
        };
        stats.record_round(&report, NOW);
        let a = stats.author(&key(1)).unwrap();
        assert!((a.probed_secs - 30.0 * DAY as f64).abs() < 1.0, "{a:?}");
        assert_eq!(a.first, NOW - 30 * DAY);
    }

    #[test]
    fn a_capped_probe_shows_liveness_depth_and_rate_but_no_share_or_start() {
        let mut stats = DeliveryStats::new();
        // The fetch's deep relay returned 300 of author 1's notes over a year (a yardstick
        // now); the probe's page of 20 covers the last 20 days, and author 2's 5 notes are
        // all it had there.
        let capped = AuthorRound {
            capped: true,
            ..aged(1, 20, 20)
        };
        let report = RoundReport {
            relays: vec![
                answered("wss://probed.example", vec![capped, aged(2, 5, 200)]),
                RelayRound {
                    compare_only: true,
                    ..answered(
                        "wss://deep.example",
                        vec![aged(1, 300, 360), aged(2, 10, 360)],
                    )
                },
            ],
        };
        stats.record_round(&report, NOW);
        let probed = stats.get_at("wss://probed.example", NOW);
        assert!(probed.live_mean() > 0.6, "{probed:?}");
        assert!((probed.depth_secs - 200.0 * DAY as f64).abs() < 1.0);
        // Only author 2 is a trial: half of what the deep relay had.
        assert!((probed.alpha - 1.5).abs() < 1e-9, "{probed:?}");
        assert!((probed.beta - 1.5).abs() < 1e-9, "{probed:?}");
        assert_eq!(
            stats.pair(&key(1), "wss://probed.example"),
            PairStats::default()
        );
        assert!(stats.pair(&key(2), "wss://probed.example").hits > 0.0);
        // The deep relay, compare-only, learned nothing.
        assert!(stats.get("wss://deep.example").is_uniform());
    }

    #[test]
    fn a_probe_with_a_capped_page_teaches_no_depth_unless_another_relay_shows_its_end() {
        // A relay that keeps a year: the prolific follow's page is capped at 20 days, the
        // quiet one's only note is 50 days old. Nothing shows the history ends there.
        let capped = AuthorRound {
            capped: true,
            ..aged(1, 20, 20)
        };
        let probe = |yardstick: Option<AuthorRound>| RoundReport {
            relays: std::iter::once(answered(
                "wss://probed.example",
                vec![capped, aged(2, 1, 50)],
            ))
            .chain(yardstick.map(|a| RelayRound {
                compare_only: true,
                ..answered("wss://deep.example", vec![a])
            }))
            .collect(),
        };
        let mut stats = DeliveryStats::new();
        stats.record_round(&probe(None), NOW);
        let relay = stats.get("wss://probed.example");
        assert_eq!(relay.depth_secs, 0.0, "{relay:?}");
        assert!(relay.live_mean() > 0.6);
        // Another relay returned the quiet follow's note of 300 days ago: the probed relay's
        // history ends near 50 days.
        let mut stats = DeliveryStats::new();
        stats.record_round(&probe(Some(aged(2, 2, 300))), NOW);
        let relay = stats.get("wss://probed.example");
        assert!(
            (relay.depth_secs - 50.0 * DAY as f64).abs() < 1.0,
            "{relay:?}"
        );
    }

    #[test]
    fn a_capped_page_teaches_the_volume_its_rate_implies_over_the_known_history() {
        // A hub that keeps a month shows 3 of the follow's notes back to 28 days; the probe's
        // page of its newest 20 reaches back 7 days: about 80 notes in those 28 days.
        let capped = AuthorRound {
            capped: true,
            ..aged(1, 20, 7)
        };
        let report = RoundReport {
            relays: vec![
                answered("wss://probed.example", vec![capped]),
                RelayRound {
                    compare_only: true,
                    ..answered("wss://hub.example", vec![aged(1, 3, 28)])
                },
            ],
        };
        let mut stats = DeliveryStats::new();
        stats.record_round(&report, NOW);
        let a = stats.author(&key(1)).unwrap();
        assert!((a.volume - 80.0).abs() < 1e-6, "{a:?}");
        // A page that reaches as far back as anything seen is all there is to go on.
        let mut stats = DeliveryStats::new();
        let alone = RoundReport {
            relays: vec![answered("wss://probed.example", vec![capped])],
        };
        stats.record_round(&alone, NOW);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 20.0);
        // Twenty notes in the last two days are a rate of ten a day, read over a week.
        let mut stats = DeliveryStats::new();
        let busy = AuthorRound {
            capped: true,
            ..aged(1, 20, 2)
        };
        let alone = RoundReport {
            relays: vec![answered("wss://probed.example", vec![busy])],
        };
        stats.record_round(&alone, NOW);
        assert!((stats.author(&key(1)).unwrap().volume - 70.0).abs() < 1e-6);
    }

    #[test]
    fn volume_fades_only_on_relays_that_had_the_notes_and_reach_back_over_the_history() {
        // A deep relay showed 40 notes of author 1 over 200 days.
        let mut stats = DeliveryStats::new();
        let deep = RoundReport {
            relays: vec![answered("wss://deep.example", vec![aged(1, 40, 200)])],
        };
        stats.record_round(&deep, NOW);
        // A relay that keeps a month (author 2's notes end there) shows 3 of author 1's;
        // another returns none of them: neither can show the author posts less.
        let shallow = RoundReport {
            relays: vec![
                answered("wss://month.example", vec![aged(1, 3, 20), aged(2, 5, 30)]),
                answered("wss://other.example", vec![aged(1, 0, 0), aged(2, 5, 30)]),
            ],
        };
        stats.record_round(&shallow, NOW);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 40.0);
        // The deep relay again, with 5: now it fades.
        let fewer = RoundReport {
            relays: vec![answered("wss://deep.example", vec![aged(1, 5, 200)])],
        };
        stats.record_round(&fewer, NOW);
        assert_eq!(stats.author(&key(1)).unwrap().volume, 32.0);
    }

    #[test]
    fn a_capped_page_alone_leaves_the_authors_history_censored() {
        let mut stats = DeliveryStats::new();
        let capped = AuthorRound {
            capped: true,
            ..aged(1, 20, 10)
        };
        let report = RoundReport {
            relays: vec![answered("wss://probed.example", vec![capped])],
        };
        stats.record_round(&report, NOW);
        let a = stats.author(&key(1)).unwrap();
        assert_eq!(a.volume, 20.0);
        assert_eq!(a.first, NOW - 10 * DAY);
        // Nothing shows where its history starts: no relay probed it deeper than its notes,
        // and the relay's own history may reach past the page.
        assert_eq!(a.probed_secs, 0.0, "{a:?}");
        let relay = stats.get("wss://probed.example");
        assert_eq!(relay.depth_secs, 0.0, "{relay:?}");
        assert!(relay.live_mean() > 0.6);
    }
}

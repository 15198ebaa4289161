//! Probes: short questions to relays a session's plan did not ask, so learning sees past it.
//!
//! A strategy that learns only from its own fetches never learns about a relay it never asks:
//! a follow's own relay that nobody else lists holds all of that follow's notes, and stays
//! unknown for as long as plans leave it out. The connection budget bounds the sockets open at
//! once, not what a session may learn, so after the fetch a client opens a few short
//! connections, one wave at a time within the budget, and asks each unexplored relay one cheap
//! question about only the follows who list it: per follow, the newest [`ProbePlan::limit`]
//! notes of the window. The answer says whether the relay is alive, how far back its history
//! reaches, and each follow's rate there; a page shorter than the limit is the follow's whole
//! window on that relay.
//!
//! [`plan_probes`] picks the relays; a client asks them with [`ProbePlan::filters`], passes the
//! frames to a `RoundRecorder` (`nostr-outbox-client`) with `probed`, and learns from the round like from any
//! other ([`DeliveryStats::record_round`]). What a probe returns is never learned as a fetch: a
//! full page is a sample, learned as one (see [`AuthorRound::capped`](crate::stats::AuthorRound)).
//! Its notes are still the follows' notes of the window; a client may pass on those no relay
//! delivered (the runtime does, as *found*).
//! Every question names follows to a relay, so probes count in disclosure; asking a relay only
//! about the follows who list it keeps that to what the outbox model already tells it. A relay
//! hinted for a follow ([`crate::hints`]) is a candidate too, for the follows hinted there,
//! each worth its source's share of a declared relay ([`HintSource::prior`](crate::HintSource::prior)).

use std::collections::HashSet;

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;

use crate::stats::AuthorStats;
use crate::{AuthorId, DeliveryStats, RelayId, RouteTable};

/// Notes asked per follow in a probe: enough to read a rate from, few enough to be cheap.
pub const DEFAULT_PROBE_LIMIT: u32 = 20;

/// Most follows named in one probe, one filter each: relays commonly cap the filters of one
/// REQ near ten (NIP-11 `max_filters`).
pub const MAX_PROBE_AUTHORS: usize = 10;

/// Most probe connections a session may open; a config naming more is refused.
pub const MAX_PROBE_CONNECTIONS: usize = 1_000;

/// Fewest probe sockets open at once: a small routed budget is no reason to learn slowly.
/// Where most listed relays are dead, a few probes a session seldom meet a live one, and a
/// follow list names hundreds of candidates of which the relay that holds a prolific follow's
/// year may be the hundredth; short probe sockets after the fetch are cheap beside the routed
/// ones, and more of them at once find the live relays sooner for a run that ends no later.
pub const MIN_PROBES_AT_ONCE: usize = 60;

/// Waves of probes a session sends when the config names no number: what it affords after the
/// fetch is a few connect timeouts, not a count tied to the routed budget, and a second wave
/// finds the live relays among the dead ones twice as fast for a run that ends about two
/// seconds later.
pub const PROBE_WAVES: usize = 2;

/// Relays probed per session when the config names no number: [`PROBE_WAVES`] waves of
/// [`probes_at_once`].
pub fn default_probes(max_connections: usize) -> usize {
    probes_at_once(max_connections)
        .saturating_mul(PROBE_WAVES)
        .min(MAX_PROBE_CONNECTIONS)
}

/// Probe sockets a client opens at once: the routed budget, and at least
/// [`MIN_PROBES_AT_ONCE`]. Probes are short, and a `--once` run sends them after the feed's
/// sockets closed, so a small routed budget is no reason to probe in many waves of dead relays'
/// timeouts; the client's socket budget still bounds them with everything else.
pub fn probes_at_once(max_connections: usize) -> usize {
    max_connections.clamp(MIN_PROBES_AT_ONCE, MAX_PROBE_CONNECTIONS)
}

/// A relay that failed this many times and never answered is not probed again: most listed
/// relays that never answer are dead for good.
pub const MAX_PROBE_FAILURES: u64 = 2;

/// How much a session may probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeBudget {
    /// Relays probed per session (short connections, opened at most [`probes_at_once`] at once).
    pub connections: usize,
    /// Follows named per probed relay.
    pub authors: usize,
    /// Notes asked per follow.
    pub limit: u32,
}

impl ProbeBudget {
    /// `connections` probes a session with the default follows per relay and limit.
    pub fn new(connections: usize) -> Self {
        Self {
            connections: connections.min(MAX_PROBE_CONNECTIONS),
            authors: MAX_PROBE_AUTHORS,
            limit: DEFAULT_PROBE_LIMIT,
        }
    }
}

/// One probed relay and the follows it is asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Canonical relay URL.
    pub url: String,
    /// The follows asked about, each in a filter of its own.
    pub authors: Vec<PublicKey>,
    /// The relay failed before: wait the whole connect timeout for it. A probe gives up
    /// connecting sooner than a fetch (a run should not wait on dead relays), so a relay that is
    /// alive but slow to accept would fail every short probe and be written off after
    /// [`MAX_PROBE_FAILURES`]; its last chance is a patient one.
    pub patient: bool,
}

/// Which relays a session probes, most valuable first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbePlan {
    /// One entry per relay.
    pub probes: Vec<Probe>,
    /// Notes asked per follow.
    pub limit: u32,
}

impl ProbePlan {
    /// Whether nothing is probed.
    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// Follow-relay pairs named: what the probed relays learn of the follow list together.
    pub fn disclosure(&self) -> usize {
        self.probes.iter().map(|p| p.authors.len()).sum()
    }

    /// The filters of one probe: per follow, its newest `limit` notes of `kinds` since `since`.
    /// One filter per follow, since a relay applies `limit` per filter.
    pub fn filters(&self, probe: &Probe, kinds: &[Kind], since: Option<u64>) -> Vec<Filter> {
        probe
            .authors
            .iter()
            .map(|author| {
                let mut filter = Filter::new()
                    .author(*author)
                    .kinds(kinds.iter().copied())
                    .limit(self.limit as usize);
                if let Some(since) = since {
                    filter = filter.since(Timestamp::from_secs(since));
                }
                filter
            })
            .collect()
    }
}

/// What is still unknown about a follow's notes, for choosing which relays to probe: 1 when no
/// relay ever returned one, or when only relays it does not list did (what spills over to
/// others' relays is a sample, not the follow's volume); less when its history was seen on its
/// own relays (less still when seen to its start).
fn need(table: &RouteTable, stats: &DeliveryStats, author: AuthorId, now: u64) -> f64 {
    match stats.author(table.pubkey(author)) {
        None => 1.0,
        Some(s) if s.last == 0 => 1.0,
        Some(s) if !seen_where_listed(table, s, author) => 1.0,
        // Only relays that prune were seen returning its notes: older ones may be elsewhere.
        Some(s) if s.censored(now) => 0.5,
        Some(_) => 0.1,
    }
}

/// Whether one of the relays `author` lists returned some of its notes, or it lists none.
fn seen_where_listed(table: &RouteTable, s: &AuthorStats, author: AuthorId) -> bool {
    let listed = table.write_relays(author);
    listed.is_empty()
        || listed.iter().any(|&r| {
            s.relays
                .get(table.url(r))
                .is_some_and(|pair| pair.hits > 0.0)
        })
}

/// Whether `url` is worth a probe: it never answered, and did not fail so often that it is
/// most likely dead.
fn unexplored(stats: &DeliveryStats, url: &str) -> bool {
    let s = stats.get(url);
    let answered = s.asked.saturating_sub(s.failures);
    answered == 0 && s.failures < MAX_PROBE_FAILURES
}

/// Whether `url` never answered and failed so often that it is taken for dead: probed again
/// only with probes to spare.
fn written_off(stats: &DeliveryStats, url: &str) -> bool {
    let s = stats.get(url);
    s.asked == s.failures && s.failures >= MAX_PROBE_FAILURES
}

/// How much of a follow's unknown a candidate relay carries: 1 for a declared write relay, the
/// source's prior for a hinted one ([`HintSource::prior`](crate::HintSource::prior)).
fn weight(table: &RouteTable, author: AuthorId, at: usize) -> f64 {
    let declared = table.write_relays(author).len();
    if at < declared {
        1.0
    } else {
        table
            .hint_sources(author)
            .get(at - declared)
            .map_or(0.0, |s| s.prior())
    }
}

/// The relays to probe after a session's fetch: relays never seen answering, not in `skip`
/// (the relays the session asked, those set aside), each valued by what it may hold that is
/// unknown — per follow who lists it or was hinted there, what is unknown of the follow's
/// notes, shared among the follow's unexplored relays, so a follow's only relay carries all of
/// it and one of thirty a thirtieth. A hinted relay carries its source's share
/// ([`HintSource::prior`](crate::HintSource::prior)) of what a declared one would: `need · w / max(1, Σ w)` over the
/// follow's unexplored candidates. That sum is weighed by how likely the relay answers (its
/// liveness mean: a failed dial lowers it, a NIP-66 monitor's report seeds it), so among
/// relays of equal worth one never tried goes before one that failed. The best
/// `budget.connections` relays, ties by URL; each is asked about its follows with the most
/// unknown there first, at most `budget.authors`.
///
/// When fewer relays are unexplored than the budget allows, the rest of it goes to relays
/// written off after [`MAX_PROBE_FAILURES`], valued the same way among themselves: a relay
/// that was down for a few sessions may be back, and a session with probes to spare learns it
/// for the cost of a short dial. Such a retry is not patient.
pub fn plan_probes(
    table: &RouteTable,
    stats: &DeliveryStats,
    skip: &HashSet<&str>,
    budget: &ProbeBudget,
    now: u64,
) -> ProbePlan {
    let mut plan = ProbePlan {
        probes: Vec::new(),
        limit: budget.limit,
    };
    if budget.connections == 0 || budget.authors == 0 || budget.limit == 0 {
        return plan;
    }
    let candidate = |r: RelayId| table.candidate_popularity(r) > 0 && !skip.contains(table.url(r));
    let unexplored: Vec<bool> = table
        .relays()
        .map(|r| candidate(r) && unexplored(stats, table.url(r)))
        .collect();
    let written_off: Vec<bool> = table
        .relays()
        .map(|r| candidate(r) && written_off(stats, table.url(r)))
        .collect();
    let needs: Vec<f64> = table
        .authors()
        .map(|a| need(table, stats, a, now))
        .collect();
    for (open, patience) in [(&unexplored, true), (&written_off, false)] {
        let left = budget.connections.saturating_sub(plan.probes.len());
        if left == 0 {
            break;
        }
        for (relay, authors) in rank(table, stats, &needs, open, budget.authors, now).take(left) {
            let url = table.url(relay);
            plan.probes.push(Probe {
                url: url.to_string(),
                authors,
                patient: patience && stats.get(url).failures > 0,
            });
        }
    }
    plan
}

/// The relays marked `open`, most valuable first (see [`plan_probes`]), each with the follows
/// to ask it about, at most `authors`; `needs` is each follow's [`need`].
fn rank<'a>(
    table: &'a RouteTable,
    stats: &'a DeliveryStats,
    needs: &[f64],
    open: &'a [bool],
    authors: usize,
    now: u64,
) -> impl Iterator<Item = (RelayId, Vec<PublicKey>)> + 'a {
    // Per follow: its need over the summed weight of its open candidates (at least 1).
    let shares: Vec<f64> = table
        .authors()
        .map(|a| {
            let shared: f64 = (table.candidates(a).iter().enumerate())
                .filter(|(_, r)| open[r.index()])
                .map(|(at, _)| weight(table, a, at))
                .sum();
            if shared <= 0.0 {
                0.0
            } else {
                needs[a.index()] / shared.max(1.0)
            }
        })
        .collect();
    // What probing `relay` about `author` may find, should it answer.
    let value = move |author: AuthorId, relay: RelayId| {
        let at = table.candidates(author).iter().position(|&r| r == relay);
        at.map_or(0.0, |at| shares[author.index()] * weight(table, author, at))
    };
    let mut candidates: Vec<(f64, RelayId)> = table
        .relays()
        .filter(|r| open[r.index()])
        .map(|r| {
            let v: f64 = table
                .candidate_writers(r)
                .iter()
                .map(|&a| value(a, r))
                .sum();
            // How likely it answers: a failed dial and a monitor's report count here.
            (v * stats.get_at(table.url(r), now).live_mean(), r)
        })
        .filter(|(value, _)| *value > 0.0)
        .collect();
    candidates.sort_by(|(va, ra), (vb, rb)| {
        vb.total_cmp(va)
            .then_with(|| table.url(*ra).cmp(table.url(*rb)))
    });
    candidates.into_iter().map(move |(_, relay)| {
        let mut writers: Vec<(f64, AuthorId)> = table
            .candidate_writers(relay)
            .iter()
            .map(|&a| (value(a, relay), a))
            .collect();
        writers.sort_by(|(va, a), (vb, b)| {
            vb.total_cmp(va)
                .then_with(|| table.pubkey(*a).cmp(table.pubkey(*b)))
        });
        writers.truncate(authors);
        (
            relay,
            writers.iter().map(|(_, a)| *table.pubkey(*a)).collect(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{AuthorRound, RelayRound, RoundReport};
    use crate::{HintSource, RawRelayList, RouteTableBuilder, UrlPolicy};

    fn key(n: u8) -> PublicKey {
        let mut sk = [4u8; 32];
        sk[31] = n;
        nostr::key::Keys::new(nostr::key::SecretKey::from_slice(&sk).unwrap()).public_key()
    }

    /// `author`'s relay list naming `relays`, unmarked.
    fn list(author: u8, relays: &[&str]) -> RawRelayList {
        RawRelayList {
            author: key(author),
            created_at: 1,
            tags: relays
                .iter()
                .map(|r| vec!["r".to_string(), r.to_string()])
                .collect(),
        }
    }

    /// Follows 1..=3: 1 lists only own.example, 2 lists hub and own2, 3 lists hub only.
    fn table() -> RouteTable {
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1), key(2), key(3)])
            .reader_relays(["wss://home.example"]);
        b.add_list(list(1, &["wss://own.example"]));
        b.add_list(list(2, &["wss://hub.example", "wss://own2.example"]));
        b.add_list(list(3, &["wss://hub.example"]));
        b.build()
    }

    #[test]
    fn the_default_is_two_waves_of_the_budget_and_never_fewer_than_the_minimum() {
        assert_eq!(probes_at_once(0), MIN_PROBES_AT_ONCE);
        assert_eq!(probes_at_once(4), MIN_PROBES_AT_ONCE);
        assert_eq!(probes_at_once(80), 80);
        assert_eq!(default_probes(0), 2 * MIN_PROBES_AT_ONCE);
        assert_eq!(default_probes(4), 2 * MIN_PROBES_AT_ONCE);
        assert_eq!(default_probes(80), 160);
        assert_eq!(default_probes(usize::MAX), MAX_PROBE_CONNECTIONS);
    }

    #[test]
    fn a_follows_only_relay_comes_first_and_asked_relays_never() {
        let t = table();
        let stats = DeliveryStats::new();
        let skip: HashSet<&str> = ["wss://hub.example"].into_iter().collect();
        let plan = plan_probes(&t, &stats, &skip, &ProbeBudget::new(1), 0);
        assert_eq!(plan.probes.len(), 1);
        assert_eq!(plan.probes[0].url, "wss://own.example");
        assert_eq!(plan.probes[0].authors, vec![key(1)]);
        let all = plan_probes(&t, &stats, &skip, &ProbeBudget::new(10), 0);
        let urls: Vec<&str> = all.probes.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["wss://own.example", "wss://own2.example"]);
        assert_eq!(all.disclosure(), 2);
        assert!(plan_probes(&t, &stats, &skip, &ProbeBudget::new(0), 0).is_empty());
    }

    #[test]
    fn relays_that_answered_are_explored_and_those_that_failed_twice_wait_for_spare_probes() {
        let t = table();
        let mut stats = DeliveryStats::new();
        let round = |url: &str, answered: bool| RoundReport {
            relays: vec![RelayRound::new(
                url,
                answered,
                vec![AuthorRound::counted(key(1), 0)],
            )],
        };
        stats.record_round(&round("wss://own.example", true), 10);
        for _ in 0..MAX_PROBE_FAILURES {
            stats.record_round(&round("wss://own2.example", false), 10);
        }
        let plan = plan_probes(&t, &stats, &HashSet::new(), &ProbeBudget::new(1), 10);
        let urls: Vec<&str> = plan.probes.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["wss://hub.example"]);
        // With probes to spare, the relay written off is asked again, briefly.
        let plan = plan_probes(&t, &stats, &HashSet::new(), &ProbeBudget::new(10), 10);
        let probes: Vec<(&str, bool)> = plan
            .probes
            .iter()
            .map(|p| (p.url.as_str(), p.patient))
            .collect();
        assert_eq!(
            probes,
            [("wss://hub.example", false), ("wss://own2.example", false)]
        );
    }

    #[test]
    fn a_relay_that_failed_once_is_probed_patiently() {
        let t = table();
        let mut stats = DeliveryStats::new();
        let failed = RoundReport {
            relays: vec![RelayRound::new(
                "wss://own2.example",
                false,
                vec![AuthorRound::counted(key(2), 0)],
            )],
        };
        stats.record_round(&failed, 10);
        let plan = plan_probes(&t, &stats, &HashSet::new(), &ProbeBudget::new(10), 10);
        let patient: Vec<(&str, bool)> = plan
            .probes
            .iter()
            .map(|p| (p.url.as_str(), p.patient))
            .collect();
        assert!(
            patient.contains(&("wss://own2.example", true)),
            "{patient:?}"
        );
        assert!(
            patient.contains(&("wss://own.example", false)),
            "{patient:?}"
        );
    }

    /// `author` returned by `url` with `events` notes over the last 100 days.
    fn seen(url: &str, author: u8, events: u32) -> RelayRound {
        RelayRound::new(
            url,
            true,
            vec![AuthorRound {
                author: key(author),
                events,
                oldest: NOW - 100 * DAY,
                newest: NOW - DAY,
                capped: false,
                missed: 0,
            }],
        )
    }

    const DAY: u64 = 86_400;
    const NOW: u64 = 1_000 * DAY;

    #[test]
    fn a_follow_seen_only_on_relays_it_does_not_list_is_still_unknown_where_it_writes() {
        // 1 lists own.example and was seen on the reader's home relay only; 2 lists hub and
        // b.example and was seen on the hub; 3 lists a.example and was never seen.
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1), key(2), key(3)])
            .reader_relays(["wss://home.example"]);
        b.add_list(list(1, &["wss://own.example"]));
        b.add_list(list(2, &["wss://hub.example", "wss://b.example"]));
        b.add_list(list(3, &["wss://a.example"]));
        let t = b.build();
        let mut stats = DeliveryStats::new();
        let round = RoundReport {
            relays: vec![
                seen("wss://home.example", 1, 3),
                seen("wss://hub.example", 2, 3),
            ],
        };
        stats.record_round(&round, NOW);
        let skip: HashSet<&str> = ["wss://home.example", "wss://hub.example"].into();
        let plan = plan_probes(&t, &stats, &skip, &ProbeBudget::new(2), NOW);
        let urls: Vec<&str> = plan.probes.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["wss://a.example", "wss://own.example"]);
    }

    #[test]
    fn a_relay_that_failed_once_waits_behind_an_untried_one_of_equal_value() {
        let t = table();
        let mut stats = DeliveryStats::new();
        let failed = RoundReport {
            relays: vec![RelayRound::new(
                "wss://own.example",
                false,
                vec![AuthorRound::counted(key(1), 0)],
            )],
        };
        stats.record_round(&failed, 10);
        // own.example (1's only relay) and own2.example (2's relay besides the asked hub; 2 was
        // never seen either) would tie but for the failure.
        let skip: HashSet<&str> = ["wss://hub.example"].into();
        let plan = plan_probes(&t, &stats, &skip, &ProbeBudget::new(10), 10);
        let urls: Vec<&str> = plan.probes.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["wss://own2.example", "wss://own.example"]);
    }

    #[test]
    fn hinted_relays_are_probed_for_the_follows_hinted_there_below_declared_ones() {
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1), key(4), key(5), key(6)])
            .reader_relays(["wss://home.example"]);
        b.add_list(list(1, &["wss://own.example"]));
        // 4 and 6 have no list, only a kind:3 hint each (worth a quarter of a declared relay
        // each: together less than own.example); 5 has no list, a pointer to own.example.
        b.hint(key(4), "wss://hinted.example", HintSource::ContactList);
        b.hint(key(6), "wss://hinted.example", HintSource::ContactList);
        b.hint(key(5), "wss://own.example", HintSource::Pointer);
        let t = b.build();
        let stats = DeliveryStats::new();
        let all = plan_probes(&t, &stats, &HashSet::new(), &ProbeBudget::new(10), 0);
        let urls: Vec<&str> = all.probes.iter().map(|p| p.url.as_str()).collect();
        assert_eq!(urls, ["wss://own.example", "wss://hinted.example"]);
        // The declared follow first, then the one hinted there.
        assert_eq!(all.probes[0].authors, vec![key(1), key(5)]);
        assert_eq!(all.probes[1].authors.len(), 2);
    }

    #[test]
    fn filters_ask_each_follow_separately_with_the_limit() {
        let plan = ProbePlan {
            probes: vec![Probe {
                url: "wss://own.example".into(),
                authors: vec![key(1), key(2)],
                patient: false,
            }],
            limit: 5,
        };
        let filters = plan.filters(&plan.probes[0], &[Kind::TextNote], Some(100));
        assert_eq!(filters.len(), 2);
        for (f, k) in filters.iter().zip([key(1), key(2)]) {
            assert_eq!(f.limit, Some(5));
            assert_eq!(f.since, Some(Timestamp::from_secs(100)));
            assert!(f.authors.as_ref().unwrap().contains(&k));
        }
    }
}

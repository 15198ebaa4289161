//! What a client could observe of one session's REQs, and how it is fed into learning exactly
//! as the runtime feeds a live round.

use std::collections::BTreeMap;

use nostr_outbox_core::stats::{AuthorRound, RelayRound, RoundReport};
use nostr_outbox_core::DeliveryStats;
use serde::Serialize;

use crate::asks::Asks;
use crate::fetch::{fetch, AuthorReturn, FetchCost, Fetched};
use crate::sim_world::SimWorld;

/// What one asked relay did in one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelayObservation {
    /// The relay URL as planned.
    pub url: String,
    /// Whether it answered (connected and served the REQ).
    pub up: bool,
    /// The follows it was asked about.
    pub asked: Vec<u32>,
    /// The follows it returned at least one event for, with what it returned (distinct
    /// events over all pages), sorted by follow.
    pub returned: Vec<AuthorReturn>,
    /// What its pages cost.
    pub cost: FetchCost,
}

/// Everything a client could observe from one session's REQs: per asked relay, whether it
/// answered and what it returned per author (counts and time depth).
///
/// [`DeliveryStats`] is fed from it ([`Observation::record`]) with exactly what a live client
/// reports; the per-author time depth (`newest`/`oldest`) is kept for diagnostics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// The session.
    pub session: u32,
    /// The `since` of every REQ.
    pub since: u64,
    /// One entry per plan connection.
    pub relays: Vec<RelayObservation>,
    /// Per follow, the distinct events the answering relays returned together: what a client
    /// compares each relay's answer with ([`AuthorRound::missed`]).
    #[serde(skip)]
    pub together: BTreeMap<u32, u32>,
}

/// Simulates the REQs of `asks` in `session` with `since`, paged as the runtime pages
/// ([`fetch`]): what each asked relay returned per author over all its pages.
pub fn observe(sim: &SimWorld, asks: &Asks, session: u32, since: u64) -> Observation {
    observation_of(sim, asks, session, &fetch(sim, asks, session, since, true))
}

pub(crate) fn observation_of(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    fetched: &Fetched,
) -> Observation {
    let events = sim.world.events();
    let mut together = BTreeMap::new();
    for (i, _) in fetched.delivered.iter().enumerate().filter(|(_, d)| **d) {
        *together.entry(events[i].author).or_insert(0u32) += 1;
    }
    let relays = asks
        .entries
        .iter()
        .zip(&fetched.relays)
        .map(|(e, f)| RelayObservation {
            url: e.url.clone(),
            up: f.up,
            asked: e.authors.clone(),
            returned: f.returned.clone(),
            cost: f.cost.clone(),
        })
        .collect();
    Observation {
        session,
        since: fetched.since,
        relays,
        together,
    }
}

impl Observation {
    /// What a live client would report after every asked relay sent EOSE or failed: per asked
    /// relay, whether it answered and how many events it returned for each asked author.
    pub fn round_report(&self, sim: &SimWorld) -> RoundReport {
        RoundReport {
            relays: self
                .relays
                .iter()
                .map(|r| {
                    RelayRound::new(
                        r.url.clone(),
                        r.up,
                        r.asked
                            .iter()
                            .map(|&a| {
                                let got = r.returned.iter().find(|x| x.author == a);
                                let events = got.map_or(0, |x| x.events);
                                let all = self.together.get(&a).copied().unwrap_or(0);
                                AuthorRound {
                                    author: sim.world.follows[a as usize],
                                    events,
                                    oldest: got.map_or(0, |x| x.oldest),
                                    newest: got.map_or(0, |x| x.newest),
                                    capped: false,
                                    missed: all.saturating_sub(events),
                                }
                            })
                            .collect(),
                    )
                })
                .collect(),
        }
    }

    /// Feeds the observation into delivery statistics through the same call the live runtime
    /// makes ([`DeliveryStats::record_round`]).
    pub fn record(&self, sim: &SimWorld, stats: &mut DeliveryStats, now: u64) {
        stats.record_round(&self.round_report(sim), now);
    }
}

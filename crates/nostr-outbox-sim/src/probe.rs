//! Probes, simulated: what the relays of an [`nostr_outbox_core::ProbePlan`] answer in a session.
//!
//! Each probed relay gets one REQ with a filter per follow asking its newest
//! [`ProbePlan::limit`] notes of the window; the relay serves the newest
//! `min(limit, max_limit)` notes of each follow it stores, as it would any filter. Frames go
//! to the session's [`RoundRecorder`] through [`RoundRecorder::probed`], as the runtime's do,
//! so the simulator learns from probes through the same code as a live client. What they
//! return is also what a client delivers beyond its plan (the runtime's `FeedEvent::Found`):
//! [`Probed::returned`] says which world events, for scoring that apart from the plan's recall.

use nostr::event::EventId;
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::ProbePlan;
use serde::{Deserialize, Serialize};

use crate::clock::ClientTiming;
use crate::sim_world::SimWorld;

/// What a session's probes cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// Short connections opened (relays probed, answering or not).
    pub connections: u64,
    /// REQs sent to relays that answered (one per probed relay, a filter per follow).
    pub reqs: u64,
    /// Filters sent: follow-relay pairs named (what the probes disclose).
    pub filters: u64,
    /// Events the probes returned.
    pub events: u64,
}

impl ProbeCost {
    /// Adds `other` to this cost.
    pub fn add(&mut self, other: &ProbeCost) {
        self.connections += other.connections;
        self.reqs += other.reqs;
        self.filters += other.filters;
        self.events += other.events;
    }
}

/// What a session's probes did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probed {
    /// What they cost.
    pub cost: ProbeCost,
    /// The world events they returned (indices into
    /// [`World::events`](nostr_outbox_world::World::events), sorted, each once).
    pub returned: Vec<u32>,
}

/// The filter generation probes are recorded with: a probed relay was not asked in the
/// session's fetch, so it has no earlier filter to be told apart from.
const GENERATION: u64 = 1;

/// Asks every probe of `plan` in `session` for notes since `since`, passing the frames to
/// `recorder`; returns what it cost and which events came back. On the world's clock (`client` given), a relay slower to
/// accept the probe's socket (its first connection of the session) than `client` waits for a
/// probe ([`ClientTiming::probe_give_up_ms`]) fails, as in the runtime; without it every relay
/// that is up answers.
pub fn probe_recorded(
    sim: &SimWorld,
    plan: &ProbePlan,
    session: u32,
    since: u64,
    client: Option<&ClientTiming>,
    recorder: &mut RoundRecorder,
) -> Probed {
    let world = &sim.world;
    let events = world.events();
    let mut cost = ProbeCost::default();
    let mut returned = Vec::new();
    // Per follow: notes served so far, and whether the current probe asks about it.
    let mut served = vec![0u32; world.follows.len()];
    let mut asked = vec![false; world.follows.len()];
    for probe in &plan.probes {
        cost.connections += 1;
        recorder.probed(
            &probe.url,
            probe.authors.iter().copied(),
            GENERATION,
            plan.limit,
        );
        let ids: Vec<u32> = probe
            .authors
            .iter()
            .filter_map(|pk| sim.table.author_id(pk))
            .map(|a| a.0)
            .filter(|&a| (a as usize) < world.follows.len())
            .collect();
        let Some(r) = world
            .relay_id(&probe.url)
            .filter(|&r| world.is_up(r, session))
        else {
            recorder.failed(&probe.url, "down in this session");
            continue;
        };
        let slow = |c: &ClientTiming| {
            world.timing(r).connect_ms(&probe.url, session, 1) > c.probe_give_up_ms(probe)
        };
        if client.is_some_and(slow) {
            recorder.failed(&probe.url, "connecting timed out");
            continue;
        }
        cost.reqs += 1;
        cost.filters += probe.authors.len() as u64;
        for &a in &ids {
            asked[a as usize] = true;
            served[a as usize] = 0;
        }
        let serves = world.relays()[r as usize].max_limit.unwrap_or(u32::MAX);
        let take = plan.limit.min(serves).max(1);
        let stored = sim.relay_events(r);
        let end = stored.partition_point(|&(t, _)| t >= since);
        let mut open = ids.len();
        // Newest first, as a relay serves a filter.
        for &(t, i) in &stored[..end] {
            if open == 0 {
                break;
            }
            let event = &events[i as usize];
            let a = event.author as usize;
            if !asked[a] || served[a] >= take {
                continue;
            }
            served[a] += 1;
            if served[a] == take {
                open -= 1;
            }
            cost.events += 1;
            returned.push(i);
            let author = world.follows[a];
            recorder.returned(&probe.url, author, EventId::from_byte_array(event.id), t);
        }
        recorder.eose(&probe.url, GENERATION, true);
        for &a in &ids {
            asked[a as usize] = false;
        }
    }
    returned.sort_unstable();
    returned.dedup();
    Probed { cost, returned }
}

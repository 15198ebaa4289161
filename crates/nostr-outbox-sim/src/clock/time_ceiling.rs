//! The time ceiling: every note from the fastest relay holding it, on its first page.

use std::collections::HashMap;

use super::client::ClientTiming;
use super::timeline::Timeline;
use crate::sim_world::SimWorld;

/// The time ceiling: each note of `since` and later that some relay answering in `session`
/// holds, arriving one connect and one query after the start from the fastest such relay — as
/// if every relay had been asked at once, with the lists known, about exactly the follows
/// whose notes it holds, and every note were on its first page. No plan can fill a feed
/// faster; the socket budget is not applied (a bound, not a plan).
pub fn fastest(sim: &SimWorld, session: u32, since: u64, client: &ClientTiming) -> Timeline {
    let world = &sim.world;
    let first_page: Vec<Option<f64>> = (0..world.relays().len() as u32)
        .map(|r| {
            let up = world.relays()[r as usize].exists && world.is_up(r, session);
            up.then(|| first_page_ms(sim, r, session, client))
        })
        .collect();
    let mut arrived = HashMap::new();
    let mut end = 0f64;
    for (i, e) in world.events().iter().enumerate() {
        if e.created_at < since {
            continue;
        }
        let best = (world.event_relays(e).iter())
            .filter_map(|&r| first_page.get(r as usize).copied().flatten())
            .reduce(f64::min);
        if let Some(t) = best {
            end = end.max(t);
            arrived.insert(i as u32, (t <= client.deadline_ms).then_some(t));
        }
    }
    Timeline {
        arrived,
        settled_ms: end.min(client.deadline_ms),
        end_ms: end.min(client.deadline_ms),
        latency: Vec::new(),
        opened: HashMap::new(),
    }
}

/// When `relay`'s first page would be in had it been dialled at the start of `session`: its
/// first connect and first query, within the client's timeouts.
pub(super) fn first_page_ms(
    sim: &SimWorld,
    relay: u32,
    session: u32,
    client: &ClientTiming,
) -> f64 {
    let timing = sim.world.timing(relay);
    let url = &sim.world.relays()[relay as usize].url;
    timing
        .connect_ms(url, session, 0)
        .min(client.connect_timeout_ms)
        + timing.query_ms(url, session, 0).min(client.eose_timeout_ms)
}

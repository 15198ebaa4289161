//! Headline facts of a world, to set beside the published measurements.

use serde::Serialize;

use super::DAY;
use crate::world::World;

/// Headline facts about a world, to check a model against the published measurements.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorldStats {
    /// The world's name.
    pub name: String,
    /// Follows.
    pub follows: usize,
    /// Share of follows without a relay list.
    pub no_list_share: f64,
    /// Distinct canonical relays named in kept write entries.
    pub listed_relays: usize,
    /// Share of listed relays that exist (are keys of `relays`).
    pub listed_alive_share: f64,
    /// Share of listed relays that never answer although they exist (paid, auth, refusing).
    pub listed_refusing_share: f64,
    /// Mean share of live, answering relays that are up per session.
    pub live_up_share: f64,
    /// Share of lists that include the most popular relay.
    pub top_relay_list_share: f64,
    /// Median write relays per list.
    pub median_write_relays: f64,
    /// Events.
    pub events: usize,
    /// Share of follows with no event in the last 7 days.
    pub silent_7d_share: f64,
    /// Events within 7 days, 1 year, 3 years.
    pub events_by_window: [usize; 3],
    /// Size of the world as JSON, in bytes (estimated from a sample).
    pub approx_json_bytes: u64,
}

/// Computes [`WorldStats`].
pub fn world_stats(world: &World) -> WorldStats {
    let table = world.route_table(&nostr_outbox_core::UrlPolicy::default());
    let follows = world.follows.len();
    let with_list = table.authors().filter(|&a| table.has_list(a)).count();
    let listed: Vec<_> = table
        .relays()
        .filter(|&r| table.popularity(r) > 0)
        .collect();
    let alive = listed
        .iter()
        .filter(|&&r| {
            world
                .relay_id(table.url(r))
                .is_some_and(|id| world.relays()[id as usize].exists)
        })
        .count();
    let refusing = listed
        .iter()
        .filter(|&&r| {
            world.relay_id(table.url(r)).is_some_and(|id| {
                let w = &world.relays()[id as usize];
                w.exists && w.up.iter().all(|u| !u)
            })
        })
        .count();
    let answering: Vec<_> = world
        .relays()
        .iter()
        .filter(|r| r.exists && r.up.iter().any(|&u| u))
        .collect();
    let live_up_share = if answering.is_empty() || world.sessions == 0 {
        0.0
    } else {
        answering
            .iter()
            .map(|r| r.up.iter().filter(|&&u| u).count() as f64 / world.sessions as f64)
            .sum::<f64>()
            / answering.len() as f64
    };
    let top = listed
        .iter()
        .map(|&r| table.popularity(r))
        .max()
        .unwrap_or(0);
    let mut lens: Vec<usize> = table
        .authors()
        .filter(|&a| table.has_list(a))
        .map(|a| table.write_relays(a).len())
        .collect();
    lens.sort_unstable();
    let median = lens.get(lens.len() / 2).copied().unwrap_or(0) as f64;
    let windows = [7 * DAY, 365 * DAY, 3 * 365 * DAY];
    let mut by_window = [0usize; 3];
    for e in world.events() {
        for (i, w) in windows.iter().enumerate() {
            if e.created_at >= world.now.saturating_sub(*w) {
                by_window[i] += 1;
            }
        }
    }
    let silent = (0..follows as u32)
        .filter(|&a| world.author_events_since(a, world.now - 7 * DAY).is_empty())
        .count();
    let share = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let sample = world.events().len().min(200);
    let per_event = if sample == 0 {
        0
    } else {
        world.events()[..sample]
            .iter()
            .map(|e| 170 + world.event_relays(e).len() as u64 * 32)
            .sum::<u64>()
            / sample as u64
    };
    WorldStats {
        name: world.name.clone(),
        follows,
        no_list_share: share(follows - with_list, follows),
        listed_relays: listed.len(),
        listed_alive_share: share(alive, listed.len()),
        listed_refusing_share: share(refusing, listed.len()),
        live_up_share,
        top_relay_list_share: share(top as usize, with_list),
        median_write_relays: median,
        events: world.events().len(),
        silent_7d_share: share(silent, follows),
        events_by_window: by_window,
        approx_json_bytes: per_event * world.events().len() as u64 + follows as u64 * 300,
    }
}

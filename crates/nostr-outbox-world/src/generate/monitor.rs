//! What a NIP-66 relay monitor reports about the world's relays as of `now`: noisy and lagging.
//! Some live relays are missing, some dead ones still look recently seen, and every report is
//! one or more hourly checks old (the knobs are [`WorldModel`]'s `monitor_*` fields).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::relays::Network;
use super::{WorldModel, DAY};
use crate::world::{MonitorEntry, World};

/// Draws the monitor data for every relay of the network, in network order, from a stream of
/// its own (so adding it left every other part of a world as it was). A relay the monitor sees
/// online is one that accepts connections: live relays, paid or flaky ones included.
pub(super) fn assign_monitor(model: &WorldModel, seed: u64, net: &Network, world: &mut World) {
    let coverage = model.monitor_coverage.clamp(0.0, 1.0);
    let dead_listed = model.monitor_dead_listed.clamp(0.0, 1.0);
    if coverage == 0.0 && dead_listed == 0.0 {
        return;
    }
    let dead_recent = model.monitor_dead_recent.clamp(0.0, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6d6f_6e69_0000 ^ (model.follows as u64) << 40);
    let now = world.now;
    let recent = |rng: &mut ChaCha8Rng| {
        let hours = model.monitor_lag_hours.draw(rng).max(0.0);
        now.saturating_sub((hours * 3_600.0) as u64)
    };
    let mut entries = Vec::new();
    for relay in &net.relays {
        let last_seen = if relay.alive {
            rng.random_bool(coverage).then(|| recent(&mut rng))
        } else if rng.random_bool(dead_listed) {
            Some(if rng.random_bool(dead_recent) {
                recent(&mut rng)
            } else {
                let days = model.monitor_dead_age_days.draw(&mut rng).max(0.0);
                now.saturating_sub((days * DAY as f64) as u64)
            })
        } else {
            None
        };
        if let Some(last_seen) = last_seen {
            entries.push(MonitorEntry {
                url: relay.url.clone(),
                last_seen,
            });
        }
    }
    world.set_monitor(entries);
}

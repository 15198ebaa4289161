//! What a replay gives back: when each note of a run arrived ([`Timeline`]), and which of those
//! notes make its first screen.

use std::collections::HashMap;

use crate::sim_world::SimWorld;

/// Notes on a first screen: the screen is in when the newest this many notes of the run's fetch
/// have all arrived.
pub const SCREEN: usize = 50;

/// When each note of a run arrived.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Per world event the run fetched: ms after the start when it first arrived (`None`: it
    /// would have arrived only after the deadline).
    pub arrived: HashMap<u32, Option<f64>>,
    /// When the fetch settled: every relay asked answered or was set aside, ms.
    pub settled_ms: f64,
    /// When the run ended (probes done, or the deadline), ms.
    pub end_ms: f64,
    /// Per relay that answered, sorted by URL: its first query's time (a REQ to its EOSE),
    /// the latency the runtime records ([`nostr_outbox_core::DeliveryStats::record_latency`]).
    pub latency: Vec<(String, f64)>,
    /// Per relay whose socket opened: when it could carry its first REQ, ms.
    pub opened: HashMap<String, f64>,
}

/// The newest [`SCREEN`] of `arrived` (all of them when fewer), in no particular order.
pub(super) fn screen_notes(
    sim: &SimWorld,
    arrived: impl Iterator<Item = (u32, Option<f64>)>,
) -> Vec<(u32, Option<f64>)> {
    let events = sim.world.events();
    let mut newest: Vec<(u64, [u8; 32], u32, Option<f64>)> = arrived
        .map(|(e, t)| (events[e as usize].created_at, events[e as usize].id, e, t))
        .collect();
    let screen = SCREEN.min(newest.len());
    if screen > 0 && screen < newest.len() {
        newest.select_nth_unstable_by(screen - 1, |a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    }
    newest.truncate(screen);
    newest.into_iter().map(|(_, _, e, t)| (e, t)).collect()
}

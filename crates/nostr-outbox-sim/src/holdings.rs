//! What the bounds choose relays from: the window's events each relay would return, and the
//! asks a choice of relays makes, the residual on the reader's relays included.

use crate::asks::{Ask, Asks};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// The window's events (numbered in author order) that each relay would return, with each
/// event's author. Only events some relay would return are numbered.
pub(crate) struct Holdings {
    /// Per world relay, the numbers of the events it would return.
    pub per_relay: Vec<Vec<u32>>,
    /// Per numbered event, its author.
    pub event_author: Vec<u32>,
}

impl Holdings {
    /// The events of `window` stored on relays that `returns(author, relay)` allows.
    pub fn of(sim: &SimWorld, window: Window, returns: impl Fn(u32, u32) -> bool) -> Self {
        let world = &sim.world;
        let since = world.now.saturating_sub(window.secs());
        let mut per_relay: Vec<Vec<u32>> = vec![Vec::new(); world.relays().len()];
        let mut event_author: Vec<u32> = Vec::new();
        for a in 0..world.follows.len() as u32 {
            for e in world.author_events_since(a, since) {
                let id = event_author.len() as u32;
                let mut held = false;
                for &r in world.event_relays(e) {
                    if returns(a, r) {
                        per_relay[r as usize].push(id);
                        held = true;
                    }
                }
                if held {
                    event_author.push(a);
                }
            }
        }
        Self {
            per_relay,
            event_author,
        }
    }

    /// Each chosen relay asked about the authors of the events it holds, and every follow left
    /// out asked of the reader's relays.
    pub fn asks(&self, sim: &SimWorld, chosen: &[u32]) -> Asks {
        let relays = sim.world.relays();
        let entries = chosen
            .iter()
            .map(|&r| {
                let mut authors: Vec<u32> = self.per_relay[r as usize]
                    .iter()
                    .map(|&e| self.event_author[e as usize])
                    .collect();
                authors.sort_unstable();
                authors.dedup();
                Ask {
                    url: relays[r as usize].url.clone(),
                    relay: Some(r),
                    authors,
                }
            })
            .collect();
        with_residual(sim, entries)
    }
}

/// `entries` plus every follow they leave out, asked of the reader's relays.
pub(crate) fn with_residual(sim: &SimWorld, mut entries: Vec<Ask>) -> Asks {
    let world = &sim.world;
    let mut routed = vec![false; world.follows.len()];
    for e in &entries {
        for &a in &e.authors {
            routed[a as usize] = true;
        }
    }
    let residual: Vec<u32> = (0..world.follows.len() as u32)
        .filter(|&a| !routed[a as usize])
        .collect();
    if !residual.is_empty() {
        let reader = sim
            .table
            .reader_relays()
            .iter()
            .filter_map(|&r| world.relay_id(sim.table.url(r)));
        for r in reader {
            match entries.iter_mut().find(|e| e.relay == Some(r)) {
                Some(e) => {
                    e.authors.extend_from_slice(&residual);
                    e.authors.sort_unstable();
                    e.authors.dedup();
                }
                None => entries.push(Ask {
                    url: world.relays()[r as usize].url.clone(),
                    relay: Some(r),
                    authors: residual.clone(),
                }),
            }
        }
    }
    Asks {
        entries,
        orphans: Some(residual.len()),
        foreign_authors: 0,
    }
}

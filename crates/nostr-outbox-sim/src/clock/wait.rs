//! Why a run's first screen came when it did: the screen's last note, set beside the time
//! ceiling's, and what held it back.
//!
//! The time ceiling ([`super::fastest`]) takes each note from the fastest relay holding it,
//! whether or not any list names that relay, on that relay's first page. A plan asks the relays
//! a follow lists (the reader's relays for a follow without a list, and at most a few hinted),
//! and a relay's later pages draw times of their own. [`screen_wait`] tells those apart for the
//! one note a first screen waits for, so a gap to the ceiling can be laid at the door of the
//! plan, of how it was carried out, or of the world.

use serde::Serialize;

use nostr_outbox_core::AuthorId;

use super::client::ClientTiming;
use super::time_ceiling::first_page_ms;
use super::timeline::{screen_notes, Timeline};
use crate::asks::Asks;
use crate::sim_world::SimWorld;

/// A screen is on time when its last note came within this many times the ceiling's time for
/// it...
pub const ON_TIME_FACTOR: f64 = 1.3;
/// ...or within this many ms of it.
pub const ON_TIME_MS: f64 = 200.0;

/// What held a first screen's last note back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// Nothing: it came about as soon as on the ceiling.
    OnTime,
    /// Every relay that would have brought it in time is one its author's list does not name
    /// (nor, for a follow without a list, one of the reader's relays): a plan could know to ask
    /// there only from a hint, if at all.
    Unlisted,
    /// A relay the author lists would have brought it in time, but the plan did not ask it
    /// about the author.
    NotAsked,
    /// The plan asked such a relay about the author, but its socket opened late: after the
    /// relay-list lookup of a first run, with a later wave, or behind the socket budget.
    LateSocket,
    /// The plan asked such a relay about the author and its socket opened in time, but the
    /// page carrying the note came late: it drew a slow time, or waited behind the relay's
    /// other pages.
    SlowPage,
}

impl Wait {
    /// Every cause, in the order they are reported.
    pub const ALL: [Wait; 5] = [
        Wait::OnTime,
        Wait::Unlisted,
        Wait::NotAsked,
        Wait::LateSocket,
        Wait::SlowPage,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Wait::OnTime => "on time",
            Wait::Unlisted => "unlisted",
            Wait::NotAsked => "not asked",
            Wait::LateSocket => "late socket",
            Wait::SlowPage => "slow page",
        }
    }
}

/// What held back the last note of `timeline`'s first screen in `session` (`None`: no screen,
/// or one not filled before the deadline), with `ideal` the session's time ceiling
/// ([`super::fastest`] for `client`) and `waves` everything the run asked.
pub fn screen_wait(
    sim: &SimWorld,
    session: u32,
    client: &ClientTiming,
    timeline: &Timeline,
    ideal: &Timeline,
    waves: &[Asks],
) -> Option<Wait> {
    let screen = screen_notes(sim, timeline.arrived.iter().map(|(&e, &t)| (e, t)));
    // The last to arrive; of notes that came together (one page), the lowest id, so the
    // answer does not depend on the order they are stored in.
    let events = sim.world.events();
    let mut last: Option<(u32, f64)> = None;
    for (e, t) in screen {
        let t = t?;
        let later = last.is_none_or(|(l, m)| {
            t > m || (t == m && events[e as usize].id < events[l as usize].id)
        });
        if later {
            last = Some((e, t));
        }
    }
    let (event, at) = last?;
    let best = ideal.arrived.get(&event).copied().flatten()?;
    let in_time = |t: f64| t <= (best * ON_TIME_FACTOR).max(best + ON_TIME_MS);
    if in_time(at) {
        return Some(Wait::OnTime);
    }
    let world = &sim.world;
    let note = &events[event as usize];
    let author = AuthorId(note.author);
    let table = &sim.table;
    let knowable: Vec<&str> = match table.write_relays(author) {
        [] => table.reader_relays(),
        listed => listed,
    }
    .iter()
    .map(|&r| table.url(r))
    .collect();
    // The relays a list names that hold it, answer this session and would have brought it in
    // time on the ceiling, with their first connect.
    let quick: Vec<(&str, f64)> = (world.event_relays(note).iter())
        .filter(|&&r| world.relays()[r as usize].exists && world.is_up(r, session))
        .map(|&r| (r, world.relays()[r as usize].url.as_str()))
        .filter(|&(r, url)| {
            knowable.contains(&url) && in_time(first_page_ms(sim, r, session, client))
        })
        .map(|(r, url)| {
            let connect =
                (world.timing(r).connect_ms(url, session, 0)).min(client.connect_timeout_ms);
            (url, connect)
        })
        .collect();
    if quick.is_empty() {
        return Some(Wait::Unlisted);
    }
    let asked = |url: &str| {
        (waves.iter().flat_map(|w| &w.entries))
            .any(|a| a.url == url && a.authors.contains(&note.author))
    };
    let asked: Vec<(&str, f64)> = quick.into_iter().filter(|(url, _)| asked(url)).collect();
    if asked.is_empty() {
        return Some(Wait::NotAsked);
    }
    // A socket is late when it opened well after a dial at the start would have.
    let on_time = |&(url, connect): &(&str, f64)| {
        (timeline.opened.get(url)).is_some_and(|&t| t <= connect + ON_TIME_MS)
    };
    Some(if asked.iter().any(on_time) {
        Wait::SlowPage
    } else {
        Wait::LateSocket
    })
}

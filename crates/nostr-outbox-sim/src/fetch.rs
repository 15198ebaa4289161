//! What a plan's REQs return when relays cap each REQ: the runtime's paged fetch, simulated.
//!
//! The simulated client pages by the rules of [`nostr_outbox_client::paging`], exactly as the runtime
//! does, and knows no relay's cap (the simulator has no NIP-11 documents, so
//! [`RelayLimits::default`]):
//!
//! 1. each asked relay's author list, in the order a REQ filter holds it (public-key order, as
//!    in a `nostr::Filter`), is split with [`paging::chunk`];
//! 2. each chunk is asked with `limit` = [`Paging::limit_for`] and `since` = the window's start;
//!    the relay returns the newest `min(limit, max_limit)` events of the chunk's authors it
//!    stores with `since ≤ created_at ≤ until`, newest first and, within one second, by id
//!    ascending (the order of `nostr` events and of nostr-relay-builder's memory database);
//! 3. a [`Cursor`] per chunk and one [`CapEstimate`] per relay decide the next page's `until`,
//!    until the chunk's paging ends ([`Ended`]).
//!
//! With complete paging a window returns every stored event of the asked authors; only a
//! [`Ended::Budget`] end (or more than a page of one second) loses events, and recall counts
//! what the pages actually returned. Each relay's stored events are sorted by time once per
//! [`SimWorld`]; a page is a range of the chunk's events found by binary search.
//!
//! [`fetch_recorded`] also hands every asked relay's REQ, returned events, EOSE and failure to
//! a [`RoundRecorder`], as the runtime's coordinator does with relay frames, so the simulator
//! learns through the same code as a live client.

use nostr::event::EventId;
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_client::{
    paging, paging::CapEstimate, paging::Cursor, paging::Ended, paging::Next, paging::Page,
    paging::Paging, paging::RelayLimits,
};
use serde::{Deserialize, Serialize};

use crate::asks::Asks;
use crate::sim_world::SimWorld;
use crate::window::Window;

/// What fetching one window of a plan cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchCost {
    /// REQ pages sent to relays that answered (round trips).
    pub round_trips: u64,
    /// Events returned by every page, duplicates across relays and page edges included.
    pub events: u64,
    /// Author chunks whose paging ended on the page budget (older events may remain).
    pub cut_chunks: u64,
}

impl FetchCost {
    fn add(&mut self, other: &FetchCost) {
        self.round_trips += other.round_trips;
        self.events += other.events;
        self.cut_chunks += other.cut_chunks;
    }
}

/// A window's cost, as kept in a [`PlanScore`](crate::PlanScore).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowCost {
    /// The window.
    pub window: Window,
    /// What fetching it cost.
    #[serde(flatten)]
    pub cost: FetchCost,
}

/// What one asked relay returned over every page of one window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RelayFetch {
    /// Whether the relay answered in the session.
    pub up: bool,
    /// What its pages cost.
    pub cost: FetchCost,
    /// Per asked author with at least one event returned: distinct events, newest and oldest
    /// (sorted by author; filled only when asked for).
    pub returned: Vec<AuthorReturn>,
}

/// One window of a plan fetched in one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The window's start (`since` of every REQ).
    pub since: u64,
    /// Per world event (indexed like [`World::events`](nostr_outbox_world::World::events)),
    /// whether some page returned it.
    pub delivered: Vec<bool>,
    /// Per plan entry, in order.
    pub relays: Vec<RelayFetch>,
    /// The sum over relays.
    pub cost: FetchCost,
}

/// The paging rules and relay knowledge of the simulated client.
fn client() -> (Paging, RelayLimits) {
    (Paging::default(), RelayLimits::default())
}

/// Fetches `asks` in `session` with `since`, paging every relay; with `returns`, also counts
/// what each relay returned per author (what the client learns from).
pub fn fetch(sim: &SimWorld, asks: &Asks, session: u32, since: u64, returns: bool) -> Fetched {
    fetch_into(sim, asks, session, since, returns, None, None)
}

/// Where [`fetch_into`] reports each page it simulates: the plan entry, the author chunk of
/// that entry, and the events the page returned that no earlier page of the chunk had (world
/// event indexes). Every page is reported, empty ones included, in the order a chunk pages.
pub(crate) type PageSink<'a> = &'a mut dyn FnMut(usize, usize, &[u32]);

/// [`fetch`] with every relay's frames passed to `recorder` as filter generation 1: the REQ
/// (`asked`), each returned event (by its world id), and the EOSE (complete unless a chunk's
/// paging ended on the page budget), or a failure for a relay that is down.
pub fn fetch_recorded(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    since: u64,
    recorder: &mut RoundRecorder,
) -> Fetched {
    fetch_into(sim, asks, session, since, false, Some(recorder), None)
}

/// [`fetch`], with `recorder` (when given) seeing every relay's frames as in [`fetch_recorded`],
/// and `pages` (when given) every page ([`PageSink`]).
pub(crate) fn fetch_into(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    since: u64,
    returns: bool,
    mut recorder: Option<&mut RoundRecorder>,
    mut pages: Option<PageSink<'_>>,
) -> Fetched {
    const GENERATION: u64 = 1;
    let world = &sim.world;
    let events = world.events();
    let (paging, limits) = client();
    let mut delivered = vec![false; events.len()];
    let mut total = FetchCost::default();
    let mut in_chunk = vec![0u32; world.follows.len()];
    let mut chunk_id = 0u32;
    let mut slot = vec![u32::MAX; world.follows.len()];
    let mut found: Vec<(u64, u32)> = Vec::new();
    let mut relays = Vec::with_capacity(asks.entries.len());
    let mut fresh: Vec<u32> = Vec::new();
    for (entry_index, entry) in asks.entries.iter().enumerate() {
        let mut authors: Vec<u32> = entry
            .authors
            .iter()
            .copied()
            .filter(|&a| (a as usize) < world.follows.len())
            .collect();
        authors.sort_unstable_by_key(|&a| sim.key_rank(a));
        authors.dedup();
        if let Some(rec) = recorder.as_deref_mut() {
            let keys = authors.iter().map(|&a| world.follows[a as usize]);
            rec.asked(&entry.url, keys, GENERATION);
        }
        let Some(r) = entry.relay.filter(|&r| world.is_up(r, session)) else {
            if let Some(rec) = recorder.as_deref_mut() {
                rec.failed(&entry.url, "down in this session");
            }
            relays.push(RelayFetch::default());
            continue;
        };
        let stored = sim.relay_events(r);
        let end = stored.partition_point(|&(t, _)| t >= since);
        let stored = &stored[..end];
        let serves = world.relays()[r as usize]
            .max_limit
            .unwrap_or(u32::MAX)
            .max(1);
        let mut cost = FetchCost::default();
        let mut returned: Vec<AuthorReturn> = Vec::new();
        let mut cap = CapEstimate::new(&limits);
        for (chunk_index, chunk) in paging::chunk(&authors, &limits, &paging)
            .into_iter()
            .enumerate()
        {
            chunk_id += 1;
            for &a in &chunk {
                in_chunk[a as usize] = chunk_id;
            }
            found.clear();
            found.extend(
                stored
                    .iter()
                    .copied()
                    .filter(|&(_, i)| in_chunk[events[i as usize].author as usize] == chunk_id),
            );
            let mut cursor = Cursor::new(paging.limit_for(&limits), Some(since));
            // Pages start no earlier than the one before, so what is new is what lies past the
            // furthest position returned so far.
            let mut seen_to = 0usize;
            loop {
                let start = cursor
                    .until()
                    .map_or(0, |until| found.partition_point(|&(t, _)| t > until));
                let take = cursor.limit().min(serves) as usize;
                let stop = (start + take).min(found.len());
                let fresh_from = start.max(seen_to).min(stop);
                if let Some(sink) = pages.as_deref_mut() {
                    fresh.clear();
                    fresh.extend(found[fresh_from..stop].iter().map(|&(_, i)| i));
                    sink(entry_index, chunk_index, &fresh);
                }
                for &(t, i) in &found[fresh_from..stop] {
                    delivered[i as usize] = true;
                    if let Some(rec) = recorder.as_deref_mut() {
                        let event = &events[i as usize];
                        let author = world.follows[event.author as usize];
                        rec.returned(&entry.url, author, EventId::from_byte_array(event.id), t);
                    }
                    if returns {
                        let a = events[i as usize].author;
                        let s = &mut slot[a as usize];
                        if *s == u32::MAX {
                            *s = returned.len() as u32;
                            returned.push(AuthorReturn {
                                author: a,
                                events: 0,
                                newest: t,
                                oldest: t,
                            });
                        }
                        let g = &mut returned[*s as usize];
                        g.events += 1;
                        g.newest = g.newest.max(t);
                        g.oldest = g.oldest.min(t);
                    }
                }
                seen_to = seen_to.max(stop);
                let page = Page {
                    returned: (stop - start) as u32,
                    new: (stop - fresh_from) as u32,
                    oldest: (stop > start).then(|| found[stop - 1].0),
                };
                cost.round_trips += 1;
                cost.events += u64::from(page.returned);
                if let Next::Done(why) = cursor.answer(page, &mut cap, &paging) {
                    cost.cut_chunks += u64::from(why == Ended::Budget);
                    break;
                }
            }
        }
        if let Some(rec) = recorder.as_deref_mut() {
            rec.eose(&entry.url, GENERATION, cost.cut_chunks == 0);
        }
        for g in &returned {
            slot[g.author as usize] = u32::MAX;
        }
        returned.sort_unstable_by_key(|g| g.author);
        total.add(&cost);
        relays.push(RelayFetch {
            up: true,
            cost,
            returned,
        });
    }
    Fetched {
        since,
        delivered,
        relays,
        cost: total,
    }
}

/// What one author's events from one relay looked like.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthorReturn {
    /// The follow.
    pub author: u32,
    /// Events returned.
    pub events: u32,
    /// `created_at` of the newest event returned.
    pub newest: u64,
    /// `created_at` of the oldest event returned.
    pub oldest: u64,
}

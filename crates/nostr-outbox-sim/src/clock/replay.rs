//! The replay of one session's run ([the clock's docs](super), steps 1 to 6): [`replay()`]
//! whole, or [`Replay`] one wave at a time.

use std::collections::HashMap;

use nostr_outbox_client::recorder::EMPTY_FOLLOWS;
use nostr_outbox_core::Probe;
use nostr_outbox_world::RelayTiming;

use super::budget::Budget;
use super::client::ClientTiming;
use super::timeline::Timeline;
use crate::asks::{Ask, Asks};
use crate::fetch::fetch_into;
use crate::sim_world::SimWorld;

/// What a session's run did, in the order the clock replays it.
#[derive(Clone, Copy, Debug)]
pub struct RunShape<'a> {
    /// The first plan's asks, then each re-plan's (every plan of the run, whole).
    pub waves: &'a [Asks],
    /// Whether the lists were kept from the last run, so the routed relays are dialled at the
    /// start; `false`: a first run, which waits for the relay-list lookup.
    pub lists_kept: bool,
    /// The relays probed once the fetch settled, in the order they are dialled.
    pub probes: &'a [Probe],
    /// Probe sockets open at once (the routed budget, as the runtime opens them): each next
    /// probe waits for the first one to end. 0 counts as 1.
    pub probes_at_once: usize,
}

/// One relay's socket during a replay.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    /// When its socket could carry a REQ (`None`: set aside, or not dialled).
    ready: Option<f64>,
    /// When everything asked of it so far was answered, or it was set aside.
    resolved: f64,
    /// Queries drawn so far (each draw has its own number).
    queries: u64,
    /// Set aside: never asked again in the run.
    aside: bool,
    /// Its first query's time, once drawn.
    first_query_ms: Option<f64>,
    /// When its socket first opened.
    opened: Option<f64>,
}

/// A relay's timing: the world's, or the default for a URL the world does not know (it never
/// answers).
fn timing_of(sim: &SimWorld, relay: Option<u32>) -> RelayTiming {
    relay.map_or_else(RelayTiming::default, |r| sim.world.timing(r))
}

/// Dials `url` at `at` (after waiting for a place): when its socket is ready (the caller then
/// holds the place), or the time it was set aside (its place freed then).
fn dial(
    sim: &SimWorld,
    client: &ClientTiming,
    budget: &mut Budget,
    url: &str,
    relay: Option<u32>,
    session: u32,
    at: f64,
) -> Result<f64, f64> {
    let timing = timing_of(sim, relay);
    let start = budget.place(at);
    if relay.is_some_and(|r| sim.world.is_up(r, session)) {
        // The caller holds the place for as long as the socket is used.
        return Ok(start
            + timing
                .connect_ms(url, session, 0)
                .min(client.connect_timeout_ms));
    }
    let mut t = start;
    let attempts = if timing.hangs && client.policy.aside_on_timeout {
        1
    } else {
        client.attempts.max(1)
    };
    for attempt in 0..attempts {
        t += if timing.hangs {
            client.connect_timeout_ms
        } else {
            timing.refuse_ms(url, session, u64::from(attempt))
        };
        if attempt + 1 < attempts {
            t += 0.75 * client.backoff_ms * 2f64.powi(attempt.min(30) as i32);
        }
    }
    budget.hold(t);
    Err(t)
}

/// Replays one session's run ([the clock's docs](super)) for the notes of `since` and later:
/// when each note the run fetched arrived.
pub fn replay(
    sim: &SimWorld,
    session: u32,
    since: u64,
    run: RunShape<'_>,
    client: &ClientTiming,
) -> Timeline {
    let mut replay = Replay::start(sim, session, since, run.lists_kept, client);
    for wave in run.waves {
        replay.wave(wave, None);
    }
    replay.finish(run.probes, run.probes_at_once)
}

/// A run replayed one wave at a time ([`replay()`] in steps): a caller that chooses each re-plan
/// from what happened so far (the simulator's re-planned sessions) learns from it when each
/// relay was set aside, and so which set-asides a re-plan at a given moment knows of.
pub struct Replay<'a> {
    sim: &'a SimWorld,
    client: &'a ClientTiming,
    session: u32,
    since: u64,
    budget: Budget,
    links: HashMap<String, Link>,
    /// Per relay, the follows the run's plans asked of it so far.
    asked: HashMap<String, Vec<u32>>,
    arrived: HashMap<u32, f64>,
    readers: Vec<&'a str>,
    /// When the first plan's routed relays may be dialled (after the lookup on a first run).
    routed_from: f64,
    /// When the last wave went out.
    wave_at: f64,
    waves: usize,
    /// With early waves, when the runtime's re-plan asks elsewhere about an author: the
    /// debounce after the first relay it was asked of was set aside (the runtime re-plans
    /// after each set-aside, not once per wave).
    moved_at: HashMap<u32, f64>,
    /// Every answer with notes so far: when it ended, and whose notes it returned (what shows
    /// another relay's empty answer up).
    answers: Vec<(f64, String, Vec<u32>)>,
    /// Every relay set aside so far (it failed, or answered empty), and when.
    asides: HashMap<String, f64>,
    settled: f64,
}

impl<'a> Replay<'a> {
    /// The run's start: the reader's relays are dialled, and on a first run (`lists_kept`
    /// false) answer the relay-list lookup.
    pub fn start(
        sim: &'a SimWorld,
        session: u32,
        since: u64,
        lists_kept: bool,
        client: &'a ClientTiming,
    ) -> Self {
        let world = &sim.world;
        let mut budget = Budget::new(client.lasting_sockets);
        let mut links: HashMap<String, Link> = HashMap::new();
        let mut asides = HashMap::new();
        let mut lists_answered: Vec<f64> = Vec::new();
        let mut lookup_failed = 0f64;
        for url in &world.reader_relays {
            let relay = world.relay_id(url);
            let mut link = Link::default();
            match dial(sim, client, &mut budget, url, relay, session, 0.0) {
                Ok(ready) => {
                    budget.hold(f64::INFINITY);
                    let timing = timing_of(sim, relay);
                    // The lookup's query is the socket's first.
                    let answer = ready + query_ms(&timing, client, url, session, &mut link);
                    lists_answered.push(answer);
                    link.ready = Some(ready);
                    link.opened = Some(ready);
                    link.resolved = answer;
                }
                Err(aside) => {
                    lookup_failed = lookup_failed.max(aside);
                    link.resolved = aside;
                    link.aside = true;
                    asides.insert(url.clone(), aside);
                }
            }
            links.insert(url.clone(), link);
        }
        let lookup_end = match lists_answered.iter().copied().reduce(f64::min) {
            Some(first) => {
                let all = lists_answered.iter().copied().fold(0.0, f64::max);
                // Reader relays that fail are waited for only until the grace is over.
                all.max(lookup_failed).min(first + client.lookup_grace_ms)
            }
            None => lookup_failed,
        };
        let lists_in = lists_answered
            .iter()
            .copied()
            .filter(|&t| t <= lookup_end)
            .fold(0.0, f64::max);
        let routed_from = match (lists_kept || client.lists_given, lists_answered.is_empty()) {
            (true, _) => 0.0,
            (false, false) => lists_in + client.debounce_ms,
            // No reader relay answered: the runtime plans with what it has once they failed.
            (false, true) => lookup_end + client.debounce_ms,
        };
        Self {
            sim,
            client,
            session,
            since,
            budget,
            links,
            asked: HashMap::new(),
            arrived: HashMap::new(),
            readers: world.reader_relays.iter().map(String::as_str).collect(),
            routed_from,
            wave_at: 0.0,
            waves: 0,
            moved_at: HashMap::new(),
            answers: Vec::new(),
            asides,
            settled: lookup_end,
        }
    }

    /// When the next re-plan goes out, as the runtime sends it: with early waves, the
    /// debounce after the first set-aside since the last plan went out; otherwise (or when
    /// none is left) once every relay asked so far answered or was set aside, or one EOSE
    /// timeout after the first failure since the last plan, whichever comes first.
    fn next_wave_at(&self) -> f64 {
        let since_last = |include: &dyn Fn(&str) -> bool| {
            (self.asides.iter())
                .filter(|(url, &at)| at > self.wave_at && include(url))
                .map(|(_, &at)| at)
                .fold(f64::INFINITY, f64::min)
        };
        let first_aside = since_last(&|_| true);
        if self.client.policy.early_waves && first_aside.is_finite() {
            return first_aside + self.client.debounce_ms;
        }
        let failed = |url: &str| self.links.get(url).is_some_and(|l| l.ready.is_none());
        let first_failed = since_last(&failed);
        let everyone = (self.links.values())
            .map(|l| l.resolved)
            .fold(self.wave_at, f64::max);
        everyone
            .min(first_failed + self.client.eose_timeout_ms)
            .max(self.wave_at)
    }

    /// Every relay set aside so far (failed, or answered empty) and when, ms.
    pub fn asides(&self) -> &HashMap<String, f64> {
        &self.asides
    }

    /// When the fetch so far settled: every relay asked answered or was set aside, ms.
    pub fn settled(&self) -> f64 {
        self.settled
    }

    /// Serves the next plan's `wave` (every plan of the run, whole: what earlier plans asked
    /// is not asked again), going out at `at`, or when the runtime would send it: the debounce
    /// after the first set-aside since the last wave ([the clock's docs](super), step 5). The
    /// first wave goes out at the start.
    pub fn wave(&mut self, wave: &Asks, at: Option<f64>) {
        let client = self.client;
        let sim = self.sim;
        let session = self.session;
        let n = self.waves;
        self.waves += 1;
        if n > 0 {
            self.wave_at = at.unwrap_or_else(|| self.next_wave_at()).max(self.wave_at);
        }
        let wave_at = self.wave_at;
        // What this wave asks that no earlier wave did, relay by relay (and, with early waves,
        // by when each of its authors moved), with when each goes out.
        let mut delta = Asks::default();
        let mut froms: Vec<f64> = Vec::new();
        for ask in &wave.entries {
            let before = self.asked.entry(ask.url.clone()).or_default();
            let new: Vec<u32> = (ask.authors.iter())
                .copied()
                .filter(|a| !before.contains(a))
                .collect();
            if new.is_empty() {
                continue;
            }
            before.extend(&new);
            let mut groups: Vec<(f64, Vec<u32>)> = Vec::new();
            for a in new {
                let at = match self.moved_at.get(&a) {
                    Some(&t) if client.policy.early_waves => t.max(wave_at),
                    _ => wave_at,
                };
                match groups.iter_mut().find(|(t, _)| *t == at) {
                    Some((_, authors)) => authors.push(a),
                    None => groups.push((at, vec![a])),
                }
            }
            groups.sort_by(|x, y| x.0.total_cmp(&y.0));
            for (at, authors) in groups {
                froms.push(at);
                delta.entries.push(Ask {
                    url: ask.url.clone(),
                    relay: ask.relay,
                    authors,
                });
            }
        }
        let pages = paged(sim, &delta, session, self.since);
        // Per ask of the wave, the follows it returned notes of.
        let returned: Vec<Vec<u32>> = (pages.iter())
            .map(|chunks| {
                let mut authors: Vec<u32> = (chunks.iter().flatten().flatten())
                    .map(|&e| sim.world.events()[e as usize].author)
                    .collect();
                authors.sort_unstable();
                authors.dedup();
                authors
            })
            .collect();
        let mut ends: Vec<Option<f64>> = Vec::with_capacity(delta.entries.len());
        let mut state = State {
            budget: &mut self.budget,
            links: &mut self.links,
            arrived: &mut self.arrived,
        };
        for ((ask, chunks), at) in delta.entries.iter().zip(pages).zip(froms) {
            // The first plan's routed relays wait for the lists on a first run.
            let from = if n == 0 && !self.readers.contains(&ask.url.as_str()) {
                self.routed_from
            } else {
                at
            };
            let served = serve(sim, client, session, &mut state, ask, chunks, from);
            self.settled = self.settled.max(served.resolved);
            ends.push(served.first_answer.map(|_| served.resolved));
            if served.first_answer.is_none() {
                let failed = self
                    .asides
                    .entry(ask.url.clone())
                    .or_insert(served.resolved);
                *failed = failed.min(served.resolved);
                let moved = served.resolved + client.debounce_ms;
                for &a in &ask.authors {
                    let t = self.moved_at.entry(a).or_insert(moved);
                    *t = t.min(moved);
                }
            }
        }
        // Relays that answered empty are set aside at the EOSE that shows them up (their own,
        // or the first answer with notes of one of their follows), as the runtime does.
        for (ask, (end, got)) in delta.entries.iter().zip(ends.iter().zip(&returned)) {
            if let Some(end) = end.filter(|_| !got.is_empty()) {
                self.answers.push((end, ask.url.clone(), got.clone()));
            }
        }
        for (ask, (end, got)) in delta.entries.iter().zip(ends.iter().zip(&returned)) {
            let Some(end) = end.filter(|_| got.is_empty()) else {
                continue;
            };
            if self.readers.contains(&ask.url.as_str()) {
                continue;
            }
            let shown = if ask.authors.len() >= EMPTY_FOLLOWS {
                end
            } else {
                (self.answers.iter())
                    .filter(|(_, url, got)| {
                        *url != ask.url && got.iter().any(|a| ask.authors.contains(a))
                    })
                    .map(|(at, _, _)| *at)
                    .fold(f64::INFINITY, f64::min)
                    .max(end)
            };
            if shown.is_finite() {
                // Set aside for the run: its socket closes then.
                let link = self.links.entry(ask.url.clone()).or_default();
                if !link.aside {
                    link.aside = true;
                    self.budget.release(shown);
                    self.asides.insert(ask.url.clone(), shown);
                }
                for &a in &ask.authors {
                    let t = self.moved_at.entry(a).or_insert(shown + client.debounce_ms);
                    *t = t.min(shown + client.debounce_ms);
                }
            }
        }
    }

    /// The run's end: probes once the fetch settled, and when each note arrived.
    pub fn finish(self, probes: &[Probe], probes_at_once: usize) -> Timeline {
        let (sim, client, session) = (self.sim, self.client, self.session);
        let world = &sim.world;
        let settled = self.settled;
        // Probes once the fetch settled: one connect and one query each, or one failed
        // attempt, at most `probes_at_once` at a time, each next one in the first place that
        // frees.
        let mut places = vec![settled; probes_at_once.clamp(1, probes.len().max(1))];
        let mut end = settled;
        for probe in probes {
            let url = probe.url.as_str();
            let relay = world.relay_id(url);
            let timing = timing_of(sim, relay);
            let give_up = client.probe_give_up_ms(probe);
            let took = if relay.is_some_and(|r| world.is_up(r, session)) {
                let connect = timing.connect_ms(url, session, 1);
                if connect > give_up {
                    give_up
                } else {
                    connect
                        + timing
                            .query_ms(url, session, u64::MAX)
                            .min(client.eose_timeout_ms)
                }
            } else if timing.hangs {
                give_up
            } else {
                timing.refuse_ms(url, session, 1)
            };
            let place = (0..places.len())
                .min_by(|&a, &b| places[a].total_cmp(&places[b]))
                .unwrap_or(0);
            places[place] += took;
            end = end.max(places[place]);
        }
        let deadline = client.deadline_ms;
        let opened = (self.links.iter())
            .filter_map(|(url, link)| Some((url.clone(), link.opened?)))
            .collect();
        let mut latency: Vec<(String, f64)> = (self.links.into_iter())
            .filter_map(|(url, link)| Some((url, link.first_query_ms?)))
            .collect();
        latency.sort_by(|a, b| a.0.cmp(&b.0));
        Timeline {
            arrived: (self.arrived.into_iter())
                .map(|(e, t)| (e, (t <= deadline).then_some(t)))
                .collect(),
            settled_ms: settled.min(deadline),
            end_ms: end.min(deadline),
            latency,
            opened,
        }
    }
}

/// Every page `asks` get in `session`, per entry and chunk in paging order: each page's notes
/// that no earlier page of its chunk returned.
fn paged(sim: &SimWorld, asks: &Asks, session: u32, since: u64) -> Vec<Vec<Vec<Vec<u32>>>> {
    let mut pages: Vec<Vec<Vec<Vec<u32>>>> = vec![Vec::new(); asks.entries.len()];
    let mut sink = |entry: usize, chunk: usize, fresh: &[u32]| {
        let chunks = &mut pages[entry];
        if chunks.len() <= chunk {
            chunks.resize(chunk + 1, Vec::new());
        }
        chunks[chunk].push(fresh.to_vec());
    };
    fetch_into(sim, asks, session, since, false, None, Some(&mut sink));
    pages
}

/// What a replay changes as it serves asks.
struct State<'a> {
    budget: &'a mut Budget,
    links: &'a mut HashMap<String, Link>,
    arrived: &'a mut HashMap<u32, f64>,
}

/// What serving one ask came to.
struct Served {
    /// When its first page arrived (`None`: the relay was set aside, or had been).
    first_answer: Option<f64>,
    /// When everything asked of it was answered, or it was set aside.
    resolved: f64,
}

/// Serves `ask` from `from` on: dials the relay unless its socket is open, then pages `chunks`
/// (per chunk, each page's new notes) at most [`ClientTiming::concurrent_pages`] at once, and
/// keeps its place for the run.
fn serve(
    sim: &SimWorld,
    client: &ClientTiming,
    session: u32,
    state: &mut State<'_>,
    ask: &Ask,
    chunks: Vec<Vec<Vec<u32>>>,
    from: f64,
) -> Served {
    let link = state.links.entry(ask.url.clone()).or_default();
    if link.aside {
        return Served {
            first_answer: None,
            resolved: from,
        };
    }
    let mut dialled = false;
    let ready = match link.ready {
        Some(ready) => ready.max(from),
        None => match dial(
            sim,
            client,
            state.budget,
            &ask.url,
            ask.relay,
            session,
            from,
        ) {
            Ok(ready) => {
                link.ready = Some(ready);
                link.opened.get_or_insert(ready);
                dialled = true;
                ready
            }
            Err(aside) => {
                link.resolved = aside;
                link.aside = true;
                return Served {
                    first_answer: None,
                    resolved: aside,
                };
            }
        },
    };
    let timing = timing_of(sim, ask.relay);
    // Pages go out in time order, as the runtime sends them: each lane sends its chunk's next
    // page when the last one answered and takes the next chunk when its own is done; the query
    // times are drawn in that order.
    let mut lanes: Vec<(f64, Option<std::vec::IntoIter<Vec<u32>>>)> =
        vec![(ready, None); client.concurrent_pages.max(1)];
    let mut waiting = chunks.into_iter();
    let mut first_answer = f64::INFINITY;
    loop {
        for lane in lanes.iter_mut() {
            if lane.1.as_ref().is_none_or(|pages| pages.len() == 0) {
                lane.1 = waiting.next().map(Vec::into_iter);
            }
        }
        let next = (0..lanes.len())
            .filter(|&l| lanes[l].1.as_ref().is_some_and(|pages| pages.len() > 0))
            .min_by(|&a, &b| lanes[a].0.total_cmp(&lanes[b].0));
        let Some(l) = next else { break };
        let Some(page) = lanes[l].1.as_mut().and_then(Iterator::next) else {
            break;
        };
        let sent = lanes[l].0;
        let t = sent + query_ms(&timing, client, &ask.url, session, link);
        first_answer = first_answer.min(t);
        for e in page {
            let at = state.arrived.entry(e).or_insert(t);
            *at = at.min(t);
        }
        lanes[l].0 = t;
    }
    let lanes: Vec<f64> = lanes.into_iter().map(|(t, _)| t).collect();
    let done = lanes.iter().copied().fold(ready, f64::max);
    link.resolved = link.resolved.max(done);
    let resolved = link.resolved;
    if dialled {
        state.budget.hold(f64::INFINITY);
    }
    Served {
        first_answer: Some(first_answer.min(done)),
        resolved,
    }
}

/// The next query time of a link, never past the EOSE timeout (a relay that answers answers
/// within it; one that does not is down and hangs, which the dial models).
fn query_ms(
    timing: &RelayTiming,
    client: &ClientTiming,
    url: &str,
    session: u32,
    link: &mut Link,
) -> f64 {
    let ms = timing
        .query_ms(url, session, link.queries)
        .min(client.eose_timeout_ms);
    link.queries += 1;
    link.first_query_ms.get_or_insert(ms);
    ms
}

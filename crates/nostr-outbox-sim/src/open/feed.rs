//! This library's strategies with the feed left open, as the runtime's continuing feed is
//! meant to behave: a continuing feed never routes nothing, and everything set aside expires.
//!
//! - The plan's relays stay subscribed. A relay that drops is dialled again with the runtime's
//!   backoff; when it answers, it is asked `since` the newest note it delivered, so its gap is
//!   filled.
//! - A relay that fails every attempt is set aside (a minute, four times longer at each strike
//!   in a row, at most six hours) and its follows are planned elsewhere after the debounce;
//!   when the set-aside expires the feed plans again with it.
//! - Once the window is fetched, a strategy that reads the window plans again for the notes
//!   to come ([`super::LIVE_WINDOW_SECS`]).
//! - A follow's new relay list, or a change to the reader's follows, is planned for a debounce
//!   after the client holds it.
//! - Relays beyond the socket budget are polled in turns, each asked `since` its last answer.
//! - A relay whose filter a new plan changed is asked its whole filter again, as the runtime
//!   re-sends a changed filter as a new generation.

use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use nostr::event::EventId;
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::Router;

use super::{Feed, Segment, Session};
use crate::asks::Asks;

/// Longest set-aside, seconds (the runtime's six hours).
const LONGEST_ASIDE: f64 = 6.0 * 3_600.0;
/// First set-aside, seconds.
const FIRST_ASIDE: f64 = 60.0;
/// Longest backoff between attempts, seconds (the runtime's two minutes).
const LONGEST_BACKOFF: f64 = 120.0;
/// Most events handled in one open feed: bounds a pathological hour.
const MAX_EVENTS: usize = 1_000_000;

/// What happens next, in time order.
#[derive(Clone, Debug)]
enum Ev {
    /// Dial a slot's relay (the slot's epoch when scheduled).
    Dial(String, u64),
    /// A slot's relay went down under its open subscription.
    Drop(String, u64),
    /// A polled slot's turn.
    Poll(String, u64),
    /// A set-aside ended.
    Expire,
    /// Plan again (the debounce has passed).
    Replan,
    /// A new relay list reached the client.
    List,
}

/// Events ordered by time, then by when they were queued.
#[derive(Default)]
struct Queue {
    heap: BinaryHeap<std::cmp::Reverse<(Time, u64)>>,
    events: HashMap<u64, Ev>,
    seq: u64,
}

#[derive(Clone, Copy)]
struct Time(f64);
impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Queue {
    fn push(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(std::cmp::Reverse((Time(t), self.seq)));
        self.events.insert(self.seq, ev);
    }

    fn pop(&mut self) -> Option<(f64, Ev)> {
        let std::cmp::Reverse((t, seq)) = self.heap.pop()?;
        self.events.remove(&seq).map(|ev| (t.0, ev))
    }
}

/// How a slot stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Dialling,
    Open,
    Aside,
    Polled,
}

/// One relay of the current plan.
#[derive(Clone, Debug)]
struct Slot {
    relay: Option<u32>,
    authors: Vec<u32>,
    epoch: u64,
    state: State,
    /// Notes from here on are asked for at the next answer.
    since: f64,
    /// The open subscription's segment.
    open: Option<usize>,
    attempt: u32,
}

struct Runner<'s, 'a> {
    s: &'s Session<'a>,
    feed: Feed,
    slots: BTreeMap<String, Slot>,
    /// Set-aside relays: until when, and strikes in a row.
    aside: HashMap<String, (f64, u32)>,
    queue: Queue,
    epoch: u64,
    replan_due: bool,
    /// Connect and REQ counters (the timing draws' `n`).
    draws: u64,
    generation: u64,
}

/// Runs the open feed of this library's strategies on `s`, starting from what its fetch asked.
pub(super) fn run(s: &Session<'_>, router: &mut Router, recorder: &mut RoundRecorder) -> Feed {
    let mut r = Runner {
        s,
        feed: Feed::default(),
        slots: BTreeMap::new(),
        aside: HashMap::new(),
        queue: Queue::default(),
        epoch: 0,
        replan_due: false,
        draws: 0,
        generation: 0,
    };
    // Relays up at the start hold the subscription the fetch opened; the others are dialled.
    r.apply(&s.followed_only(s.asks, 0.0), 0.0, recorder, true);
    // Once the window is fetched, the subscriptions are planned again for the notes to come
    // (a strategy that reads the window plans for the newest; the others plan as before).
    if router.reads_window() {
        r.replan_due = true;
        r.queue.push(0.0, Ev::Replan);
    }
    for t in s.list_changes() {
        r.queue.push(t, Ev::List);
    }
    let secs = s.open.secs;
    let mut handled = 0;
    while let Some((t, ev)) = r.queue.pop() {
        if t >= secs || handled >= MAX_EVENTS {
            break;
        }
        handled += 1;
        match ev {
            Ev::Dial(url, epoch) => r.dial(&url, epoch, t, recorder),
            Ev::Drop(url, epoch) => r.dropped(&url, epoch, t),
            Ev::Poll(url, epoch) => r.poll(&url, epoch, t, recorder),
            Ev::Expire | Ev::List => r.replan_after_debounce(t),
            Ev::Replan => {
                r.replan_due = false;
                let aside: HashSet<&str> = (r.aside.iter())
                    .filter(|(_, &(until, _))| until > t)
                    .map(|(url, _)| url.as_str())
                    .collect();
                r.feed.plans += 1;
                let plan = s.plan(router, s.moves_seen(t), &aside, t);
                // Nobody left to ask: the last plan stays, as the runtime keeps its last good one.
                if let Some(plan) = plan {
                    r.apply(&plan, t, recorder, false);
                }
            }
        }
    }
    for (url, slot) in &r.slots {
        if let Some(i) = slot.open {
            let seg = &mut r.feed.segments[i];
            seg.end = seg.end.min(secs);
        }
        // What is learned of a relay is how it stands when the feed closes: a drop it came
        // back from is not a failure (the sessions' fetches learn how often it answers).
        let down = slot.relay.is_none_or(|relay| !s.open.is_up(relay, secs));
        if down && matches!(slot.state, State::Dialling | State::Aside) {
            recorder.failed(url, "down when the feed closed");
            recorder.set_aside(url);
        }
    }
    r.feed
}

impl Runner<'_, '_> {
    fn backoff(&self, attempt: u32) -> f64 {
        // The mean of the runtime's jittered delay, half to all of it.
        let d = self.s.timing.backoff_ms / 1_000.0 * 2f64.powi(attempt.min(30) as i32);
        d.min(LONGEST_BACKOFF) * 0.75
    }

    fn replan_after_debounce(&mut self, t: f64) {
        if !self.replan_due {
            self.replan_due = true;
            self.queue
                .push(t + self.s.timing.debounce_ms / 1_000.0, Ev::Replan);
        }
    }

    fn next_epoch(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    /// Opens a subscription on `url` connected at `start`, asking back to its slot's `since`.
    fn subscribe(&mut self, url: &str, start: f64, recorder: &mut RoundRecorder, poll: bool) {
        let Some(slot) = self.slots.get(url) else {
            return;
        };
        let Some(relay) = slot.relay else {
            return;
        };
        self.draws += 1;
        let q = self.s.query(relay, self.draws);
        let open = &self.s.open;
        let end = if poll {
            start
        } else {
            open.next_down(relay, start)
        };
        let seg = Segment {
            relay,
            authors: slot.authors.clone(),
            since: slot.since,
            start,
            backfill_at: start + q,
            end,
            answered: open.stays_up(relay, start, start + q),
            poll,
        };
        self.feed.reqs += 1;
        self.generation += 1;
        let follows = &self.s.sim.world.follows;
        recorder.asked(
            url,
            (seg.authors.iter()).filter_map(|&a| follows.get(a as usize).copied()),
            self.generation,
        );
        if seg.answered {
            for &i in &open.on_relay[relay as usize] {
                let note = &open.notes[i as usize];
                if note.sampled
                    && note.t >= seg.since
                    && note.t < seg.start
                    && seg.authors.binary_search(&note.author).is_ok()
                {
                    let id = note_id(open.seed, i);
                    let at = self.s.now + note.t as u64;
                    recorder.returned(url, follows[note.author as usize], id, at);
                }
            }
            // A catch-up is bounded by `since`: it says the relay answers, not how complete.
            recorder.eose(url, self.generation, false);
        }
        self.feed.segments.push(seg);
        let index = self.feed.segments.len() - 1;
        if !poll {
            let epoch = self.slots.get(url).map_or(0, |s| s.epoch);
            if let Some(slot) = self.slots.get_mut(url) {
                slot.open = Some(index);
                slot.state = State::Open;
                slot.attempt = 0;
            }
            if end < open.secs {
                self.queue.push(end, Ev::Drop(url.to_string(), epoch));
            }
        }
    }

    fn dial(&mut self, url: &str, epoch: u64, t: f64, recorder: &mut RoundRecorder) {
        let Some(slot) = self.slots.get(url) else {
            return;
        };
        if slot.epoch != epoch || slot.state != State::Dialling {
            return;
        }
        let relay = slot.relay;
        self.draws += 1;
        self.feed.dials += 1;
        let n = self.draws;
        if let Some(r) = relay {
            let c = self.s.connect(r, n);
            if self.s.open.is_up(r, t) && self.s.open.stays_up(r, t, t + c) {
                // A success ends the escalation.
                self.aside.remove(url);
                self.subscribe(url, t + c, recorder, false);
                return;
            }
        }
        let cost = self.s.failure(relay, n);
        let attempts = self.s.timing.attempts.max(1);
        let attempt = {
            let slot = self.slots.get_mut(url).expect("checked above");
            slot.attempt += 1;
            slot.attempt
        };
        if attempt < attempts {
            let at = t + cost + self.backoff(attempt - 1);
            self.queue.push(at, Ev::Dial(url.to_string(), epoch));
            return;
        }
        let strikes = self.aside.get(url).map_or(0, |&(_, k)| k) + 1;
        let lasts = (FIRST_ASIDE * 4f64.powi(strikes.min(16) as i32 - 1)).min(LONGEST_ASIDE);
        let until = t + cost + lasts;
        self.aside.insert(url.to_string(), (until, strikes));
        if let Some(slot) = self.slots.get_mut(url) {
            slot.state = State::Aside;
        }
        self.queue.push(until, Ev::Expire);
        self.replan_after_debounce(t + cost);
    }

    fn dropped(&mut self, url: &str, epoch: u64, t: f64) {
        let Some(slot) = self.slots.get_mut(url) else {
            return;
        };
        if slot.epoch != epoch || slot.state != State::Open {
            return;
        }
        // Every note before the drop was pushed: the next answer asks from here.
        slot.since = t;
        slot.open = None;
        slot.state = State::Dialling;
        slot.attempt = 0;
        let at = t + self.backoff(0);
        self.queue.push(at, Ev::Dial(url.to_string(), epoch));
    }

    fn poll(&mut self, url: &str, epoch: u64, t: f64, recorder: &mut RoundRecorder) {
        let Some(slot) = self.slots.get(url) else {
            return;
        };
        if slot.epoch != epoch || slot.state != State::Polled {
            return;
        }
        let relay = slot.relay;
        self.draws += 1;
        self.feed.dials += 1;
        if let Some(r) = relay {
            let c = self.s.connect(r, self.draws);
            if self.s.open.is_up(r, t) && self.s.open.stays_up(r, t, t + c) {
                self.subscribe(url, t + c, recorder, true);
                if let Some(slot) = self.slots.get_mut(url) {
                    slot.since = t + c;
                }
            }
        }
        let at = t + self.s.cfg.poll_secs.max(1.0);
        self.queue.push(at, Ev::Poll(url.to_string(), epoch));
    }

    /// Closes `url`'s open subscription at `t`.
    fn close(&mut self, url: &str, t: f64) {
        if let Some(slot) = self.slots.get_mut(url) {
            if let Some(i) = slot.open.take() {
                let seg = &mut self.feed.segments[i];
                seg.end = seg.end.min(t);
            }
        }
    }

    /// Carries out a plan from `t`: relays it dropped are closed, new ones dialled, changed
    /// filters asked again; at the start, relays up are already subscribed.
    fn apply(&mut self, asks: &Asks, t: f64, recorder: &mut RoundRecorder, start: bool) {
        let wanted: HashMap<&str, &crate::asks::Ask> =
            asks.entries.iter().map(|a| (a.url.as_str(), a)).collect();
        let gone: Vec<String> = (self.slots.keys())
            .filter(|url| !wanted.contains_key(url.as_str()))
            .cloned()
            .collect();
        for url in gone {
            self.close(&url, t);
            self.slots.remove(&url);
            recorder.closed(&url);
        }
        // The budget's sockets go to the relays asked about the most follows.
        let mut order: Vec<&crate::asks::Ask> = asks.entries.iter().collect();
        order.sort_by(|a, b| {
            b.authors
                .len()
                .cmp(&a.authors.len())
                .then(a.url.cmp(&b.url))
        });
        let sockets = self.s.cfg.sockets;
        for (rank, ask) in order.into_iter().enumerate() {
            let polled = rank >= sockets;
            let url = ask.url.as_str();
            let known = self
                .slots
                .get(url)
                .map(|s| (s.state, s.authors == ask.authors));
            match known {
                Some((state, same)) => {
                    let was_polled = state == State::Polled;
                    if same && was_polled == polled && state != State::Aside {
                        continue;
                    }
                    let open = state == State::Open;
                    self.close(url, t);
                    let epoch = self.next_epoch();
                    let slot = self.slots.get_mut(url).expect("known");
                    if !same {
                        slot.authors = ask.authors.clone();
                        // A changed filter is asked again whole.
                        slot.since = 0.0;
                    } else if open {
                        slot.since = t;
                    }
                    slot.epoch = epoch;
                    slot.attempt = 0;
                    if polled {
                        slot.state = State::Polled;
                        let at = t + rank.saturating_sub(sockets) as f64 * 2.0;
                        self.queue.push(at, Ev::Poll(url.to_string(), epoch));
                    } else if open {
                        self.subscribe(url, t, recorder, false);
                    } else {
                        slot.state = State::Dialling;
                        self.queue.push(t, Ev::Dial(url.to_string(), epoch));
                    }
                }
                None => {
                    let epoch = self.next_epoch();
                    self.slots.insert(
                        url.to_string(),
                        Slot {
                            relay: ask.relay,
                            authors: ask.authors.clone(),
                            epoch,
                            state: State::Dialling,
                            since: 0.0,
                            open: None,
                            attempt: 0,
                        },
                    );
                    let up_now = ask.relay.is_some_and(|r| self.s.open.is_up(r, t));
                    if polled {
                        if let Some(slot) = self.slots.get_mut(url) {
                            slot.state = State::Polled;
                        }
                        let at = t + rank.saturating_sub(sockets) as f64 * 2.0;
                        self.queue.push(at, Ev::Poll(url.to_string(), epoch));
                    } else if start && up_now {
                        self.subscribe(url, t, recorder, false);
                    } else {
                        self.queue.push(t, Ev::Dial(url.to_string(), epoch));
                    }
                }
            }
        }
    }
}

/// The id of live note `i` of an open feed drawn from `seed`.
pub(super) fn note_id(seed: u64, i: u32) -> EventId {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..12].copy_from_slice(&i.to_le_bytes());
    bytes[31] = 0x0e;
    EventId::from_byte_array(bytes)
}

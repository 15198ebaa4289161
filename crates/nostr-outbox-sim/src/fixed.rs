//! The best fixed set: the `budget` relays that, chosen once with hindsight and asked in every
//! session about every follow who lists them, fetch the most of a window's declared notes over
//! all sessions together. Follows who list none of them are asked of the reader's relays, as in
//! every plan. It is the reference a learning router should reach when the world does not
//! change: a plan that never moves can do this well, knowing where the notes are.
//!
//! The choice assumes complete paging (a relay asked about a follow returns all of the follow's
//! notes it holds); the chosen plan is then scored like any plan. It is exhaustive over every
//! set of `budget` relays when there are at most [`MAX_EXHAUSTIVE_SETS`] of them, greedy
//! otherwise (each step adds the relay that adds the most, until none adds anything).

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;

use crate::asks::{Ask, Asks};
use crate::holdings::with_residual;
use crate::score::score_each_window;
use crate::session::{LoopConfig, SessionOutcome};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// The label of the best-fixed-set row (followed by the budget: `best fixed 4`).
pub const BEST_FIXED: &str = "best fixed";

/// The most sets of relays the exhaustive search tries; with more, the choice is greedy.
pub const MAX_EXHAUSTIVE_SETS: u64 = 100_000;

/// How the fixed set was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum FixedSearch {
    /// Every set of the budget's size among the candidates was tried.
    Exhaustive {
        /// How many sets.
        sets: u64,
    },
    /// Relays were added one at a time, the one adding the most first.
    Greedy,
}

/// The best fixed set for one window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FixedChoice {
    /// The window chosen for.
    pub window: Window,
    /// The chosen world relays, ascending.
    pub relays: Vec<u32>,
    /// The relays it was chosen among: those holding some declared note of the window of a
    /// follow who lists them.
    pub candidates: usize,
    /// How it was found.
    pub search: FixedSearch,
    /// Declared-available notes it fetches, summed over the sessions (complete paging).
    pub fetched: u64,
}

/// The asks of a fixed set: each relay asked about every follow who lists it, everyone else
/// asked of the reader's relays.
pub fn fixed_asks(sim: &SimWorld, relays: &[u32]) -> Asks {
    let world = &sim.world;
    let entries = relays
        .iter()
        .map(|&r| Ask {
            url: world.relays()[r as usize].url.clone(),
            relay: Some(r),
            authors: (0..world.follows.len() as u32)
                .filter(|&a| sim.is_declared(a, r))
                .collect(),
        })
        .filter(|ask| !ask.authors.is_empty())
        .collect();
    with_residual(sim, entries)
}

/// The best fixed set of at most `budget` relays for `window` over sessions `0..sessions`.
pub fn best_fixed(sim: &SimWorld, sessions: u32, budget: usize, window: Window) -> FixedChoice {
    let mut model = Model::new(sim, sessions, window);
    let n = model.candidates.len();
    let k = budget.min(n);
    let sets = binomial(n as u64, k as u64);
    let (relays, search) = if sets <= MAX_EXHAUSTIVE_SETS {
        (model.exhaustive(k), FixedSearch::Exhaustive { sets })
    } else {
        (model.greedy(k), FixedSearch::Greedy)
    };
    let fetched = model.total(&relays);
    FixedChoice {
        window,
        relays,
        candidates: n,
        search,
        fetched,
    }
}

/// Scores the best fixed set in every session: each window with the set chosen for it;
/// connections, disclosure and coverage are those of the longest window's plan. Returns the
/// choices (in window order, shortest first) and the sessions.
pub fn run_best_fixed(
    sim: &SimWorld,
    cfg: &LoopConfig,
    budget: usize,
) -> (Vec<FixedChoice>, Vec<SessionOutcome>) {
    let started = Instant::now();
    let mut windows = cfg.windows.clone();
    windows.sort();
    windows.dedup();
    let choices: Vec<FixedChoice> = windows
        .iter()
        .map(|&w| best_fixed(sim, cfg.sessions, budget, w))
        .collect();
    let plans: Vec<(Window, Asks)> = choices
        .iter()
        .map(|c| (c.window, fixed_asks(sim, &c.relays)))
        .collect();
    let plan_us = started.elapsed().as_secs_f64() * 1e6;
    let empty = with_residual(sim, Vec::new());
    let base = plans.last().map_or(&empty, |(_, asks)| asks);
    let plans: Vec<(Window, &Asks)> = plans.iter().map(|(w, asks)| (*w, asks)).collect();
    let outcomes = (0..cfg.sessions)
        .map(|s| SessionOutcome {
            score: score_each_window(sim, base, &plans, s),
            plan_us,
        })
        .collect();
    (choices, outcomes)
}

/// `n` choose `k`, saturating.
fn binomial(n: u64, k: u64) -> u64 {
    let k = k.min(n - k.min(n));
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * u128::from(n - i) / u128::from(i + 1);
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// One follow's notes of the window, grouped by the relays holding them.
struct AuthorNotes {
    /// The follow's declared relays, ascending.
    declared: Vec<u32>,
    /// Per group of notes held by the same relays: those relays and how many notes.
    groups: Vec<(Vec<u32>, u64)>,
    /// Values already computed, by the chosen declared relays as a bit mask over `declared`
    /// (only for follows declaring at most 64 relays).
    memo: HashMap<u64, u64>,
}

/// What the choice is made from.
struct Model<'a> {
    sim: &'a SimWorld,
    sessions: u32,
    /// The reader's relays (world ids): where unrouted follows are asked.
    reader: Vec<u32>,
    authors: Vec<AuthorNotes>,
    /// The relays that can add something, ascending.
    candidates: Vec<u32>,
    /// Per world relay, the follows who declare it.
    declarers: Vec<Vec<u32>>,
    /// Whether each world relay is in the set being valued.
    chosen: Vec<bool>,
}

impl<'a> Model<'a> {
    fn new(sim: &'a SimWorld, sessions: u32, window: Window) -> Self {
        let world = &sim.world;
        let since = world.now.saturating_sub(window.secs());
        let relays = world.relays().len();
        let reader = (sim.table.reader_relays().iter())
            .filter_map(|&r| world.relay_id(sim.table.url(r)))
            .collect();
        let mut declarers = vec![Vec::new(); relays];
        let mut holds_declared = vec![false; relays];
        let mut authors = Vec::with_capacity(world.follows.len());
        for a in 0..world.follows.len() as u32 {
            let mut declared = sim.declared(a).to_vec();
            declared.sort_unstable();
            declared.dedup();
            for &r in &declared {
                declarers[r as usize].push(a);
            }
            let mut groups: HashMap<Vec<u32>, u64> = HashMap::new();
            for e in world.author_events_since(a, since) {
                let mut on = world.event_relays(e).to_vec();
                on.sort_unstable();
                on.dedup();
                for &r in &on {
                    if declared.binary_search(&r).is_ok() {
                        holds_declared[r as usize] = true;
                    }
                }
                *groups.entry(on).or_default() += 1;
            }
            let mut groups: Vec<(Vec<u32>, u64)> = groups.into_iter().collect();
            groups.sort_unstable();
            authors.push(AuthorNotes {
                declared,
                groups,
                memo: HashMap::new(),
            });
        }
        let candidates = (0..relays as u32)
            .filter(|&r| holds_declared[r as usize] && world.relays()[r as usize].exists)
            .collect();
        Self {
            sim,
            sessions,
            reader,
            authors,
            candidates,
            declarers,
            chosen: vec![false; relays],
        }
    }

    /// Declared-available notes of follow `a` fetched over the sessions when the relays
    /// marked in `self.chosen` are asked.
    fn value(&mut self, a: u32) -> u64 {
        let notes = &self.authors[a as usize];
        let key = (notes.declared.len() <= 64).then(|| {
            (notes.declared.iter().enumerate())
                .filter(|(_, &r)| self.chosen[r as usize])
                .fold(0u64, |m, (i, _)| m | 1 << i)
        });
        if let Some(v) = key.and_then(|k| notes.memo.get(&k)) {
            return *v;
        }
        let routed: Vec<u32> = (notes.declared.iter().copied())
            .filter(|&r| self.chosen[r as usize])
            .collect();
        let world = &self.sim.world;
        let asked = if routed.is_empty() {
            &self.reader
        } else {
            &routed
        };
        let mut total = 0;
        for (on, count) in &notes.groups {
            for s in 0..self.sessions {
                let (mut available, mut fetched) = (false, false);
                for r in on.iter().filter(|&&r| world.is_up(r, s)) {
                    available |= notes.declared.contains(r);
                    fetched |= asked.contains(r);
                }
                if available && fetched {
                    total += count;
                }
            }
        }
        if let Some(k) = key {
            self.authors[a as usize].memo.insert(k, total);
        }
        total
    }

    /// The notes `relays` fetch over the sessions.
    fn total(&mut self, relays: &[u32]) -> u64 {
        self.chosen.iter_mut().for_each(|c| *c = false);
        for &r in relays {
            self.chosen[r as usize] = true;
        }
        (0..self.authors.len() as u32).map(|a| self.value(a)).sum()
    }

    /// The best of every set of `k` candidates (the first found on ties, in lexicographic
    /// order of relay ids).
    fn exhaustive(&mut self, k: usize) -> Vec<u32> {
        let n = self.candidates.len();
        // What every follow gets with nothing chosen; a set changes only its declarers' values.
        self.chosen.iter_mut().for_each(|c| *c = false);
        let unrouted: Vec<u64> = (0..self.authors.len() as u32)
            .map(|a| self.value(a))
            .collect();
        let base: u64 = unrouted.iter().sum();
        let mut touched = vec![false; self.authors.len()];
        let mut index: Vec<usize> = (0..k).collect();
        let mut best: Option<(u64, Vec<u32>)> = None;
        loop {
            let set: Vec<u32> = index.iter().map(|&i| self.candidates[i]).collect();
            for &r in &set {
                self.chosen[r as usize] = true;
            }
            let mut total = base;
            for &r in &set {
                for i in 0..self.declarers[r as usize].len() {
                    let a = self.declarers[r as usize][i];
                    if !std::mem::replace(&mut touched[a as usize], true) {
                        total = total - unrouted[a as usize] + self.value(a);
                    }
                }
            }
            for &r in &set {
                self.chosen[r as usize] = false;
                for &a in &self.declarers[r as usize] {
                    touched[a as usize] = false;
                }
            }
            if best.as_ref().is_none_or(|(b, _)| total > *b) {
                best = Some((total, set));
            }
            // The next combination in lexicographic order.
            let Some(i) = (0..k).rev().find(|&i| index[i] < n - k + i) else {
                break;
            };
            index[i] += 1;
            for j in i + 1..k {
                index[j] = index[j - 1] + 1;
            }
        }
        best.map(|(_, set)| set).unwrap_or_default()
    }

    /// Up to `k` candidates, each step the one adding the most (ties: the lowest id), until
    /// none adds anything.
    fn greedy(&mut self, k: usize) -> Vec<u32> {
        let mut set: Vec<u32> = Vec::new();
        self.chosen.iter_mut().for_each(|c| *c = false);
        while set.len() < k {
            let mut best: Option<(i128, u32)> = None;
            for ci in 0..self.candidates.len() {
                let r = self.candidates[ci];
                if self.chosen[r as usize] {
                    continue;
                }
                let mut gain: i128 = 0;
                for i in 0..self.declarers[r as usize].len() {
                    let a = self.declarers[r as usize][i];
                    gain -= i128::from(self.value(a));
                    self.chosen[r as usize] = true;
                    gain += i128::from(self.value(a));
                    self.chosen[r as usize] = false;
                }
                if best.is_none_or(|(g, _)| gain > g) {
                    best = Some((gain, r));
                }
            }
            match best {
                Some((gain, r)) if gain > 0 => {
                    self.chosen[r as usize] = true;
                    set.push(r);
                }
                _ => break,
            }
        }
        set.sort_unstable();
        set
    }
}

#[cfg(test)]
mod tests {
    use nostr::key::{Keys, PublicKey, SecretKey};

    use super::*;
    use nostr_outbox_world::world::{PartEvent, WorldParts};
    use nostr_outbox_world::{World, WorldRelayList};

    const NOW: u64 = 1_767_225_600;

    fn key(i: u8) -> PublicKey {
        Keys::new(SecretKey::from_slice(&[i + 1; 32]).expect("valid secret")).public_key()
    }

    fn url(r: char) -> String {
        format!("wss://{r}.example")
    }

    /// Four relays a–d, the reader on a. f0 lists a, b and its ten notes are on a only; f1
    /// lists b, c and its five notes are on both; f2 lists c, d and its eight notes are on d;
    /// f3 lists d and its three notes are on d. Asked of a (the residual), an unrouted f0 is
    /// fetched in full. By hand, over the six pairs: {a,b} 15, {a,c} 15, {a,d} 21, {b,c} 5
    /// (f0 routed to b, which holds none of its notes), {b,d} 16, {c,d} 26 (f0 on a, f1 on c,
    /// f2 and f3 on d): the best pair is {c, d}, not the two relays holding the most notes.
    fn tiny() -> SimWorld {
        let follows: Vec<PublicKey> = (0..4).map(key).collect();
        let lists = [vec!['a', 'b'], vec!['b', 'c'], vec!['c', 'd'], vec!['d']];
        let notes = [
            (10, vec!['a']),
            (5, vec!['b', 'c']),
            (8, vec!['d']),
            (3, vec!['d']),
        ];
        let mut events = Vec::new();
        for (a, (count, on)) in notes.iter().enumerate() {
            for i in 0..*count {
                let mut id = [0u8; 32];
                id[0] = a as u8;
                id[1] = i as u8;
                events.push(PartEvent {
                    id,
                    author: a as u32,
                    created_at: NOW - 1_000 - i as u64,
                    kind: 1,
                    on: on.iter().map(|&r| url(r)).collect(),
                });
            }
        }
        let world = World::from_parts(WorldParts {
            name: "tiny".into(),
            now: NOW,
            sessions: 2,
            reader: Some(key(9)),
            follows: follows.clone(),
            reader_relays: vec![url('a')],
            relay_lists: (follows.iter().zip(&lists))
                .map(|(&author, list)| WorldRelayList {
                    author,
                    created_at: NOW - 10_000,
                    tags: list.iter().map(|&r| vec!["r".into(), url(r)]).collect(),
                })
                .collect(),
            relays: "abcd".chars().map(|r| (url(r), vec![true, true])).collect(),
            events,
        })
        .expect("a valid world");
        SimWorld::new(world)
    }

    fn urls(sim: &SimWorld, relays: &[u32]) -> Vec<String> {
        let all = sim.world.relays();
        relays
            .iter()
            .map(|&r| all[r as usize].url.clone())
            .collect()
    }

    #[test]
    fn the_best_pair_is_the_one_computed_by_hand() {
        let sim = tiny();
        let best = best_fixed(&sim, 2, 2, Window::Y1);
        assert_eq!(urls(&sim, &best.relays), [url('c'), url('d')]);
        assert_eq!(best.search, FixedSearch::Exhaustive { sets: 6 });
        assert_eq!((best.candidates, best.fetched), (4, 2 * 26));
        // The greedy choice agrees on this world (d first: 21, then c: 26).
        let mut model = Model::new(&sim, 2, Window::Y1);
        assert_eq!(urls(&sim, &model.greedy(2)), [url('c'), url('d')]);
        // Scored as a plan, it fetches every declared note in both sessions.
        let cfg = LoopConfig {
            sessions: 2,
            windows: vec![Window::Y1],
            ..LoopConfig::default()
        };
        let (_, outcomes) = run_best_fixed(&sim, &cfg, 2);
        for o in &outcomes {
            assert_eq!(
                o.score.window(Window::Y1).and_then(|w| w.declared()),
                Some(1.0)
            );
        }
        // Of one relay, d is best (21: f0 still asked of a).
        let one = best_fixed(&sim, 2, 1, Window::Y1);
        assert_eq!((urls(&sim, &one.relays), one.fetched), (vec![url('d')], 42));
    }

    #[test]
    fn binomials_saturate() {
        assert_eq!(binomial(8, 4), 70);
        assert_eq!(binomial(4, 0), 1);
        assert_eq!(binomial(1_000, 500), u64::MAX);
    }
}

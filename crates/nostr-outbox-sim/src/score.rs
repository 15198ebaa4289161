//! Scoring a plan against a world, exactly as `docs/formats.md` defines it, from what its paged
//! REQs return ([`mod@crate::fetch`]).

use serde::Serialize;

use crate::asks::Asks;
use nostr_outbox_client::RoundRecorder;

use crate::fetch::{fetch, fetch_into, FetchCost, Fetched, WindowCost};
use crate::observe::{observation_of, Observation};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// Recall in one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowScore {
    /// The window.
    pub window: Window,
    /// Events some relay would return in this session (the total-recall denominator).
    pub available: u64,
    /// Events some declared write relay would return (the declared-recall denominator).
    pub declared_available: u64,
    /// Fetched events.
    pub fetched: u64,
    /// Fetched events among `declared_available`.
    pub declared_fetched: u64,
    /// `declared_fetched / declared_available` (1 when nothing was available: use
    /// [`WindowScore::declared`] to tell that case apart).
    pub declared_recall: f64,
    /// `fetched / available` (1 when nothing was available: use [`WindowScore::total`] to tell
    /// that case apart).
    pub total_recall: f64,
    /// Events among `declared_available` that only the session's probes returned, after the
    /// fetch: notes a client delivers beyond its plan (the runtime's `FeedEvent::Found`). Never
    /// part of `declared_recall`, which is the plan's; 0 when nothing was probed.
    #[serde(default)]
    pub found: u64,
}

impl WindowScore {
    /// Declared recall, or `None` when no event was declared-available (0 of 0 is no
    /// evidence of anything, and reports show it as `-`).
    pub fn declared(&self) -> Option<f64> {
        (self.declared_available > 0).then_some(self.declared_recall)
    }

    /// Total recall, or `None` when no event was available.
    pub fn total(&self) -> Option<f64> {
        (self.available > 0).then_some(self.total_recall)
    }

    /// Declared recall of what a client delivers: the plan's fetch and what its probes found
    /// beyond it (`None` as for [`WindowScore::declared`]).
    pub fn declared_with_found(&self) -> Option<f64> {
        (self.declared_available > 0).then(|| {
            (self.declared_fetched + self.found).min(self.declared_available) as f64
                / self.declared_available as f64
        })
    }
}

/// Every metric of one plan in one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanScore {
    /// The session.
    pub session: u32,
    /// Plan entries (connections opened, the reader's relays included).
    pub connections: usize,
    /// Sum of author-list lengths over all entries.
    pub disclosure: usize,
    /// Relays told about each follow, mean over the world's follows (the reader's relays
    /// carrying the residual included).
    #[serde(default)]
    pub per_follow: f64,
    /// The most relays told about one follow.
    #[serde(default)]
    pub per_follow_max: usize,
    /// Share of follows in at least one filter.
    pub author_coverage: f64,
    /// Follows no routed relay covered, before the residual (when known).
    pub orphans: Option<usize>,
    /// The largest entry's author count divided by the disclosure: how much of what the
    /// relays learn goes to one relay.
    pub load_concentration: f64,
    /// Recall per window.
    pub windows: Vec<WindowScore>,
    /// What fetching each window cost (each window is its own paged fetch).
    pub cost: Vec<WindowCost>,
    /// What the session's probes cost after the fetch (none for a plan scored alone).
    #[serde(default)]
    pub probe: crate::probe::ProbeCost,
    /// When the notes of the clock's window arrived ([`crate::clock`]; `None`: not timed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<crate::clock::TimeScore>,
}

impl PlanScore {
    /// The score for one window, if computed.
    pub fn window(&self, w: Window) -> Option<&WindowScore> {
        self.windows.iter().find(|s| s.window == w)
    }

    /// What fetching one window cost, if computed.
    pub fn cost(&self, w: Window) -> Option<&FetchCost> {
        self.cost.iter().find(|c| c.window == w).map(|c| &c.cost)
    }

    /// Takes the windows `other` (another plan's score of the same session) scored: their
    /// recall and cost replace any this score has for them, in window order; connections,
    /// disclosure and coverage stay this plan's.
    pub fn add_windows(&mut self, other: PlanScore) {
        self.windows
            .retain(|w| other.windows.iter().all(|o| o.window != w.window));
        self.cost
            .retain(|c| other.cost.iter().all(|o| o.window != c.window));
        self.windows.extend(other.windows);
        self.cost.extend(other.cost);
        self.windows.sort_by_key(|w| w.window);
        self.cost.sort_by_key(|c| c.window);
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        1.0
    } else {
        n as f64 / d as f64
    }
}

/// Scores `asks` in `session` for each window (definitions in `docs/formats.md`).
///
/// Each window is fetched as the runtime would ([`fetch`]): every page of every author chunk
/// on every asked relay that answers. An event counts as fetched when some page returned it.
/// Declared recall's numerator counts only fetched events inside its denominator (events some
/// declared write relay would return), so it never exceeds 1.
pub fn score(sim: &SimWorld, asks: &Asks, session: u32, windows: &[Window]) -> PlanScore {
    let windows = sorted_windows(windows);
    let fetched: Vec<Fetched> = windows
        .iter()
        .map(|w| fetch(sim, asks, session, since_of(sim, *w), false))
        .collect();
    score_fetched(sim, asks, session, &windows, &fetched)
}

/// Scores each window with the plan made for it (`plans`); connections, disclosure and
/// coverage are `base`'s plan's.
pub(crate) fn score_each_window(
    sim: &SimWorld,
    base: &Asks,
    plans: &[(Window, &Asks)],
    session: u32,
) -> PlanScore {
    let mut total = score(sim, base, session, &[]);
    for &(w, asks) in plans {
        total.add_windows(score(sim, asks, session, &[w]));
    }
    total
}

/// Scores `asks` and observes what its REQs returned with `since`, fetching each window once
/// (the observation reuses the window that starts at `since`, if any).
pub fn score_and_observe(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    windows: &[Window],
    since: u64,
) -> (PlanScore, Observation) {
    score_observe_into(sim, asks, session, windows, since, None)
}

/// [`score_and_observe`], with the fetch observed (the one with `since`) also handing its
/// frames to `recorder`, as [`crate::fetch::fetch_recorded`] does: a session learns from the
/// very fetch it is scored and observed by, fetched once.
pub(crate) fn score_observe_into(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    windows: &[Window],
    since: u64,
    mut recorder: Option<&mut RoundRecorder>,
) -> (PlanScore, Observation) {
    let windows = sorted_windows(windows);
    let mut observed = None;
    let fetched: Vec<Fetched> = windows
        .iter()
        .map(|w| {
            let start = since_of(sim, *w);
            let reuse = observed.is_none() && start == since;
            let f = if reuse {
                fetch_into(sim, asks, session, start, true, recorder.take(), None)
            } else {
                fetch(sim, asks, session, start, false)
            };
            if reuse {
                observed = Some(observation_of(sim, asks, session, &f));
            }
            f
        })
        .collect();
    let observation = observed.unwrap_or_else(|| {
        let f = fetch_into(sim, asks, session, since, true, recorder.take(), None);
        observation_of(sim, asks, session, &f)
    });
    (
        score_fetched(sim, asks, session, &windows, &fetched),
        observation,
    )
}

pub(crate) fn sorted_windows(windows: &[Window]) -> Vec<Window> {
    let mut windows = windows.to_vec();
    windows.sort();
    windows.dedup();
    windows
}

fn since_of(sim: &SimWorld, w: Window) -> u64 {
    sim.world.now.saturating_sub(w.secs())
}

/// Recall per window in `session` (`windows` sorted, no duplicates) when `got(w, i)` says
/// whether event `i` of [`World::events`](nostr_outbox_world::World::events) was fetched for
/// window `w`: the one place the recall definitions are counted, for plans and for delivered
/// sets alike.
pub(crate) fn window_scores(
    sim: &SimWorld,
    session: u32,
    windows: &[Window],
    got: impl Fn(usize, usize) -> bool,
) -> Vec<WindowScore> {
    let world = &sim.world;
    let since_of: Vec<u64> = windows.iter().map(|&w| since_of(sim, w)).collect();
    let earliest = since_of.iter().copied().min().unwrap_or(u64::MAX);
    let mut counts = vec![[0u64; 4]; windows.len()];
    let mut declared_up = Vec::new();
    let mut author = u32::MAX;
    for (i, e) in world.events().iter().enumerate() {
        if e.created_at < earliest {
            continue;
        }
        if e.author != author {
            author = e.author;
            declared_up.clear();
            declared_up.extend(
                sim.declared(author)
                    .iter()
                    .copied()
                    .filter(|&r| world.is_up(r, session)),
            );
        }
        let on = world.event_relays(e);
        if !on.iter().any(|&r| world.is_up(r, session)) {
            continue;
        }
        let declared = on.iter().any(|r| declared_up.contains(r));
        for (w, &since) in since_of.iter().enumerate() {
            if e.created_at >= since {
                let got = got(w, i);
                let c = &mut counts[w];
                c[0] += 1;
                c[1] += u64::from(declared);
                c[2] += u64::from(got);
                c[3] += u64::from(declared && got);
            }
        }
    }
    windows
        .iter()
        .zip(&counts)
        .map(|(&window, c)| WindowScore {
            window,
            available: c[0],
            declared_available: c[1],
            fetched: c[2],
            declared_fetched: c[3],
            declared_recall: ratio(c[3], c[1]),
            total_recall: ratio(c[2], c[0]),
            found: 0,
        })
        .collect()
}

/// Sets [`WindowScore::found`] for each of `windows` (each with the asks scored for it): the
/// declared-available events of `returned` (sorted world event indices, what the session's
/// probes returned) that the window's fetch did not.
pub(crate) fn add_found(
    sim: &SimWorld,
    score: &mut PlanScore,
    windows: &[(Window, &Asks)],
    session: u32,
    returned: &[u32],
) {
    if returned.is_empty() {
        return;
    }
    for &(window, asks) in windows {
        let Some(at) = score.windows.iter().position(|w| w.window == window) else {
            continue;
        };
        let fetched = fetch(sim, asks, session, since_of(sim, window), false);
        let with = window_scores(sim, session, &[window], |_, i| {
            fetched.delivered[i] || returned.binary_search(&(i as u32)).is_ok()
        });
        let plan = &mut score.windows[at];
        plan.found = with[0]
            .declared_fetched
            .saturating_sub(plan.declared_fetched);
    }
}

/// Every metric of `asks` from one fetch per window (`fetched[i]` is `windows[i]`'s).
fn score_fetched(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    windows: &[Window],
    fetched: &[Fetched],
) -> PlanScore {
    let world = &sim.world;
    let disclosure: usize =
        asks.entries.iter().map(|e| e.authors.len()).sum::<usize>() + asks.foreign_authors;
    let mut told = vec![0usize; world.follows.len()];
    for e in &asks.entries {
        for &a in &e.authors {
            if let Some(c) = told.get_mut(a as usize) {
                *c += 1;
            }
        }
    }
    let covered: Vec<bool> = told.iter().map(|&n| n > 0).collect();
    let largest = asks
        .entries
        .iter()
        .map(|e| e.authors.len())
        .max()
        .unwrap_or(0);
    PlanScore {
        session,
        connections: asks.entries.len(),
        disclosure,
        per_follow: if told.is_empty() {
            0.0
        } else {
            told.iter().sum::<usize>() as f64 / told.len() as f64
        },
        per_follow_max: told.iter().copied().max().unwrap_or(0),
        author_coverage: ratio(
            covered.iter().filter(|&&c| c).count() as u64,
            covered.len() as u64,
        ),
        orphans: asks.orphans,
        load_concentration: if disclosure == 0 {
            0.0
        } else {
            largest as f64 / disclosure as f64
        },
        windows: window_scores(sim, session, windows, |w, i| fetched[w].delivered[i]),
        cost: windows
            .iter()
            .zip(fetched)
            .map(|(&window, f)| WindowCost {
                window,
                cost: f.cost.clone(),
            })
            .collect(),
        probe: Default::default(),
        time: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PlanFile, PlanFileEntry};
    use nostr_outbox_world::World;

    const READER: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
    const ALICE: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
    const NOW: u64 = 100_000_000;

    /// Alice lists a and b; her newest note is on both, the next on a alone, an old one on b.
    fn sim() -> SimWorld {
        let ev = |n: u8, age: u64, on: &str| {
            format!(
                r#"{{"id": "{n:064x}", "author": "{ALICE}", "created_at": {}, "kind": 1, "on": [{on}]}}"#,
                NOW - age
            )
        };
        let events = [
            ev(1, 3_600, r#""wss://a.example", "wss://b.example""#),
            ev(2, 7_200, r#""wss://a.example""#),
            ev(3, 400 * 86_400, r#""wss://b.example""#),
        ];
        let json = format!(
            r#"{{"format": "outbox-world/1", "name": "found", "now": {NOW}, "sessions": 1,
  "reader": {{"pubkey": "{READER}", "follows": ["{ALICE}"], "relays": ["wss://home.example"]}},
  "relay_lists": [{{"author": "{ALICE}", "created_at": 1, "tags": [["r", "wss://a.example"], ["r", "wss://b.example"]]}}],
  "relays": {{"wss://a.example": {{"up": [true]}}, "wss://b.example": {{"up": [true]}}, "wss://home.example": {{"up": [true]}}}},
  "events": [{}]}}"#,
            events.join(",\n")
        );
        SimWorld::new(World::from_json(&json).unwrap())
    }

    #[test]
    fn found_counts_what_only_the_probes_returned_within_each_window() {
        let sim = sim();
        // The plan asks b about Alice: her newest note (on a and b) and the old one come back.
        let file = PlanFile::new(
            "hand",
            0,
            vec![PlanFileEntry::new("wss://b.example", [ALICE])],
        );
        let asks = Asks::from_plan_file(&sim, &file).unwrap();
        let windows = [Window::D7, Window::Y3];
        let mut score = score(&sim, &asks, 0, &windows);
        // A probe of a returned both of a's notes: only the second is new.
        let returned: Vec<u32> = (0..sim.world.events().len() as u32)
            .filter(|&i| sim.world.events()[i as usize].created_at >= NOW - 7_200)
            .collect();
        assert_eq!(returned.len(), 2);
        add_found(
            &sim,
            &mut score,
            &[(Window::D7, &asks), (Window::Y3, &asks)],
            0,
            &returned,
        );
        for w in windows {
            let s = score.window(w).unwrap();
            assert_eq!(s.found, 1, "{w}: {s:?}");
            assert_eq!(
                s.declared_fetched + s.found,
                s.declared_available,
                "{w}: {s:?}"
            );
            assert_eq!(s.declared_with_found(), Some(1.0));
        }
        // Nothing returned, nothing found.
        let mut plain = super::score(&sim, &asks, 0, &windows);
        add_found(&sim, &mut plain, &[(Window::D7, &asks)], 0, &[]);
        assert!(plain.windows.iter().all(|w| w.found == 0));
    }
}

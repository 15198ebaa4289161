//! What a reader sees of a run's timeline: the first note, the first screen, how complete the
//! feed is after one, two and five seconds, and when the run ends.

use serde::Serialize;

use super::timeline::{screen_notes, Timeline};
use super::wait::Wait;
use crate::sim_world::SimWorld;

/// The moments completeness is measured at, ms after the start.
pub const COMPLETENESS_AT_MS: [u32; 3] = [1_000, 2_000, 5_000];

/// How much of the feed was in at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Completeness {
    /// Ms after the start.
    pub at_ms: u32,
    /// Share of the run's own fetch in by then (1 when the run fetched nothing).
    pub own: f64,
    /// Share of the reachable notes (those some relay would return in the session) in by then
    /// (1 when none was reachable).
    pub reachable: f64,
}

/// When a run's notes of one window arrived, in ms after the run's start.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeScore {
    /// Notes the run fetched (the untimed fetch: some may arrive only after the deadline).
    pub fetched: u64,
    /// Notes some relay would return in the session.
    pub reachable: u64,
    /// The first note (`None`: none arrived).
    pub first_note_ms: Option<f64>,
    /// The newest [`SCREEN`](super::SCREEN) notes of the run's fetch (all of it when smaller)
    /// all in (`None`: one arrived only after the deadline, or nothing was fetched).
    pub screen_ms: Option<f64>,
    /// 90% of the run's fetch in (`None`: not before the deadline, or nothing was fetched).
    pub p90_ms: Option<f64>,
    /// The last note in (`None`: some arrived only after the deadline, or nothing was fetched).
    pub last_note_ms: Option<f64>,
    /// Every relay asked answered or was set aside.
    pub settled_ms: f64,
    /// The run ended (probes done, or the deadline).
    pub end_ms: f64,
    /// At each of [`COMPLETENESS_AT_MS`].
    pub completeness: Vec<Completeness>,
    /// The same notes on the time ceiling ([`super::fastest`]): the first screen and 90% of
    /// this run's own fetch, had each note come from the fastest relay that holds it.
    pub ideal: Option<Ideal>,
    /// What held the first screen back ([`super::screen_wait`]; `None` when not measured:
    /// the session loop measures it, knowing what the run asked).
    pub wait: Option<Wait>,
}

/// A run's own fetch on the time ceiling.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ideal {
    /// The newest [`SCREEN`](super::SCREEN) notes of the run's fetch all in.
    pub screen_ms: Option<f64>,
    /// 90% of the run's fetch in.
    pub p90_ms: Option<f64>,
}

impl TimeScore {
    /// How many times longer than on the time ceiling the run took to fill its first screen
    /// (`None`: either never filled).
    pub fn screen_ratio(&self) -> Option<f64> {
        ratio_of(self.screen_ms, self.ideal?.screen_ms)
    }

    /// How many times longer than on the time ceiling the run took to 90% of its fetch.
    pub fn p90_ratio(&self) -> Option<f64> {
        ratio_of(self.p90_ms, self.ideal?.p90_ms)
    }
}

fn ratio_of(got: Option<f64>, best: Option<f64>) -> Option<f64> {
    let (got, best) = (got?, best?);
    (best > 0.0).then(|| got / best)
}

impl TimeScore {
    /// Completeness at `at_ms`, if measured there.
    pub fn at(&self, at_ms: u32) -> Option<&Completeness> {
        self.completeness.iter().find(|c| c.at_ms == at_ms)
    }
}

/// The first screen of a set of arrivals: when the newest [`SCREEN`](super::SCREEN) notes (by
/// `created_at`, then id, as a feed sorts them) were all in.
fn screen_of(sim: &SimWorld, arrived: impl Iterator<Item = (u32, Option<f64>)>) -> Option<f64> {
    let screen = screen_notes(sim, arrived);
    (!screen.is_empty())
        .then(|| {
            screen
                .iter()
                .try_fold(0f64, |m, &(_, t)| t.map(|t| m.max(t)))
        })
        .flatten()
}

/// When a `share` of `fetched` notes had arrived, from the sorted arrival `times`.
fn nth(times: &[f64], fetched: usize, share: f64) -> Option<f64> {
    if fetched == 0 {
        return None;
    }
    let need = ((fetched as f64) * share).ceil().max(1.0) as usize;
    times.get(need - 1).copied()
}

fn sorted_times(arrived: impl Iterator<Item = Option<f64>>) -> Vec<f64> {
    let mut times: Vec<f64> = arrived.flatten().collect();
    times.sort_by(f64::total_cmp);
    times
}

/// Measures `timeline`, whose notes are those of one window, against the `reachable` notes of
/// that window, and with `ideal` (the time ceiling of the same session and window) the same
/// notes had each come from its fastest relay.
pub fn time_score(
    sim: &SimWorld,
    timeline: &Timeline,
    reachable: u64,
    ideal: Option<&Timeline>,
) -> TimeScore {
    let fetched = timeline.arrived.len();
    let times = sorted_times(timeline.arrived.values().copied());
    let all_in = times.len() == fetched;
    let screen_ms = screen_of(sim, timeline.arrived.iter().map(|(&e, &t)| (e, t)));
    let ideal = ideal.map(|best| {
        // Each of the run's notes at its time on the ceiling (never, if no relay holding it
        // answers: the run cannot have it then either).
        let at = |e: &u32| best.arrived.get(e).copied().flatten();
        let own = timeline.arrived.keys().map(|e| (*e, at(e)));
        Ideal {
            screen_ms: screen_of(sim, own),
            p90_ms: nth(&sorted_times(timeline.arrived.keys().map(at)), fetched, 0.9),
        }
    });
    let ratio = |n: usize, d: u64| if d == 0 { 1.0 } else { n as f64 / d as f64 };
    let completeness = COMPLETENESS_AT_MS
        .iter()
        .map(|&at_ms| {
            let n = times.partition_point(|&t| t <= f64::from(at_ms));
            Completeness {
                at_ms,
                own: ratio(n, fetched as u64),
                reachable: ratio(n, reachable),
            }
        })
        .collect();
    TimeScore {
        fetched: fetched as u64,
        reachable,
        first_note_ms: times.first().copied(),
        screen_ms,
        p90_ms: nth(&times, fetched, 0.9),
        last_note_ms: if all_in { times.last().copied() } else { None },
        settled_ms: timeline.settled_ms,
        end_ms: timeline.end_ms,
        completeness,
        ideal,
        wait: None,
    }
}

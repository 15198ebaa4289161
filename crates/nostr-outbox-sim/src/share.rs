//! Each strategy's recall as a share of the learnable ceiling, world by world.
//!
//! Goals for learning are stated this way (the mean over worlds and the worst world), since a
//! world's ceiling says how much of it any router could have learned to fetch; a mean ± SE of
//! recall hides the world where a strategy is weakest. Beside it: how often a session fetched
//! more than [`FALL_POINTS`] points less than the one before, the volatility a reader sees as a
//! feed that got worse, and how many of those the ceiling does not explain: a session where
//! fewer relays answer lowers every router's recall, the ceiling's too, and no plan made before
//! the session could have known; a fall beyond the ceiling's own is the router's.

use nostr_outbox_world::Profile;
use serde::Serialize;

use crate::ceiling::CEILING;
use crate::run_record::RunRecord;
use crate::score::PlanScore;
use crate::session::ORACLE;
use crate::window::Window;

/// A session counts as a fall when its declared recall is more than this many percentage
/// points below the session before.
pub const FALL_POINTS: f64 = 2.0;

/// One strategy's shares of the ceiling.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareRow {
    /// Row label.
    pub label: String,
    /// Per window, in the bench's order.
    pub windows: Vec<ShareWindow>,
}

/// One window of a [`ShareRow`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareWindow {
    /// The window.
    pub window: Window,
    /// Worlds scored: where the ceiling fetched something in the last session.
    pub worlds: usize,
    /// Mean over those worlds of last-session declared recall over the ceiling's.
    pub mean: Option<f64>,
    /// The world with the lowest share.
    pub worst: Option<WorstWorld>,
    /// Sessions (after the first) more than [`FALL_POINTS`] below the one before.
    pub falls: usize,
    /// Of `falls`, those more than [`FALL_POINTS`] beyond what the ceiling lost on the same
    /// world between the same sessions: the router's own, not the world's luck.
    pub own_falls: usize,
    /// Sessions after the first, over every world.
    pub steps: usize,
}

/// The world where a strategy's share of the ceiling is lowest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorstWorld {
    /// Its share of the ceiling.
    pub share: f64,
    /// The world's profile.
    pub profile: Profile,
    /// The world's seed.
    pub seed: u64,
}

/// Shares of the ceiling for every label in `labels` (the bounds themselves are skipped), from
/// the runs of one bench: a run is compared with the ceiling's run on the same world.
pub fn ceiling_shares<'a>(
    runs: &[RunRecord],
    labels: impl IntoIterator<Item = &'a str>,
    windows: &[Window],
) -> Vec<ShareRow> {
    labels
        .into_iter()
        .filter(|&label| label != CEILING && label != ORACLE)
        .map(|label| ShareRow {
            label: label.to_string(),
            windows: windows
                .iter()
                .map(|&window| window_share(runs, label, window))
                .collect(),
        })
        .collect()
}

/// `label`'s share of the ceiling in `window`, over every world it ran on.
fn window_share(runs: &[RunRecord], label: &str, window: Window) -> ShareWindow {
    let recall = |s: &PlanScore| s.window(window).and_then(|w| w.declared());
    let mut share = ShareWindow {
        window,
        worlds: 0,
        mean: None,
        worst: None,
        falls: 0,
        own_falls: 0,
        steps: 0,
    };
    let mut sum = 0.0;
    for run in runs.iter().filter(|r| r.label == label) {
        let series: Vec<Option<f64>> = run.sessions.iter().map(recall).collect();
        let bound = runs
            .iter()
            .find(|r| r.label == CEILING && r.profile == run.profile && r.seed == run.seed);
        let bound_series: Vec<Option<f64>> = bound
            .map(|c| c.sessions.iter().map(recall).collect())
            .unwrap_or_default();
        for (i, pair) in series.windows(2).enumerate() {
            if let [Some(before), Some(after)] = pair {
                share.steps += 1;
                let lost = 100.0 * (before - after);
                if lost > FALL_POINTS {
                    share.falls += 1;
                    // What the ceiling lost between the same sessions (nothing when it rose or
                    // was not run).
                    let bound_lost = match bound_series.get(i..i + 2) {
                        Some([Some(b), Some(a)]) => (100.0 * (b - a)).max(0.0),
                        _ => 0.0,
                    };
                    if lost - bound_lost > FALL_POINTS {
                        share.own_falls += 1;
                    }
                }
            }
        }
        let ceiling = bound.and_then(|c| c.sessions.last()).and_then(recall);
        let (Some(last), Some(ceiling)) = (series.last().copied().flatten(), ceiling) else {
            continue;
        };
        if ceiling <= 0.0 {
            continue;
        }
        let x = last / ceiling;
        share.worlds += 1;
        sum += x;
        if share.worst.as_ref().is_none_or(|w| x < w.share) {
            share.worst = Some(WorstWorld {
                share: x,
                profile: run.profile,
                seed: run.seed,
            });
        }
    }
    if share.worlds > 0 {
        share.mean = Some(sum / share.worlds as f64);
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::WindowScore;

    fn session(recall_of_100: u64) -> PlanScore {
        PlanScore {
            session: 0,
            connections: 0,
            disclosure: 0,
            per_follow: 0.0,
            per_follow_max: 0,
            author_coverage: 1.0,
            orphans: None,
            load_concentration: 0.0,
            windows: vec![WindowScore {
                window: Window::Y1,
                available: 100,
                declared_available: 100,
                fetched: recall_of_100,
                declared_fetched: recall_of_100,
                declared_recall: recall_of_100 as f64 / 100.0,
                total_recall: recall_of_100 as f64 / 100.0,
                found: 0,
            }],
            cost: Vec::new(),
            probe: Default::default(),
            time: None,
        }
    }

    fn run(label: &str, seed: u64, recalls: &[u64]) -> RunRecord {
        RunRecord {
            label: label.to_string(),
            profile: Profile::Small,
            seed,
            plan_us: 0.0,
            plan_us_cold: 0.0,
            plan_us_warm: 0.0,
            sessions: recalls.iter().map(|&r| session(r)).collect(),
            open: Vec::new(),
        }
    }

    #[test]
    fn shares_are_world_by_world_and_falls_count_sessions_that_lost_more_than_two_points() {
        let runs = vec![
            run(CEILING, 1, &[80, 80, 80]),
            run(CEILING, 2, &[50, 50, 40]),
            run(CEILING, 3, &[50, 41, 41]),
            run("ours", 1, &[60, 70, 60]),
            run("ours", 2, &[10, 9, 20]),
            run("ours", 3, &[40, 30, 29]),
        ];
        let rows = ceiling_shares(&runs, ["ours", CEILING], &[Window::Y1]);
        assert_eq!(rows.len(), 1, "the ceiling is not compared with itself");
        let w = &rows[0].windows[0];
        assert_eq!(w.worlds, 3);
        // 60/80, 20/40 and 29/41: the mean of the shares, not the share of the means.
        let mean = (0.75 + 0.5 + 29.0 / 41.0) / 3.0;
        assert!((w.mean.unwrap() - mean).abs() < 1e-12, "{w:?}");
        let worst = w.worst.as_ref().unwrap();
        assert_eq!(worst.seed, 2);
        assert!((worst.share - 0.5).abs() < 1e-12);
        // 70 → 60 and 40 → 30 fall; 10 → 9 and 30 → 29 are within two points.
        assert_eq!((w.falls, w.steps), (2, 6));
        // 70 → 60 while the ceiling held is the router's own; 40 → 30 while the ceiling lost
        // 9 is within two points of the ceiling's loss, and the world's.
        assert_eq!(w.own_falls, 1);
    }
}

//! The learnable ceiling: the best plan a router could reach by learning.
//!
//! The oracle knows which relays answer in this very session, which no router can learn. The
//! ceiling knows only what learning could in principle reveal: where every event is stored and
//! each relay's *rate* of answering over all sessions. It picks up to `budget` relays greedily by
//! the expected number of the window's events they add — an event counts
//! `1 − Π(1 − up_rate(r))` over the chosen relays `r` that hold it — asks each chosen relay only
//! about follows who declare it (as every plan must), and is then scored in each session like
//! any plan. The expected gain is submodular, so lazy greedy selection finds the same set as
//! recomputing every gain. Where the strategies re-plan around relays that do not answer, as the
//! runtime does ([`LoopConfig::replan_on_failure`]), the ceiling does too: within a session it
//! learns what they learn, which of the relays it asked did not answer.

use std::collections::BinaryHeap;
use std::time::Instant;

use crate::asks::Asks;
use crate::holdings::{with_residual, Holdings};
use crate::replan::MAX_REPLANS;
use crate::score::score_each_window;
use crate::session::{LoopConfig, SessionOutcome};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// The label of the learnable-ceiling row.
pub const CEILING: &str = "learnable ceiling";

/// Each relay's share of sessions it answered in, over every session of the world.
pub fn up_rates(sim: &SimWorld) -> Vec<f64> {
    let world = &sim.world;
    let sessions = world.sessions.max(1);
    (0..world.relays().len() as u32)
        .map(|r| {
            let up = (0..sessions).filter(|&s| world.is_up(r, s)).count();
            up as f64 / f64::from(sessions)
        })
        .collect()
}

/// The ceiling's asks for `window`, given each relay's answer rate (see [`up_rates`]). The same
/// in every session: the ceiling does not know which relays answer in a given one.
pub fn ceiling_asks(sim: &SimWorld, rates: &[f64], budget: usize, window: Window) -> Asks {
    // Per relay, the window's events it stores of authors who declare it.
    let held = Holdings::of(sim, window, |a, r| {
        sim.is_declared(a, r) && rates.get(r as usize).is_some_and(|&p| p > 0.0)
    });
    let (per_relay, event_author) = (&held.per_relay, &held.event_author);
    // `missed[e]`: the chance no chosen relay returns event `e`.
    let mut missed = vec![1.0f64; event_author.len()];
    let gain = |r: usize, missed: &[f64]| -> f64 {
        rates[r]
            * per_relay[r]
                .iter()
                .map(|&e| missed[e as usize])
                .sum::<f64>()
    };
    let mut heap: BinaryHeap<Candidate> = (0..per_relay.len())
        .filter(|&r| !per_relay[r].is_empty())
        .map(|r| Candidate {
            gain: gain(r, &missed),
            relay: r as u32,
            round: 0,
        })
        .collect();
    let mut chosen: Vec<u32> = Vec::new();
    while chosen.len() < budget {
        let Some(top) = heap.pop() else {
            break;
        };
        let r = top.relay as usize;
        if top.round != chosen.len() {
            heap.push(Candidate {
                gain: gain(r, &missed),
                round: chosen.len(),
                ..top
            });
            continue;
        }
        if top.gain <= 0.0 {
            break;
        }
        for &e in &per_relay[r] {
            missed[e as usize] *= 1.0 - rates[r];
        }
        chosen.push(top.relay);
    }
    held.asks(sim, &chosen)
}

/// The expected number of the window's events that asking `relays` (about the follows who
/// declare them) returns, when relay `r` answers with probability `rates[r]`.
pub fn expected_events(sim: &SimWorld, rates: &[f64], window: Window, relays: &[u32]) -> f64 {
    let world = &sim.world;
    let since = world.now.saturating_sub(window.secs());
    let mut total = 0.0;
    for a in 0..world.follows.len() as u32 {
        for e in world.author_events_since(a, since) {
            let missed: f64 = world
                .event_relays(e)
                .iter()
                .filter(|&&r| relays.contains(&r) && sim.is_declared(a, r))
                .map(|&r| 1.0 - rates.get(r as usize).copied().unwrap_or(0.0))
                .product();
            total += 1.0 - missed;
        }
    }
    total
}

/// The ceiling's asks in `session` when it re-plans as the runtime does
/// ([`LoopConfig::replan_on_failure`]): `first`, then, while relays it asked do not answer,
/// its asks again with those relays set aside, every wave's asks together. What it learns
/// within the session is what the runtime learns: which relays it asked did not answer.
fn replanned_asks(
    sim: &SimWorld,
    rates: &[f64],
    budget: usize,
    window: Window,
    session: u32,
    first: &Asks,
) -> Asks {
    let mut rates = rates.to_vec();
    let mut asks = first.clone();
    for _ in 0..MAX_REPLANS {
        let failed: Vec<u32> = (asks.entries.iter().filter_map(|a| a.relay))
            .filter(|&r| !sim.world.is_up(r, session) && rates[r as usize] > 0.0)
            .collect();
        if failed.is_empty() {
            break;
        }
        for r in failed {
            rates[r as usize] = 0.0;
        }
        asks.merge(ceiling_asks(sim, &rates, budget, window));
    }
    asks
}

/// Scores the ceiling in every session: each window with the plan chosen for it, re-planned
/// around the relays that do not answer when `cfg` says the strategies are. Connections,
/// disclosure and coverage are those of the longest window's plan.
pub fn run_ceiling(sim: &SimWorld, cfg: &LoopConfig, budget: usize) -> Vec<SessionOutcome> {
    let started = Instant::now();
    let rates = up_rates(sim);
    let mut windows = cfg.windows.clone();
    windows.sort_by_key(|w| w.secs());
    let plans: Vec<(Window, Asks)> = windows
        .iter()
        .map(|&w| (w, ceiling_asks(sim, &rates, budget, w)))
        .collect();
    let plan_us = started.elapsed().as_secs_f64() * 1e6;
    let empty = with_residual(sim, Vec::new());
    (0..cfg.sessions)
        .map(|s| {
            let replanned: Vec<(Window, Asks)>;
            let session_plans = if cfg.replan_on_failure {
                replanned = (plans.iter())
                    .map(|(w, first)| (*w, replanned_asks(sim, &rates, budget, *w, s, first)))
                    .collect();
                &replanned
            } else {
                &plans
            };
            let base = session_plans.last().map_or(&empty, |(_, asks)| asks);
            let session_plans: Vec<(Window, &Asks)> =
                session_plans.iter().map(|(w, asks)| (*w, asks)).collect();
            let mut score = score_each_window(sim, base, &session_plans, s);
            if let Some(w) = cfg.clock {
                let since = sim.world.now.saturating_sub(w.secs());
                let bound = crate::clock::fastest(sim, s, since, &cfg.client);
                let reachable = bound.arrived.len() as u64;
                score.time = Some(crate::clock::time_score(
                    sim,
                    &bound,
                    reachable,
                    Some(&bound),
                ));
            }
            SessionOutcome { score, plan_us }
        })
        .collect()
}

/// A relay in the lazy-greedy heap: its gain as of `round` choices.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    gain: f64,
    relay: u32,
    round: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Largest gain first; on ties the lower relay index, so choices are reproducible.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.gain
            .total_cmp(&other.gain)
            .then_with(|| other.relay.cmp(&self.relay))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asks::Ask;
    use crate::score::score;
    use crate::session::run_oracle;
    use nostr_outbox_world::{generate, Profile};

    fn mean_y1(outcomes: &[SessionOutcome]) -> f64 {
        let xs: Vec<f64> = outcomes
            .iter()
            .filter_map(|o| o.score.window(Window::Y1).and_then(|w| w.declared()))
            .collect();
        xs.iter().sum::<f64>() / xs.len().max(1) as f64
    }

    #[test]
    fn the_ceiling_sits_below_the_oracle_and_covers_every_follow() {
        let sim = SimWorld::new(generate(Profile::Small, 3));
        let cfg = LoopConfig {
            sessions: 3,
            ..LoopConfig::default()
        };
        let ceiling = run_ceiling(&sim, &cfg, 20);
        let oracle = run_oracle(&sim, &cfg, 20);
        for (c, o) in ceiling.iter().zip(&oracle) {
            assert_eq!(c.score.author_coverage, 1.0);
            // The oracle counts undeclared notes too, so it bounds the ceiling's declared
            // recall at the year on these worlds, not at every window.
            let c = c.score.window(Window::Y1).and_then(|s| s.declared());
            let o = o.score.window(Window::Y1).and_then(|s| s.declared());
            assert!(c <= o, "ceiling {c:?} above oracle {o:?}");
        }
        assert!(mean_y1(&ceiling) > 0.0);
    }

    #[test]
    fn a_ceiling_that_re_plans_finds_more_and_never_less() {
        let sim = SimWorld::new(generate(Profile::Small, 5));
        let y1 = |replan: bool| -> Vec<f64> {
            let cfg = LoopConfig {
                sessions: 5,
                windows: vec![Window::Y1],
                replan_on_failure: replan,
                clock: None,
                ..LoopConfig::default()
            };
            (run_ceiling(&sim, &cfg, 10).iter())
                .map(|o| o.score.window(Window::Y1).expect("scored").declared_recall)
                .collect()
        };
        let (once, replanned) = (y1(false), y1(true));
        for (s, (a, b)) in once.iter().zip(&replanned).enumerate() {
            assert!(b + 1e-9 >= *a, "session {s}: re-planned {b} < one plan {a}");
        }
        assert!(
            once.iter().zip(&replanned).any(|(a, b)| b > a),
            "re-planning changed nothing: {once:?} vs {replanned:?}"
        );
    }

    #[test]
    fn the_ceiling_weighs_relays_by_how_often_they_answer() {
        let sim = SimWorld::new(generate(Profile::Small, 5));
        let rates = up_rates(&sim);
        assert!(rates.iter().any(|&p| p < 1.0), "the world has flaky relays");
        let routed = |asks: &Asks| -> Vec<u32> {
            let reader: Vec<Option<u32>> = sim
                .table
                .reader_relays()
                .iter()
                .map(|&r| sim.world.relay_id(sim.table.url(r)))
                .collect();
            asks.entries
                .iter()
                .filter(|e| !reader.contains(&e.relay))
                .filter_map(|e| e.relay)
                .collect()
        };
        let ceiling = routed(&ceiling_asks(&sim, &rates, 10, Window::Y1));
        // The same greedy choice, blind to liveness: the most stored events.
        let always_up = vec![1.0; rates.len()];
        let blind = routed(&ceiling_asks(&sim, &always_up, 10, Window::Y1));
        assert!(ceiling.len() <= 10 && blind.len() <= 10);
        let expected = |relays: &[u32]| expected_events(&sim, &rates, Window::Y1, relays);
        assert!(
            expected(&ceiling) > expected(&blind),
            "{} <= {}",
            expected(&ceiling),
            expected(&blind)
        );
    }

    #[test]
    fn the_ceiling_beats_a_random_plan_of_the_same_budget() {
        let sim = SimWorld::new(generate(Profile::Small, 4));
        let rates = up_rates(&sim);
        let best = ceiling_asks(&sim, &rates, 5, Window::Y1);
        // The five relays the most follows declare, ignoring liveness and history.
        let mut by_popularity: Vec<u32> = (0..sim.world.relays().len() as u32).collect();
        let declarers = |r: u32| {
            (0..sim.world.follows.len() as u32)
                .filter(|&a| sim.is_declared(a, r))
                .count()
        };
        by_popularity.sort_by_key(|&r| std::cmp::Reverse(declarers(r)));
        let naive: Vec<Ask> = by_popularity
            .iter()
            .take(5)
            .map(|&r| Ask {
                url: sim.world.relays()[r as usize].url.clone(),
                relay: Some(r),
                authors: (0..sim.world.follows.len() as u32)
                    .filter(|&a| sim.is_declared(a, r))
                    .collect(),
            })
            .collect();
        let naive = with_residual(&sim, naive);
        let total = |asks: &Asks| -> f64 {
            (0..sim.world.sessions.min(5))
                .map(|s| {
                    score(&sim, asks, s, &[Window::Y1])
                        .window(Window::Y1)
                        .and_then(|w| w.declared())
                        .unwrap_or(0.0)
                })
                .sum()
        };
        assert!(
            best.entries
                .iter()
                .filter(|e| !sim
                    .table
                    .reader_relays()
                    .iter()
                    .any(|&r| e.relay == sim.world.relay_id(sim.table.url(r))))
                .count()
                <= 5
        );
        assert!(
            total(&best) >= total(&naive),
            "{} < {}",
            total(&best),
            total(&naive)
        );
    }
}

//! Scoring a set of *delivered* events (what a live client actually received) with the same
//! definitions [`score`](crate::score()) applies to a plan, so live and simulated recall are
//! comparable number for number.

use crate::score::{sorted_windows, window_scores, WindowScore};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// Scores the world events marked in `delivered` (indexed like [`World::events`]) in `session`.
///
/// An event counts as fetched when it was delivered and some relay would return it in the
/// session (a delivered event no up relay stores cannot happen in a faithful replay; it is
/// ignored rather than inflating recall). Declared recall's numerator counts only fetched
/// events some declared write relay of the author would return, exactly as in
/// [`score`](crate::score()). A `delivered` shorter than the world's events reads the missing
/// tail as not delivered.
///
/// [`World::events`]: nostr_outbox_world::World::events
pub fn score_delivered(
    sim: &SimWorld,
    delivered: &[bool],
    session: u32,
    windows: &[Window],
) -> Vec<WindowScore> {
    window_scores(sim, session, &sorted_windows(windows), |_, i| {
        delivered.get(i).copied().unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asks::Asks;
    use crate::observe::observe;
    use crate::score::score;
    use nostr_outbox_world::{generate, Profile};

    /// Delivering exactly what a plan's simulated REQs return scores exactly like the plan.
    #[test]
    fn delivering_what_a_plan_fetches_scores_like_the_plan() {
        nostr_outbox_strategies::link();
        let sim = SimWorld::new(generate(Profile::Small, 3));
        let mut router = nostr_outbox_core::Router::from_toml("[strategy]\ntype = \"greedy\"\n")
            .expect("config");
        let plan = router.plan(&sim.table, 1);
        let asks = Asks::from_plan(&sim, &plan);
        let world = &sim.world;
        for session in 0..world.sessions {
            let since = world.now.saturating_sub(Window::Y3.secs());
            let obs = observe(&sim, &asks, session, since);
            let mut delivered = vec![false; world.events().len()];
            let mut index = 0usize;
            for a in 0..world.follows.len() as u32 {
                for e in world.author_events(a) {
                    let asked = obs.relays.iter().any(|r| {
                        r.up && r.asked.contains(&a)
                            && world
                                .relay_id(&r.url)
                                .is_some_and(|id| world.event_relays(e).contains(&id))
                    });
                    delivered[index] = asked && e.created_at >= since;
                    index += 1;
                }
            }
            let want = score(&sim, &asks, session, &Window::ALL);
            let got = score_delivered(&sim, &delivered, session, &Window::ALL);
            assert_eq!(want.windows, got, "session {session}");
        }
    }

    #[test]
    fn nothing_delivered_is_zero_recall_and_short_input_is_fine() {
        let sim = SimWorld::new(generate(Profile::Small, 4));
        let got = score_delivered(&sim, &[], 0, &[Window::Y1]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].fetched, 0);
        assert!(got[0].declared_available > 0);
        assert_eq!(got[0].declared_recall, 0.0);
    }
}

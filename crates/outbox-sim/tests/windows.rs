//! Plans per window: a router whose plans read the fetch's window has each narrower window
//! scored with the plan made for it, while what it learns from stays the widest window's plan.

use outbox_core::{PlanContext, Router};
use outbox_sim::{generate, run_sessions, score, Asks, LoopConfig, Profile, SimWorld, Window};

fn recall() -> Router {
    outbox_strategies::link();
    Router::from_toml("max_connections = 20\n[strategy]\ntype = \"recall\"\n").expect("config")
}

fn sessions(n: u32) -> LoopConfig {
    LoopConfig {
        sessions: n,
        windows: vec![Window::D7, Window::Y1],
        timing_repeats: 0,
        ..LoopConfig::default()
    }
}

#[test]
fn each_window_is_scored_with_the_plan_made_for_it() {
    let sim = SimWorld::new(generate(Profile::Small, 1));
    // What the first session taught, and the second session as the loop scores it.
    let mut learned = run_sessions(&sim, &mut recall(), &sessions(1), |_, _, _| {}).stats;
    let two = run_sessions(&sim, &mut recall(), &sessions(2), |_, _, _| {});

    let cfg = sessions(2);
    learned.begin_session();
    let ctx = PlanContext::at(sim.world.now + cfg.session_interval_secs).seed(cfg.seed_for(1));
    let mut router = recall();
    let mut plan_for = |w: Window| {
        let plan = router.plan_with(&sim.table, &learned, ctx.window(w.secs()));
        Asks::from_plan(&sim, &plan)
    };
    let (week, year) = (plan_for(Window::D7), plan_for(Window::Y1));
    assert_ne!(week, year, "here the week's plan differs from the year's");
    let scored = &two.sessions[1].score;
    for (w, asks) in [(Window::D7, &week), (Window::Y1, &year)] {
        assert_eq!(
            scored.window(w),
            score(&sim, asks, 1, &[w]).window(w),
            "{w} is scored with its own plan"
        );
    }
}

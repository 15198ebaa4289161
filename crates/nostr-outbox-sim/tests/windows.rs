//! Plans per window: a router whose plans read the fetch's window has each narrower window
//! scored with the plan made for it, while what it learns from stays the widest window's plan.

use nostr_outbox_core::{DeliveryStats, Plan, PlanContext, Router};
use nostr_outbox_sim::{
    run_sessions, run_sessions_with, score, Asks, LoopConfig, SimWorld, Window, WindowScore,
};
use nostr_outbox_world::{generate, Profile};

fn recall() -> Router {
    nostr_outbox_strategies::link();
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
        // What the session's probes found beyond the plan is the loop's to add.
        let loop_scored = scored.window(w).map(|s| WindowScore {
            found: 0,
            ..s.clone()
        });
        assert_eq!(
            loop_scored.as_ref(),
            score(&sim, asks, 1, &[w]).window(w),
            "{w} is scored with its own plan"
        );
    }
}

/// A session as the loop showed it: its number, plan, plans per window and learned stats.
type Shown = (u32, Plan, Vec<(Window, Plan)>, DeliveryStats);

/// What the loop shows of each session: per window the plan made for it (the widest window's
/// being the session's plan), from the stats the session began with, and the stats it ends
/// with; a router that does not read the window shows its one plan for every window.
#[test]
fn each_session_shows_the_plan_made_for_each_window_and_what_it_learned() {
    let sim = SimWorld::new(generate(Profile::Small, 1));
    let cfg = LoopConfig {
        windows: vec![Window::D7, Window::Y1, Window::Y3],
        ..sessions(3)
    };
    let greedy = || {
        Router::from_toml("max_connections = 20\n[strategy]\ntype = \"greedy\"\n").expect("config")
    };
    for (make, reads) in [(recall as fn() -> Router, true), (greedy, false)] {
        let mut shown: Vec<Shown> = Vec::new();
        let run = run_sessions_with(&sim, &mut make(), &cfg, |v| {
            let plans = v.window_plans.iter().map(|(w, p)| (*w, (*p).clone()));
            shown.push((v.session, v.plan.clone(), plans.collect(), v.stats.clone()));
        });
        assert_eq!(shown.len(), 3);
        assert_eq!(shown.last().map(|s| &s.3), Some(&run.stats));
        let mut differs = false;
        let mut before = DeliveryStats::new();
        for (s, plan, windows, after) in &shown {
            let listed: Vec<Window> = windows.iter().map(|(w, _)| *w).collect();
            assert_eq!(listed, cfg.windows, "session {s}");
            let mut stats = before.clone();
            stats.begin_session();
            let ctx = PlanContext::at(sim.world.now + u64::from(*s) * cfg.session_interval_secs)
                .seed(cfg.seed_for(*s));
            for (w, shown_plan) in windows {
                if reads {
                    let own = make().plan_with(&sim.table, &stats, ctx.window(w.secs()));
                    assert_eq!(shown_plan, &own, "session {s}, {w}");
                } else {
                    assert_eq!(shown_plan, plan, "session {s}, {w}");
                }
                differs |= shown_plan != plan;
            }
            assert_eq!(windows.last().map(|(_, p)| p), Some(plan), "session {s}");
            before = after.clone();
        }
        assert_eq!(differs, reads, "some window's plan is its own");
    }
}

//! Planning time, cold and warm: a session's first plan is timed cold (after the previous
//! session's fetch and learning), the plans repeated with the final stats warm, and each is
//! reported apart through the loop and the bench.

use nostr_outbox_core::Router;
use nostr_outbox_sim::{
    run_bench, run_sessions, BenchConfig, LoopConfig, SimWorld, SuiteEntry, Window,
};
use nostr_outbox_world::{generate, Profile};

fn greedy() -> Router {
    nostr_outbox_strategies::link();
    Router::from_toml("max_connections = 20\n[strategy]\ntype = \"greedy\"\n").expect("config")
}

#[test]
fn cold_is_each_sessions_first_plan_and_warm_the_repeated_plans() {
    let sim = SimWorld::new(generate(Profile::Small, 2));
    let cfg = |repeats| LoopConfig {
        sessions: 3,
        windows: vec![Window::D7, Window::Y1],
        timing_repeats: repeats,
        ..LoopConfig::default()
    };
    let run = run_sessions(&sim, &mut greedy(), &cfg(0), |_, _, _| {});
    let times: Vec<f64> = run.sessions.iter().map(|o| o.plan_us).collect();
    assert!(times.iter().all(|&t| t > 0.0), "{times:?}");
    let mean = times.iter().sum::<f64>() / 3.0;
    assert!((run.plan_us_cold - mean).abs() < 1e-9, "{run:?}");
    // No repeats: nothing was timed warm.
    assert_eq!(run.plan_us_warm, 0.0);
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(run.plan_us_median, sorted[1]);

    let run = run_sessions(&sim, &mut greedy(), &cfg(5), |_, _, _| {});
    let mean = run.sessions.iter().map(|o| o.plan_us).sum::<f64>() / 3.0;
    assert!((run.plan_us_cold - mean).abs() < 1e-9, "{run:?}");
    assert!(run.plan_us_warm > 0.0, "{run:?}");
}

#[test]
fn the_bench_reports_cold_and_warm_per_run_and_per_row() {
    nostr_outbox_strategies::link();
    let suite = vec![SuiteEntry {
        label: "greedy".into(),
        toml: "[strategy]\ntype = \"greedy\"\n".into(),
    }];
    let cfg = BenchConfig {
        profiles: vec![Profile::Small],
        seeds: vec![3, 4],
        sessions: 2,
        windows: vec![Window::Y1],
        timing_repeats: 3,
        threads: 1,
        routes: false,
        ..BenchConfig::default()
    };
    let report = run_bench(&cfg, &suite, &|_| {});
    let runs: Vec<_> = report.runs.iter().filter(|r| r.label == "greedy").collect();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        assert!(run.plan_us_cold > 0.0 && run.plan_us_warm > 0.0, "{run:?}");
    }
    let row = report.rows.iter().find(|r| r.label == "greedy").unwrap();
    let median = |f: fn(&nostr_outbox_sim::RunRecord) -> f64| (f(runs[0]) + f(runs[1])) / 2.0;
    assert_eq!(row.plan_us_cold, median(|r| r.plan_us_cold));
    assert_eq!(row.plan_us_warm, median(|r| r.plan_us_warm));
    // The bounds learn nothing: their warm time is the median of their sessions' plans.
    for bound in report.runs.iter().filter(|r| r.label != "greedy") {
        assert!(bound.plan_us_cold > 0.0, "{bound:?}");
        assert_eq!(bound.plan_us_warm, bound.plan_us, "{bound:?}");
    }
    let zeroed = report.without_timings();
    for row in &zeroed.rows {
        assert_eq!((row.plan_us_cold, row.plan_us_warm), (0.0, 0.0));
    }
    for run in &zeroed.runs {
        assert_eq!((run.plan_us_cold, run.plan_us_warm), (0.0, 0.0));
    }
}

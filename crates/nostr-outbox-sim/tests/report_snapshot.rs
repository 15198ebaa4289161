//! A small bench report on fixed seeds, snapshotted (timings zeroed: they vary run to run).

use nostr_outbox_sim::{run_bench, BenchConfig, SuiteEntry, Window};
use nostr_outbox_world::Profile;

#[test]
fn small_bench_report_is_stable() {
    nostr_outbox_strategies::link();
    let suite = vec![
        SuiteEntry {
            label: "greedy".into(),
            toml: "[strategy]\ntype = \"greedy\"\n".into(),
        },
        SuiteEntry {
            label: "direct".into(),
            toml: "[strategy]\ntype = \"direct\"\n".into(),
        },
        SuiteEntry {
            label: "not_yet".into(),
            toml: "[strategy]\ntype = \"not_registered_anywhere\"\n".into(),
        },
    ];
    let cfg = BenchConfig {
        profiles: vec![Profile::Small],
        seeds: vec![7],
        sessions: 2,
        windows: vec![Window::D7, Window::Y1],
        timing_repeats: 0,
        threads: 1,
        ..BenchConfig::default()
    };
    let report = run_bench(&cfg, &suite, &|_| {}).without_timings();
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.rows.last().unwrap().label, "oracle");
    assert_eq!(report.skipped[0].label, "not_yet");
    // The route scores ride along without touching the feed rows.
    assert_eq!(report.route_runs.len(), 1);
    assert_eq!(report.route_runs[0].sessions.len(), 2);
    assert!(report.route_runs[0]
        .sessions
        .iter()
        .all(|s| s.violations == 0));
    let labels: Vec<&str> = report.routes.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["routes", "naive"]);
    insta::assert_json_snapshot!("small_bench_rows", &report.rows);
}

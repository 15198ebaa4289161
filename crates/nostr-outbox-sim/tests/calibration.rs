//! Calibration against the published study (nostrability/outbox, 2026; its table is quoted in
//! `docs/design.md`): the reference strategies, at 1 year, must land within ±8 percentage points
//! of the published numbers and keep their ordering.
//!
//! Small and medium worlds on fixed seeds, so it runs in reasonable time in debug builds.
//! Strategies that are not registered are skipped (the suite runs whatever is linked).

use nostr_outbox_sim::{default_suite, run_bench, BenchConfig, BenchReport, SuiteEntry, Window};
use nostr_outbox_world::Profile;

/// Published 1-year declared recall (%), nostrability/outbox 2026, 20-connection cap.
const PUBLISHED_1YR: &[(&str, f64)] = &[
    ("greedy", 16.3),
    ("ndk_priority", 16.3),
    ("stochastic", 23.8),
    ("filter_decomposition", 24.8),
    ("direct", 30.3),
    ("stochastic+thompson", 39.0),
];
const BAND: f64 = 8.0;

/// Published gain of stochastic + Thompson (session 5) over its paired stochastic run, 1 year:
/// 30.4% → 39.0%.
const PUBLISHED_GAIN: f64 = 8.6;
const GAIN_BAND: f64 = 2.0;

fn report() -> BenchReport {
    nostr_outbox_strategies::link();
    let cfg = BenchConfig {
        profiles: vec![Profile::Small, Profile::Medium],
        seeds: vec![1, 2, 3],
        timing_repeats: 0,
        only: Some(PUBLISHED_1YR.iter().map(|(l, _)| l.to_string()).collect()),
        oracle: false,
        ..BenchConfig::default()
    };
    run_bench(&cfg, &default_suite(), &|_| {})
}

fn one_year(report: &BenchReport) -> Vec<(&'static str, f64)> {
    PUBLISHED_1YR
        .iter()
        .filter_map(|(label, _)| {
            let row = report.rows.iter().find(|r| r.label == *label)?;
            Some((*label, row.window(Window::Y1)?.last.mean * 100.0))
        })
        .collect()
}

#[test]
fn reference_strategies_land_near_the_published_numbers() {
    let report = report();
    let ours = one_year(&report);
    for (label, value) in &ours {
        let published = PUBLISHED_1YR.iter().find(|(l, _)| l == label).unwrap().1;
        eprintln!("{label:<22} ours {value:5.1}%  published {published:5.1}%");
    }
    assert!(
        ours.iter().any(|(l, _)| *l == "greedy"),
        "greedy is always registered"
    );
    for (label, value) in ours.iter().filter(|(l, _)| *l != "stochastic+thompson") {
        let published = PUBLISHED_1YR.iter().find(|(l, _)| l == label).unwrap().1;
        assert!(
            (value - published).abs() <= BAND,
            "{label}: {value:.1}% is not within ±{BAND} pp of the published {published}%"
        );
    }
    let get = |l: &str| ours.iter().find(|(x, _)| *x == l).map(|(_, v)| *v);
    // Ordering at 1 year: direct > FD ≈ stochastic > greedy, and learning helps stochastic.
    if let (Some(direct), Some(greedy)) = (get("direct"), get("greedy")) {
        assert!(direct > greedy, "direct {direct:.1} > greedy {greedy:.1}");
    }
    for baseline in ["stochastic", "filter_decomposition"] {
        if let Some(b) = get(baseline) {
            if let Some(direct) = get("direct") {
                assert!(direct > b, "direct {direct:.1} > {baseline} {b:.1}");
            }
            if let Some(greedy) = get("greedy") {
                assert!(b > greedy, "{baseline} {b:.1} > greedy {greedy:.1}");
            }
        }
    }
    if let (Some(s), Some(fd)) = (get("stochastic"), get("filter_decomposition")) {
        assert!((s - fd).abs() <= BAND, "stochastic {s:.1} ≈ FD {fd:.1}");
    }
    if let (Some(t), Some(s)) = (get("stochastic+thompson"), get("stochastic")) {
        assert!(
            t > s,
            "Thompson after 5 sessions {t:.1} > stochastic {s:.1}"
        );
    }
}

/// The published study measured stochastic + Thompson (session 5) at 39.0%, 8.6 points over
/// its paired stochastic baseline (30.4%). Its per-author algorithms select by the benchmark's
/// rules, not a client's: a fresh random factor per (follow, relay), and a connection cap that
/// keeps the 20 relays with the most picks and drops every other pick. Under the client's
/// rules here (one draw per relay, dropped follows moved to kept relays they write to)
/// Thompson gains less (+6.3 on these six worlds, +5.6 on 40), because much of the study's gain
/// is Thompson covering again the follows its cap left out.
///
/// Neither the learning signal nor the world model was found wrong: the signal is the study's
/// (`relay-scores.ts`: per relay of the capped plan, each assigned author with notes is a trial
/// split by the share of its notes the relay returned; a relay that does not answer fails each;
/// evidence fades by 0.95 a session; the fifth session plans with four learned), and with the
/// study's rules (`rules = "study"`) the worlds give its paired numbers: on these six worlds
/// 20.8 → 29.4 (+8.6), on the 40 worlds of seeds 1–20, small and medium, 30.3 → 38.6 (+8.3)
/// against its 30.4 → 39.0. So the check compares like with like: Thompson's gain over
/// stochastic, both under the study's rules, paired on the same worlds, within ±2 points of
/// +8.6. (These six worlds sit low for every learning row; the level check of the stateless rows
/// is the test above.)
#[test]
fn thompson_gains_the_published_lead_under_the_studys_rules() {
    nostr_outbox_strategies::link();
    let study = |scorer: &str| SuiteEntry {
        label: format!("stochastic{scorer} (study rules)"),
        toml: format!(
            "[strategy]\ntype = \"stochastic\"\nrules = \"study\"\n{}",
            if scorer.is_empty() {
                String::new()
            } else {
                "[strategy.scorer]\ntype = \"thompson\"\n".to_string()
            }
        ),
    };
    let suite = vec![study(""), study("+thompson")];
    let cfg = BenchConfig {
        profiles: vec![Profile::Small, Profile::Medium],
        seeds: vec![1, 2, 3],
        timing_repeats: 0,
        oracle: false,
        ..BenchConfig::default()
    };
    let report = run_bench(&cfg, &suite, &|_| {});
    let level = |label: &str| {
        report
            .rows
            .iter()
            .find(|r| r.label == label)
            .and_then(|r| r.window(Window::Y1))
            .map(|w| w.last.mean * 100.0)
            .unwrap_or_else(|| panic!("no 1-year row for {label}"))
    };
    let (s, t) = (
        level("stochastic (study rules)"),
        level("stochastic+thompson (study rules)"),
    );
    let gain = t - s;
    eprintln!(
        "study rules: stochastic {s:.1}%, Thompson {t:.1}%, gain {gain:+.1} (published +8.6)"
    );
    assert!(
        (gain - PUBLISHED_GAIN).abs() <= GAIN_BAND,
        "Thompson gains {gain:+.1} over stochastic under the study's rules, not within ±{GAIN_BAND} of the published +{PUBLISHED_GAIN}"
    );
}

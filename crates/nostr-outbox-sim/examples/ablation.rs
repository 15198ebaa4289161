//! Router configs side by side with the learnable ceiling, paired by world: which idea buys how
//! much, and on which worlds.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example ablation -- [--suite FILE] [--profiles small,medium]
//!     [--seeds 1-8] [--family decay] [--budget 20] [--sessions 5] [--windows 7d,1yr,3yr]
//!     [--json OUT]
//! cargo run --release -p nostr-outbox-sim --example ablation -- [--suite FILE] --world FILE
//!     [--budget 20] [--sessions N] [--windows 7d,1yr,3yr] [--json OUT]
//! ```
//!
//! `--suite FILE`: one row per `[[row]]` table with a `label` and a router config in `toml`
//! (default: `recall` with each ingredient switched off in turn, and stochastic + Thompson).
//! Every row is printed with its 1-year declared recall in the first and last session, its
//! share of the learnable ceiling and its ratio to the first row, both paired by world, its
//! week's recall (first and last session, where `7d` is scored), the relays told about each
//! follow (`told`, first and last session: the disclosure), and its
//! planning time: cold (a session's first plan, mean over sessions) and warm (plans repeated
//! with the final stats), medians over worlds. `--world FILE` runs the rows on one
//! `outbox-world/1` file instead of generated worlds, over every session it describes
//! (`--sessions` may ask for fewer), planning with base seed 0 as `outbox bench --world` does.

mod common;

use std::collections::HashMap;

use common::{fail, parse_list, read_text, Args, Source};
use nostr_outbox_core::Router;
use nostr_outbox_sim::bench::resolve;
use nostr_outbox_sim::session::median;
use nostr_outbox_sim::{
    run_bench, run_ceiling, run_sessions, BenchConfig, LoopConfig, SimWorld, SuiteEntry, Window,
    CEILING,
};

const VARIANTS: &[(&str, &str)] = &[
    ("recall", ""),
    ("- liveness", "liveness = false\n"),
    ("- completeness", "completeness = false\n"),
    ("- pairs", "pairs = false\n"),
    ("- volume", "volume = false\n"),
    ("- depth", "depth = false\n"),
    ("- dead share", "dead_share = 0.0\n"),
    ("- windowed", "windowed = false\n"),
    ("+ recent weight", "recent_weight = 0.25\n"),
    ("+ Thompson draws", "explore = true\n"),
    ("+ pooled priors", "pooled_priors = true\n"),
    ("- empirical priors", "empirical_priors = false\n"),
    ("disclosure 2", "disclosure = 2.0\n"),
];

/// One row on one world: declared recall (%) of the week and the year in the first and last
/// session, relays told about each follow in both, and planning times (µs).
#[derive(Clone, Copy)]
struct Cell {
    s1: f64,
    last: f64,
    week_s1: f64,
    week_last: f64,
    told_s1: f64,
    told_last: f64,
    cold: f64,
    warm: f64,
}

/// Declared recall (%) of `window` in session `i`, 0 when not scored.
fn recall_of(sessions: &[nostr_outbox_sim::PlanScore], i: usize, window: Window) -> f64 {
    sessions
        .get(i)
        .and_then(|s| s.window(window))
        .map_or(0.0, |w| w.declared_recall * 100.0)
}

fn cell(sessions: &[nostr_outbox_sim::PlanScore], cold: f64, warm: f64) -> Cell {
    let last = sessions.len().saturating_sub(1);
    let told = |i: usize| sessions.get(i).map_or(0.0, |s| s.per_follow);
    Cell {
        s1: recall_of(sessions, 0, Window::Y1),
        last: recall_of(sessions, last, Window::Y1),
        week_s1: recall_of(sessions, 0, Window::D7),
        week_last: recall_of(sessions, last, Window::D7),
        told_s1: told(0),
        told_last: told(last),
        cold,
        warm,
    }
}

fn suite(path: Option<&str>) -> Result<Vec<SuiteEntry>, String> {
    let Some(path) = path else {
        let mut rows: Vec<SuiteEntry> = VARIANTS
            .iter()
            .map(|(label, extra)| SuiteEntry {
                label: (*label).to_string(),
                toml: format!("[strategy]\ntype = \"recall\"\n{extra}"),
            })
            .collect();
        rows.push(SuiteEntry {
            label: "stochastic+thompson".into(),
            toml: "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\n"
                .into(),
        });
        return Ok(rows);
    };
    let text = read_text(std::path::Path::new(path))?;
    let doc: toml::Table = text
        .parse()
        .map_err(|e| format!("suite file {path}: {e}"))?;
    let rows = doc
        .get("row")
        .and_then(|r| r.as_array())
        .ok_or_else(|| format!("suite file {path}: no [[row]] tables"))?;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let text = |key: &str| {
                row.get(key)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| format!("suite file {path}: row {i} has no {key} string"))
            };
            Ok(SuiteEntry {
                label: text("label")?,
                toml: text("toml")?,
            })
        })
        .collect()
}

fn main() {
    nostr_outbox_strategies::link();
    let args = Args::parse(&[
        "--suite",
        "--profiles",
        "--seeds",
        "--family",
        "--budget",
        "--windows",
        "--json",
    ]);
    let mut cfg = BenchConfig {
        oracle: false,
        ceiling: true,
        routes: false,
        ..BenchConfig::default()
    };
    let worlds = args
        .worlds(
            args.value("--profiles"),
            args.value("--seeds"),
            ("small,medium,large", "1,2"),
        )
        .unwrap_or_else(|e| fail(e));
    cfg.sessions = worlds.sessions;
    if let Some(b) = args.parsed::<usize>("--budget").unwrap_or_else(|e| fail(e)) {
        if b == 0 {
            fail("--budget must be at least 1");
        }
        cfg.budget = b;
    }
    if let Some(w) = args.value("--windows") {
        cfg.windows = parse_list(w).unwrap_or_else(|e| fail(format!("--windows: {e}")));
    }
    let suite = suite(args.value("--suite")).unwrap_or_else(|e| fail(e));
    let json = args.value("--json");

    // Per row, per world: recall in the first and last session, and planning times.
    let mut by_world: HashMap<(String, String), Cell> = HashMap::new();
    let world_keys: Vec<String> = match &worlds.source {
        Source::Generated {
            family,
            profiles,
            seeds,
        } => {
            cfg.family = *family;
            cfg.profiles = profiles.clone();
            cfg.seeds = seeds.clone();
            let report = run_bench(&cfg, &suite, &|_| {});
            for s in &report.skipped {
                eprintln!("skipped {}: {}", s.label, s.reason);
            }
            if let Some(out) = json {
                let text = serde_json::to_string(&report).unwrap_or_else(|e| fail(e));
                std::fs::write(out, text).unwrap_or_else(|e| fail(format!("writing {out}: {e}")));
            }
            for run in &report.runs {
                let key = format!("{}/{}", run.profile, run.seed);
                let c = cell(&run.sessions, run.plan_us_cold, run.plan_us_warm);
                by_world.insert((run.label.clone(), key), c);
            }
            println!(
                "{:?} family, profiles {:?}, seeds {:?}, {} sessions, budget {}; 1-year declared recall %",
                cfg.family, cfg.profiles, cfg.seeds, cfg.sessions, cfg.budget
            );
            (cfg.profiles.iter())
                .flat_map(|p| cfg.seeds.iter().map(move |s| format!("{p}/{s}")))
                .collect()
        }
        Source::File { path, sim } => {
            let runs = run_on_world(sim, &cfg, &suite);
            if let Some(out) = json {
                let text = serde_json::to_string(&serde_json::json!({
                    "world": sim.world.name,
                    "config": cfg,
                    "runs": runs.iter().map(|(label, sessions, cold, warm)| serde_json::json!({
                        "label": label,
                        "plan_us_cold": cold,
                        "plan_us_warm": warm,
                        "sessions": sessions,
                    })).collect::<Vec<_>>(),
                }))
                .unwrap_or_else(|e| fail(e));
                std::fs::write(out, text).unwrap_or_else(|e| fail(format!("writing {out}: {e}")));
            }
            let key = common::printable(&sim.world.name);
            for (label, sessions, cold, warm) in &runs {
                by_world.insert((label.clone(), key.clone()), cell(sessions, *cold, *warm));
            }
            println!(
                "world {key} ({}), {} sessions, budget {}; 1-year declared recall %",
                common::printable(&path.display().to_string()),
                cfg.sessions,
                cfg.budget
            );
            vec![key]
        }
    };

    let first_label = suite.first().map(|e| e.label.clone()).unwrap_or_default();
    println!(
        "{:<24} {:>6} {:>6} {:>14} {:>16} {:>6} {:>6} {:>9} {:>9} {:>8} {:>8}",
        "row",
        "s1",
        "last",
        "% of ceiling",
        "× first row",
        "7d s1",
        "7d",
        "told s1",
        "told",
        "cold µs",
        "warm µs"
    );
    let labels: Vec<String> = suite
        .iter()
        .map(|e| e.label.clone())
        .chain([CEILING.to_string()])
        .collect();
    for label in &labels {
        let get = |l: &str, w: &String| by_world.get(&(l.to_string(), w.clone())).copied();
        let (mut s1, mut last, mut share, mut ratio) = (vec![], vec![], vec![], vec![]);
        let (mut cold, mut warm) = (vec![], vec![]);
        let (mut week_s1, mut week_last, mut told_s1, mut told_last) =
            (vec![], vec![], vec![], vec![]);
        for w in &world_keys {
            let Some(c) = get(label, w) else {
                continue;
            };
            s1.push(c.s1);
            last.push(c.last);
            week_s1.push(c.week_s1);
            week_last.push(c.week_last);
            told_s1.push(c.told_s1);
            told_last.push(c.told_last);
            cold.push(c.cold);
            warm.push(c.warm);
            if let Some(ceil) = get(CEILING, w).filter(|c| c.last > 0.0) {
                share.push(c.last / ceil.last * 100.0);
            }
            if let Some(first) = get(&first_label, w).filter(|f| f.last > 0.0) {
                ratio.push(c.last / first.last);
            }
        }
        if s1.is_empty() {
            continue;
        }
        println!(
            "{:<24} {:>6.1} {:>6.1} {:>14} {:>16} {:>6.1} {:>6.1} {:>9.2} {:>9.2} {:>8.0} {:>8.0}",
            label,
            mean(&s1),
            mean(&last),
            format!("{:.1}±{:.1}", mean(&share), se(&share)),
            format!("{:.3}±{:.3}", mean(&ratio), se(&ratio)),
            mean(&week_s1),
            mean(&week_last),
            mean(&told_s1),
            mean(&told_last),
            median(&mut cold),
            median(&mut warm),
        );
    }
}

/// Every suite row and the learnable ceiling on one world: per row its label, scores by
/// session, and cold and warm planning times (µs).
fn run_on_world(
    sim: &SimWorld,
    cfg: &BenchConfig,
    suite: &[SuiteEntry],
) -> Vec<(String, Vec<nostr_outbox_sim::PlanScore>, f64, f64)> {
    let (ready, skipped) = resolve(suite);
    for s in &skipped {
        eprintln!("skipped {}: {}", s.label, s.reason);
    }
    let loop_cfg = LoopConfig {
        sessions: cfg.sessions,
        windows: cfg.windows.clone(),
        session_interval_secs: cfg.session_interval_secs,
        seed: 0,
        timing_repeats: cfg.timing_repeats,
        ..LoopConfig::default()
    };
    let mut runs: Vec<_> = ready
        .iter()
        .map(|(label, config)| {
            let mut router = Router::new(&*config.strategy, cfg.budget).with_probes(
                config
                    .probe_connections
                    .unwrap_or_else(|| nostr_outbox_core::default_probes(cfg.budget)),
            );
            let run = run_sessions(sim, &mut router, &loop_cfg, |_, _, _| {});
            let sessions = run.sessions.into_iter().map(|s| s.score).collect();
            (label.clone(), sessions, run.plan_us_cold, run.plan_us_warm)
        })
        .collect();
    let ceiling = run_ceiling(sim, &loop_cfg, cfg.budget);
    let mut times: Vec<f64> = ceiling.iter().map(|o| o.plan_us).collect();
    let cold = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let warm = median(&mut times);
    let sessions = ceiling.into_iter().map(|o| o.score).collect();
    runs.push((CEILING.to_string(), sessions, cold, warm));
    runs
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

fn se(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
    (var / xs.len() as f64).sqrt()
}

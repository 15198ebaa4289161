//! Router configs side by side with the learnable ceiling, paired by world: which idea buys how
//! much, and on which worlds.
//!
//! ```text
//! cargo run --release -p outbox-sim --example ablation -- [--suite FILE] [--profiles small,medium]
//!     [--seeds 1-8] [--family decay] [--budget 20] [--sessions 5] [--json OUT]
//! ```
//!
//! `--suite FILE`: one row per `[[row]]` table with a `label` and a router config in `toml`
//! (default: `recall` with each ingredient switched off in turn, and stochastic + Thompson).
//! Every row is printed with its 1-year declared recall in the first and last session, its
//! share of the learnable ceiling and its ratio to the first row, both paired by world.

use std::collections::HashMap;

use outbox_sim::{run_bench, BenchConfig, Family, Profile, SuiteEntry, Window, CEILING};

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
    ("disclosure 2", "disclosure = 2.0\n"),
];

fn value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).map(String::as_str)
}

fn seeds(text: &str) -> Vec<u64> {
    match text.split_once('-') {
        Some((a, b)) => (a.parse().expect("seed")..=b.parse().expect("seed")).collect(),
        None => text.split(',').map(|s| s.parse().expect("seed")).collect(),
    }
}

fn suite(path: Option<&str>) -> Vec<SuiteEntry> {
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
        return rows;
    };
    let text = std::fs::read_to_string(path).expect("suite file");
    let doc: toml::Table = text.parse().expect("suite file is TOML");
    doc.get("row")
        .and_then(|r| r.as_array())
        .expect("[[row]] tables")
        .iter()
        .map(|row| SuiteEntry {
            label: row["label"].as_str().expect("label").to_string(),
            toml: row["toml"].as_str().expect("toml").to_string(),
        })
        .collect()
}

fn main() {
    outbox_strategies::link();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = BenchConfig {
        oracle: false,
        ceiling: true,
        routes: false,
        ..BenchConfig::default()
    };
    if let Some(p) = value(&args, "--profiles") {
        cfg.profiles = p
            .split(',')
            .map(|s| s.parse::<Profile>().expect("profile"))
            .collect();
    }
    if let Some(s) = value(&args, "--seeds") {
        cfg.seeds = seeds(s);
    }
    if let Some(f) = value(&args, "--family") {
        cfg.family = f.parse::<Family>().expect("family");
    }
    if let Some(b) = value(&args, "--budget") {
        cfg.budget = b.parse().expect("budget");
    }
    if let Some(s) = value(&args, "--sessions") {
        cfg.sessions = s.parse().expect("sessions");
    }
    if let Some(w) = value(&args, "--windows") {
        cfg.windows = w
            .split(',')
            .map(|x| x.parse::<Window>().expect("window"))
            .collect();
    }
    let suite = suite(value(&args, "--suite"));
    let report = run_bench(&cfg, &suite, &|_| {});
    if let Some(out) = value(&args, "--json") {
        let json = serde_json::to_string(&report).expect("report serialises");
        std::fs::write(out, json).expect("write --json");
    }

    // Per row, per world: 1-year declared recall in the first and last session.
    let mut by_world: HashMap<(String, Profile, u64), (f64, f64)> = HashMap::new();
    for run in &report.runs {
        let y1 = |i: usize| {
            run.sessions
                .get(i)
                .and_then(|s| s.window(Window::Y1))
                .map_or(0.0, |w| w.declared_recall * 100.0)
        };
        let last = run.sessions.len().saturating_sub(1);
        by_world.insert(
            (run.label.clone(), run.profile, run.seed),
            (y1(0), y1(last)),
        );
    }
    let worlds: Vec<(Profile, u64)> = cfg
        .profiles
        .iter()
        .flat_map(|&p| cfg.seeds.iter().map(move |&s| (p, s)))
        .collect();
    let first_label = suite.first().map(|e| e.label.clone()).unwrap_or_default();
    println!(
        "{:?} family, profiles {:?}, seeds {:?}, {} sessions, budget {}; 1-year declared recall %",
        cfg.family, cfg.profiles, cfg.seeds, cfg.sessions, cfg.budget
    );
    println!(
        "{:<24} {:>6} {:>6} {:>14} {:>16} {:>8}",
        "row", "s1", "last", "% of ceiling", "× first row", "plan µs"
    );
    let labels: Vec<String> = suite
        .iter()
        .map(|e| e.label.clone())
        .chain([CEILING.to_string()])
        .collect();
    for label in &labels {
        let get = |l: &str, w: &(Profile, u64)| by_world.get(&(l.to_string(), w.0, w.1)).copied();
        let (mut s1, mut last, mut share, mut ratio) = (vec![], vec![], vec![], vec![]);
        for w in &worlds {
            let Some((a, b)) = get(label, w) else {
                continue;
            };
            s1.push(a);
            last.push(b);
            if let Some((_, c)) = get(CEILING, w).filter(|c| c.1 > 0.0) {
                share.push(b / c * 100.0);
            }
            if let Some((_, f)) = get(&first_label, w).filter(|f| f.1 > 0.0) {
                ratio.push(b / f);
            }
        }
        let plan_us = report
            .rows
            .iter()
            .find(|r| &r.label == label)
            .map_or(0.0, |r| r.plan_us);
        println!(
            "{:<24} {:>6.1} {:>6.1} {:>14} {:>16} {:>8.0}",
            label,
            mean(&s1),
            mean(&last),
            format!("{:.1}±{:.1}", mean(&share), se(&share)),
            format!("{:.3}±{:.3}", mean(&ratio), se(&ratio)),
            plan_us
        );
    }
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

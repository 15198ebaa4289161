//! The `recall` strategy beside the best reference and the oracle, with each of its ingredients
//! switched off in turn: which idea buys how much.
//!
//! `cargo run --release -p outbox-sim --example ablation [profiles...] [--seeds 1,2,3]`

use outbox_sim::{
    generate, run_bench, run_oracle_within, BenchConfig, LoopConfig, OracleScope, Profile,
    SimWorld, SuiteEntry, Window,
};

const VARIANTS: &[(&str, &str)] = &[
    ("recall", ""),
    ("- liveness", "liveness = false\n"),
    ("- completeness", "completeness = false\n"),
    ("- pairs", "pairs = false\n"),
    ("- volume", "volume = false\n"),
    ("- exploration", "explore = false\n"),
    ("+ pooled priors", "pooled_priors = true\n"),
    ("+ optimism 1", "optimism = 1.0\n"),
    ("+ optimism 3", "optimism = 3.0\n"),
    ("disclosure 1.5", "disclosure = 1.5\n"),
    ("disclosure 2", "disclosure = 2.0\n"),
    ("per_author 2", "per_author = 2\n"),
];

fn main() {
    outbox_strategies::link();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = BenchConfig::default();
    let profiles: Vec<Profile> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if !profiles.is_empty() {
        cfg.profiles = profiles;
    }
    if let Some(i) = args.iter().position(|a| a == "--seeds") {
        cfg.seeds = args[i + 1].split(',').map(|s| s.parse().unwrap()).collect();
    }
    let mut suite: Vec<SuiteEntry> = VARIANTS
        .iter()
        .map(|(label, extra)| SuiteEntry {
            label: (*label).to_string(),
            toml: format!("[strategy]\ntype = \"recall\"\n{extra}"),
        })
        .collect();
    suite.push(SuiteEntry {
        label: "stochastic+thompson".into(),
        toml: "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\n".into(),
    });
    suite.push(SuiteEntry {
        label: "greedy".into(),
        toml: "[strategy]\ntype = \"greedy\"\n".into(),
    });
    let report = run_bench(&cfg, &suite, &|_| {});
    println!(
        "profiles {:?}, seeds {:?}, {} sessions, budget {}; declared recall %, last session (first → last for 1yr)",
        cfg.profiles, cfg.seeds, cfg.sessions, cfg.budget
    );
    println!(
        "{:<20} {:>6} {:>15} {:>6} {:>10} {:>8}",
        "variant", "7d", "1yr s1 → s5", "3yr", "disclosure", "plan µs"
    );
    for row in &report.rows {
        let get = |w: Window| row.window(w);
        let d7 = get(Window::D7).map_or(0.0, |x| x.last.mean * 100.0);
        let (y1a, y1) =
            get(Window::Y1).map_or((0.0, 0.0), |x| (x.first.mean * 100.0, x.last.mean * 100.0));
        let y3 = get(Window::Y3).map_or(0.0, |x| x.last.mean * 100.0);
        println!(
            "{:<20} {:>6.1} {:>6.1} → {:>5.1} {:>6.1} {:>10.0} {:>8.0}",
            row.label, d7, y1a, y1, y3, row.disclosure.mean, row.plan_us
        );
    }
    // The ceiling for a router that may only ask relays about follows who list them: the
    // oracle restricted to declared write relays, over the same worlds.
    let loop_cfg = LoopConfig {
        sessions: cfg.sessions,
        session_interval_secs: cfg.session_interval_secs,
        ..LoopConfig::default()
    };
    let mut last = Vec::new();
    for &profile in &cfg.profiles {
        for &seed in &cfg.seeds {
            let sim = SimWorld::new(generate(profile, seed));
            let runs = run_oracle_within(&sim, &loop_cfg, cfg.budget, OracleScope::DeclaredOnly);
            let recall = |w: Window| {
                runs.last()
                    .and_then(|r| r.score.window(w))
                    .map_or(0.0, |x| x.declared_recall)
            };
            last.push([recall(Window::D7), recall(Window::Y1), recall(Window::Y3)]);
        }
    }
    let mean = |i: usize| last.iter().map(|x| x[i]).sum::<f64>() / last.len().max(1) as f64 * 100.0;
    println!(
        "{:<20} {:>6.1} {:>6} → {:>5.1} {:>6.1}",
        "oracle, lists only",
        mean(0),
        "",
        mean(1),
        mean(2)
    );
}

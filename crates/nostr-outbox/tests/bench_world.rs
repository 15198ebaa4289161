//! `outbox bench --world` and `outbox world stats` on world files, through the binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use nostr_outbox_fleet::{assert_says, cli};
use nostr_outbox_sim::World;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn outbox(args: &[&str]) -> Output {
    cli::run_blocking(env!("CARGO_BIN_EXE_outbox"), args)
}

fn bench_on(world: &Path, extra: &[&str]) -> Output {
    bench_with(world, &examples_dir().join("greedy.toml"), extra)
}

/// `outbox bench --world WORLD --config CONFIG` with `extra`.
fn bench_with(world: &Path, config: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "--world",
        world.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    outbox(&args)
}

fn first_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn sessions_override_the_world_file_up_to_its_own_count() {
    // The example world describes 3 sessions.
    let world = examples_dir().join("world.json");
    let all = bench_on(&world, &[]);
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    assert_eq!(first_line(&all), "greedy: 3 on example/36-follows");
    for n in ["1", "2", "3"] {
        let out = bench_on(&world, &["--sessions", n]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            first_line(&out),
            format!("greedy: {n} on example/36-follows")
        );
    }
    for n in ["4", "5", "0"] {
        let out = bench_on(&world, &["--sessions", n]);
        assert!(!out.status.success(), "--sessions {n} ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_says(&stderr, "--sessions");
    }
}

#[test]
fn world_names_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let mut world = World::read_path(&examples_dir().join("world.json")).unwrap();
    world.name = "evil\u{1b}[2J\u{202e}gnp.exe\nnext".to_string();
    world.write_path(&path).unwrap();
    let escaped = "evil\\u{1b}[2J\\u{202e}gnp.exe\\nnext";

    let stats = outbox(&["world", "stats", path.to_str().unwrap()]);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let bench = bench_on(&path, &[]);
    assert!(
        bench.status.success(),
        "{}",
        String::from_utf8_lossy(&bench.stderr)
    );
    for out in [&stats, &bench] {
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        assert_says(&text, escaped);
        assert!(
            !text.contains(['\u{1b}', '\u{202e}']),
            "raw control text printed: {text:?}"
        );
    }
}

#[test]
fn recall_with_nothing_to_recall_is_shown_as_a_dash() {
    // The example world without events: every window has 0 of 0 events to recall.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world.json");
    let text = std::fs::read_to_string(examples_dir().join("world.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["events"] = serde_json::Value::Array(Vec::new());
    std::fs::write(&path, json.to_string()).unwrap();

    let out = bench_on(&path, &["--windows", "7d,1yr"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    // The recall table: the first one printed (the clock's table follows it).
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .take_while(|l| !l.starts_with('└'))
        .filter(|l| l.starts_with('│'))
        .map(|l| l.trim_matches('│').split('┆').map(str::trim).collect())
        .collect();
    // Header, then one row per session: session, 7d/1yr declared, 7d/1yr total, ...
    assert_eq!(rows.len(), 4, "{stdout}");
    for row in &rows[1..] {
        assert_eq!(&row[1..5], ["-", "-", "-", "-"], "{stdout}");
    }
    assert!(!stdout.contains("100.0"), "{stdout}");
}

/// The example world's present, and a step between sessions long enough for what was learned
/// to fade visibly.
const NOW: u64 = 1_767_225_600;
const INTERVAL: u64 = 86_400;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config(dir: &Path, name: &str, toml: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, toml).unwrap();
    path
}

/// `outbox plan` on the example world with `extra`, writing to `out`.
fn plan_run(config: &Path, out: &Path, extra: &[&str]) -> Output {
    let world = examples_dir().join("world.json");
    let (world, config, out) = (
        world.to_str().unwrap(),
        config.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    outbox(
        &[
            &["plan", "--world", world, "--config", config, "--out", out],
            extra,
        ]
        .concat(),
    )
}

/// [`plan_run`], which must succeed; its plan file's text.
fn plan_with(config: &Path, out: &Path, extra: &[&str]) -> String {
    let run = plan_run(config, out, extra);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    read(out)
}

/// A `recall` config of `max_connections` in `dir`.
fn recall(dir: &Path, max_connections: usize) -> PathBuf {
    let toml = format!("max_connections = {max_connections}\n[strategy]\ntype = \"recall\"\n");
    config(dir, "recall.toml", &toml)
}

/// Every session's plan for every window, and the stats learned by each session, written out;
/// `outbox plan` given a session's stats, present, window and seed makes exactly the plan the
/// bench made for that window in the next session, for a router that plans per window and
/// for a randomised one that learns.
#[test]
fn written_stats_and_window_plans_are_reproduced_by_outbox_plan() {
    let dir = tempfile::tempdir().unwrap();
    let recall = recall(dir.path(), 3);
    let thompson = config(
        dir.path(),
        "thompson.toml",
        "max_connections = 20\n[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\n",
    );
    let world = examples_dir().join("world.json");
    for (config, seed, per_window) in [(&recall, None, true), (&thompson, Some("7"), false)] {
        let plans = dir.path().join("plans");
        let stats = dir.path().join("stats");
        let _ = std::fs::remove_dir_all(&plans);
        let _ = std::fs::remove_dir_all(&stats);
        let mut args = vec![
            "--plans-out",
            plans.to_str().unwrap(),
            "--stats-out",
            stats.to_str().unwrap(),
            "--interval",
            "86400",
        ];
        if let Some(seed) = seed {
            args.extend(["--seed", seed]);
        }
        let run = bench_with(&world, config, &args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let (mut own_window_plans, mut other_seed_differs) = (0, false);
        for s in 0..3u64 {
            let session = read(&plans.join(format!("session-{s}.json")));
            // The widest window's plan is the session's plan.
            assert_eq!(read(&plans.join(format!("session-{s}-3yr.json"))), session);
            // The stats after each session, as the file store reads them: the sessions counted.
            let learned =
                nostr_outbox_stats::read_stats_file(&stats.join(format!("stats-{s}.json")))
                    .unwrap_or_else(|e| panic!("stats-{s}: {e}"));
            assert!(learned.warnings.is_empty(), "{:?}", learned.warnings);
            assert_eq!(learned.stats.session(), s + 1);
            for w in ["7d", "1yr", "3yr"] {
                let written = read(&plans.join(format!("session-{s}-{w}.json")));
                own_window_plans += usize::from(written != session);
                let now = (NOW + s * INTERVAL).to_string();
                let mut extra = vec!["--now", now.as_str(), "--window", w];
                // Session 0 plans from nothing, session s from what session s − 1 learned.
                let before = stats.join(format!("stats-{}.json", s.saturating_sub(1)));
                if s > 0 {
                    extra.extend(["--stats", before.to_str().unwrap()]);
                }
                let out = dir.path().join("plan.json");
                if seed.is_some() {
                    // The seed matters here: another one plans otherwise.
                    let other = [extra.as_slice(), &["--seed", "8"]].concat();
                    other_seed_differs |= plan_with(config, &out, &other) != written;
                }
                if let Some(seed) = seed {
                    extra.extend(["--seed", seed]);
                }
                // Compared whole, reported briefly: a plan file runs to hundreds of lines.
                assert!(
                    plan_with(config, &out, &extra) == written,
                    "{}: session {s}, {w} planned otherwise",
                    config.display()
                );
            }
        }
        assert_eq!(other_seed_differs, seed.is_some(), "{}", config.display());
        assert_eq!(
            own_window_plans > 0,
            per_window,
            "{}: {own_window_plans} window plans differ from the session's",
            config.display()
        );
    }
}

/// With `--replan`, every session writes what all its waves asked per window beside its first
/// plan (a superset of it); without, no such file.
#[test]
fn a_re_planned_session_writes_what_every_wave_asked() {
    let dir = tempfile::tempdir().unwrap();
    let recall = recall(dir.path(), 3);
    let world = examples_dir().join("world.json");
    let pairs = |path: &Path| -> BTreeSet<(String, String)> {
        let file = nostr_outbox_sim::PlanFile::from_json(&read(path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        (file.relays.into_iter())
            .flat_map(|r| r.authors.into_iter().map(move |a| (r.url.clone(), a)))
            .collect()
    };
    for replan in [false, true] {
        let plans = dir.path().join(format!("plans-{replan}"));
        let mut args = vec!["--plans-out", plans.to_str().unwrap()];
        if replan {
            args.push("--replan");
        }
        let run = bench_with(&world, &recall, &args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let mut waves_added = 0;
        for s in 0..3 {
            for w in ["7d", "1yr", "3yr"] {
                let asked = plans.join(format!("session-{s}-{w}-asked.json"));
                assert_eq!(asked.exists(), replan, "{}", asked.display());
                if !replan {
                    continue;
                }
                // The first plan is the first wave: everything it named was asked.
                let first = pairs(&plans.join(format!("session-{s}-{w}.json")));
                let all = pairs(&asked);
                assert!(first.is_subset(&all), "session {s}, {w}");
                waves_added += usize::from(all.len() > first.len());
            }
        }
        // Relays of this world are down in some sessions: their follows went out again.
        assert_eq!(waves_added > 0, replan);
    }
}

/// A stats file `outbox plan` cannot read is an error naming it, and is left as it was; so is
/// a file of another format.
#[test]
fn plan_refuses_unreadable_stats_and_leaves_them_alone() {
    let dir = tempfile::tempdir().unwrap();
    let greedy = examples_dir().join("greedy.toml");
    let torn = dir.path().join("torn-stats.json");
    std::fs::write(&torn, "{\"format\": \"outbox-stats\", \"relays\": {").unwrap();
    let world = examples_dir().join("world.json");
    for path in [&torn, &world] {
        let before = std::fs::read(path).unwrap();
        let out = outbox(&[
            "plan",
            "--world",
            world.to_str().unwrap(),
            "--config",
            greedy.to_str().unwrap(),
            "--stats",
            path.to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{} was accepted", path.display());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&path.display().to_string()),
            "the file is not named: {stderr}"
        );
        assert_eq!(std::fs::read(path).unwrap(), before);
    }
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// The run's JSON and table give planning time cold (each session's first plan, mean over
/// sessions) and warm (plans repeated with the final stats) apart.
#[test]
fn the_world_bench_reports_plan_time_cold_and_warm() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = bench_on(
        &examples_dir().join("world.json"),
        &["--json", json.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_str(&read(&json)).unwrap();
    let sessions: Vec<f64> = run["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["plan_us"].as_f64().unwrap())
        .collect();
    assert_eq!(sessions.len(), 3);
    let cold = run["plan_us_cold"].as_f64().expect("plan_us_cold");
    let mean = sessions.iter().sum::<f64>() / 3.0;
    assert!((cold - mean).abs() < 1e-6, "{cold} against {mean}");
    assert!(run["plan_us_warm"].as_f64().expect("plan_us_warm") > 0.0);
    assert!(run["plan_us_median"].as_f64().is_some(), "kept");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("plan µs: cold "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_says(line, &format!("cold {cold:.0} "));
}

/// Under the table: the best fixed set of the budget's relays, found exhaustively on a world
/// of 8 relays (70 sets of 4), and the learnable ceiling, per session. On the pruned-hubs world
/// the two hubs keep a month, so neither is among the year's best four.
#[test]
fn the_world_bench_reports_the_best_fixed_set() {
    let world = examples_dir().join("worlds/pruned-hubs.json");
    let out = bench_on(&world, &["--budget", "4", "--windows", "1yr"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(&"  best fixed 4       1yr 96.9 96.9 96.9 96.9 96.9"),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  learnable ceiling  1yr ")),
        "{stdout}"
    );
    assert!(
        lines.contains(
            &"best fixed 4, 1yr: wss://relay-c.example, wss://relay-d.example, \
              wss://relay-e.example, wss://relay-f.example (exhaustive over the 70 sets of 4 \
              among the 8 relays holding declared notes)"
        ),
        "{stdout}"
    );
}

#[test]
fn seed_is_for_a_world_file_or_the_live_bench() {
    let out = outbox(&["bench", "--seed", "3", "--profiles", "small"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_says(&stderr, "--seed needs --world");
}

/// The routes' table is printed with `--routes` only; without it the run says it left them out.
#[test]
fn routes_are_scored_with_the_routes_flag() {
    let args = [
        "bench",
        "--profiles",
        "small",
        "--seeds",
        "1",
        "--sessions",
        "1",
        "--strategies",
        "greedy",
    ];
    let stdout = |extra: &[&str]| {
        let out = outbox(&[&args[..], extra].concat());
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let without = stdout(&[]);
    assert!(
        without.contains("routes: not scored (--routes"),
        "{without}"
    );
    assert!(!without.contains("publish reach"), "{without}");
    let with = stdout(&["--routes"]);
    assert_says(&with, "publish reach");
    assert!(!with.contains("not scored"), "{with}");
}

/// `--live` runs a config file's strategy at the config's own budget, labelled by its strategy;
/// naming the same strategy again as a suite row is refused.
#[test]
fn the_live_bench_runs_a_config_file() {
    let mut args = vec!["--live", "--sessions", "2"];
    let out = bench_on(&examples_dir().join("world.json"), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("│ ")).collect();
    assert!(rows.iter().any(|l| l.starts_with("│ greedy ")), "{stdout}");
    assert!(!rows.iter().any(|l| l.starts_with("│ recall ")), "{stdout}");
    assert_says(&stdout, "budget 3,");
    args.extend_from_slice(&["--strategies", "greedy"]);
    let out = bench_on(&examples_dir().join("world.json"), &args);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_says(&stderr, "both --config's and a --strategies row");
}

/// `outbox plan` says how many routed relays count against the budget: on the example world at
/// one connection `recall` routes to one of the reader's relays (connected for the residual
/// anyway) and to one relay beyond them.
#[test]
fn the_plan_summary_counts_the_budget_beyond_the_readers_relays() {
    let dir = tempfile::tempdir().unwrap();
    let recall = recall(dir.path(), 1);
    let run = plan_run(&recall, &dir.path().join("plan.json"), &[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert_says(&stderr, "(2 routed, 1 beyond the reader's relays of max 1)");
}

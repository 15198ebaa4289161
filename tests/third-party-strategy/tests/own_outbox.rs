//! `my-outbox` is `nostr_outbox::run` in a binary that also names this crate: the shipped
//! command, with the outside strategy in every command that picks strategies by name.

use std::path::Path;
use std::process::{Command, Output};

const STRATEGY: &str = "most_popular_first";

/// Runs the binary with `args`, logging off, and returns its output after checking it
/// succeeded.
fn outbox(args: &[&str]) -> (String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(env!("CARGO_BIN_EXE_my-outbox"))
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("the binary runs");
    let (stdout, stderr) = (
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    );
    assert!(
        status.success(),
        "outbox {args:?}: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// The first word of each indented line: the names `outbox strategies` lists.
fn listed(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn strategies_lists_it_beside_the_built_in_ones() {
    let (stdout, _) = outbox(&["strategies"]);
    let names = listed(&stdout);
    assert!(names.contains(&STRATEGY), "{stdout}");
    // The binary is the whole command: the built-in strategies and scorers are all there too.
    for builtin in ["greedy", "recall", "welshman", "fixed_thompson"] {
        assert!(names.contains(&builtin), "{builtin} missing:\n{stdout}");
    }
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(STRATEGY))
        .unwrap();
    assert!(line.contains("example third-party strategy"), "{line}");
}

#[test]
fn strategies_check_runs_the_conformance_suite_on_it() {
    let (stdout, _) = outbox(&["strategies", "--check"]);
    assert!(stdout.contains(STRATEGY), "{stdout}");
}

#[test]
fn bench_runs_it_by_name() {
    let (stdout, _) = outbox(&[
        "bench",
        "--strategies",
        STRATEGY,
        "--profiles",
        "small",
        "--seeds",
        "1",
        "--sessions",
        "1",
        "--windows",
        "7d",
    ]);
    // A table row: `│ most_popular_first ┆ <7d recall> ┆ ...`.
    let row = stdout
        .lines()
        .find(|l| l.trim_start_matches('│').split_whitespace().next() == Some(STRATEGY))
        .unwrap_or_else(|| panic!("no {STRATEGY} row:\n{stdout}"));
    let recall: f64 = row
        .split('┆')
        .nth(1)
        .and_then(|cell| cell.trim().parse().ok())
        .unwrap_or_else(|| panic!("no recall in {row}"));
    assert!(recall > 0.0 && recall <= 100.0, "{row}");
}

#[test]
fn plan_picks_it_from_a_config_file() {
    let config = Path::new(env!("CARGO_TARGET_TMPDIR")).join("most_popular_first.toml");
    std::fs::write(
        &config,
        format!("max_connections = 3\n[strategy]\ntype = \"{STRATEGY}\"\n"),
    )
    .unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/world.json");
    let (stdout, _) = outbox(&[
        "plan",
        "--world",
        world.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]);
    let plan: serde_json::Value = serde_json::from_str(&stdout).expect("the plan is JSON");
    assert_eq!(plan["strategy"], STRATEGY, "{stdout}");
}

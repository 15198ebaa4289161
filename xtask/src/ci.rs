//! `cargo xtask ci`: the whole gate, in the order that fails fastest.
//!
//! Cheap checks (format, packaging, lints, API docs) run before the test
//! suite, and the audit runs after the tests so its build reuses their
//! artifacts. The snapshot step only checks files: the test step already ran
//! with `INSTA_UPDATE=no` and `INSTA_FORCE_PASS=0`, so a snapshot mismatch
//! has failed it already.

use std::path::Path;
use std::time::Instant;

use crate::{audit, package, snapshots, util};

type Step = fn(&Path) -> anyhow::Result<bool>;

fn cargo_step(root: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<bool> {
    let mut cmd = util::cargo(root);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    util::run_status(cmd)
}

fn fmt(root: &Path) -> anyhow::Result<bool> {
    cargo_step(root, &["fmt", "--all", "--", "--check"], &[])
}

fn clippy(root: &Path) -> anyhow::Result<bool> {
    cargo_step(
        root,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )
}

/// Broken intra-doc links and malformed doc comments fail the gate: the API
/// docs are how an outside strategy author finds their way around.
fn docs(root: &Path) -> anyhow::Result<bool> {
    cargo_step(
        root,
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )
}

/// The property tests' seed in the gate unless one is given: the gate passes or fails the same
/// way on every run, while a plain `cargo test` draws new cases each time.
const PROPTEST_SEED: &str = "20261130";

fn tests(root: &Path) -> anyhow::Result<bool> {
    let seed = std::env::var("PROPTEST_RNG_SEED").unwrap_or_else(|_| PROPTEST_SEED.to_string());
    cargo_step(
        root,
        &["test", "--workspace"],
        &[
            ("INSTA_UPDATE", "no"),
            ("INSTA_FORCE_PASS", "0"),
            ("PROPTEST_RNG_SEED", &seed),
        ],
    )
}

fn snapshot_files(root: &Path) -> anyhow::Result<bool> {
    snapshots::run(root, snapshots::Mode::FilesOnly)
}

pub fn run(root: &Path) -> anyhow::Result<bool> {
    let steps: [(&str, Step); 7] = [
        ("fmt", fmt),
        ("package", package::run),
        ("clippy", clippy),
        ("docs", docs),
        ("tests", tests),
        ("audit", audit::run),
        ("snapshots", snapshot_files),
    ];
    let total = Instant::now();
    for (name, step) in steps {
        println!();
        println!("==== ci step: {name} ====");
        let start = Instant::now();
        let ok = step(root).unwrap_or_else(|e| {
            println!("error: {e:#}");
            false
        });
        let secs = start.elapsed().as_secs_f64();
        if !ok {
            println!("==== ci step `{name}` FAILED after {secs:.1}s; stopping ====");
            return Ok(false);
        }
        println!("==== ci step `{name}` passed in {secs:.1}s ====");
    }
    println!();
    println!(
        "ci: all steps passed in {:.1}s",
        total.elapsed().as_secs_f64()
    );
    Ok(true)
}

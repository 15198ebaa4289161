//! `cargo xtask snapshots`: insta snapshot tests in check mode.
//!
//! A snapshot suite can rot in three ways that a plain `cargo test` run does
//! not show: a mismatch accepted locally by `INSTA_FORCE_PASS`/`INSTA_UPDATE`,
//! pending `.snap.new` / `.pending-snap` files left in the tree, and `.snap`
//! files whose test was renamed or deleted. This task fails on all three.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::util;

const REVIEW_HINT: &str = "review with: cargo insta review (install: cargo install cargo-insta); \
to write pending snapshots for review first: INSTA_UPDATE=new cargo test --workspace";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Run the tests, then check the files.
    RunTests,
    /// Only the file checks: `ci` has already run `cargo test --workspace`
    /// with `INSTA_UPDATE=no`, and running the suite twice is wasted time.
    FilesOnly,
}

pub fn run(root: &Path, mode: Mode) -> anyhow::Result<bool> {
    let mut ok = true;
    if mode == Mode::RunTests && !run_tests(root)? {
        ok = false;
        println!("the test run failed (see above; a snapshot mismatch shows as a failing assert_*snapshot!)");
    }
    let pending = pending_files(root)?;
    if !pending.is_empty() {
        ok = false;
        println!("pending snapshot files (a test produced output that was not accepted):");
        for p in &pending {
            println!("  - {}", util::relative(root, p));
        }
    }
    let unreferenced = unreferenced_snapshots(root)?;
    if !unreferenced.is_empty() {
        ok = false;
        println!("unreferenced snapshot files (no test appears to produce them):");
        for (p, why) in &unreferenced {
            println!("  - {}: {why}", util::relative(root, p));
        }
    }
    if ok {
        println!("snapshots: passed");
    } else {
        println!("snapshots: FAILED");
        println!("{REVIEW_HINT}");
    }
    Ok(ok)
}

fn cargo_insta_installed(root: &Path) -> bool {
    let mut cmd = util::cargo(root);
    cmd.args(["insta", "--version"]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    cmd.status().is_ok_and(|s| s.success())
}

fn run_tests(root: &Path) -> anyhow::Result<bool> {
    let mut cmd = util::cargo(root);
    if cargo_insta_installed(root) {
        // `--check` makes mismatches fail instead of being collected;
        // `--unreferenced=reject` fails on snapshot files no test touched.
        cmd.args([
            "insta",
            "test",
            "--workspace",
            "--check",
            "--unreferenced=reject",
        ]);
    } else {
        println!(
            "cargo-insta not installed: running cargo test and checking snapshot files directly"
        );
        cmd.args(["test", "--workspace"]);
    }
    cmd.env("INSTA_UPDATE", "no").env("INSTA_FORCE_PASS", "0");
    util::run_status(cmd)
}

fn snapshot_tree(root: &Path, keep: &dyn Fn(&str) -> bool) -> anyhow::Result<Vec<PathBuf>> {
    util::walk_files(root, root, &[], &|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(keep)
    })
}

fn pending_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    snapshot_tree(root, &|n| {
        n.ends_with(".snap.new") || n.ends_with(".pending-snap")
    })
}

/// Snapshot files that no test source appears to reference, with the reason.
///
/// insta names a file `<module path>__<snapshot name>.snap` inside a
/// `snapshots/` directory next to the test source, and records that source in
/// the `source:` header. A snapshot is taken as referenced when its source
/// file exists, contains an `assert_*snapshot!` call, and mentions the
/// snapshot name either as a string literal (explicit names) or as a function
/// name (auto-named snapshots are named after the calling test function).
fn unreferenced_snapshots(root: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let snaps = snapshot_tree(root, &|n| n.ends_with(".snap"))?;
    let mut out = Vec::new();
    for snap in snaps {
        let in_snapshots_dir = snap
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "snapshots");
        if !in_snapshots_dir {
            continue;
        }
        if let Some(why) = unreferenced_reason(root, &snap)? {
            out.push((snap, why));
        }
    }
    Ok(out)
}

fn unreferenced_reason(root: &Path, snap: &Path) -> anyhow::Result<Option<String>> {
    let text =
        std::fs::read_to_string(snap).with_context(|| format!("reading {}", snap.display()))?;
    let Some(source) = header_field(&text, "source") else {
        return Ok(Some("no `source:` header".to_string()));
    };
    let snap_dir = snap.parent().unwrap_or(root);
    let candidates = [
        root.join(&source),
        crate_dir(snap_dir, root).join(&source),
        snap_dir.join("..").join(&source),
    ];
    let Some(source_path) = candidates.iter().find(|p| p.is_file()) else {
        return Ok(Some(format!("source `{source}` does not exist")));
    };
    let code = std::fs::read_to_string(source_path)
        .with_context(|| format!("reading {}", source_path.display()))?;
    if !has_snapshot_assert(&code) {
        return Ok(Some(format!(
            "source `{source}` has no assert_*snapshot! call"
        )));
    }
    let name = snapshot_name(snap);
    let referenced = code.contains(&format!("\"{name}\"")) || mentions_fn(&code, &name);
    if referenced {
        Ok(None)
    } else {
        Ok(Some(format!(
            "source `{source}` names no snapshot or test function `{name}`"
        )))
    }
}

/// A field of the `---`-delimited YAML header insta writes.
fn header_field(text: &str, key: &str) -> Option<String> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        if let Some(rest) = line.strip_prefix(key).and_then(|r| r.strip_prefix(':')) {
            return Some(rest.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// The nearest directory at or above `dir` with a `Cargo.toml`.
fn crate_dir(dir: &Path, root: &Path) -> PathBuf {
    let mut d = dir;
    loop {
        if d.join("Cargo.toml").is_file() || d == root {
            return d.to_path_buf();
        }
        match d.parent() {
            Some(p) => d = p,
            None => return root.to_path_buf(),
        }
    }
}

fn has_snapshot_assert(code: &str) -> bool {
    code.match_indices("assert_").any(|(i, _)| {
        code[i..]
            .split('!')
            .next()
            .is_some_and(|m| m.ends_with("snapshot"))
    })
}

/// Snapshot name from its file name: the part after the module path, without
/// the `-N` duplicate counter and `@suffix` that insta may add.
fn snapshot_name(snap: &Path) -> String {
    let stem = snap
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".snap"))
        .unwrap_or_default();
    let name = stem.rsplit("__").next().unwrap_or(stem);
    let name = name.split('@').next().unwrap_or(name);
    match name.rsplit_once('-') {
        Some((base, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            base.to_string()
        }
        _ => name.to_string(),
    }
}

fn mentions_fn(code: &str, name: &str) -> bool {
    code.contains(&format!("fn {name}(")) || code.contains(&format!("fn {name}<"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_file_names() {
        assert_eq!(
            snapshot_name(Path::new("a/snapshots/route__tests__basic.snap")),
            "basic"
        );
        assert_eq!(
            snapshot_name(Path::new("snapshots/route__basic-2.snap")),
            "basic"
        );
        assert_eq!(
            snapshot_name(Path::new("snapshots/route__basic@v1.snap")),
            "basic"
        );
        assert_eq!(snapshot_name(Path::new("snapshots/plain.snap")), "plain");
    }

    #[test]
    fn header() {
        let text = "---\nsource: crates/x/tests/a.rs\nexpression: v\n---\nbody\n";
        assert_eq!(
            header_field(text, "source").as_deref(),
            Some("crates/x/tests/a.rs")
        );
        assert_eq!(header_field("body", "source"), None);
    }

    #[test]
    fn detects_asserts() {
        assert!(has_snapshot_assert("insta::assert_json_snapshot!(x)"));
        assert!(has_snapshot_assert("assert_snapshot!(\"n\", x)"));
        assert!(!has_snapshot_assert("assert_eq!(a, b)"));
    }

    #[test]
    fn file_checks_find_pending_and_unreferenced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("c/Cargo.toml", "[package]\nname = \"c\"\n");
        write(
            "c/tests/a.rs",
            "#[test]\nfn auto_named() { insta::assert_snapshot!(1); }\n\
             #[test]\nfn t() { insta::assert_json_snapshot!(\"kept\", 2); }\n",
        );
        let snap = |source: &str| format!("---\nsource: {source}\nexpression: x\n---\n1\n");
        write("c/tests/snapshots/a__kept.snap", &snap("c/tests/a.rs"));
        write("c/tests/snapshots/a__auto_named.snap", &snap("tests/a.rs"));
        write(
            "c/tests/snapshots/a__auto_named-2.snap",
            &snap("tests/a.rs"),
        );
        write("c/tests/snapshots/a__gone.snap", &snap("c/tests/a.rs"));
        write("c/tests/snapshots/b__x.snap", &snap("c/tests/b.rs"));
        write("c/tests/snapshots/a__kept.snap.new", &snap("c/tests/a.rs"));

        let pending: Vec<String> = pending_files(root)
            .unwrap()
            .iter()
            .map(|p| util::relative(root, p))
            .collect();
        assert_eq!(pending, ["c/tests/snapshots/a__kept.snap.new"]);
        let unreferenced: Vec<String> = unreferenced_snapshots(root)
            .unwrap()
            .iter()
            .map(|(p, why)| format!("{}: {why}", util::relative(root, p)))
            .collect();
        assert_eq!(
            unreferenced,
            [
                "c/tests/snapshots/a__gone.snap: source `c/tests/a.rs` names no snapshot or test function `gone`",
                "c/tests/snapshots/b__x.snap: source `c/tests/b.rs` does not exist",
            ]
        );
        assert!(!run(root, Mode::FilesOnly).unwrap());
    }
}

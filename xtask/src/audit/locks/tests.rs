//! The audit must be able to fail: each fixture in `xtask/fixtures/` plants
//! one kind of problem, and these tests pin the exact findings. `clean.rs`
//! holds the safe variants, which must produce none.

use std::path::Path;

use super::{analyze, Config, Report, SourceFile};

fn fixture(name: &str) -> SourceFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    SourceFile::read(&path, format!("fixtures/{name}")).expect("fixture exists")
}

fn ranked(pairs: &[(&str, i64)]) -> Config {
    Config {
        ranks: pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect(),
        ..Config::default()
    }
}

fn run(name: &str, cfg: &Config) -> Report {
    analyze(&[fixture(name)], cfg)
}

fn findings(report: &Report) -> Vec<String> {
    report.findings.iter().map(ToString::to_string).collect()
}

#[test]
fn dump() {
    for f in [
        "hold_and_call.rs",
        "inversion.rs",
        "self_deadlock.rs",
        "across_await.rs",
        "clean.rs",
        "unseen.rs",
    ] {
        let r = run(
            f,
            &ranked(&[
                ("A", 1),
                ("B", 2),
                ("Book.accounts", 1),
                ("Book.journal", 2),
            ]),
        );
        println!("## {f}");
        for x in findings(&r) {
            println!("F {x}");
        }
        for u in &r.unseen {
            println!("U {:?} {} {}", u.kind, u.at, u.detail);
        }
    }
}

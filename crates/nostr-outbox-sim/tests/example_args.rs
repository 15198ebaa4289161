//! The study examples' shared argument reading (`examples/common`): generated worlds or one
//! world file, and the sessions to run on them.

#[path = "../examples/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};

use common::{Args, Source, Worlds};
use nostr_outbox_world::Profile;

fn example_world() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/world.json")
}

fn args(list: &[&str]) -> Args {
    Args::from_args(list.iter().map(|s| s.to_string()), &["--family"]).expect("arguments")
}

/// The worlds `list` asks for, with profiles and seeds as positional arguments 1 and 2.
fn worlds(list: &[&str]) -> Result<Worlds, String> {
    let a = args(list);
    let positional = |i: usize| a.positional.get(i).map(String::as_str);
    a.worlds(positional(1), positional(2), ("small", "1,2"))
}

/// Every (label, name, sessions described) `worlds` yields.
fn listed(worlds: &Worlds) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    worlds.each(|label, sim| {
        out.push((
            label.to_string(),
            sim.world.name.clone(),
            sim.world.sessions,
        ))
    });
    out
}

#[test]
fn a_world_file_runs_every_session_it_describes_and_no_more() {
    let path = example_world();
    let file = path.to_str().unwrap();
    // The example world describes 3 sessions.
    let all = worlds(&["cfg.toml", "--world", file]).unwrap();
    assert_eq!(all.sessions, 3);
    assert!(matches!(&all.source, Source::File { path: p, .. } if p == &path));
    assert_eq!(
        listed(&all),
        [(
            "example/36-follows".to_string(),
            "example/36-follows".to_string(),
            3
        )]
    );
    for n in [1, 2, 3] {
        let some = worlds(&["--world", file, "--sessions", &n.to_string()]).unwrap();
        assert_eq!(some.sessions, n);
    }
    for n in ["4", "10000", "0", "x"] {
        let err = worlds(&["--world", file, "--sessions", n])
            .err()
            .unwrap_or_else(|| panic!("--sessions {n} accepted"));
        assert!(err.contains("--sessions"), "{err}");
    }
    let err = worlds(&["--world", file, "--sessions", "4"]).err().unwrap();
    assert!(err.contains("only 3 sessions"), "{err}");
}

#[test]
fn a_world_file_replaces_generated_worlds_and_bad_files_are_named() {
    let file = example_world();
    let file = file.to_str().unwrap();
    for extra in [
        &["cfg.toml", "small"][..],
        &["cfg.toml", "small", "3"],
        &["--family", "decay"],
    ] {
        let mut list = vec!["--world", file];
        list.extend_from_slice(extra);
        let err = worlds(&list).err().expect("both accepted");
        assert!(err.contains("--world"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad-world.json");
    std::fs::write(&bad, r#"{"format": "outbox-world/1", "now": "#).unwrap();
    let missing = dir.path().join("missing.json");
    for path in [&bad, &missing] {
        let err = worlds(&["--world", path.to_str().unwrap()]).err().unwrap();
        assert!(
            err.contains(&path.display().to_string()),
            "the file is not named: {err}"
        );
    }
    let err = worlds(&["--world", "/dev/zero"]).err().unwrap();
    assert!(err.contains("not a regular file"), "{err}");
    assert!(Args::from_args(["--world".to_string()], &[]).is_err());
}

#[test]
fn generated_worlds_describe_the_sessions_asked_for() {
    let five = worlds(&["cfg.toml", "small", "1-2"]).unwrap();
    assert_eq!(five.sessions, 5);
    match &five.source {
        Source::Generated {
            profiles, seeds, ..
        } => {
            assert_eq!(profiles, &[Profile::Small]);
            assert_eq!(seeds, &[1, 2]);
        }
        Source::File { .. } => panic!("a file"),
    }
    let many = worlds(&["cfg.toml", "small", "1", "--sessions", "7"]).unwrap();
    let listed = listed(&many);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "small/1");
    assert!(listed[0].2 >= 7, "{listed:?}");
    assert!(worlds(&["cfg.toml", "small", "1", "--sessions", "0"]).is_err());
}

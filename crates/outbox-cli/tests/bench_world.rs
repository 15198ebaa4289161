//! `outbox bench --world` and `outbox world stats` on world files, through the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use outbox_sim::World;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn outbox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outbox"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn bench_on(world: &Path, extra: &[&str]) -> Output {
    let config = examples_dir().join("greedy.toml");
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
        assert!(stderr.contains("--sessions"), "{stderr}");
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
        assert!(text.contains(escaped), "{text}");
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
    let rows: Vec<Vec<&str>> = stdout
        .lines()
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

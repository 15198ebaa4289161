//! Files a careless or hostile user hands the CLI: never read without bound, never echoed raw.

use std::process::Output;

use nostr_outbox_fleet::{assert_says, cli};

fn outbox(args: &[&str]) -> Output {
    cli::run_blocking(env!("CARGO_BIN_EXE_outbox"), args)
}

#[test]
fn escape_sequences_in_a_config_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("evil.toml");
    std::fs::write(
        &config,
        // TOML's own escapes put real control characters into the key.
        r#"max_connections = 4
"\u001b[2J\u001b]0;owned\u0007" = 1
[strategy]
type = "greedy"
"#,
    )
    .unwrap();
    let out = outbox(&[
        "plan",
        "--world",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/world.json"),
        "--config",
        config.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        !stderr.contains('\u{1b}'),
        "raw escape on stderr: {stderr:?}"
    );
    assert!(
        stderr.contains("\\u{1b}[2J"),
        "the key is shown escaped: {stderr}"
    );
}

#[test]
fn a_config_that_never_ends_is_refused_before_reading() {
    let out = outbox(&[
        "plan",
        "--world",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/world.json"),
        "--config",
        "/dev/zero",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "not a regular file");
}

#[test]
fn a_plan_is_never_written_over_what_it_is_made_from() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world.json");
    let config = dir.path().join("greedy.toml");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/world.json"),
        &world,
    )
    .unwrap();
    std::fs::write(
        &config,
        "max_connections = 4\n[strategy]\ntype = \"greedy\"\n",
    )
    .unwrap();
    let before = (
        std::fs::read(&world).unwrap(),
        std::fs::read(&config).unwrap(),
    );
    let spelled = |name: &str| dir.path().join(".").join(name);
    for target in [spelled("world.json"), spelled("greedy.toml")] {
        let paths = [&world, &config, &target].map(|p| p.to_str().unwrap());
        let [world, config, out] = paths;
        let out = outbox(&["plan", "--world", world, "--config", config, "--out", out]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {stderr}", target.display());
        assert_says(&stderr, "--out");
    }
    let after = (
        std::fs::read(&world).unwrap(),
        std::fs::read(&config).unwrap(),
    );
    assert!(before == after, "a file the plan was made from was changed");
}

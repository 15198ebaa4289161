//! A closed stdout (`outbox ... | head`, `| true`) ends a command cleanly: exit 0, no panic.

use std::process::Stdio;

use nostr_outbox_fleet::cli;

/// Runs `outbox args` with stdout a pipe whose reading end is already closed, so every write
/// fails with a broken pipe.
fn with_closed_stdout(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .stdout(Stdio::from(writer));
    cli::output(cmd)
}

#[test]
fn commands_end_cleanly_when_stdout_is_closed() {
    for args in [
        &["strategies"][..],
        &["strategies", "--examples"],
        &["strategies", "--check"],
        &[
            "plan",
            "--world",
            "examples/world.json",
            "--config",
            "examples/greedy.toml",
        ],
        &["world", "stats", "examples/world.json"],
    ] {
        let out = with_closed_stdout(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("panicked"),
            "outbox {}: {:?}\n{stderr}",
            args.join(" "),
            out.status
        );
    }
}

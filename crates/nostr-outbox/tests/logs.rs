//! What `outbox` writes to stderr when it is not a terminal: no colour codes, and no URL
//! credentials in errors or logs.

use nostr_outbox_fleet::{assert_says, cli};

fn outbox(args: &[&str]) -> (bool, String) {
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(args).env_remove("NO_COLOR");
    let out = cli::output(cmd);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let follow = "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d";
    // Nothing listens on port 1: the run logs its failures at every level and ends.
    let (_, stderr) = outbox(&[
        "feed",
        "--once",
        "--allow-local",
        "--relays",
        "ws://127.0.0.1:1",
        "--follows",
        follow,
        "--no-stats",
        "--connect-timeout",
        "2s",
        "--log",
        "trace",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(stderr.lines().count() > 3, "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

#[test]
fn errors_hide_url_credentials() {
    let (ok, stderr) = outbox(&[
        "feed",
        "--once",
        "--relays",
        "wss://alice:hunter2@relay.example",
        "--follows",
        "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d",
        "--no-stats",
    ]);
    assert!(!ok, "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert_says(&stderr, "wss://***@relay.example");
}

//! What a careless or hostile user hands `outbox feed` and `outbox publish` on the command
//! line: durations too long for any clock, relay URLs that are refused. Local relays on
//! 127.0.0.1.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nostr::event::Kind;
use nostr::key::Keys;

mod common;

use common::{key, signed, Relay};

/// How long a command may run before the test calls it hung and kills it: far beyond what any
/// of them needs on a loaded machine (a guard against hanging forever, not a timing check).
const HUNG: Duration = Duration::from_secs(60);

/// A relay holding `notes` notes of one follow, and that follow.
async fn relay_with_notes(notes: u64) -> (Relay, Keys) {
    let relay = Relay::start().await;
    let author = key(7);
    for n in 0..notes {
        let note = signed(
            &author,
            Kind::TextNote,
            &format!("note {n}"),
            vec![],
            60 + n,
        );
        relay.store(&note).await;
    }
    (relay, author)
}

/// `outbox feed --once` against `relay` for `author` with `extra` arguments, and short
/// timeouts and a week's notes unless `extra` names its own.
fn feed(relay: &str, author: &Keys, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["feed", "--once", "--allow-local"])
        .args(["--relays", relay])
        .args(["--follows", &author.public_key().to_hex()])
        .args(extra);
    for (flag, value) in [
        ("--since", "7d"),
        ("--connect-timeout", "2s"),
        ("--eose-timeout", "3s"),
    ] {
        if !extra.contains(&flag) {
            cmd.args([flag, value]);
        }
    }
    cmd
}

/// Waits for `child` to end, reading nothing meanwhile; kills it and fails once [`HUNG`] passed.
fn wait_or_kill(mut child: Child, what: &str) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HUNG {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {HUNG:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `cmd` with stdout and stderr captured, off the async threads.
async fn run(mut cmd: Command, what: String) -> Output {
    tokio::task::spawn_blocking(move || {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_or_kill(child, &what)
    })
    .await
    .unwrap()
}

/// Why `out` is not a clean refusal naming `flag`, if it is not one.
fn not_refused(out: &Output, flag: &str) -> Option<String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let refused = !out.status.success()
        && out.status.code() != Some(101)
        && !stderr.contains("panicked")
        && stderr.contains(flag);
    (!refused).then(|| format!("{flag}: {:?}\n{stderr}", out.status))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_past_the_longest_accepted_are_refused_naming_the_flag() {
    let (relay, author) = relay_with_notes(3).await;
    let huge = "18446744073709551615s";
    let mut wrong = Vec::new();
    for flag in [
        "--deadline",
        "--eose-race",
        "--eose-timeout",
        "--connect-timeout",
        "--since",
    ] {
        let mut cmd = feed(&relay.url, &author, &["--no-stats", flag, huge]);
        if flag != "--deadline" {
            cmd.args(["--deadline", "5s"]);
        }
        let out = run(cmd, format!("feed {flag} {huge}")).await;
        wrong.extend(not_refused(&out, flag));
    }
    // Just past ten years is refused too; ten years is accepted.
    let cmd = feed(
        &relay.url,
        &author,
        &["--no-stats", "--eose-timeout", "3651days"],
    );
    let out = run(cmd, "feed --eose-timeout 3651days".into()).await;
    wrong.extend(not_refused(&out, "--eose-timeout"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["publish", "--allow-local", "--to", &relay.url])
        .arg("--event")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/note.json"
        ))
        .args(["--timeout", "18446744073709551615"]);
    let out = run(cmd, "publish --timeout u64::MAX".into()).await;
    wrong.extend(not_refused(&out, "--timeout"));
    assert!(wrong.is_empty(), "not refused:\n{}", wrong.join("\n"));

    // The longest accepted: the run is as any other.
    let mut longest = vec!["--no-stats"];
    for flag in [
        "--deadline",
        "--eose-race",
        "--eose-timeout",
        "--connect-timeout",
        "--since",
    ] {
        longest.extend([flag, "3650days"]);
    }
    let cmd = feed(&relay.url, &author, &longest);
    let out = run(cmd, "feed at the longest durations".into()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3);
}

#[test]
fn the_allow_local_hint_comes_only_when_the_relay_was_refused_as_loopback() {
    let follow = key(7).public_key().to_hex();
    let refusal = |relay: &str, allow_local: bool| -> String {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_outbox"));
        cmd.args(["feed", "--once", "--no-stats", "--relays", relay])
            .args(["--follows", &follow]);
        if allow_local {
            cmd.arg("--allow-local");
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{relay} accepted:\n{stderr}");
        assert!(stderr.contains("not usable"), "{relay}:\n{stderr}");
        stderr
    };
    for relay in ["ws://127.0.0.1:7777", "ws://localhost:7777"] {
        let stderr = refusal(relay, false);
        assert!(stderr.contains("--allow-local"), "{relay}:\n{stderr}");
    }
    let mut wrong = Vec::new();
    for (relay, allow_local) in [
        ("wss://alice:hunter2@relay.example", false),
        ("ws://alice:hunter2@127.0.0.1:7777", true),
        (
            "wss://relay3bqdwx2hn6wbdo3t4xxafatfz44d6ijbvkzkxl4oofwn7oaad.onion",
            false,
        ),
        ("wss://192.168.1.4", false),
        ("wss://192.168.1.4", true),
        ("https://relay.example", false),
    ] {
        let stderr = refusal(relay, allow_local);
        if stderr.contains("--allow-local") {
            wrong.push(format!("{relay} (--allow-local {allow_local}):\n{stderr}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "a hint that cannot help:\n{}",
        wrong.join("\n")
    );
}

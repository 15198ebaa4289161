//! What a careless or hostile user hands `outbox feed` and `outbox publish` on the command
//! line: durations too long for any clock, a summary file that is a FIFO, a device, a
//! directory or stdout itself, relay URLs that are refused; stop signals while the feed is
//! still saving; and relay text that reaches the summary file. Local relays on 127.0.0.1.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nostr::key::Keys;

use nostr_outbox_fleet::{assert_says, cli, key, BlackHole, FaultServer, RealRelay};

/// How long a command may run before the test calls it hung and kills it: far beyond what any
/// of them needs on a loaded machine (a guard against hanging forever, not a timing check).
const HUNG: Duration = Duration::from_secs(60);

/// The feed's flags that take a duration.
const DURATION_FLAGS: [&str; 5] = [
    "--deadline",
    "--eose-race",
    "--eose-timeout",
    "--connect-timeout",
    "--since",
];

/// A relay holding `notes` notes of one follow, and that follow.
async fn relay_with_notes(notes: u64) -> (RealRelay, Keys) {
    let relay = RealRelay::start().await;
    let author = key(7);
    relay.store_notes(&author, notes, "note ").await;
    (relay, author)
}

/// `outbox feed --once` against `relay` for `author` with `extra` arguments, and short
/// timeouts and a week's notes unless `extra` names its own.
fn feed(relay: &str, author: &Keys, extra: &[&str]) -> Command {
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
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

/// Waits for `child` to end; fails if it ran past [`HUNG`].
fn wait_or_kill(child: Child, what: &str) -> Output {
    let started = Instant::now();
    let out = cli::wait(child);
    assert!(
        started.elapsed() <= HUNG,
        "{what}: still running after {HUNG:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` with stdout and stderr captured, off the async threads.
async fn run(mut cmd: Command, what: String) -> Output {
    tokio::task::spawn_blocking(move || wait_or_kill(cmd.spawn().unwrap(), &what))
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
    for flag in DURATION_FLAGS {
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
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
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
    for flag in DURATION_FLAGS {
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
        let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
        cmd.args(["feed", "--once", "--no-stats", "--relays", relay])
            .args(["--follows", &follow]);
        if allow_local {
            cmd.arg("--allow-local");
        }
        let out = cli::output(cmd);
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

/// `--inbox` prints its own summary: asking for the feed's summary file with it is an error,
/// not a flag silently ignored.
/// Whether `out` is the summary file refused before the run, saying `says`: nothing fetched,
/// no summary.
fn refused_before_the_run(out: &Output, says: &str) -> bool {
    let stderr = String::from_utf8_lossy(&out.stderr);
    !out.status.success()
        && stderr.contains("--summary-json")
        && stderr.contains(says)
        && !stderr.contains("events:")
        && out.stdout.is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_refuses_a_summary_file_it_would_not_write() {
    let (relay, author) = relay_with_notes(1).await;
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let npub = author.public_key().to_hex();
    let cmd = feed(
        &relay.url,
        &author,
        &[
            "--no-stats",
            "--inbox",
            "--npub",
            &npub,
            "--summary-json",
            summary.to_str().unwrap(),
        ],
    );
    let out = run(cmd, "--inbox --summary-json".into()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, "--summary-json");
    assert!(!summary.exists());
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_file_that_is_not_a_regular_file_is_refused_before_the_run() {
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("summary.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut targets: Vec<PathBuf> = vec![dir.path().into(), "/dev/null".into()];
    // Stdout is a pipe here: /dev/stdout is that pipe.
    if cfg!(target_os = "linux") {
        targets.push("/dev/stdout".into());
    }
    // Last: on a build that opens it, the run never ends.
    targets.push(fifo);
    let mut wrong = Vec::new();
    for target in &targets {
        let target = target.to_str().unwrap();
        let cmd = feed(
            &relay.url,
            &author,
            &["--no-stats", "--summary-json", target],
        );
        let out = run(cmd, format!("--summary-json {target}")).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let refused = refused_before_the_run(&out, "not a regular file");
        if !refused {
            wrong.push(format!("{target}: {:?}\n{stderr}", out.status));
        }
    }
    assert!(wrong.is_empty(), "not refused:\n{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_file_that_is_stdout_is_refused_and_the_notes_are_kept() {
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    let mut targets = vec![notes.clone()];
    if cfg!(target_os = "linux") {
        targets.push("/dev/stdout".into());
    }
    for target in targets {
        std::fs::write(&notes, "written before the run\n").unwrap();
        let stdout = std::fs::OpenOptions::new()
            .append(true)
            .open(&notes)
            .unwrap();
        let shown = target.to_str().unwrap();
        let mut cmd = feed(
            &relay.url,
            &author,
            &["--no-stats", "--summary-json", shown],
        );
        let what = format!("--summary-json {} with stdout there", target.display());
        let out = tokio::task::spawn_blocking(move || {
            let child = cmd.stdout(Stdio::from(stdout)).spawn().unwrap();
            wait_or_kill(child, &what)
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let text = std::fs::read_to_string(&notes).unwrap();
        assert!(
            text.starts_with("written before the run\n"),
            "{}: stdout's file was truncated: {text:?}\n{stderr}",
            target.display()
        );
        assert!(!out.status.success(), "{}: {stderr}", target.display());
        assert!(
            stderr.contains("--summary-json") && stderr.contains("stdout"),
            "{}: {stderr}",
            target.display()
        );
    }
}

/// What a relay refusing every REQ says: C1 controls (CSI, a string terminator), a
/// right-to-left override, and an escape, which serde_json escapes on its own.
const HOSTILE_REASON: &str = "go\u{9b}2J away\u{202e}txt.exe\u{2066}\u{9c}\u{1b}[31m";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_s_refusal_reaches_the_summary_file_escaped() {
    let relay = FaultServer::refusing(HOSTILE_REASON).await;
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    let path = summary.to_str().unwrap();
    let cmd = feed(&relay.url, &key(7), &["--no-stats", "--summary-json", path]);
    let out = run(cmd, "a feed from a refusing relay".into()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = std::fs::read_to_string(&summary)
        .unwrap_or_else(|e| panic!("no summary ({e}); {:?}\n{stderr}", out.status));
    // The reason is in the file (read back, it is the relay's text) ...
    let parsed: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(
        parsed.to_string().contains("txt.exe\u{2066}\u{9c}"),
        "the reason is kept: {text}"
    );
    // ... and none of its controls is written raw.
    let raw: Vec<char> = text
        .trim_end_matches('\n')
        .chars()
        .filter(|c| {
            c.is_control()
                || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(raw.is_empty(), "raw controls {raw:?} in {text}");
}

/// Starts `cmd` with its output piped and waits until it printed its first note; the child
/// and the rest of its stdout.
#[cfg(unix)]
fn first_note(mut cmd: Command) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = cmd.spawn().unwrap();
    let mut notes = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    notes.read_line(&mut first).unwrap();
    assert!(first.contains("note"), "{first:?}");
    (child, notes)
}

/// A feed run with `--stats` in `dir` that is still fetching when its first note is out: one
/// of its relays (`hole`) never answers, and is waited for up to the connect and EOSE timeouts
/// (8 s each). Once the note is out, [`hold_lock`] makes its save wait too.
#[cfg(unix)]
fn held_up(relay: &RealRelay, author: &Keys, dir: &Path, hole: &BlackHole) -> Command {
    let relays = format!("{},{}", relay.url, hole.url);
    let timeouts = ["--connect-timeout", "8s", "--eose-timeout", "8s"];
    let mut cmd = feed(&relays, author, &timeouts);
    cmd.arg("--stats").arg(dir.join("stats.json"));
    cmd
}

/// Another save holds the stats file's lock in `dir` from now on: a run's own save waits for it
/// (up to `nostr_outbox_stats::LOCK_WAIT`). Taken after the run's checks before it starts, which
/// refuse a lock that looks held.
#[cfg(unix)]
fn hold_lock(dir: &Path) {
    std::fs::write(dir.join("stats.json.lock"), "").unwrap();
}

/// The first stop signal ends the feed and lets it save; a second one, while it is still
/// saving, ends the process at once.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stop_signal_ends_the_process_while_it_is_still_saving() {
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    let hole = BlackHole::start().await;
    for signal in ["-INT", "-TERM"] {
        // The lock the last round held is gone before this one starts.
        let _ = std::fs::remove_file(dir.path().join("stats.json.lock"));
        let mut cmd = held_up(&relay, &author, dir.path(), &hole);
        cmd.args(["--log", "info"]);
        let held = dir.path().to_path_buf();
        let (status, stderr) = tokio::task::spawn_blocking(move || {
            let (mut child, notes) = first_note(cmd);
            hold_lock(&held);
            // The stop signals are heard from the first note on.
            let (stopping, heard) = std::sync::mpsc::channel();
            let mut lines = BufReader::new(child.stderr.take().unwrap());
            let stderr = std::thread::spawn(move || {
                let (mut all, mut line) = (String::new(), String::new());
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    if line.contains("stopping") {
                        let _ = stopping.send(());
                    }
                    all.push_str(&line);
                    line.clear();
                }
                all
            });
            cli::signal(signal, child.id());
            heard
                .recv_timeout(HUNG)
                .expect("the first signal stops the feed");
            cli::signal(signal, child.id());
            let rest = cli::read_to_end(notes);
            let out = wait_or_kill(child, signal);
            let _ = rest.join();
            (out.status, stderr.join().unwrap())
        })
        .await
        .unwrap();
        let code = if signal == "-INT" { 130 } else { 143 };
        assert_eq!(status.code(), Some(code), "{signal}:\n{stderr}");
        let name = format!("stopped by SIG{}", &signal[1..]);
        assert!(stderr.contains(&name), "{signal}:\n{stderr}");
    }
}

/// A summary file replaced by a FIFO while the run is under way is not opened: the summary is
/// reported unwritten and the process ends.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_file_replaced_by_a_fifo_during_the_run_is_not_opened() {
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.json");
    std::fs::write(&summary, "").unwrap();
    let hole = BlackHole::start().await;
    let mut cmd = held_up(&relay, &author, dir.path(), &hole);
    cmd.arg("--summary-json").arg(&summary);
    let held = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let (child, notes) = first_note(cmd);
        hold_lock(&held);
        std::fs::remove_file(&summary).unwrap();
        assert!(Command::new("mkfifo")
            .arg(&summary)
            .status()
            .unwrap()
            .success());
        let rest = cli::read_to_end(notes);
        let out = wait_or_kill(child, "a summary file swapped for a FIFO");
        let _ = rest.join();
        out
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("events:"),
        "the summary is printed:\n{stderr}"
    );
    assert!(
        stderr.contains("not a regular file"),
        "the summary file is refused:\n{stderr}"
    );
}

/// What is in each of `paths` (`None`: not there).
fn contents(paths: &[PathBuf]) -> Vec<Option<Vec<u8>>> {
    paths.iter().map(|p| std::fs::read(p).ok()).collect()
}

/// A summary file naming a file the run reads or keeps (the stats file or a file beside it,
/// the SQLite store, the secret key file), by any spelling, is refused before the run, and
/// every one of those files is left as it was.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_file_naming_a_file_the_run_keeps_is_refused_and_nothing_is_touched() {
    use std::os::unix::fs::PermissionsExt;
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    let stats = d.join("stats.json");
    let sqlite = d.join("outbox.sqlite");
    let key_file = d.join("reader.key");
    std::fs::write(&key_file, key(9).secret_key().to_secret_hex()).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let stats_arg = stats.to_str().unwrap();
    let store_arg = format!("sqlite:{}", sqlite.display());
    // One run with each store, so there is something kept to lose.
    for store in [["--stats", stats_arg], ["--store", &store_arg]] {
        let out = run(feed(&relay.url, &author, &store), "a first run".into()).await;
        assert!(out.status.success(), "{out:?}");
    }
    let kept = [
        stats.clone(),
        d.join("stats.json.lists.json"),
        d.join("stats.json.penalties.json"),
        d.join("stats.json.lock"),
        sqlite.clone(),
        key_file.clone(),
    ];
    let before = contents(&kept);
    let key_arg = key_file.to_str().unwrap();
    let cases: Vec<(Vec<&str>, PathBuf)> = vec![
        (vec!["--stats", stats_arg], stats.clone()),
        (
            vec!["--stats", stats_arg],
            d.join("sub/../stats.json.lists.json"),
        ),
        (
            vec!["--stats", stats_arg],
            d.join("./stats.json.penalties.json"),
        ),
        // Not there yet: the same name in the same directory.
        (vec!["--stats", stats_arg], d.join("sub/../stats.json.lock")),
        (vec!["--store", &store_arg], sqlite.clone()),
        (
            vec!["--no-stats", "--secret-key-file", key_arg],
            d.join("sub/../reader.key"),
        ),
    ];
    let mut wrong = Vec::new();
    for (args, target) in &cases {
        let mut cmd = feed(&relay.url, &author, args);
        cmd.arg("--summary-json").arg(target);
        let what = format!("{args:?} --summary-json {}", target.display());
        let out = run(cmd, what.clone()).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let refused = refused_before_the_run(&out, "give another file");
        if !refused {
            wrong.push(format!("{what}: {:?}\n{stderr}", out.status));
        }
        if contents(&kept) != before {
            wrong.push(format!("{what}: a kept file was changed"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777 == 0o600,
        "the key file is still private"
    );
}

/// A lock on the stats file that looks held (a save that has not said who it is, moments ago)
/// stops the feed before it fetches anything, with an error naming the lock file, instead of
/// a run whose save waits for it in vain and keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stats_lock_that_looks_held_stops_the_feed_before_it_fetches() {
    let (relay, author) = relay_with_notes(3).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("stats.json.lock"), "").unwrap();
    let mut cmd = feed(&relay.url, &author, &[]);
    cmd.arg("--stats").arg(dir.path().join("stats.json"));
    let out = run(cmd, "a feed whose stats lock is held".into()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, "stats.json.lock");
    assert!(out.stdout.is_empty(), "nothing fetched: {stderr}");
    assert!(!stderr.contains("events:"), "no run: {stderr}");
}

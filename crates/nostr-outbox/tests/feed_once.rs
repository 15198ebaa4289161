//! `outbox feed --once` end to end: the binary against real relays (nostr-relay-builder's local
//! relay) on 127.0.0.1, relay lists discovered from the reader's relay, a summary on stderr and
//! learned stats on disk. Prints the measured run.

use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Instant;

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::nips::nip19::ToBech32;
use nostr::types::Timestamp;

use nostr_outbox_fleet::{assert_says, cli, follows_file, key, BlackHole, RealRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_once_against_local_relays_prints_a_summary_and_saves_stats() {
    const FOLLOWS: u32 = 60;
    const ROUTED: usize = 8;
    const NOTES_PER_AUTHOR: u64 = 10;
    let reader = RealRelay::start().await;
    let mut routed = Vec::new();
    for _ in 0..ROUTED {
        routed.push(RealRelay::start().await);
    }
    let now = Timestamp::now().as_secs();
    let mut expected_notes = 0usize;
    let mut follows = Vec::new();
    for i in 0..FOLLOWS {
        let k = key(i);
        // Half as npub, half as hex: both are accepted.
        follows.push(if i % 2 == 0 {
            k.public_key().to_bech32().unwrap()
        } else {
            k.public_key().to_hex()
        });
        // Every fifth follow has no list and writes to the reader's relay.
        let writes: Vec<&RealRelay> = if i % 5 == 0 {
            vec![&reader]
        } else {
            let a = &routed[i as usize % ROUTED];
            let b = &routed[(i as usize * 7 + 3) % ROUTED];
            let tags = [a, b].map(|r| Tag::parse(["r", r.url.as_str()]).unwrap());
            let list = EventBuilder::new(Kind::RelayList, "")
                .tags(tags)
                .custom_created_at(Timestamp::from(now - 1000))
                .finalize(&k)
                .unwrap();
            reader.store(&list).await;
            vec![a, b]
        };
        for n in 0..NOTES_PER_AUTHOR {
            let note = EventBuilder::new(Kind::TextNote, format!("note {n} of {i}"))
                .custom_created_at(Timestamp::from(now - 60 - n * 3600))
                .finalize(&k)
                .unwrap();
            for r in &writes {
                r.store(&note).await;
            }
            expected_notes += 1;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let follows_file = dir.path().join("follows.txt");
    std::fs::write(&follows_file, follows.join("\n")).unwrap();
    let stats = dir.path().join("stats.json");
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        "max_connections = 8\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n",
    )
    .unwrap();

    let started = Instant::now();
    let mut cmd = feed(&reader, &follows_file, &["--once"]);
    cmd.arg("--config").arg(&config).arg("--stats").arg(&stats);
    let output = cli::output_of(cmd).await;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");
    eprintln!("measured `outbox feed --once` ({wall:?} wall):\n{stderr}");

    let notes = stdout.lines().count();
    assert_eq!(notes, expected_notes, "every note of every follow, once");
    assert!(stderr.contains(&format!("events:              {expected_notes}")));
    assert!(stderr.contains(&format!("authors covered:     {FOLLOWS}/{FOLLOWS}")));
    assert!(stderr.contains(&format!("relay lists:         {}", FOLLOWS - FOLLOWS / 5)));
    assert!(stderr.contains("time to first event: ") && !stderr.contains("first event: -"));
    let saved = std::fs::read_to_string(&stats).expect("stats written");
    for r in &routed {
        if stdout.contains(&format!("[{}]", r.url)) {
            assert!(saved.contains(&r.url), "{} learned", r.url);
        }
    }
    assert!(dir.path().join("stats.json.penalties.json").exists());
}

/// A reader relay holding `notes` notes of one follow (no relay lists), and a follows file.
async fn one_follow(dir: &std::path::Path, notes: u64) -> (RealRelay, std::path::PathBuf) {
    let reader = RealRelay::start().await;
    let k = key(7);
    reader.store_notes(&k, notes, "note ").await;
    (reader, follows_file(dir, &[k.public_key()]))
}

/// `outbox feed` against one local reader relay, short timeouts, with `extra` arguments.
fn feed(reader: &RealRelay, follows: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args([
        "feed",
        "--allow-local",
        "--since",
        "7d",
        "--relays",
        &reader.url,
    ])
    .arg("--follows")
    .arg(follows)
    .args(["--connect-timeout", "2s", "--eose-timeout", "3s"])
    .args(extra);
    cmd
}

fn seed_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split("(seed ").nth(1))
        .map(|s| s.trim_end_matches(')').to_string())
        .unwrap_or_else(|| panic!("no seed in:\n{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_feed_uses_recall_keeps_its_state_and_draws_anew_each_run() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, follows) = one_follow(dir.path(), 5).await;
    let data = dir.path().join("data");
    let run = |extra: &'static [&'static str], data: std::path::PathBuf| {
        let mut cmd = feed(&reader, &follows, extra);
        cmd.env("OUTBOX_DATA_DIR", data);
        cli::output_of(cmd)
    };
    let mut seeds = Vec::new();
    for _ in 0..2 {
        let out = run(&["--once", "--verbose"], data.clone()).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("(recall)"),
            "the default strategy:\n{stderr}"
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 5);
        seeds.push(seed_of(&stderr));
    }
    assert_ne!(seeds[0], seeds[1], "two runs planned with one seed");
    for kept in [
        "stats.json",
        "stats.json.penalties.json",
        "stats.json.lists.json",
    ] {
        assert!(
            data.join(kept).exists(),
            "{kept} kept in the data directory"
        );
    }
    let saved = std::fs::read_to_string(data.join("stats.json")).unwrap();
    assert!(saved.contains(&reader.url), "the reader relay was learned");

    let untouched = dir.path().join("untouched");
    let out = run(&["--once", "--no-stats"], untouched.clone()).await;
    assert!(out.status.success());
    assert!(!untouched.exists(), "--no-stats keeps nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_installation_draws_its_own_base_seed_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, follows) = one_follow(dir.path(), 2).await;
    let run = |name: &str, extra: &'static [&'static str]| {
        let mut cmd = feed(&reader, &follows, &["--once"]);
        cmd.args(extra)
            .env("OUTBOX_DATA_DIR", dir.path().join(name));
        async move {
            let out = cli::output_of(cmd).await;
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(out.status.success(), "{stderr}");
            seed_of(&stderr)
        }
    };
    let kept = |name: &str| {
        let text = std::fs::read_to_string(dir.path().join(name).join("stats.json")).unwrap();
        let stats: serde_json::Value = serde_json::from_str(&text).unwrap();
        stats["seed"].as_u64()
    };
    let drawn =
        |base: u64, session: u64| format!("{:#x}", nostr_outbox_core::session_seed(base, session));

    // Two first runs: two installations, two draws, each kept with its stats.
    let (one, two) = (run("one", &[]).await, run("two", &[]).await);
    assert_ne!(one, two, "two installations planned their first run alike");
    let base = kept("one").expect("the base seed is kept with the stats");
    assert_eq!(one, drawn(base, 0));
    // Later runs draw from the kept base and the run count.
    assert_eq!(run("one", &[]).await, drawn(base, 1));
    // --seed wins, and the kept base stays for the runs without it.
    assert_eq!(run("one", &["--seed", "5"]).await, drawn(5, 2));
    assert_eq!(kept("one"), Some(base));
    assert_eq!(run("one", &[]).await, drawn(base, 3));

    // A store kept before the seed was: it reads as before, and keeps the next run's draw.
    let path = dir.path().join("two").join("stats.json");
    let mut old: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    old.as_object_mut().unwrap().remove("seed");
    std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    let again = run("two", &[]).await;
    let base = kept("two").expect("kept on the next run");
    assert_eq!(
        again,
        drawn(base, 1),
        "the run count of the old store goes on"
    );
    assert_eq!(run("two", &[]).await, drawn(base, 2));
}

/// Starts `cmd`, reads the first line it prints, then hands the child, that line and the rest
/// of its stdout to `then`; the run's output once it ended.
async fn after_first_line(
    mut cmd: Command,
    then: impl FnOnce(&std::process::Child, String, BufReader<std::process::ChildStdout>)
        + Send
        + 'static,
) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut first = String::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        lines.read_line(&mut first).unwrap();
        then(&child, first, lines);
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_feed_cleanly_with_its_stats_saved() {
    let dir = tempfile::tempdir().unwrap();
    // Far more than a pipe buffer holds, so the feed is still writing when the reader leaves.
    let (reader, follows) = one_follow(dir.path(), 3000).await;
    let stats = dir.path().join("stats.json");
    let mut cmd = feed(&reader, &follows, &["--once"]);
    cmd.arg("--stats").arg(&stats);
    let out = after_first_line(cmd, |_, first, lines| {
        assert_says(&first, "note");
        drop(lines); // like `| head -1`
    })
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(
        stderr.contains("events:"),
        "the summary is printed:\n{stderr}"
    );
    assert!(stats.exists(), "stats saved");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_live_feed_like_ctrl_c() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (reader, follows) = one_follow(dir.path(), 3).await;
    let stats = dir.path().join("stats.json");
    let mut cmd = feed(&reader, &follows, &[]);
    cmd.arg("--stats").arg(&stats);
    let out = after_first_line(cmd, |child, _, mut lines| {
        cli::signal("-TERM", child.id());
        let mut rest = String::new();
        while lines.read_line(&mut rest).unwrap_or(0) > 0 {}
    })
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert_says(&stderr, "events:");
    assert!(stats.exists(), "stats saved on SIGTERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_keeps_the_state_and_refuses_a_newer_database() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, follows) = one_follow(dir.path(), 4).await;
    let db = dir.path().join("state.sqlite");
    let arg = format!("sqlite:{}", db.display());
    let run = |extra: Vec<String>| {
        let mut cmd = feed(&reader, &follows, &["--once"]);
        cmd.args(extra);
        cli::output_of(cmd)
    };
    let mut seeds = Vec::new();
    for _ in 0..2 {
        let out = run(vec!["--store".into(), arg.clone()]).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
        seeds.push(seed_of(&stderr));
    }
    assert_ne!(seeds[0], seeds[1], "the run count was kept in the database");
    let store = nostr_outbox_stats::SqliteStore::new(&db);
    let loaded = store.load().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert!(loaded.stats.get(&reader.url).asked >= 2, "learned twice");
    assert!(store.load_penalties().unwrap().value.is_some());
    assert!(
        !dir.path().join("stats.json").exists(),
        "nothing beside it in JSON"
    );

    // `--stats` and `--store` name one thing twice.
    let out = run(vec![
        "--store".into(),
        arg.clone(),
        "--stats".into(),
        "x.json".into(),
    ])
    .await;
    assert!(!out.status.success());

    // A database of a newer schema is refused, and left as it is.
    let conn = nostr_outbox_stats::sqlite::rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE meta SET value = 99 WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    drop(conn);
    let before = std::fs::read(&db).unwrap();
    let out = run(vec!["--store".into(), arg.clone()]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, "newer");
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// A follow whose only relay the budget leaves out of the plan: the run probes that relay
/// after its fetch, prints the notes it found there after the plan's, and says so in one
/// summary line; `--probes 0` probes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_once_probes_a_relay_the_plan_left_out_unless_probes_is_zero() {
    let [reader, hub, own] = RealRelay::several().await;
    let now = Timestamp::now().as_secs();
    let list = |k: &nostr::key::Keys, relay: &RealRelay| {
        EventBuilder::new(Kind::RelayList, "")
            .tags([Tag::parse(["r", relay.url.as_str()]).unwrap()])
            .custom_created_at(Timestamp::from(now - 1000))
            .finalize(k)
            .unwrap()
    };
    let mut follows = Vec::new();
    for i in 0..3u32 {
        let k = key(100 + i);
        let relay = if i == 0 { &own } else { &hub };
        reader.store(&list(&k, relay)).await;
        for n in 0..3u64 {
            let note = EventBuilder::new(Kind::TextNote, format!("note {n} of {i}"))
                .custom_created_at(Timestamp::from(now - 60 - n * 3600))
                .finalize(&k)
                .unwrap();
            relay.store(&note).await;
        }
        follows.push(k.public_key().to_hex());
    }
    let dir = tempfile::tempdir().unwrap();
    let follows_file = dir.path().join("follows.txt");
    std::fs::write(&follows_file, follows.join("\n")).unwrap();
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        "max_connections = 1\n[strategy]\ntype = \"recall\"\n",
    )
    .unwrap();
    let run = |extra: &'static [&'static str]| {
        let mut cmd = feed(&reader, &follows_file, &["--once", "--no-stats"]);
        cmd.arg("--config").arg(&config).args(extra);
        cli::output_of(cmd)
    };

    let out = run(&[]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_says(&stderr, "probes:              1 relays probed, 1 answered, 3 notes learned from, 3 new ones shown after the fetch");
    // The hub's notes, then the follow's three the probe found on its own relay.
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 9, "{stdout}");
    let from_own = |l: &&str| l.contains(&format!("[{}]", own.url));
    assert!(lines[..6].iter().all(|l| !from_own(l)), "{stdout}");
    assert!(lines[6..].iter().all(from_own), "{stdout}");

    let out = run(&["--probes", "0"]).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_says(&stderr, "probes:              none");
    assert_eq!(stdout.lines().count(), 6, "{stdout}");
}

/// Polls until the process `pid` has written most of a pipe's capacity (48 of 64 KiB: partly
/// filled pages keep the last bytes), or `within` passed; whether it did. Where
/// `/proc/PID/io` cannot be read, waits a fixed two seconds.
#[cfg(unix)]
fn stdout_filled(pid: u32, within: std::time::Duration) -> bool {
    const PIPE: u64 = 48 * 1024;
    let written = || -> Option<u64> {
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
        io.lines()
            .find_map(|l| l.strip_prefix("wchar:"))
            .and_then(|n| n.trim().parse().ok())
    };
    if written().is_none() {
        std::thread::sleep(std::time::Duration::from_secs(2));
        return true;
    }
    let started = Instant::now();
    while started.elapsed() < within {
        if written().is_some_and(|n| n >= PIPE) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// A reader that never reads: the pipe fills and stays full. SIGTERM and SIGINT still end the
/// feed promptly, with the stats saved and the summary on stderr.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_end_the_feed_while_stdout_is_blocked() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    // Far more than a pipe buffer holds.
    let (reader, follows) = one_follow(dir.path(), 3000).await;
    for signal in ["-TERM", "-INT"] {
        let stats = dir.path().join(format!("stats{signal}.json"));
        let mut cmd = feed(&reader, &follows, &["--once", "--json"]);
        cmd.arg("--stats").arg(&stats);
        let (stderr, status, waited) = tokio::task::spawn_blocking(move || {
            let (unread, writer) = std::io::pipe().unwrap();
            let mut child = cmd
                .stdout(std::process::Stdio::from(writer))
                .spawn()
                .unwrap();
            // Wait until the feed has written most of a pipe's worth: nobody reads, so the
            // pipe fills and the feed, with far more to write, cannot finish.
            assert!(
                stdout_filled(child.id(), Duration::from_secs(30)),
                "the feed never filled its stdout"
            );
            assert!(child.try_wait().unwrap().is_none(), "still writing");
            let sent = Instant::now();
            cli::signal(signal, child.id());
            let status = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    break Some(status);
                }
                if sent.elapsed() > Duration::from_secs(15) {
                    let _ = child.kill();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let waited = sent.elapsed();
            let mut stderr = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            drop(unread);
            (stderr, status, waited)
        })
        .await
        .unwrap();
        let status = status.unwrap_or_else(|| panic!("{signal} ignored while stdout is blocked"));
        assert!(status.success(), "{signal}: {status:?}\n{stderr}");
        assert!(waited < Duration::from_secs(10), "{signal} took {waited:?}");
        assert!(
            stderr.contains("events:"),
            "the summary is printed:\n{stderr}"
        );
        assert!(stats.exists(), "{signal}: stats saved");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_feed_ends_at_its_deadline_and_names_the_pending_relays() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, follows) = one_follow(dir.path(), 3).await;
    // A second reader relay that accepts sockets and never answers.
    let hole = BlackHole::start().await;
    let hole_url = hole.url.clone();
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["feed", "--once", "--no-stats", "--allow-local"])
        .args([
            "--since",
            "7d",
            "--relays",
            &reader.url,
            "--relays",
            &hole_url,
        ])
        .arg("--follows")
        .arg(&follows)
        .args(["--connect-timeout", "60s", "--eose-timeout", "60s"])
        .args(["--deadline", "1s"]);
    let started = Instant::now();
    let out = cli::output_of(cmd).await;
    let wall = started.elapsed();
    drop(hole);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?} after {wall:?}\n{stderr}",
        out.status
    );
    // The deadline, then the slots' shutdown grace at most.
    assert!(wall < std::time::Duration::from_secs(8), "{wall:?}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("deadline reached:"))
        .unwrap_or_else(|| panic!("no deadline line:\n{stderr}"));
    assert_says(line, &hole_url);
    assert!(!line.contains(&reader.url), "{line}");
    assert_eq!(
        stdout.lines().count(),
        3,
        "the good relay's notes:\n{stdout}"
    );
    eprintln!("measured `outbox feed --once --deadline 1s` with a black hole: {wall:?}\n{stderr}");
}

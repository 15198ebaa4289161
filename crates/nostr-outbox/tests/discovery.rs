//! Reaching every follow: relay lists that live only on an indexer are found and routed, the
//! next run plans routed from its first REQ with the lists it kept, and relays on the deny list
//! (the config's, or the reader's kind:10006) are never asked. Local relays on 127.0.0.1.

use std::path::Path;
use std::process::Output;

use nostr::event::{Kind, Tag};
use nostr::key::Keys;
use nostr::nips::nip19::ToBech32;

use nostr_outbox_fleet::{assert_says, cli, key, signed, RealRelay};

const NOTES: u64 = 4;

/// `follows` authors, author `i` writing `NOTES` notes to `writes[i % writes.len()]` only, with
/// a kind:10002 list naming that relay stored on `lists_on`.
async fn authors(follows: u32, writes: &[&RealRelay], lists_on: &RealRelay) -> Vec<Keys> {
    let mut keys = Vec::new();
    for i in 0..follows {
        let k = key(1_000 + i);
        let home = writes[i as usize % writes.len()];
        let tag = Tag::parse(["r", home.url.as_str()]).unwrap();
        lists_on
            .store(&signed(&k, Kind::RelayList, "", vec![tag], 1_000))
            .await;
        for n in 0..NOTES {
            let note = signed(
                &k,
                Kind::TextNote,
                &format!("note {n} of {i}"),
                vec![],
                60 + n,
            );
            home.store(&note).await;
        }
        keys.push(k);
    }
    keys
}

fn follows_file(dir: &Path, keys: &[Keys]) -> std::path::PathBuf {
    let path = dir.join("follows.txt");
    let lines: Vec<String> = keys.iter().map(|k| k.public_key().to_hex()).collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

async fn run(args: Vec<String>) -> (Output, String, String) {
    let fixed = [
        "feed",
        "--once",
        "--verbose",
        "--allow-local",
        "--since",
        "7d",
    ];
    let waits = ["--connect-timeout", "2s", "--eose-timeout", "3s"];
    let out = cli::run(
        env!("CARGO_BIN_EXE_outbox"),
        &[&fixed[..], &waits].concat(),
        args,
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    (out, stdout, stderr)
}

/// The first `plan 1 (...)` line's routed connections and relay lists.
fn first_plan(stderr: &str) -> (usize, usize) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("plan 1 "))
        .unwrap_or_else(|| panic!("no first plan in:\n{stderr}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (numbers[1], numbers[2])
}

fn arg(s: impl AsRef<std::ffi::OsStr>) -> String {
    s.as_ref().to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_only_on_an_indexer_are_routed_and_kept_for_the_next_run() {
    const FOLLOWS: u32 = 6;
    let reader = RealRelay::start().await; // holds nothing: no lists, no notes
    let indexer = RealRelay::start().await;
    let [a, b] = RealRelay::several().await;
    let keys = authors(FOLLOWS, &[&a, &b], &indexer).await;
    let dir = tempfile::tempdir().unwrap();
    let follows = follows_file(dir.path(), &keys);
    let stats = dir.path().join("stats.json");
    let base = vec![
        "--relays".to_string(),
        reader.url.clone(),
        "--follows".into(),
        arg(&follows),
        "--stats".into(),
        arg(&stats),
    ];

    // Without the indexer nobody knows where the follows write.
    let mut alone = base.clone();
    alone[5] = arg(dir.path().join("alone.json"));
    let (_, stdout, stderr) = run(alone).await;
    assert_eq!(stdout.lines().count(), 0, "{stderr}");

    let mut with_indexer = base.clone();
    with_indexer.extend(["--indexers".to_string(), indexer.url.clone()]);
    let (_, stdout, stderr) = run(with_indexer).await;
    let expected = (FOLLOWS as u64 * NOTES) as usize;
    assert_eq!(stdout.lines().count(), expected, "{stderr}");
    assert_says(
        &stderr,
        &format!("relay lists:         {FOLLOWS} ({FOLLOWS} first from indexers)"),
    );
    assert_eq!(first_plan(&stderr).1, 0, "the first run starts unrouted");

    // The second run, without the indexer: routed from its first plan with the kept lists.
    let (_, stdout, stderr) = run(base).await;
    assert_eq!(stdout.lines().count(), expected, "{stderr}");
    let (connections, lists) = first_plan(&stderr);
    assert_eq!(lists, FOLLOWS as usize, "{stderr}");
    assert!(connections >= 2, "routed at once:\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_denied_by_config_or_by_the_readers_blocked_list_are_never_asked() {
    const FOLLOWS: u32 = 6;
    let reader = RealRelay::start().await;
    let [denied, blocked, open] = RealRelay::several().await;
    let keys = authors(FOLLOWS, &[&denied, &blocked, &open], &reader).await;
    // The reader follows them (kind:3) and blocks one relay (kind:10006).
    let me = key(1);
    let p_tags = keys
        .iter()
        .map(|k| Tag::parse(["p", &k.public_key().to_hex()]).unwrap())
        .collect();
    reader
        .store(&signed(&me, Kind::ContactList, "", p_tags, 100))
        .await;
    let block = vec![Tag::parse(["relay", blocked.url.as_str()]).unwrap()];
    reader
        .store(&signed(&me, Kind::BlockedRelays, "", block, 100))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        format!(
            "[url_policy]\ndeny = [\"{}\"]\n[strategy]\ntype = \"greedy\"\n",
            denied.url
        ),
    )
    .unwrap();
    let (_, stdout, stderr) = run(vec![
        "--relays".into(),
        reader.url.clone(),
        "--npub".into(),
        me.public_key().to_bech32().unwrap(),
        "--config".into(),
        arg(&config),
        "--no-stats".into(),
    ])
    .await;
    // Only the authors on the open relay are found, and the two others were never dialled.
    assert_eq!(
        stdout.lines().count(),
        (FOLLOWS / 3) as usize * NOTES as usize,
        "{stderr}"
    );
    assert!(stdout.lines().all(|l| l.contains(&open.url)), "{stdout}");
    assert_says(&stderr, &format!("connected {}", open.url));
    for never in [&denied, &blocked] {
        assert!(
            !stderr.contains(&format!("connected {}", never.url)),
            "{} was asked:\n{stderr}",
            never.url
        );
    }
    assert!(stderr.contains(&format!("authors covered:     {FOLLOWS}/{FOLLOWS}")));
}

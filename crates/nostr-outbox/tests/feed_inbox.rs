//! `outbox feed --inbox`: the reader's mentions come from the read relays of the reader's own
//! relay list (NIP-65), or from `--relays` when the reader has no list. Local relays on
//! 127.0.0.1.

use std::collections::BTreeSet;
use std::process::Output;

use nostr::event::{Event, Kind, Tag};
use nostr::key::Keys;
use nostr::nips::nip19::ToBech32;

use nostr_outbox_fleet::{assert_says, cli, key, now, relay_list, signed, RealRelay};

/// A note by `author` tagging `whom`.
fn mention(author: &Keys, whom: &Keys, text: &str) -> Event {
    let p = Tag::parse(["p", whom.public_key().to_hex().as_str()]).unwrap();
    signed(author, Kind::TextNote, text, vec![p], 120)
}

/// Runs `outbox feed --inbox --once --json` for `reader` asking `relays` (comma-separated).
async fn run_inbox(reader: &Keys, relays: &str) -> Output {
    let npub = reader.public_key().to_bech32().unwrap();
    let fixed = ["feed", "--inbox", "--once", "--json", "--no-stats"];
    let args = ["--allow-local", "--since", "7d", "--npub", &npub];
    let waits = ["--connect-timeout", "2s", "--eose-timeout", "3s"];
    let args = [&fixed[..], &args, &waits, &["--relays", relays]].concat();
    cli::run(env!("CARGO_BIN_EXE_outbox"), &args, Vec::new()).await
}

/// Runs `outbox feed --inbox --once` for `reader`; returns the ids printed and stderr.
async fn inbox(reader: &Keys, relays: &[&RealRelay]) -> (BTreeSet<String>, String) {
    let relays: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();
    let out = run_inbox(reader, &relays.join(",")).await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{stderr}");
    let ids = stdout
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            event["id"].as_str().unwrap().to_string()
        })
        .collect();
    (ids, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_read_from_the_readers_read_relays_only() {
    let [home, inbox_relay, elsewhere] = RealRelay::several().await;
    let (reader, friend, stranger) = (key(1), key(2), key(3));
    // The reader writes to `home` and reads on `inbox_relay`.
    let list = relay_list(
        &reader,
        now() - 1_000,
        &[(&inbox_relay.url, Some("read")), (&home.url, Some("write"))],
    );
    home.store(&list).await;
    let found = mention(&stranger, &reader, "hello reader");
    let on_home = mention(&friend, &reader, "sent to the reader's outbox only");
    let lost = mention(&friend, &reader, "sent where the reader never reads");
    let unrelated = signed(&friend, Kind::TextNote, "no tag", vec![], 60);
    let other = mention(&friend, &stranger, "about someone else");
    inbox_relay.store(&found).await;
    inbox_relay.store(&unrelated).await;
    inbox_relay.store(&other).await;
    home.store(&on_home).await;
    elsewhere.store(&lost).await;

    let (ids, stderr) = inbox(&reader, &[&home]).await;
    assert_eq!(ids, BTreeSet::from([found.id.to_hex()]), "{stderr}");
    assert_says(&stderr, "inbox: 1 relays");
    assert_says(&stderr, &format!("{} (reader-read)", inbox_relay.url));
    assert_says(&stderr, "mentions:            1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_relay_list_the_given_relays_are_asked() {
    let [first, second] = RealRelay::several().await;
    let (reader, friend) = (key(11), key(12));
    let a = mention(&friend, &reader, "on the first relay");
    let b = mention(&friend, &reader, "on the second relay");
    first.store(&a).await;
    second.store(&b).await;
    // The same mention on both relays is printed once.
    second.store(&a).await;

    let (ids, stderr) = inbox(&reader, &[&first, &second]).await;
    assert_eq!(
        ids,
        BTreeSet::from([a.id.to_hex(), b.id.to_hex()]),
        "{stderr}"
    );
    assert_says(&stderr, "inbox: 2 relays");
    assert_says(&stderr, "reader-relay");
    assert_says(&stderr, "mentions:            2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_sent_where_route_publish_says_is_found_by_the_inbox() {
    let [reader_home, reader_inbox, author_home, elsewhere] = RealRelay::several().await;
    let (reader, author) = (key(21), key(22));
    let reader_list = relay_list(
        &reader,
        now() - 1_000,
        &[
            (&reader_inbox.url, Some("read")),
            (&reader_home.url, Some("write")),
        ],
    );
    let author_list = relay_list(&author, now() - 1_000, &[(&author_home.url, Some("write"))]);
    reader_home.store(&reader_list).await;
    let note = mention(&author, &reader, "a reply the reader should see");

    // Where to publish, from the two lists alone (no network).
    let dir = tempfile::tempdir().unwrap();
    let lists = dir.path().join("lists.json");
    std::fs::write(
        &lists,
        serde_json::to_string(&[&reader_list, &author_list]).unwrap(),
    )
    .unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(&event, serde_json::to_string(&note).unwrap()).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[strategy]\ntype = \"greedy\"\n[url_policy]\nallow_loopback = true\n",
    )
    .unwrap();
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["route", "publish", "--json"])
        .arg("--event")
        .arg(&event)
        .arg("--lists")
        .arg(&lists)
        .arg("--config")
        .arg(&config);
    let out = cli::output_of(cmd).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let targets: BTreeSet<String> = plan["route"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        targets,
        BTreeSet::from([author_home.url.clone(), reader_inbox.url.clone()])
    );

    // Publish there (and nowhere else), then read the reader's inbox.
    for relay in [&reader_home, &reader_inbox, &author_home, &elsewhere] {
        if targets.contains(&relay.url) {
            relay.store(&note).await;
        }
    }
    let (ids, stderr) = inbox(&reader, &[&reader_home]).await;
    assert_eq!(ids, BTreeSet::from([note.id.to_hex()]), "{stderr}");
}

/// When the reader's relay list could not be looked up (the relay refused without sign-in),
/// the inbox says so and fails instead of asking `--relays` as if the reader had no list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_relay_list_lookup_is_an_error_not_an_empty_inbox() {
    use nostr_relay_builder::prelude as rb;
    let private = RealRelay::start_with(|builder| {
        builder.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Read,
        })
    })
    .await;
    let reader = key(31);
    let out = run_inbox(&reader, &private.url).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(out.stdout.len(), 0, "{stderr}");
    assert_says(&stderr, "could not learn where");
    assert_says(
        &stderr,
        &format!("{}: relay refused: auth-required", private.url),
    );
    assert_says(&stderr, "give --secret-key-file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_whose_relays_all_refuse_is_an_error_not_an_empty_inbox() {
    use nostr_outbox_fleet::FaultServer;
    let home = RealRelay::start().await;
    let members = FaultServer::refusing("auth-required: members only").await;
    let reader = key(32);
    let list = relay_list(&reader, now() - 1_000, &[(&members.url, Some("read"))]);
    home.store(&list).await;
    let out = run_inbox(&reader, &home.url).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, "no inbox relay answered");
    assert_says(&stderr, "give --secret-key-file");
}

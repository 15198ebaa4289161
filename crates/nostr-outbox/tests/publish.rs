//! `outbox publish` against local relays (nostr-relay-builder on 127.0.0.1): the event reaches
//! the `--to` relays and the author's write relays from `--lists`, an event whose signature
//! does not check out is refused before anything is sent, the exit status says whether any
//! relay took it, and a relay requiring NIP-42 sign-in accepts with a key file.

use std::path::{Path, PathBuf};
use std::process::Output;

use nostr::event::{Event, Kind, Tag};
use nostr::nips::nip19::ToBech32;
use nostr_relay_builder::prelude as rb;

use nostr_outbox_fleet::{
    assert_says, cli, dead_url, key, now, relay_list, signed, strings, texts, RealRelay,
};

/// Runs `outbox publish --allow-local` with `args`.
async fn publish(args: Vec<String>) -> Output {
    let fixed = ["publish", "--allow-local", "--timeout", "5"];
    cli::run(env!("CARGO_BIN_EXE_outbox"), &fixed, args).await
}

/// [`publish`] of the event in the file `event` to `relay`, with `extra` arguments.
async fn publish_to(event: &Path, relay: &str, extra: &[&str]) -> Output {
    let event = event.display().to_string();
    publish(strings(
        &[&["--event", &event, "--to", relay], extra].concat(),
    ))
    .await
}

fn write_event(dir: &Path, name: &str, event: &Event) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(event).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_reaches_every_relay_given_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b, listed] = RealRelay::several().await;
    let author = key(1);
    let list = relay_list(&author, now() - 100, &[(&listed.url, Some("write"))]);
    let lists = dir.path().join("lists.json");
    std::fs::write(&lists, serde_json::to_string(&vec![list]).unwrap()).unwrap();
    let note = signed(&author, Kind::TextNote, "hello relays", vec![], 10);
    let file = write_event(dir.path(), "note.json", &note);

    let out = publish(strings(&[
        "--event",
        &file.display().to_string(),
        "--lists",
        &lists.display().to_string(),
        "--to",
        &a.url,
        "--relay",
        &b.url,
    ]))
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    for relay in [&a, &b, &listed] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&relay.url))
            .unwrap_or_else(|| panic!("no line for {}: {stdout}", relay.url));
        assert_says(line, "accepted");
        assert!(relay.has(&note.id.to_hex()).await, "{} lacks it", relay.url);
    }

    // Again, as JSON: every relay already has it.
    let out = publish_to(&file, &a.url, &["--json"]).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["event"], note.id.to_hex());
    assert_eq!(json["successes"], 1);
    assert_eq!(json["relays"][0]["url"], a.url.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_event_is_refused_and_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let note = signed(&key(1), Kind::TextNote, "original", vec![], 10);
    let mut value = serde_json::to_value(&note).unwrap();
    value["content"] = "forged".into();
    let path = dir.path().join("forged.json");
    std::fs::write(&path, value.to_string()).unwrap();
    let out = publish_to(&path, &relay.url, &[]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_says(&stderr, "does not check out");
    assert!(!relay.has(&note.id.to_hex()).await);

    value.as_object_mut().unwrap().remove("sig");
    std::fs::write(&path, value.to_string()).unwrap();
    let out = publish_to(&path, &relay.url, &[]).await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_says(&stderr, "is not a signed event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_relay_taking_it_is_exit_status_one() {
    let dir = tempfile::tempdir().unwrap();
    let note = signed(&key(1), Kind::TextNote, "nobody listens", vec![], 10);
    let file = write_event(dir.path(), "note.json", &note);
    let dead = dead_url().await;
    let out = publish_to(&file, &dead, &[]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_says(&stdout, "connect-failed");

    let out = publish(strings(&["--event", &file.display().to_string()])).await;
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_says(&stderr, "no relay to publish to");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_requiring_sign_in_accepts_with_a_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start_with(|b| {
        b.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Write,
        })
    })
    .await;
    let author = key(1);
    let note = signed(&author, Kind::TextNote, "members only", vec![], 10);
    let file = write_event(dir.path(), "note.json", &note);
    let base = vec![
        "--event".to_string(),
        file.display().to_string(),
        "--to".into(),
        relay.url.clone(),
    ];

    let out = publish(base.clone()).await;
    let (stdout, _) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_says(&stdout, "auth-required");

    let key_path = dir.path().join("key.nsec");
    std::fs::write(&key_path, author.secret_key().to_bech32().unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut args = base;
    args.extend(["--secret-key-file".into(), key_path.display().to_string()]);
    let out = publish(args).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_says(&stdout, "accepted");
    assert!(relay.has(&note.id.to_hex()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebroadcast_skips_relays_that_have_it_and_learn_records_who_answered() {
    let dir = tempfile::tempdir().unwrap();
    let [a, b] = RealRelay::several().await;
    let note = signed(&key(1), Kind::TextNote, "once more", vec![], 10);
    let file = write_event(dir.path(), "note.json", &note);
    let stats = dir.path().join("stats.json");
    let first = publish_to(&file, &a.url, &[]).await;
    assert!(first.status.success(), "{:?}", texts(&first));
    let again = publish_to(
        &file,
        &a.url,
        &[
            "--to",
            &b.url,
            "--rebroadcast",
            "--learn",
            "--stats",
            &stats.display().to_string(),
        ],
    )
    .await;
    let (stdout, stderr) = texts(&again);
    assert!(again.status.success(), "{stdout}{stderr}");
    assert_says(&stdout, &format!("{}  duplicate  already there", a.url));
    assert_says(&stdout, &format!("{}  accepted", b.url));
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    for relay in [&a.url, &b.url] {
        let live = kept["relays"][relay.as_str()]["live_alpha"].as_f64();
        assert!(live.is_some_and(|l| l > 1.0), "{relay}: {kept}");
    }
}

/// A key file holding a public key, the event author's or a tagged person's (hex), is refused
/// before anything is sent, naming the file and never quoting it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_holding_the_authors_public_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let (author, tagged) = (key(1), key(2));
    let tags = vec![Tag::public_key(tagged.public_key())];
    let note = signed(&author, Kind::TextNote, "not signed in", tags, 10);
    let file = write_event(dir.path(), "note.json", &note);
    for (name, public, whose) in [
        (
            "author.key",
            author.public_key(),
            "the event author's public key",
        ),
        (
            "tagged.key",
            tagged.public_key(),
            "a tagged person's public key",
        ),
    ] {
        let key_path = dir.path().join(name);
        std::fs::write(&key_path, public.to_hex()).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let out = publish_to(
            &file,
            &relay.url,
            &["--secret-key-file", &key_path.display().to_string()],
        )
        .await;
        let (stdout, stderr) = texts(&out);
        assert!(!out.status.success(), "{stdout}\n{stderr}");
        assert!(stderr.contains(whose) && stderr.contains(name), "{stderr}");
        assert_says(&stderr, "not a secret key");
        assert!(!stderr.contains(&public.to_hex()), "{stderr}");
        assert!(!relay.has(&note.id.to_hex()).await, "sent anyway");
    }
}

/// `--learn` keeps what it learned where `outbox feed` looks: the data directory
/// (`OUTBOX_DATA_DIR`), or the store `--store` names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn learn_writes_the_store_the_feed_reads() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let note = signed(&key(1), Kind::TextNote, "where is it kept", vec![], 10);
    let file = write_event(dir.path(), "note.json", &note);
    let data = dir.path().join("data");
    let event = file.display().to_string();
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["publish", "--allow-local", "--timeout", "5", "--learn"])
        .args(["--event", &event, "--to", &relay.url])
        .env("OUTBOX_DATA_DIR", &data);
    let out = cli::output_of(cmd).await;
    assert!(out.status.success(), "{:?}", texts(&out));
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("stats.json")).unwrap()).unwrap();
    let live = kept["relays"][relay.url.as_str()]["live_alpha"].as_f64();
    assert!(live.is_some_and(|l| l > 1.0), "{kept}");

    let db = dir.path().join("kept.sqlite");
    let out = publish_to(
        &file,
        &relay.url,
        &["--learn", "--store", &format!("sqlite:{}", db.display())],
    )
    .await;
    assert!(out.status.success(), "{:?}", texts(&out));
    assert!(db.exists(), "the --store database was not written");
}

/// Runs `outbox lists --allow-local --no-stats` with `args`.
async fn lists(args: Vec<String>) -> Output {
    let fixed = ["lists", "--allow-local", "--no-stats"];
    cli::run(
        env!("CARGO_BIN_EXE_outbox"),
        &[&fixed, cli::QUICK].concat(),
        args,
    )
    .await
}

/// `outbox lists --add-relay` builds the reader's new kind:10002 from the old one (its other
/// tags kept), and it is stored on the write relays of the new list and of the old one, on the
/// indexer, and on every relay the old list named (a read relay among them), so a reader of
/// either list finds it; `--dry-run` sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_relay_reaches_the_write_relays_the_indexer_and_the_old_lists_relays() {
    let dir = tempfile::tempdir().unwrap();
    let [home, old_write, old_read, indexer, added] = RealRelay::several().await;
    let reader = key(7);
    let tag = |parts: &[&str]| Tag::parse(parts.iter().copied()).unwrap();
    let old = signed(
        &reader,
        Kind::RelayList,
        "",
        vec![
            tag(&["r", &home.url]),
            tag(&["r", &old_write.url, "write"]),
            tag(&["r", &old_read.url, "read"]),
            tag(&["client", "somewhere"]),
        ],
        3600,
    );
    home.store(&old).await;
    let key_path = dir.path().join("reader.nsec");
    std::fs::write(&key_path, reader.secret_key().to_bech32().unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let base = vec![
        "--relays".to_string(),
        home.url.clone(),
        "--indexers".into(),
        indexer.url.clone(),
        "--secret-key-file".into(),
        key_path.display().to_string(),
        "--add-relay".into(),
        added.url.clone(),
        "--write".into(),
    ];

    let mut dry = base.clone();
    dry.push("--dry-run".into());
    let out = lists(dry).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("{}  write", added.url)),
        "the new entry is shown: {stdout}"
    );
    assert_eq!(stdout.matches("not sent (dry run)").count(), 5, "{stdout}");
    assert_says(
        &stdout,
        &format!("{}  not sent (dry run)  (in the old list)", old_read.url),
    );

    let mut args = base;
    args.push("--json".into());
    let out = lists(args).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let event: Event = serde_json::from_value(doc["event"].clone()).unwrap();
    event.verify().unwrap();
    assert_eq!(event.pubkey, reader.public_key());
    assert!(event.created_at > old.created_at);
    let tags: Vec<Vec<String>> = event.tags.iter().map(|t| t.as_slice().to_vec()).collect();
    let mut want: Vec<Vec<String>> = old.tags.iter().map(|t| t.as_slice().to_vec()).collect();
    want.push(vec!["r".into(), added.url.clone(), "write".into()]);
    assert_eq!(tags, want, "the old list's tags kept, the relay added");
    for (relay, why) in [
        (&home, "a write relay of both lists"),
        (&old_write, "a write relay of the old list"),
        (&added, "the new write relay"),
        (&indexer, "the indexer"),
        (&old_read, "a relay the old list named"),
    ] {
        assert!(relay.has(&event.id.to_hex()).await, "not stored on {why}");
    }
    assert_eq!(doc["accepted"], 5, "{stdout}");

    // Shown as the newest list.
    let out = lists(strings(&[
        "--relays",
        &home.url,
        "--npub",
        &reader.public_key().to_bech32().unwrap(),
    ]))
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_says(&stdout, "relay list (kind:10002): 4 relays");
    assert_says(&stdout, "dm relays (kind:10050): none found");
}

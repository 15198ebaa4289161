//! `outbox dms` against local relays: a gift wrap on a DM relay that requires sign-in (NIP-42)
//! for wraps, named only in the reader's kind:10050 list, read and opened with the reader's
//! key; refused without it, with an error naming the fix; and the fallbacks when the reader
//! has no DM relay list.

use std::path::{Path, PathBuf};
use std::process::Output;

use nostr::event::{Event, EventBuilder, FinalizeEvent, FinalizeUnsignedEvent, Kind, Tag};
use nostr::key::{Keys, SecretKey};
use nostr::nips::nip19::ToBech32;
use nostr::nips::nip59::GiftWrapBuilder;

use nostr_outbox_fleet::{
    assert_says, cli, dead_url, dm_list, now, relay_list, sealed_as, signed, strings, texts,
    RealRelay,
};

fn fixed(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).unwrap())
}

/// A NIP-17 chat message from `from` to `to`, gift wrapped for `to`.
fn wrap(from: &Keys, to: &Keys, text: &str) -> Event {
    let rumor = EventBuilder::new(Kind::PrivateDirectMessage, text)
        .tag(Tag::public_key(to.public_key()))
        .finalize_unsigned(from.public_key());
    GiftWrapBuilder::new(to.public_key(), rumor)
        .finalize(from)
        .unwrap()
}

/// A relay that serves gift wraps only to the reader they tag, signed in (NIP-42), as DM
/// relays do.
async fn dm_relay() -> RealRelay {
    RealRelay::start_with(|builder| builder.auth_dm(true)).await
}

/// A [`dm_relay`] that `reader`'s DM relay list, stored on `listed_on`, names alone.
async fn dm_relay_listed_on(listed_on: &RealRelay, reader: &Keys) -> RealRelay {
    let dm = dm_relay().await;
    listed_on.store(&dm_list(reader, &[&dm.url])).await;
    dm
}

/// The reader's home relay, holding its DM relay list, and the [`dm_relay`] the list names.
async fn home_and_dm_relay(reader: &Keys) -> (RealRelay, RealRelay) {
    let home = RealRelay::start().await;
    let dm = dm_relay_listed_on(&home, reader).await;
    (home, dm)
}

/// Writes a key file readable by its owner alone.
fn key_file(dir: &Path, keys: &Keys) -> PathBuf {
    let path = dir.join("reader.nsec");
    std::fs::write(&path, keys.secret_key().to_bech32().unwrap()).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path
}

/// Runs `outbox dms` with short timeouts and no store.
async fn dms(args: Vec<String>) -> Output {
    let fixed = ["dms", "--allow-local", "--no-stats"];
    let waits = ["--connect-timeout", "2s", "--eose-timeout", "3s"];
    cli::run(
        env!("CARGO_BIN_EXE_outbox"),
        &[&fixed[..], &waits].concat(),
        args,
    )
    .await
}

/// [`dms`] asking `relays`, signed in with the key file `key` if one is given, with `extra`
/// arguments.
async fn dms_on(relays: &str, key: Option<&str>, extra: &[&str]) -> Output {
    dms(on(relays, key, extra)).await
}

/// `--relays relays`, `--secret-key-file key` if one is given, and `extra`.
fn on(relays: &str, key: Option<&str>, extra: &[&str]) -> Vec<String> {
    let mut args = strings(&["--relays", relays]);
    if let Some(key) = key {
        args.extend(strings(&["--secret-key-file", key]));
    }
    args.extend(strings(extra));
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrap_on_a_signed_in_dm_relay_named_only_in_the_dm_list_is_read_and_opened() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, alice) = (fixed(0x21), fixed(0xa1));
    let (home, dm) = home_and_dm_relay(&reader).await;
    dm.store(&wrap(&alice, &reader, "meet at \u{1b}[31mnoon\nok?"))
        .await;
    // A wrap tagging the reader that opens to nothing: reported, not fatal.
    let junk = EventBuilder::new(Kind::GiftWrap, "not a seal")
        .tag(Tag::public_key(reader.public_key()))
        .finalize(&fixed(0x33))
        .unwrap();
    dm.store(&junk).await;
    let npub = reader.public_key().to_bech32().unwrap();
    let key = key_file(dir.path(), &reader);
    let key = key.display().to_string();

    let out = dms_on(&home.url, Some(&key), &["--npub", &npub, "--decrypt"]).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let alice_npub = alice.public_key().to_bech32().unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let message = lines
        .iter()
        .find(|l| l.contains(&alice_npub))
        .expect(&stdout);
    assert!(
        message.ends_with(&format!("[{}] meet at \\u{{1b}}[31mnoon\\nok?", dm.url)),
        "{message}"
    );
    let broken = lines
        .iter()
        .find(|l| l.contains("not opened"))
        .expect(&stdout);
    assert_says(broken, &junk.id.to_hex());
    assert_says(
        &stderr,
        &format!(
            "dm relays:           {} (kind:10050, from the reader's relays)",
            dm.url
        ),
    );
    assert_says(&stderr, "answered, 2 wraps");
    assert_says(&stderr, "messages:            2, 1 did not open");
    // Only the DM relay was asked for wraps: the reader relay holds none and was not asked.
    assert!(!stdout.contains(&home.url));

    // JSON: one object per line, the text as it was.
    let out = dms_on(&home.url, Some(&key), &["--decrypt", "--json"]).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let docs: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{stdout}");
    let doc = docs
        .iter()
        .find(|d| d["sender"] == alice_npub.as_str())
        .unwrap();
    assert_eq!(doc["content"], "meet at \u{1b}[31mnoon\nok?");
    assert_eq!(doc["kind"], 14);
    assert!(!stdout.contains('\u{1b}'), "raw escape in {stdout:?}");

    // A closed stdout ends the run cleanly.
    let (closed, writer) = std::io::pipe().unwrap();
    drop(closed);
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["dms", "--allow-local", "--no-stats", "--decrypt"])
        .args(["--relays", &home.url, "--secret-key-file", &key])
        .stdout(std::process::Stdio::from(writer));
    let out = cli::output_of(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Signed in but not opened: the wraps as they are.
    let out = dms_on(&home.url, Some(&key), &["--npub", &npub]).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(stdout.lines().all(|l| l.contains(" wrap ")), "{stdout}");
    assert!(!stdout.contains("meet at"), "{stdout}");

    // Without the key the DM relay refuses, and the error says what to give.
    let out = dms_on(&home.url, None, &["--npub", &npub]).await;
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_says(&stderr, "needs sign-in (NIP-42)");
    assert_says(
        &stderr,
        &format!(
            "error: {} refused to serve direct messages without sign-in (NIP-42): give \
             --secret-key-file",
            dm.url
        ),
    );

    // --decrypt without a key, and someone else's key, are refused before anything is asked.
    let asked = home.counter.reqs().len();
    let out = dms_on(&home.url, None, &["--npub", &npub, "--decrypt"]).await;
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert_says(&stderr, "--decrypt needs the reader's secret key");
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let other = key_file(&other, &alice).display().to_string();
    let out = dms_on(&home.url, Some(&other), &["--npub", &npub]).await;
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert_says(&stderr, "not the reader's");
    assert_eq!(home.counter.reqs().len(), asked, "nothing asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_dm_list_the_read_relays_are_asked_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, bob) = (fixed(0x22), fixed(0xb0));
    let home = RealRelay::start().await;
    let inbox = dm_relay().await;
    home.store(&relay_list(
        &reader,
        now() - 60,
        &[(&inbox.url, Some("read")), (&home.url, Some("write"))],
    ))
    .await;
    inbox
        .store(&wrap(&bob, &reader, "no list? found you anyway"))
        .await;
    let key = key_file(dir.path(), &reader).display().to_string();
    let (stdout, stderr) = read_dms(&home.url, &key).await;
    assert!(
        stderr.contains("no DM relay list (kind:10050)")
            && stderr.contains(&format!(
                "asking the read relays of its relay list (kind:10002) instead: {}",
                inbox.url
            )),
        "{stderr}"
    );
    assert_says(&stdout, "no list? found you anyway");
    assert_says(&stdout, &bob.public_key().to_bech32().unwrap());

    // No list at all: --relays are asked, and named.
    let bare = RealRelay::start().await;
    bare.store(&wrap(&bob, &reader, "on the home relay")).await;
    let (stdout, stderr) = read_dms(&bare.url, &key).await;
    assert_says(
        &stderr,
        &format!(
            "no DM relay list (kind:10050) or read relays for {}; asking --relays instead: {}",
            reader.public_key().to_bech32().unwrap(),
            bare.url
        ),
    );
    assert_says(&stdout, "on the home relay");

    // Nobody to ask: an error that says why, not an empty success.
    let dead = dead_url().await;
    let out = dms_on(&dead, Some(&key), &[]).await;
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("could not learn where") && stderr.contains(&dead),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_list_only_an_indexer_has_is_found_there() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, carol) = (fixed(0x23), fixed(0xc0));
    let [home, indexer] = RealRelay::several().await;
    let dm = dm_relay_listed_on(&indexer, &reader).await;
    dm.store(&wrap(&carol, &reader, "via the indexer")).await;
    let key = key_file(dir.path(), &reader).display().to_string();
    let out = dms_on(
        &home.url,
        Some(&key),
        &["--indexers", &indexer.url, "--decrypt"],
    )
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_says(
        &stderr,
        &format!("{} (kind:10050, from the indexers)", dm.url),
    );
    assert_says(&stdout, "via the indexer");
}

/// A "seal" that is not one (a kind:1 note, a seal with tags) does not open; one message
/// delivered in three wraps is shown once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_real_seals_open_and_each_message_is_shown_once() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, alice) = (fixed(0x22), fixed(0xa2));
    let (home, dm) = home_and_dm_relay(&reader).await;
    let rumor = |text: &str| {
        EventBuilder::new(Kind::PrivateDirectMessage, text)
            .tag(Tag::public_key(reader.public_key()))
            .finalize_unsigned(alice.public_key())
    };
    let once = rumor("sent once, wrapped thrice");
    for _ in 0..3 {
        dm.store(&sealed_as(
            &alice,
            reader.public_key(),
            &once,
            Kind::Seal,
            vec![],
        ))
        .await;
    }
    dm.store(&sealed_as(
        &alice,
        reader.public_key(),
        &rumor("a note, not a seal"),
        Kind::TextNote,
        vec![],
    ))
    .await;
    let tags = vec![Tag::public_key(reader.public_key())];
    dm.store(&sealed_as(
        &alice,
        reader.public_key(),
        &rumor("a seal with tags"),
        Kind::Seal,
        tags,
    ))
    .await;
    let key = key_file(dir.path(), &reader).display().to_string();
    let (stdout, _) = read_dms(&home.url, &key).await;
    let shown = |text: &str| stdout.lines().filter(|l| l.contains(text)).count();
    assert_eq!(shown("sent once, wrapped thrice"), 1, "{stdout}");
    assert_eq!(shown("a note, not a seal"), 0, "{stdout}");
    assert_eq!(shown("a seal with tags"), 0, "{stdout}");
    assert_eq!(shown("not opened"), 2, "{stdout}");
}

/// A DM relay that takes events only from a client signed in (NIP-42), and serves gift wraps
/// only to the reader they tag, signed in.
async fn signed_in_dm_relay() -> RealRelay {
    use nostr_relay_builder::prelude as rb;
    RealRelay::start_with(|builder| {
        builder
            .nip42(rb::RelayBuilderNip42 {
                mode: rb::RelayBuilderNip42Mode::Write,
            })
            .auth_dm(true)
    })
    .await
}

/// Reads and opens the DMs of the key in the file `key` from `relay` with `outbox dms
/// --decrypt`, which must succeed; its stdout and stderr.
async fn read_dms(relay: &str, key: &str) -> (String, String) {
    let args = ["--relays", relay, "--secret-key-file", key, "--decrypt"];
    let out = dms(strings(&args)).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// [`send`] asking `relays`, signed by the key file `key`, with `extra` arguments.
async fn send_from(relays: &str, key: Option<&str>, extra: &[&str]) -> Output {
    send(on(relays, key, extra)).await
}

/// Runs `outbox dms send` with short timeouts and no store.
async fn send(args: Vec<String>) -> Output {
    let fixed = ["dms", "send", "--allow-local", "--no-stats"];
    cli::run(
        env!("CARGO_BIN_EXE_outbox"),
        &[&fixed, cli::QUICK].concat(),
        args,
    )
    .await
}

/// `keys`'s kind:10002 (`home` and `decoy`, both read and write) and kind:10050 (`dm`) on `home`.
async fn lists_on(home: &RealRelay, keys: &Keys, decoy: &RealRelay, dm: &RealRelay) {
    let r = |url: &str| Tag::parse(["r", url]).unwrap();
    home.store(&signed(
        keys,
        Kind::RelayList,
        "",
        vec![r(&home.url), r(&decoy.url)],
        60,
    ))
    .await;
    home.store(&dm_list(keys, &[&dm.url])).await;
}

/// A message A sends B with `outbox dms send` reaches B's DM relay (signed in), and B reads and
/// opens it with `outbox dms --decrypt`; A's own copy is on A's DM relay. No relay but the two
/// DM relays gets a wrap: not the relay both name in their kind:10002 lists, nor the relay the
/// lists are looked up on. A recipient without a DM relay list gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_message_reaches_only_the_dm_relays_and_the_recipient_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (fixed(0x41), fixed(0x42), fixed(0x43));
    let [home, decoy] = RealRelay::several().await;
    let (dm_a, dm_b) = (signed_in_dm_relay().await, signed_in_dm_relay().await);
    lists_on(&home, &a, &decoy, &dm_a).await;
    lists_on(&home, &b, &decoy, &dm_b).await;
    // C has a relay list and no DM relay list.
    home.store(&relay_list(&c, now() - 60, &[(&decoy.url, None)]))
        .await;
    let key_of = |name: &str, keys: &Keys| {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        key_file(&sub, keys).display().to_string()
    };
    let (key_a, key_b) = (key_of("a", &a), key_of("b", &b));
    let npub = |k: &Keys| k.public_key().to_bech32().unwrap();

    let out = send_from(
        &home.url,
        Some(&key_a),
        &[
            "--to",
            &npub(&b),
            "--to",
            &npub(&c),
            "--message",
            "lunch at one?",
            "--json",
        ],
    )
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("lunch"),
        "the text is never printed: {stdout}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let sent = doc["recipients"].as_array().unwrap();
    assert_eq!(sent.len(), 3, "{stdout}");
    let to = |k: &Keys| {
        sent.iter()
            .find(|s| s["to"] == npub(k).as_str())
            .unwrap_or_else(|| panic!("{stdout}"))
    };
    let wraps: Vec<String> = sent
        .iter()
        .map(|s| s["wrap"].as_str().unwrap().to_string())
        .collect();
    for wrap in &wraps {
        assert!(
            !decoy.has(wrap).await,
            "a wrap reached a relay no DM list names"
        );
        assert!(!home.has(wrap).await, "a wrap reached the lookup relay");
    }
    assert!(dm_b.has(&wraps[0]).await && dm_a.has(&wraps[2]).await);
    assert!(!dm_a.has(&wraps[0]).await && !dm_b.has(&wraps[2]).await);
    let (to_b, to_c, own) = (to(&b), to(&c), to(&a));
    assert_eq!(to_b["accepted"], 1, "{stdout}");
    assert_eq!(to_b["relays"][0]["url"], dm_b.url.as_str());
    assert_eq!(to_b["relays"][0]["outcome"], "accepted");
    assert_eq!(to_c["dm_list"], false, "{stdout}");
    assert_eq!(to_c["accepted"], 0);
    assert_eq!(own["own_copy"], true);
    assert_eq!(own["relays"][0]["url"], dm_a.url.as_str());
    assert_eq!(own["accepted"], 1, "{stdout}");

    // B reads it where it takes messages, signed in, and opens it.
    let (stdout, _) = read_dms(&home.url, &key_b).await;
    let line = stdout
        .lines()
        .find(|l| l.contains("lunch at one?"))
        .expect(&stdout);
    assert_says(line, &npub(&a));
    // A's copy opens for A.
    let out = dms_on(&home.url, Some(&key_a), &["--decrypt"]).await;
    let (stdout, _) = texts(&out);
    assert_says(&stdout, "lunch at one?");

    // Text: per recipient, which relays took it; nobody reachable is exit status 1.
    let out = send_from(
        &home.url,
        Some(&key_a),
        &["--to", &npub(&c), "--message", "anyone?"],
    )
    .await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_says(
        &stdout,
        &format!(
            "to {}: not sent: no DM relay list (kind:10050) found",
            npub(&c)
        ),
    );
    assert_says(
        &stdout,
        &format!("copy {} (yours): 1 of 1 DM relays accepted", npub(&a)),
    );
    assert_says(&stderr, "no recipient's DM relay took the message");
}

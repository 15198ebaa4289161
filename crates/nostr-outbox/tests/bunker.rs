//! `--bunker`: the reader's key only in a NIP-46 remote signer (rust-nostr's `nostr-connect`,
//! serving on a local relay), the `outbox` process knowing only its `bunker://` URL. A feed
//! from a relay that requires sign-in for reads, a publish to one that requires it for writes,
//! and a DM read from a DM relay that serves wraps only to their reader signed in all work;
//! a signer that never answers is a clear error naming it, within its timeout.

use std::process::Output;
use std::time::Duration;

use nostr::event::{EventBuilder, FinalizeEvent, FinalizeUnsignedEvent, Kind, Tag};
use nostr::key::{Keys, SecretKey};
use nostr::nips::nip19::ToBech32;
use nostr::nips::nip59::GiftWrapBuilder;
use nostr_relay_builder::prelude as rb;

use nostr_outbox_fleet::{
    assert_says, cli, dm_list, follows_file, silent_bunker, strings, texts, RealRelay, RemoteSigner,
};
use nostr_outbox_runtime::signer::nip46::Bunker;

fn fixed(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).unwrap())
}

/// Runs `outbox` with `args`.
async fn outbox(args: Vec<String>) -> Output {
    cli::run(env!("CARGO_BIN_EXE_outbox"), &[], args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_a_publish_and_a_dm_read_sign_with_the_remote_signer_alone() {
    let dir = tempfile::tempdir().unwrap();
    let reader = fixed(0x61);
    let signer_relay = RealRelay::start().await;
    let remote = RemoteSigner::start(reader.clone(), &signer_relay).await;
    assert!(!remote.url.contains(&reader.secret_key().to_secret_hex()));

    // Feed: a relay that serves notes only to readers signed in.
    let private = RealRelay::start_with(|b| {
        b.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Read,
        })
    })
    .await;
    let author = fixed(0x62);
    private.store_notes(&author, 3, "private ").await;
    let follows = follows_file(dir.path(), &[author.public_key()]);
    let follows = follows.display().to_string();
    let asked = [
        "--relays",
        &private.url,
        "--follows",
        &follows,
        "--connect-timeout",
        "2s",
        "--eose-timeout",
        "5s",
        "--bunker",
        &remote.url,
    ];
    let out = outbox(strings(&[cli::FEED_ONCE, &asked].concat())).await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 3, "{stdout}\n{stderr}");
    assert_says(&stderr, "1 relays required it, 1 signed in");

    // Publish: a relay that takes events only from clients signed in. The note itself is
    // signed by the remote signer too, through the library with the URL alone.
    let members = RealRelay::start_with(|b| {
        b.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Write,
        })
    })
    .await;
    let bunker = Bunker::connect(&remote.url, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(bunker.public_key(), reader.public_key());
    let note = bunker
        .sign_builder(EventBuilder::new(Kind::TextNote, "signed afar"))
        .await
        .unwrap();
    let file = dir.path().join("note.json");
    std::fs::write(&file, serde_json::to_string(&note).unwrap()).unwrap();
    let out = outbox(strings(&[
        "publish",
        "--allow-local",
        "--event",
        &file.display().to_string(),
        "--to",
        &members.url,
        "--bunker",
        &remote.url,
    ]))
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_says(&stdout, "accepted");
    assert!(members.has(&note.id.to_hex()).await);

    // DM read: a wrap on a DM relay that serves wraps only to the reader signed in, named in
    // the reader's kind:10050 list; opened by the remote signer's decryptions.
    let home = RealRelay::start().await;
    let dm = RealRelay::start_with(|b| b.auth_dm(true)).await;
    home.store(&dm_list(&reader, &[&dm.url])).await;
    let alice = fixed(0x63);
    let rumor = EventBuilder::new(Kind::PrivateDirectMessage, "from afar")
        .tag(Tag::public_key(reader.public_key()))
        .finalize_unsigned(alice.public_key());
    let wrap = GiftWrapBuilder::new(reader.public_key(), rumor)
        .finalize(&alice)
        .unwrap();
    dm.store(&wrap).await;
    let out = outbox(strings(&[
        "dms",
        "--allow-local",
        "--no-stats",
        "--connect-timeout",
        "2s",
        "--eose-timeout",
        "5s",
        "--relays",
        &home.url,
        "--bunker",
        &remote.url,
        "--decrypt",
    ]))
    .await;
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let alice_npub = alice.public_key().to_bech32().unwrap();
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(&alice_npub) && l.ends_with("from afar")),
        "{stdout}\n{stderr}"
    );
}

/// `outbox dms` of `relay` signed by the remote signer at `bunker`, with `extra` arguments.
async fn dms_through(relay: &RealRelay, bunker: &str, extra: &[&str]) -> Output {
    let fixed = ["dms", "--allow-local", "--no-stats", "--relays", &relay.url];
    outbox(strings(
        &[&fixed[..], &["--bunker", bunker], extra].concat(),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signer_that_never_answers_is_a_clear_error_naming_it() {
    let relay = RealRelay::start().await;
    let url = silent_bunker(&relay);
    let out = dms_through(&relay, &url, &["--signer-timeout", "2", "--decrypt"]).await;
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("connecting to the remote signer (--bunker)")
            && stderr.contains("did not answer in time")
            && stderr.contains(&format!("via {}", relay.url)),
        "{stderr}"
    );
    // The URL's secret part would show in the name only as the relay; the signer is named.
    assert_says(&stderr, "bunker ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_client_key_is_made_once_owner_only_and_used_again() {
    let dir = tempfile::tempdir().unwrap();
    let relay = RealRelay::start().await;
    let url = silent_bunker(&relay);
    let key_file = dir.path().join("bunker-client.nsec");
    let key_arg = key_file.display().to_string();
    let extra = [
        "--bunker-client-key-file",
        &key_arg,
        "--signer-timeout",
        "1",
    ];
    let run = || dms_through(&relay, &url, &extra);
    let out = run().await;
    assert_eq!(out.status.code(), Some(1), "{}", texts(&out).1);
    let first = std::fs::read_to_string(&key_file).unwrap();
    assert!(first.starts_with("nsec1"), "{first}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let out = run().await;
    let (_, stderr) = texts(&out);
    assert!(!stderr.contains(&first), "the client key is never shown");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), first);
    // Both runs listened for answers to the kept key.
    let kept = Keys::parse(&first).unwrap().public_key().to_hex();
    let listened = relay
        .counter
        .reqs()
        .iter()
        .filter(|r| r.kinds == [24133] && r.tagged == [kept.clone()])
        .count();
    assert_eq!(listened, 2, "{:?}", relay.counter.reqs());
}

//! `outbox feed --once` against a reader relay that requires NIP-42 sign-in for reads
//! (nostr-relay-builder's local relay on 127.0.0.1): with `--secret-key-file` (or
//! `OUTBOX_SECRET_KEY`) the notes arrive, without a key they do not, and a bad key file is a
//! clear error that never repeats what the file holds.

use std::path::{Path, PathBuf};
use std::process::Output;

use nostr::key::{Keys, SecretKey};
use nostr::nips::nip19::ToBech32;
use nostr_relay_builder::prelude as rb;

use nostr_outbox_fleet::{assert_says, cli, dead_url, follows_file, RealRelay};

const NOTES: u64 = 5;

/// A relay that requires sign-in for reads, holding `NOTES` notes of one follow; its URL and
/// a follows file.
async fn private_relay(dir: &Path) -> (RealRelay, String, PathBuf) {
    let relay = RealRelay::start_with(|builder| {
        builder.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Read,
        })
    })
    .await;
    let author = Keys::new(SecretKey::from_slice(&[0x31; 32]).unwrap());
    relay.store_notes(&author, NOTES, "private note ").await;
    let follows = follows_file(dir, &[author.public_key()]);
    let url = relay.url.clone();
    (relay, url, follows)
}

/// Writes a key file readable by its owner alone.
fn key_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    path
}

/// [`feed`] signed with the key file `key`, nothing from the environment.
async fn feed_signed(relay: &str, follows: &Path, key: &Path) -> Output {
    let key = key.display().to_string();
    feed(relay, follows, vec!["--secret-key-file".into(), key], None).await
}

/// Runs `outbox feed --once` on `relay` with extra arguments and environment.
async fn feed(relay: &str, follows: &Path, extra: Vec<String>, env: Option<String>) -> Output {
    let mut args = vec!["--no-stats".to_string()];
    args.extend(extra);
    feed_with(relay, follows, args, env).await
}

/// Runs `outbox feed --once` on `relay` with `extra` arguments (a store among them or
/// `--no-stats`) and environment.
async fn feed_with(relay: &str, follows: &Path, extra: Vec<String>, env: Option<String>) -> Output {
    let mut cmd = cli::feed_once_command(env!("CARGO_BIN_EXE_outbox"), relay, follows);
    cmd.args(extra);
    if let Some(value) = env {
        cmd.env("OUTBOX_SECRET_KEY", value);
    }
    cli::output_of(cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_key_signs_in_to_a_relay_that_requires_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_relay, url, follows) = private_relay(dir.path()).await;
    let reader = Keys::new(SecretKey::from_slice(&[0x52; 32]).unwrap());
    let nsec = reader.secret_key().to_bech32().unwrap();
    let file = key_file(dir.path(), "reader.nsec", &format!("{nsec}\n"));

    let arg = vec!["--secret-key-file".to_string(), file.display().to_string()];
    let out = feed(&url, &follows, arg, None).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stderr:\n{stderr}");
    assert_eq!(stdout.lines().count() as u64, NOTES, "{stdout}\n{stderr}");
    assert_says(
        &stderr,
        "sign-in (NIP-42):    1 relays required it, 1 signed in",
    );
    assert_says(&stderr, &format!("  {url}: signed in"));
    assert!(!stderr.contains(&nsec) && !stdout.contains(&nsec));

    // The same key from the environment, as hex.
    let hex = reader.secret_key().to_secret_hex();
    let out = feed(&url, &follows, Vec::new(), Some(hex.clone())).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr:\n{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count() as u64,
        NOTES
    );
    assert!(!stderr.contains(&hex));

    // Without a key the relay refuses and is set aside: no notes, and nobody else to ask.
    let out = feed(&url, &follows, Vec::new(), None).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout.lines().count(), 0, "{stdout}");
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 relays required it, 0 signed in")
            && stderr.contains("needs sign-in: no key (--secret-key-file or OUTBOX_SECRET_KEY)"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_key_files_are_clear_errors_that_never_echo_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_relay, url, follows) = private_relay(dir.path()).await;
    let secretish = "nsec1thisisnotakeybutlooksprivate";
    let bad = key_file(dir.path(), "bad.key", secretish);
    let out = feed_signed(&url, &follows, &bad).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(
        &stderr,
        "not a secret key: expected an nsec or 64 hex characters",
    );
    assert_says(&stderr, "bad.key");
    assert!(!stderr.contains(secretish), "{stderr}");
    assert!(out.stdout.is_empty());

    // A good key others can read is refused before it is used.
    let good = Keys::generate().secret_key().to_secret_hex();
    let open = key_file(dir.path(), "open.key", &good);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = feed_signed(&url, &follows, &open).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert_says(&stderr, "chmod 600");
        assert!(!stderr.contains(&good), "{stderr}");
    }

    // The file and the variable conflict; the variable's value is never shown.
    let file = key_file(dir.path(), "ok.key", &good);
    let out = feed(
        &url,
        &follows,
        vec!["--secret-key-file".into(), file.display().to_string()],
        Some(good.clone()),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "both given");
    assert!(!stderr.contains(&good), "{stderr}");

    // A bad variable: the same clear error, without its value.
    let out = feed(&url, &follows, Vec::new(), Some(secretish.to_string())).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "OUTBOX_SECRET_KEY");
    assert!(!stderr.contains(secretish), "{stderr}");

    // Help never shows the variable's value.
    let mut help = cli::command(env!("CARGO_BIN_EXE_outbox"));
    help.args(["feed", "--help"])
        .env("OUTBOX_SECRET_KEY", &good);
    let help = cli::output_of(help).await;
    let text = String::from_utf8_lossy(&help.stdout);
    assert_says(&text, "--secret-key-file");
    assert!(!text.contains(&good), "{text}");
}

/// A relay that refused a run without a key is remembered as needing sign-in, not as failing:
/// the next run without a key skips it and says so, and a run with a key reads it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_needed_sign_in_is_read_at_once_when_a_key_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let (_relay, url, follows) = private_relay(dir.path()).await;
    let stats = dir.path().join("stats.json");
    let store = vec!["--stats".to_string(), stats.display().to_string()];

    let out = feed_with(&url, &follows, store.clone(), None).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.stdout.len(), 0, "{stderr}");
    assert_says(&stderr, "needs sign-in: no key");
    let kept = std::fs::read_to_string(dir.path().join("stats.json.penalties.json")).unwrap();
    assert_says(&kept, "\"needs_sign_in\": true");

    // Again without a key: skipped, and the summary says why.
    let out = feed_with(&url, &follows, store.clone(), None).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.stdout.len(), 0, "{stderr}");
    assert_says(&stderr, "needs sign-in (NIP-42) and no key was given");

    let reader = Keys::new(SecretKey::from_slice(&[0x52; 32]).unwrap());
    let file = key_file(
        dir.path(),
        "reader.key",
        &reader.secret_key().to_secret_hex(),
    );
    let mut with_key = store;
    with_key.extend(["--secret-key-file".to_string(), file.display().to_string()]);
    let out = feed_with(&url, &follows, with_key, None).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "stderr:\n{stderr}");
    assert_eq!(stdout.lines().count() as u64, NOTES, "{stdout}\n{stderr}");
}

/// A key file holding the reader's public key (hex) is refused before anything is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_holding_the_readers_public_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let reader = Keys::new(SecretKey::from_slice(&[0x52; 32]).unwrap());
    let file = key_file(dir.path(), "reader.key", &reader.public_key().to_hex());
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(["feed", "--once", "--allow-local", "--no-stats"])
        .args(["--relays", "ws://127.0.0.1:9"])
        .args(["--npub", &reader.public_key().to_bech32().unwrap()])
        .arg("--secret-key-file")
        .arg(&file)
        .args(["--connect-timeout", "1s"]);
    let out = cli::output_of(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_says(&stderr, "the reader's public key, not a secret key");
    assert!(
        !stderr.contains("no follow list"),
        "refused before fetching: {stderr}"
    );
}

/// With `--follows` (no reader given), a key file holding a follow's public key (hex) is
/// refused before anything is fetched, naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_holding_a_follows_public_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let follow = Keys::new(SecretKey::from_slice(&[0x53; 32]).unwrap());
    let follows = dir.path().join("follows.txt");
    std::fs::write(&follows, follow.public_key().to_hex()).unwrap();
    let file = key_file(dir.path(), "mine.key", &follow.public_key().to_hex());
    let args = vec!["--secret-key-file".to_string(), file.display().to_string()];
    let out = feed("ws://127.0.0.1:9", &follows, args, None).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("a follow's public key, not a secret key") && stderr.contains("mine.key"),
        "{stderr}"
    );
    assert!(!stderr.contains(&follow.public_key().to_hex()), "{stderr}");
}

/// `--npub` whose follow list could not be looked up: the error says why each relay gave
/// nothing (a refusal and what would help, a relay that could not be reached), not that the
/// reader has no follow list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_follow_list_lookup_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_relay, url, _follows) = private_relay(dir.path()).await;
    let dead = dead_url().await;
    let reader = Keys::new(SecretKey::from_slice(&[0x53; 32]).unwrap());
    let npub = reader.public_key().to_bech32().unwrap();
    let relays = format!("{url},{dead}");
    let waits = ["--connect-timeout", "2s", "--eose-timeout", "2s"];
    let args = [
        cli::FEED_ONCE,
        &["--relays", &relays, "--npub", &npub],
        &waits,
    ]
    .concat();
    let out = cli::run(env!("CARGO_BIN_EXE_outbox"), &args, Vec::new()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(!stderr.contains("no follow list"), "{stderr}");
    assert_says(&stderr, "could not learn the follows");
    assert_says(&stderr, &format!("{url}: relay refused: auth-required"));
    assert_says(&stderr, "give --secret-key-file");
    assert_says(&stderr, &format!("could not connect to {dead}"));
}

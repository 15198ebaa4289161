//! Running the command-line binary from its tests: one way to start it, bounded, with nothing
//! from the environment that changes who it signs as or what it logs.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long [`run`] lets one run of the binary last before it kills it: far beyond every
/// bound the tests give it and a loaded machine.
pub const RUN_WITHIN: Duration = Duration::from_secs(120);

/// Short network bounds for a run against local relays: connect, EOSE and the whole ask.
pub const QUICK: &[&str] = &[
    "--connect-timeout",
    "2s",
    "--eose-timeout",
    "3s",
    "--timeout",
    "8",
];

/// Runs the binary at `bin` (a test's `env!("CARGO_BIN_EXE_…")`) with `fixed` then `args`
/// on a blocking thread, without `OUTBOX_SECRET_KEY`, `OUTBOX_BUNKER` or `RUST_LOG`; a run still going after
/// [`RUN_WITHIN`] is killed, and its status says so.
pub async fn run(bin: &'static str, fixed: &[&str], args: Vec<String>) -> Output {
    let args: Vec<String> = strings(fixed).into_iter().chain(args).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(bin)
            .args(args)
            .env_remove("OUTBOX_SECRET_KEY")
            .env_remove("OUTBOX_BUNKER")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary starts");
        let started = Instant::now();
        while child.try_wait().expect("a status").is_none() {
            if started.elapsed() > RUN_WITHIN {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().expect("its output")
    })
    .await
    .expect("the run's thread ends")
}

/// Runs `outbox feed --once` from `bin` reading `relay` for the follows in the file `follows`,
/// with a fixed seed, short waits and `extra` arguments.
pub async fn feed_once(
    bin: &'static str,
    relay: &str,
    follows: &std::path::Path,
    extra: Vec<String>,
) -> Output {
    let follows = follows.display().to_string();
    let fixed = [
        "feed",
        "--once",
        "--allow-local",
        "--seed",
        "1",
        "--relays",
        relay,
    ];
    let waits = ["--connect-timeout", "2s", "--eose-timeout", "2s"];
    let args = [&fixed[..], &["--follows", &follows], &waits].concat();
    run(bin, &args, extra).await
}

/// A run's stdout and stderr as text.
pub fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Owned arguments for [`run`].
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

//! Running the command-line binary from its tests: one way to start it, bounded, with nothing
//! from the environment that changes who it signs as or what it logs.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
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

/// A one-shot feed that may ask local relays, keeps no stats and plans with seed 1: how the
/// feed runs of the tests begin.
pub const FEED_ONCE: &[&str] = &[
    "feed",
    "--once",
    "--allow-local",
    "--no-stats",
    "--seed",
    "1",
];

/// The binary at `bin` (a test's `env!("CARGO_BIN_EXE_…")`) without `OUTBOX_SECRET_KEY`,
/// `OUTBOX_BUNKER` or `RUST_LOG`, stdin empty and stdout and stderr captured: what every run
/// starts from, so a developer's shell never changes a test. A test may set any of them again.
pub fn command(bin: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_remove("OUTBOX_SECRET_KEY")
        .env_remove("OUTBOX_BUNKER")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end on this thread: [`wait`] on it.
pub fn output(mut cmd: Command) -> Output {
    wait(cmd.spawn().expect("the binary starts"))
}

/// Waits for `child` to end, reading the output it still pipes as it comes; a run still going
/// after [`RUN_WITHIN`] is killed, and its status says so.
pub fn wait(mut child: Child) -> Output {
    let stdout = child.stdout.take().map(read_to_end);
    let stderr = child.stderr.take().map(read_to_end);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("a status") {
            break status;
        }
        if started.elapsed() > RUN_WITHIN {
            let _ = child.kill();
            break child.wait().expect("a status");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let joined = |h: Option<JoinHandle<Vec<u8>>>| {
        h.map(|h| h.join().expect("the reader ends"))
            .unwrap_or_default()
    };
    Output {
        status,
        stdout: joined(stdout),
        stderr: joined(stderr),
    }
}

/// Sends `signal` (`-INT`, `-TERM`, `-KILL`) to the process `pid`, as a user's `kill` would.
pub fn signal(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success(), "kill {signal} {pid}");
}

/// Reads all `from` gives on a thread of its own, so waiting for a child is never held up by
/// a full pipe.
pub fn read_to_end(mut from: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        bytes
    })
}

/// [`output`] on a blocking thread, for async tests.
pub async fn output_of(cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || output(cmd))
        .await
        .expect("the run's thread ends")
}

/// Runs the binary at `bin` with `args`, from [`command`], bounded: for plain tests.
pub fn run_blocking(bin: &str, args: &[&str]) -> Output {
    let mut cmd = command(bin);
    cmd.args(args);
    output(cmd)
}

/// Runs the binary at `bin` with `fixed` then `args`, from [`command`], on a blocking thread,
/// bounded.
pub async fn run(bin: &str, fixed: &[&str], args: Vec<String>) -> Output {
    let mut cmd = command(bin);
    cmd.args(fixed).args(args);
    output_of(cmd).await
}

/// `outbox feed --once` from `bin` reading `relay` for the follows in the file `follows`, with
/// a fixed seed and short waits, from [`command`]: a test adds its own arguments.
pub fn feed_once_command(bin: &str, relay: &str, follows: &std::path::Path) -> Command {
    let mut cmd = command(bin);
    cmd.args(["feed", "--once", "--allow-local", "--seed", "1"])
        .args(["--relays", relay])
        .arg("--follows")
        .arg(follows)
        .args(["--connect-timeout", "2s", "--eose-timeout", "2s"]);
    cmd
}

/// Runs [`feed_once_command`] with `extra` arguments, bounded.
pub async fn feed_once(
    bin: &str,
    relay: &str,
    follows: &std::path::Path,
    extra: Vec<String>,
) -> Output {
    let mut cmd = feed_once_command(bin, relay, follows);
    cmd.args(extra);
    output_of(cmd).await
}

/// A run's stdout and stderr as text.
pub fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts that `text` (what a run printed) says `expected`, showing all of `text` if not.
#[track_caller]
pub fn assert_says(text: &str, expected: &str) {
    assert!(text.contains(expected), "{text}");
}

/// Owned arguments for [`run`].
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

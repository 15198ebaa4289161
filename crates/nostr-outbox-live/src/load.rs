//! The load benchmark: one `outbox feed --once` process against `N` local relays and `F`
//! follows, measured from outside so that its memory and CPU are its own.
//!
//! A world comes from the simulator's generator with every relay alive, free and up (a load
//! point of `N` relays is `N` listening relays; a refused connection costs nothing) and no
//! one-off tail relays, so the relay count is exact. Everything else (list lengths, hub
//! popularity, posting rates, retention, lost writes, per-REQ caps) is the generator's default.
//! Only notes inside the fetched window are signed and loaded: older ones are never asked for.
//! The relay lists are kept in the feed's lists file (a warm start, as every run after the
//! first) and stored on the reader's relays, where the feed looks them up again as it always
//! does.
//!
//! The child is sampled every few milliseconds through `/proc/<pid>` (Linux): `VmHWM` is the
//! peak resident set, `utime + stime` its CPU time, read once more when it has exited but is
//! not yet reaped, so the CPU time is complete. The peak misses only growth in the last
//! sampling interval before exit (the address space is gone by then). Events received and the
//! time to full EOSE come from the summary the child writes as JSON (`--summary-json`).

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nostr_outbox_core::{RawRelayList, UrlPolicy};
use nostr_outbox_sim::{generate_with, Span, World, WorldModel};
use nostr_relay_builder::prelude as rb;
use serde::Deserialize;

use crate::fleet::{free_port_range, FleetError, FleetRelay};
use crate::rekey::{note_content, rekey, Rekeyed};
use crate::{count_urls, unix_now, UNCAPPED};

/// Most hubs of a load world (the generator's default); the other relays are mid relays.
const MAX_HUBS: usize = 16;

/// Most relays of one load point: every relay needs a port below the ephemeral range and a
/// few descriptors on each side.
pub const MAX_RELAYS: usize = 5_000;

/// Most follows of one load point (about what a reader follows at most).
pub const MAX_FOLLOWS: usize = 100_000;

/// Stderr lines of the child kept (to say why a run failed).
const STDERR_LINES: usize = 200;

/// Longest stderr line kept, in characters.
const STDERR_LINE_CHARS: usize = 1_000;

/// Most bytes of the child's JSON summary read (it names every relay asked: a few hundred
/// bytes each).
const SUMMARY_READ_LIMIT: u64 = 64 * 1024 * 1024;

/// Most bytes read from one `/proc` file.
const PROC_READ_LIMIT: u64 = 64 * 1024;

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on Linux's common
/// architectures).
const USER_HZ: u64 = 100;

/// One size to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPoint {
    /// Local relays (all listening).
    pub relays: usize,
    /// Follows.
    pub follows: usize,
}

/// How the load benchmark runs.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The `outbox` executable to run as `outbox feed --once`.
    pub program: PathBuf,
    /// World seed and the feed's planning seed.
    pub seed: u64,
    /// The window fetched (`--since`).
    pub since: Duration,
    /// Longest run of the child; it is killed after this and reported as timed out.
    pub timeout: Duration,
    /// Routed connections (`max_connections`); `None`: as many as there are relays.
    pub budget: Option<usize>,
    /// The strategy's registered name (`[strategy] type`).
    pub strategy: String,
    /// The feed's connect timeout.
    pub connect_timeout: Duration,
    /// The feed's REQ-to-EOSE timeout.
    pub eose_timeout: Duration,
    /// How often the child's `/proc` entries are read.
    pub sample_every: Duration,
    /// Where to look for a free port range first.
    pub port_hint: u16,
    /// Threads for signing.
    pub threads: usize,
}

impl LoadConfig {
    /// Defaults for `program`: 30 days of notes with `recall`, five minutes at most. The
    /// timeouts are the feed's own defaults, not the tests' short ones: a loaded machine
    /// answers slower, and a relay set aside for slowness would be measured as a failure.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            seed: 1,
            since: Duration::from_secs(30 * 86_400),
            timeout: Duration::from_secs(300),
            budget: None,
            strategy: "recall".to_string(),
            connect_timeout: Duration::from_secs(10),
            eose_timeout: Duration::from_secs(15),
            sample_every: Duration::from_millis(10),
            port_hint: 21_000,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// What the child's `outbox feed --once` summary says: the fields of its
/// `nostr_outbox_runtime::FeedSummary` that the benchmark reports, read from `--summary-json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FeedReport {
    /// Distinct notes delivered.
    pub events: u64,
    /// Feed events received, duplicates included.
    pub events_received: u64,
    /// REQ pages sent.
    pub round_trips: u64,
    /// Relays sent a feed REQ.
    pub relays_asked: u64,
    /// Relays whose last feed REQ reached EOSE.
    pub relays_answered: u64,
    /// Relays asked that did not answer.
    pub relays_failed: u64,
    /// Follows covered by an answering relay.
    pub authors_covered: u64,
    /// Start to first note.
    pub time_to_first_event: Option<Duration>,
    /// Start to the first moment every relay had answered or been set aside.
    pub time_to_full_eose: Option<Duration>,
    /// The feed stopped at its deadline, before every relay answered or was set aside.
    #[serde(default)]
    pub deadline_reached: bool,
}

/// The child process, measured from outside.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Start to exit.
    pub wall: Duration,
    /// User CPU time (`None` without `/proc`).
    pub cpu_user: Option<Duration>,
    /// System CPU time.
    pub cpu_system: Option<Duration>,
    /// Peak resident set (`VmHWM`), KiB.
    pub peak_rss_kib: Option<u64>,
    /// `/proc` samples taken.
    pub samples: u64,
    /// Exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Killed after [`LoadConfig::timeout`].
    pub timed_out: bool,
    /// Lines on stdout (one per note delivered).
    pub stdout_lines: u64,
    /// The summary, if the child printed one.
    pub report: Option<FeedReport>,
    /// The last lines of stderr (bounded), to say why a run failed.
    pub stderr_tail: Vec<String>,
}

impl Measured {
    /// User plus system CPU time.
    pub fn cpu(&self) -> Option<Duration> {
        Some(self.cpu_user? + self.cpu_system?)
    }

    /// Events received per second of the child's wall time.
    pub fn events_per_sec(&self) -> Option<f64> {
        let secs = self.wall.as_secs_f64();
        let report = self.report.as_ref()?;
        (secs > 0.0).then(|| report.events_received as f64 / secs)
    }
}

/// One load point, measured.
#[derive(Clone, Debug)]
pub struct LoadResult {
    /// The point.
    pub point: LoadPoint,
    /// Relays listening.
    pub relays: usize,
    /// Relay lists in the world (kept in the lists file and stored on the reader's relays).
    pub lists: usize,
    /// Notes in the window.
    pub notes: usize,
    /// Notes stored, summed over relays.
    pub copies: usize,
    /// The routed-connection budget the feed ran with.
    pub budget: usize,
    /// Generating, signing and loading.
    pub prepare: Duration,
    /// CPU time of this process while the child ran: the relays serving it, on the same cores.
    pub relays_cpu: Option<Duration>,
    /// The child.
    pub measured: Measured,
}

/// What the benchmark reports as it goes.
#[derive(Debug)]
pub enum LoadProgress {
    /// The world is loaded into the relays.
    Prepared {
        /// The point.
        point: LoadPoint,
        /// Relays listening.
        relays: usize,
        /// Notes in the window.
        notes: usize,
        /// Notes stored, summed over relays.
        copies: usize,
        /// Generating, signing and loading.
        took: Duration,
    },
}

/// A load point that could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A point out of range, or a strategy name that is not one.
    #[error("{0}")]
    Invalid(String),
    /// The generator refused the model.
    #[error("generating the world: {0}")]
    World(#[from] nostr_outbox_sim::WorldError),
    /// Re-keying failed.
    #[error(transparent)]
    Rekey(#[from] crate::rekey::RekeyError),
    /// No free port range.
    #[error("no {0} free consecutive ports on 127.0.0.1 below the ephemeral range")]
    Ports(usize),
    /// Too few file descriptors for the relays and the feed's connections.
    #[error(
        "{relays} relays need about {need} open files in this process and in the feed, but the \
         limit is {limit}: raise it (`ulimit -n {need}`)"
    )]
    Descriptors {
        /// Relays of the point.
        relays: usize,
        /// Descriptors needed.
        need: u64,
        /// The soft limit.
        limit: u64,
    },
    /// A relay could not start or be loaded.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// Files, or starting the child.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Signing a note or list.
    #[error("signing: {0}")]
    Sign(String),
}

/// The generator's model for a load point: `relays` relays that all exist and are up in the
/// one session (hubs first, then mid relays; no one-off tail relays, so the count is exact).
pub fn load_model(point: LoadPoint) -> Result<WorldModel, LoadError> {
    if !(2..=MAX_RELAYS).contains(&point.relays) {
        return Err(LoadError::Invalid(format!(
            "{} relays: between 2 and {MAX_RELAYS}",
            point.relays
        )));
    }
    if !(1..=MAX_FOLLOWS).contains(&point.follows) {
        return Err(LoadError::Invalid(format!(
            "{} follows: between 1 and {MAX_FOLLOWS}",
            point.follows
        )));
    }
    // At least one mid relay: every write slot that is not a hub goes to one.
    let hubs = MAX_HUBS.min(point.relays / 2);
    Ok(WorldModel {
        follows: point.follows,
        sessions: 1,
        hubs,
        dead_hubs: 0,
        paid_hubs: 0,
        mid_relays_base: point.relays - hubs,
        follows_per_mid_relay: usize::MAX,
        mid_slot_share: 1.0,
        mid_alive: 1.0,
        paid_share: 0.0,
        hub_reliability: Span::new(1.0, 1.0),
        relay_reliability: Span::new(1.0, 1.0),
        ..WorldModel::default()
    })
}

/// Generates the world of a load point.
pub fn load_world(point: LoadPoint, seed: u64) -> Result<World, LoadError> {
    let model = load_model(point)?;
    let name = format!(
        "load/{}-relays/{}-follows/seed-{seed}",
        point.relays, point.follows
    );
    Ok(generate_with(&model, &name, seed)?)
}

/// Whether `name` can be a strategy name in a TOML string without quoting.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Generates the world of `point`, loads it into local relays, runs the feed once against them
/// as a child process and measures it.
pub async fn run_point(
    point: LoadPoint,
    cfg: &LoadConfig,
    mut progress: impl FnMut(LoadProgress),
) -> Result<LoadResult, LoadError> {
    if !plain_name(&cfg.strategy) {
        return Err(LoadError::Invalid(format!(
            "strategy name {:?}: letters, digits, '_' and '-' only",
            cfg.strategy
        )));
    }
    let budget = cfg.budget.unwrap_or(point.relays);
    if budget == 0 {
        return Err(LoadError::Invalid("a budget of zero relays".into()));
    }
    check_descriptors(point.relays)?;
    let started = Instant::now();
    let world = load_world(point, cfg.seed)?;
    let policy = UrlPolicy::default();
    let url_count = count_urls(&world, &policy);
    let base = free_port_range(url_count, cfg.port_hint).ok_or(LoadError::Ports(url_count))?;
    let rekeyed = rekey(&world, &policy, base, unix_now())?;

    let since_world = world.now.saturating_sub(cfg.since.as_secs());
    let window: Vec<usize> = world
        .events()
        .iter()
        .enumerate()
        .filter(|(_, e)| e.created_at >= since_world)
        .map(|(i, _)| i)
        .collect();
    let notes = sign_notes(&world, &rekeyed, &window, cfg.threads)?;
    let lists = shifted_lists(&rekeyed);
    let signed_lists = crate::rekey::sign_relay_lists(&rekeyed, &lists)
        .map_err(|e| LoadError::Sign(format!("{}: {e}", world.name)))?;

    let mut fleet: Vec<FleetRelay> = Vec::new();
    for (i, r) in world.relays().iter().enumerate() {
        if !r.exists {
            continue;
        }
        let Some(port) = rekeyed.port_of(&world, i as u32) else {
            continue;
        };
        let cap = r.max_limit.map_or(UNCAPPED, |m| (m as usize).max(1));
        fleet.push(FleetRelay::new(i as u32, port, cap));
    }
    let slot_of: HashMap<u32, usize> = fleet
        .iter()
        .enumerate()
        .map(|(i, f)| (f.relay, i))
        .collect();
    let mut copies = 0;
    for (&index, note) in window.iter().zip(&notes) {
        for r in world.event_relays(&world.events()[index]) {
            if let Some(&i) = slot_of.get(r) {
                fleet[i].store(note).await?;
                copies += 1;
            }
        }
    }
    drop(notes);
    let reader_ports: Vec<u16> = world
        .reader_relays
        .iter()
        .filter_map(|u| policy.canonicalize(u).ok())
        .filter_map(|u| rekeyed.urls.get(&u).map(|m| m.port))
        .collect();
    for f in fleet.iter().filter(|f| reader_ports.contains(&f.port)) {
        for list in &signed_lists {
            f.store(list).await?;
        }
    }
    drop(signed_lists);
    for f in fleet.iter_mut() {
        f.start().await?;
    }
    let prepare = started.elapsed();
    progress(LoadProgress::Prepared {
        point,
        relays: fleet.len(),
        notes: window.len(),
        copies,
        took: prepare,
    });

    let dir = tempfile::tempdir()?;
    let command = feed_command(cfg, dir.path(), &rekeyed, &lists, budget)?;
    drop(rekeyed);
    drop(world);
    let (timeout, every) = (cfg.timeout, cfg.sample_every);
    let own_cpu = || {
        read_proc(Path::new("/proc/self/stat"))
            .as_deref()
            .and_then(parse_stat)
            .map(|s| ticks(s.utime.saturating_add(s.stime)))
    };
    let cpu_before = own_cpu();
    let mut measured = tokio::task::spawn_blocking(move || measure(command, timeout, every))
        .await
        .map_err(|e| std::io::Error::other(format!("measuring thread: {e}")))??;
    measured.report = read_summary(&summary_path(dir.path()));
    let relays_cpu = own_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    for f in fleet.iter_mut() {
        f.stop().await;
    }
    Ok(LoadResult {
        point,
        relays: fleet.len(),
        lists: lists.len(),
        notes: window.len(),
        copies,
        budget,
        prepare,
        relays_cpu,
        measured,
    })
}

/// Descriptors a load point needs, per process: in this one a listener per relay plus the
/// feed's WebSocket and NIP-11 connections to it; in the feed those connections. Three per
/// relay and a margin covers both.
pub fn descriptors_needed(relays: usize) -> u64 {
    3 * relays as u64 + 64
}

/// The soft limit on open files (`/proc/self/limits`), if known.
fn open_files_limit() -> Option<u64> {
    let text = read_proc(Path::new("/proc/self/limits"))?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .strip_prefix("Max open files")?
        .split_whitespace()
        .next()?;
    // "unlimited" parses as nothing: no limit to check.
    soft.parse().ok()
}

/// Fails early, and says what to raise, when the relays would run out of descriptors: past the
/// limit the relays stop accepting, the feed's connections time out, and the run measures that
/// instead of the runtime.
fn check_descriptors(relays: usize) -> Result<(), LoadError> {
    let need = descriptors_needed(relays);
    match open_files_limit() {
        Some(limit) if limit < need => Err(LoadError::Descriptors {
            relays,
            need,
            limit,
        }),
        _ => Ok(()),
    }
}

/// The re-keyed lists with `created_at` moved like the notes, so the file and the relays hold
/// the same lists and neither replaces the other.
fn shifted_lists(rekeyed: &Rekeyed) -> Vec<RawRelayList> {
    rekeyed
        .relay_lists
        .iter()
        .map(|l| RawRelayList {
            created_at: (l.created_at as i64 + rekeyed.shift).max(0) as u64,
            ..l.clone()
        })
        .collect()
}

/// Signs one note per world event in `window` (indices into [`World::events`]), in order.
fn sign_notes(
    world: &World,
    rekeyed: &Rekeyed,
    window: &[usize],
    threads: usize,
) -> Result<Vec<rb::Event>, LoadError> {
    let threads = threads.clamp(1, 16);
    let chunk = window.len().div_ceil(threads).max(1);
    let events = world.events();
    std::thread::scope(|scope| {
        let handles: Vec<_> = window
            .chunks(chunk)
            .map(|slice| {
                scope.spawn(move || {
                    slice
                        .iter()
                        .map(|&i| {
                            let e = &events[i];
                            let at = (e.created_at as i64 + rekeyed.shift).max(0) as u64;
                            rb::EventBuilder::new(rb::Kind::TextNote, note_content(i))
                                .custom_created_at(rb::Timestamp::from(at))
                                .sign_with_keys(&rekeyed.keys[e.author as usize])
                                .map_err(|e| LoadError::Sign(e.to_string()))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(window.len());
        for h in handles {
            let part = h
                .join()
                .map_err(|_| LoadError::Sign("a signing thread panicked".into()))??;
            out.extend(part);
        }
        Ok(out)
    })
}

/// Writes the follows, the router config and the lists file into `dir` and builds the
/// `outbox feed --once` command.
fn feed_command(
    cfg: &LoadConfig,
    dir: &Path,
    rekeyed: &Rekeyed,
    lists: &[RawRelayList],
    budget: usize,
) -> Result<Command, LoadError> {
    let follows = dir.join("follows.txt");
    let text: Vec<String> = rekeyed.follows.iter().map(|pk| pk.to_hex()).collect();
    std::fs::write(&follows, text.join("\n"))?;
    let config = dir.join("router.toml");
    std::fs::write(
        &config,
        format!(
            "max_connections = {budget}\n[strategy]\ntype = \"{}\"\n",
            cfg.strategy
        ),
    )?;
    let stats = dir.join("stats.json");
    // Kept by the feed's own store, where it keeps the lists it fetched.
    nostr_outbox_stats::FileStore::new(&stats)
        .save_lists(lists)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut cmd = Command::new(&cfg.program);
    cmd.args(["--log", "warn", "feed", "--once", "--allow-local"])
        .arg("--since")
        .arg(format!("{}s", cfg.since.as_secs().max(1)))
        .arg("--relays")
        .arg(rekeyed.reader_relays.join(","))
        .arg("--follows")
        .arg(&follows)
        .arg("--config")
        .arg(&config)
        .arg("--stats")
        .arg(&stats)
        .arg("--seed")
        .arg(cfg.seed.to_string())
        .arg("--connect-timeout")
        .arg(format!("{}ms", cfg.connect_timeout.as_millis().max(1)))
        .arg("--eose-timeout")
        .arg(format!("{}ms", cfg.eose_timeout.as_millis().max(1)))
        .arg("--summary-json")
        .arg(summary_path(dir))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The tempdir must outlive the child: the command is run before `dir` is dropped.
    Ok(cmd)
}

/// Where the child writes its summary (`--summary-json`).
fn summary_path(dir: &Path) -> PathBuf {
    dir.join("summary.json")
}

/// The summary the child wrote (`outbox feed --summary-json`); `None` if it wrote none or
/// not one this build reads.
pub fn read_summary(path: &Path) -> Option<FeedReport> {
    parse_summary(&read_at_most(path, SUMMARY_READ_LIMIT)?)
}

/// The first `limit` bytes of the file at `path`; `None` when it cannot be read.
fn read_at_most(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Parses a `--summary-json` document: `{"format": "outbox-feed-summary/1", "summary": {...}}`.
pub fn parse_summary(json: &[u8]) -> Option<FeedReport> {
    #[derive(Deserialize)]
    struct Document {
        format: String,
        summary: FeedReport,
    }
    let doc: Document = serde_json::from_slice(json).ok()?;
    (doc.format == nostr_outbox_runtime::SUMMARY_FORMAT).then_some(doc.summary)
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProcStat {
    /// The state letter (`Z`: exited, not yet reaped).
    state: char,
    /// User time, clock ticks.
    utime: u64,
    /// System time, clock ticks.
    stime: u64,
}

/// Reads at most [`PROC_READ_LIMIT`] bytes of a `/proc` file.
pub(crate) fn read_proc(path: &Path) -> Option<String> {
    String::from_utf8(read_at_most(path, PROC_READ_LIMIT)?).ok()
}

/// Parses `/proc/<pid>/stat`: the fields after the command name, whose parentheses may hold
/// anything, so it is skipped up to the last `)`.
fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 3 (state), 14 (utime) and 15 (stime) of proc(5), counted from 1.
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        utime: fields.get(11)?.parse().ok()?,
        stime: fields.get(12)?.parse().ok()?,
    })
}

/// A `kB` value of `/proc/<pid>/status`.
pub(crate) fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

fn ticks(t: u64) -> Duration {
    Duration::from_millis(t.saturating_mul(1_000) / USER_HZ)
}

/// Runs `command` and samples it until it exits or `timeout` passes (then it is killed).
/// Blocks.
pub fn measure(
    mut command: Command,
    timeout: Duration,
    every: Duration,
) -> std::io::Result<Measured> {
    let started = Instant::now();
    let mut child = command.spawn()?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_thread = std::thread::spawn(move || stdout.map_or(0, count_lines));
    let err_thread = std::thread::spawn(move || stderr.map_or_else(VecDeque::new, tail_lines));
    let sampled = sample(&mut child, started, timeout, every);
    let status = child.wait()?;
    let wall = started.elapsed();
    let stdout_lines = out_thread.join().unwrap_or(0);
    let stderr_tail: Vec<String> = err_thread.join().unwrap_or_default().into();
    Ok(Measured {
        wall,
        cpu_user: sampled.stat.map(|s| ticks(s.utime)),
        cpu_system: sampled.stat.map(|s| ticks(s.stime)),
        peak_rss_kib: sampled.peak_kib,
        samples: sampled.samples,
        exit_code: status.code(),
        timed_out: sampled.timed_out,
        stdout_lines,
        report: None,
        stderr_tail,
    })
}

struct Sampled {
    stat: Option<ProcStat>,
    peak_kib: Option<u64>,
    samples: u64,
    timed_out: bool,
}

/// Reads the child's `/proc` entries until it has exited (a zombie: its times are final) or is
/// gone. Does not reap it.
fn sample(child: &mut Child, started: Instant, timeout: Duration, every: Duration) -> Sampled {
    let dir = PathBuf::from(format!("/proc/{}", child.id()));
    let mut out = Sampled {
        stat: None,
        peak_kib: None,
        samples: 0,
        timed_out: false,
    };
    let every = every.max(Duration::from_millis(1));
    loop {
        let Some(stat) = read_proc(&dir.join("stat")).as_deref().and_then(parse_stat) else {
            // No /proc: wait for the exit with the same timeout.
            wait_without_proc(child, started, timeout, every, &mut out);
            return out;
        };
        out.stat = Some(stat);
        out.samples += 1;
        if stat.state == 'Z' || stat.state == 'X' {
            return out;
        }
        if let Some(text) = read_proc(&dir.join("status")) {
            // The peak of the live process; VmRSS covers kernels without VmHWM.
            let peak = status_kib(&text, "VmHWM").or_else(|| status_kib(&text, "VmRSS"));
            out.peak_kib = out.peak_kib.max(peak);
        }
        if !out.timed_out && started.elapsed() > timeout {
            out.timed_out = true;
            // Our own child, by its handle; it becomes a zombie and the loop ends.
            let _ = child.kill();
        }
        std::thread::sleep(every);
    }
}

fn wait_without_proc(
    child: &mut Child,
    started: Instant,
    timeout: Duration,
    every: Duration,
    out: &mut Sampled,
) {
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => {}
        }
        if !out.timed_out && started.elapsed() > timeout {
            out.timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(every);
    }
}

/// Counts newlines until the end of the stream.
fn count_lines(mut r: impl Read) -> u64 {
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = 0u64;
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return lines,
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
        }
    }
}

/// The last [`STDERR_LINES`] lines of the stream, each cut to [`STDERR_LINE_CHARS`].
pub(crate) fn tail_lines(mut r: impl Read) -> VecDeque<String> {
    let mut tail = VecDeque::with_capacity(STDERR_LINES);
    let mut line: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let push = |line: &mut Vec<u8>, tail: &mut VecDeque<String>| {
        let text: String = String::from_utf8_lossy(line)
            .chars()
            .take(STDERR_LINE_CHARS)
            .collect();
        line.clear();
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                push(&mut line, &mut tail);
            } else if line.len() < STDERR_LINE_CHARS * 4 {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        push(&mut line, &mut tail);
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_world_has_exactly_the_relays_asked_for() {
        for relays in [4, 20, 50] {
            let point = LoadPoint {
                relays,
                follows: 300,
            };
            let world = load_world(point, 3).unwrap();
            let existing = world.relays().iter().filter(|r| r.exists).count();
            assert_eq!(existing, relays);
            assert!(world.relays().iter().all(|r| !r.exists || r.up == [true]));
            assert_eq!(world.follows.len(), 300);
        }
        assert!(load_model(LoadPoint {
            relays: 1,
            follows: 10
        })
        .is_err());
        assert!(load_model(LoadPoint {
            relays: 10,
            follows: 0
        })
        .is_err());
    }

    #[test]
    fn proc_files_parse() {
        let stat = "4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 1 0";
        assert_eq!(
            parse_stat(stat),
            Some(ProcStat {
                state: 'S',
                utime: 250,
                stime: 31
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        let status = "Name:\touta\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(20_480));
        assert_eq!(status_kib(status, "VmRSS"), Some(10_240));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(ticks(250), Duration::from_millis(2_500));
    }

    #[test]
    fn the_feed_summary_parses() {
        let json = br#"{"format":"outbox-feed-summary/1","summary":{"events":12,
            "follows":300,"authors_covered":290,"relays_asked":5,"relays_answered":4,
            "relays_failed":1,"round_trips":31,"events_received":40,"raced":false,
            "time_to_first_event":{"secs":0,"nanos":7000000},"time_to_90_percent":null,
            "time_to_full_eose":{"secs":1,"nanos":234000000},"relays":{}}}"#;
        let r = parse_summary(json).unwrap();
        assert_eq!(
            r,
            FeedReport {
                events: 12,
                events_received: 40,
                round_trips: 31,
                relays_asked: 5,
                relays_answered: 4,
                relays_failed: 1,
                authors_covered: 290,
                time_to_first_event: Some(Duration::from_millis(7)),
                time_to_full_eose: Some(Duration::from_millis(1_234)),
                deadline_reached: false,
            }
        );
        let text = std::str::from_utf8(json).unwrap();
        let stopped = text.replace(
            r#""raced":false"#,
            r#""raced":false,"deadline_reached":true"#,
        );
        assert!(parse_summary(stopped.as_bytes()).unwrap().deadline_reached);
        let none = text.replace(r#"{"secs":1,"nanos":234000000}"#, "null");
        assert_eq!(
            parse_summary(none.as_bytes()).unwrap().time_to_full_eose,
            None
        );
        let other = text.replace("outbox-feed-summary/1", "outbox-feed-summary/2");
        assert_eq!(parse_summary(other.as_bytes()), None);
        assert_eq!(parse_summary(b"events: 12"), None);
    }

    #[test]
    fn a_child_is_measured_and_a_slow_one_killed() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo a; echo b; echo 'events: 3' >&2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let m = measure(cmd, Duration::from_secs(10), Duration::from_millis(1)).unwrap();
        assert_eq!(m.stdout_lines, 2);
        assert_eq!(m.exit_code, Some(0));
        assert!(!m.timed_out);
        assert_eq!(m.stderr_tail, ["events: 3"]);
        assert!(m.samples >= 1);

        let mut cmd = Command::new("sleep");
        cmd.arg("30").stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let m = measure(cmd, Duration::from_millis(200), Duration::from_millis(5)).unwrap();
        assert!(m.timed_out);
        assert_eq!(m.exit_code, None);
        assert!(started.elapsed() < Duration::from_secs(10));
        if Path::new("/proc/self/stat").exists() {
            assert!(m.peak_rss_kib.is_some_and(|k| k > 0));
        }
    }
}

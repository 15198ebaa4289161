//! The soak: one continuing `outbox feed` (no `--once`) against local relays while the follows
//! keep posting, relays blink, go down for a while and restart, and follows move to relays they
//! never listed. Measured from outside, as its user sees it: which of the notes stored on a relay
//! their author lists it printed, how late, how often twice, and its memory over time.
//!
//! The network is drawn here, per seed, by rules of its own (not the simulator's generator):
//!
//! - `relays` local relays, the first two the reader's; each follow lists one to four of them,
//!   the busier relays more often (weights falling as 1/rank), and posts at a rate drawn from a
//!   log-normal spread. Spare relays, listed by no one, wait for the follows that move.
//! - History: each follow's notes of the past week (a few each, most of them older than an
//!   hour), on every relay it lists but one now and then (a write that did not land).
//! - The reader's kind:3 and every follow's kind:10002 are on the reader's relays, where the
//!   feed looks them up.
//! - While open: notes at `rate` a second, each stored on every relay its author lists that is
//!   up; a relay that is down gets it when it returns (the author's client retries), so every
//!   return leaves a gap for the feed to fill. The churn repeats every [`CYCLE`]: the busiest
//!   relay beyond the reader's goes down for 20 s, the next one for 15 s, a reader relay
//!   restarts, one follow publishes a list naming only a spare relay and writes there from then
//!   on, and relays blink for a second or three in between.
//!
//! A note is *expected* once it is stored on a relay its author listed when it was written;
//! its delay runs from that moment to the line on the feed's stdout. The feed ends with SIGTERM
//! after `grace`, saving like Ctrl-C.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostr_relay_builder::prelude as rb;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::fleet::{free_port_range, FleetError, FleetRelay};
use crate::load::{read_proc, status_kib, tail_lines};
use crate::{unix_now, UNCAPPED};

/// One round of churn; a longer soak repeats it with other relays and other follows.
pub const CYCLE: Duration = Duration::from_secs(150);

/// Most relays of a soak (each a listener and a few sockets).
pub const MAX_RELAYS: usize = 200;

/// Most follows of a soak.
pub const MAX_FOLLOWS: usize = 10_000;

/// Most notes published while open (bounds what is tracked; at 2 a second, about 11 days).
pub const MAX_NOTES: usize = 2_000_000;

/// How long the feed is given to fetch its window before the first note is published.
const WARM_UP: Duration = Duration::from_secs(3);

/// How long the feed has to exit after SIGTERM before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(30);

/// Notes named one by one in a report when they were missed.
const MISSED_SHOWN: usize = 20;

/// A soak's knobs.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// The `outbox` executable.
    pub program: PathBuf,
    /// Network seed (the feed plans with it too).
    pub seed: u64,
    /// Relays the follows list (the first two are the reader's).
    pub relays: usize,
    /// Follows.
    pub follows: usize,
    /// How long notes are published.
    pub publish_for: Duration,
    /// Notes a second, all follows together.
    pub rate: f64,
    /// How long the feed stays open after the last note.
    pub grace: Duration,
    /// The feed's window (`--since`).
    pub since: Duration,
    /// Relays go down, blink and restart; follows move.
    pub churn: bool,
    /// The feed's strategy (a registered name), with 20 routed connections.
    pub strategy: String,
    /// More arguments for `outbox feed` (`--max-sockets 4`, `--profile mobile`).
    pub feed_args: Vec<String>,
    /// Where to look for free ports first.
    pub port_hint: u16,
    /// How often memory is sampled.
    pub sample_every: Duration,
    /// The feed's `--log` level.
    pub log: String,
    /// A file that receives the feed's whole stderr (its log), besides the report's tail.
    pub log_file: Option<PathBuf>,
}

impl SoakConfig {
    /// The defaults: 8 relays, 40 follows, 2 notes a second for 150 s, 75 s of grace, the
    /// feed's default window, with churn.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            seed: 1,
            relays: 8,
            follows: 40,
            publish_for: CYCLE,
            rate: 2.0,
            grace: Duration::from_secs(75),
            since: Duration::from_secs(7 * 86_400),
            churn: true,
            strategy: "recall".into(),
            feed_args: Vec::new(),
            port_hint: 21_000,
            sample_every: Duration::from_secs(1),
            log: "warn".into(),
            log_file: None,
        }
    }
}

/// A soak that could not run.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// A knob out of range.
    #[error("{0}")]
    Invalid(String),
    /// No free run of ports.
    #[error("no {0} free consecutive ports on 127.0.0.1")]
    Ports(usize),
    /// A relay failed.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// Signing failed.
    #[error("signing: {0}")]
    Sign(String),
    /// Files or the child process.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a soak reports while it runs.
#[derive(Clone, Debug)]
pub enum SoakProgress {
    /// The relays are up and loaded; the feed starts.
    Started {
        /// Relays, spares included.
        relays: usize,
        /// Notes of history stored.
        history: usize,
    },
    /// A few seconds more of the run.
    Tick {
        /// Since the feed started.
        elapsed: Duration,
        /// Notes expected so far.
        expected: usize,
        /// Of them, printed.
        delivered: usize,
        /// The feed's resident memory.
        rss_kib: Option<u64>,
    },
    /// Something the churn did, in words.
    Churn(String),
}

/// Percentiles of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Spread {
    /// How many.
    pub count: usize,
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl Spread {
    /// The spread of `values` (ms).
    pub fn of(mut values: Vec<u64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_unstable();
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        Self {
            count: values.len(),
            p50: at(0.5),
            p95: at(0.95),
            p99: at(0.99),
            max: *values.last().unwrap_or(&0),
        }
    }
}

/// A note the feed did not print.
#[derive(Clone, Debug, Serialize)]
pub struct Missed {
    /// The author (follow index).
    pub follow: usize,
    /// Seconds after the feed started that it was first stored.
    pub at_secs: f64,
    /// The relays that hold it (ports).
    pub on: Vec<u16>,
}

/// What a soak measured.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// Network seed.
    pub seed: u64,
    /// Relays the follows list, and spares.
    pub relays: usize,
    /// Follows.
    pub follows: usize,
    /// Notes of the window stored before the feed started.
    pub window: usize,
    /// Of them, printed.
    pub window_delivered: usize,
    /// Notes published while open and stored on a relay their author listed.
    pub expected: usize,
    /// Of them, printed.
    pub delivered: usize,
    /// Notes of follows after they moved.
    pub moved: usize,
    /// Of them, printed.
    pub moved_delivered: usize,
    /// Lines naming a note printed before.
    pub duplicates: usize,
    /// Lines that were not one of the soak's notes.
    pub foreign: usize,
    /// From a note's storing to its line, ms.
    pub delay: Spread,
    /// Per return of a relay with a gap: from the return to the last of the gap's notes printed
    /// (ms); gaps never printed whole are not in it (they are in `missed`).
    pub catch_up: Spread,
    /// Resident memory a tenth into the publishing, KiB.
    pub rss_early_kib: Option<u64>,
    /// Resident memory at the end, KiB.
    pub rss_end_kib: Option<u64>,
    /// Peak resident memory, KiB.
    pub rss_peak_kib: Option<u64>,
    /// What the churn did, in order.
    pub churn: Vec<String>,
    /// The first notes missed.
    pub missed: Vec<Missed>,
    /// The feed's exit status.
    pub exit_code: Option<i32>,
    /// The feed's last lines on stderr.
    pub stderr_tail: Vec<String>,
}

impl SoakReport {
    /// The share of the notes published while open that were printed.
    pub fn completeness(&self) -> f64 {
        ratio(self.delivered, self.expected)
    }

    /// The share of the window's notes printed.
    pub fn window_completeness(&self) -> f64 {
        ratio(self.window_delivered, self.window)
    }

    /// Resident memory growth from early in the run to its end, as a share.
    pub fn rss_growth(&self) -> Option<f64> {
        let (a, b) = (self.rss_early_kib?, self.rss_end_kib?);
        (a > 0).then(|| b as f64 / a as f64 - 1.0)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// The drawn network.
struct Network {
    keys: Vec<rb::Keys>,
    reader: rb::Keys,
    /// Per follow, the relays it lists now (indices).
    lists: Vec<Vec<usize>>,
    /// Per follow, its share of the posting.
    weight: Vec<f64>,
    /// Relays beyond the listed ones, for follows that move.
    spares: Vec<usize>,
    /// Non-reader relays, busiest first (by how many follows list them).
    busiest: Vec<usize>,
}

fn draw_network(cfg: &SoakConfig, rng: &mut ChaCha8Rng) -> Result<Network, SoakError> {
    let keys: Vec<rb::Keys> = (0..cfg.follows)
        .map(|_| keys_from(rng))
        .collect::<Result<_, _>>()?;
    let reader = keys_from(rng)?;
    // Popularity falls with rank; the reader's relays rank among the busiest.
    let popularity: Vec<f64> = (0..cfg.relays).map(|r| 1.0 / (r as f64 + 1.0)).collect();
    let mut lists = Vec::with_capacity(cfg.follows);
    for _ in 0..cfg.follows {
        let size = match rng.random_range(0..100) {
            0..35 => 1,
            35..70 => 2,
            70..90 => 3,
            _ => 4,
        }
        .min(cfg.relays);
        let mut chosen: Vec<usize> = Vec::with_capacity(size);
        while chosen.len() < size {
            let total: f64 = (0..cfg.relays)
                .filter(|r| !chosen.contains(r))
                .map(|r| popularity[r])
                .sum();
            let mut x = rng.random::<f64>() * total;
            for r in (0..cfg.relays).filter(|r| !chosen.contains(r)) {
                x -= popularity[r];
                if x <= 0.0 {
                    chosen.push(r);
                    break;
                }
            }
        }
        chosen.sort_unstable();
        lists.push(chosen);
    }
    // Log-normal posting weights: a few follows post most.
    let weight: Vec<f64> = (0..cfg.follows)
        .map(|_| {
            let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
            let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            normal.exp()
        })
        .collect();
    let mut listing = vec![0usize; cfg.relays];
    for list in &lists {
        for &r in list {
            listing[r] += 1;
        }
    }
    let mut busiest: Vec<usize> = (2..cfg.relays).collect();
    busiest.sort_by_key(|&r| (std::cmp::Reverse(listing[r]), r));
    let moves = moves(cfg);
    let spares = (cfg.relays..cfg.relays + moves).collect();
    Ok(Network {
        keys,
        reader,
        lists,
        weight,
        spares,
        busiest,
    })
}

/// Follows that move in a soak: one a cycle.
fn moves(cfg: &SoakConfig) -> usize {
    if cfg.churn {
        (cfg.publish_for.as_secs_f64() / CYCLE.as_secs_f64()).ceil() as usize
    } else {
        0
    }
}

fn keys_from(rng: &mut ChaCha8Rng) -> Result<rb::Keys, SoakError> {
    for _ in 0..16 {
        let bytes: [u8; 32] = rng.random();
        if let Ok(secret) = rb::SecretKey::from_slice(&bytes) {
            return Ok(rb::Keys::new(secret));
        }
    }
    Err(SoakError::Sign("no valid secret key drawn".into()))
}

/// One thing that happens while the feed is open, at an offset from the first note.
#[derive(Clone, Debug)]
enum Step {
    /// A note by this follow.
    Note(usize),
    /// This relay stops.
    Down(usize),
    /// This relay listens again.
    Up(usize),
    /// This follow lists only this spare relay from now on.
    Move(usize, usize),
}

fn schedule(cfg: &SoakConfig, net: &Network, rng: &mut ChaCha8Rng) -> Vec<(Duration, Step)> {
    let mut steps: Vec<(Duration, Step)> = Vec::new();
    // Notes: evenly spaced at `rate`, authors drawn by weight.
    let total: f64 = net.weight.iter().sum();
    let notes = ((cfg.publish_for.as_secs_f64() * cfg.rate) as usize).min(MAX_NOTES);
    for i in 0..notes {
        let at = Duration::from_secs_f64(i as f64 / cfg.rate);
        let mut x = rng.random::<f64>() * total;
        let mut author = net.weight.len() - 1;
        for (f, w) in net.weight.iter().enumerate() {
            x -= w;
            if x <= 0.0 {
                author = f;
                break;
            }
        }
        steps.push((at, Step::Note(author)));
    }
    if cfg.churn && !net.busiest.is_empty() {
        let cycles = moves(cfg);
        // Follows that move: the busiest posters first, each once.
        let mut movers: Vec<usize> = (0..net.weight.len()).collect();
        movers.sort_by(|&a, &b| net.weight[b].total_cmp(&net.weight[a]).then(a.cmp(&b)));
        for k in 0..cycles {
            let base = CYCLE.mul_f64(k as f64);
            let off = |f: f64| base + CYCLE.mul_f64(f);
            let first = net.busiest[(2 * k) % net.busiest.len()];
            let second = net.busiest[(2 * k + 1) % net.busiest.len()];
            let reader = k % 2;
            let mut outage = |at: Duration, relay: usize, len: Duration| {
                steps.push((at, Step::Down(relay)));
                steps.push((at + len, Step::Up(relay)));
            };
            outage(off(0.13), first, Duration::from_secs(20));
            if second != first {
                outage(off(0.40), second, Duration::from_secs(15));
            }
            outage(off(0.63), reader, Duration::from_secs(2));
            // Blinks: a relay beyond the reader's gone for one to three seconds.
            for f in [0.05, 0.30, 0.55, 0.85] {
                let relay = net.busiest[rng.random_range(0..net.busiest.len())];
                if relay == first || relay == second {
                    continue;
                }
                let len = Duration::from_millis(rng.random_range(1_000..3_000));
                outage(off(f), relay, len);
            }
            if let (Some(&mover), Some(&spare)) = (movers.get(k), net.spares.get(k)) {
                steps.push((off(0.73), Step::Move(mover, spare)));
            }
        }
    }
    let end = cfg.publish_for;
    steps.retain(|(at, step)| *at < end || matches!(step, Step::Up(_)));
    steps.sort_by_key(|(at, _)| *at);
    steps
}

/// A note published while open: when it was first stored, by whom, where, and whether its author
/// had moved.
struct Stored {
    at: Instant,
    follow: usize,
    on: Vec<u16>,
    after_move: bool,
}

/// Lines the feed printed: per note id (hex), when it was first printed, and repeats.
#[derive(Default)]
struct Printed {
    first: HashMap<String, Instant>,
    duplicates: usize,
    foreign: usize,
}

/// Runs one soak.
pub async fn run_soak(
    cfg: &SoakConfig,
    mut progress: impl FnMut(SoakProgress),
) -> Result<SoakReport, SoakError> {
    if !(2..=MAX_RELAYS).contains(&cfg.relays) {
        return Err(SoakError::Invalid(format!(
            "relays: between 2 and {MAX_RELAYS}, not {}",
            cfg.relays
        )));
    }
    if !(1..=MAX_FOLLOWS).contains(&cfg.follows) {
        return Err(SoakError::Invalid(format!(
            "follows: between 1 and {MAX_FOLLOWS}, not {}",
            cfg.follows
        )));
    }
    if !(cfg.rate.is_finite() && cfg.rate > 0.0 && cfg.rate <= 1_000.0) {
        return Err(SoakError::Invalid("rate: above 0 and at most 1000".into()));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x50a4_0000_0000_0001);
    let mut net = draw_network(cfg, &mut rng)?;
    let steps = schedule(cfg, &net, &mut rng);
    let total = cfg.relays + net.spares.len();
    let base = free_port_range(total, cfg.port_hint).ok_or(SoakError::Ports(total))?;
    let mut fleet: Vec<FleetRelay> = (0..total)
        .map(|r| FleetRelay::new(r as u32, base + r as u16, UNCAPPED))
        .collect();
    let url = |r: usize| format!("ws://127.0.0.1:{}", base + r as u16);
    let now = unix_now();

    // History: a few notes a follow over the past week, most older than an hour.
    let since = now.saturating_sub(cfg.since.as_secs());
    let mut window: HashSet<String> = HashSet::new();
    let mut history = 0;
    for (f, keys) in net.keys.iter().enumerate() {
        for n in 0..rng.random_range(0..6) {
            let age = rng.random_range(60..7 * 86_400u64);
            let note = sign_note(keys, now - age, &format!("history {f}.{n}"))?;
            let mut stored = false;
            for &r in &net.lists[f] {
                // A write that did not land, now and then.
                if net.lists[f].len() > 1 && rng.random_range(0..20) == 0 {
                    continue;
                }
                fleet[r].store(&note).await?;
                stored = true;
            }
            history += 1;
            if stored && now - age >= since {
                window.insert(note.id.to_hex());
            }
        }
    }
    for (f, keys) in net.keys.iter().enumerate() {
        let list = sign_list(keys, now - 86_400, net.lists[f].iter().map(|&r| url(r)))?;
        for relay in &fleet[..2] {
            relay.store(&list).await?;
        }
    }
    let contacts = sign_contacts(&net.reader, now - 86_400, &net.keys)?;
    for relay in &fleet[..2] {
        relay.store(&contacts).await?;
    }
    for relay in fleet.iter_mut() {
        relay.start().await?;
    }
    progress(SoakProgress::Started {
        relays: total,
        history,
    });

    if !(cfg.strategy.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(SoakError::Invalid(format!(
            "strategy {:?}: a registered name",
            cfg.strategy
        )));
    }
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        format!(
            "max_connections = 20\n[strategy]\ntype = \"{}\"\n",
            cfg.strategy
        ),
    )?;
    let mut command = Command::new(&cfg.program);
    command
        .arg("--log")
        .arg(&cfg.log)
        .args(["feed", "--json", "--allow-local"])
        .arg("--npub")
        .arg(net.reader.public_key().to_hex())
        .arg("--relays")
        .arg(format!("{},{}", url(0), url(1)))
        .arg("--since")
        .arg(format!("{}s", cfg.since.as_secs().max(1)))
        .arg("--stats")
        .arg(dir.path().join("stats.json"))
        .arg("--seed")
        .arg(cfg.seed.to_string())
        .arg("--config")
        .arg(&config)
        .args(&cfg.feed_args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn()?;
    let pid = child.id();
    let printed = Arc::new(Mutex::new(Printed::default()));
    let out_thread = {
        let stdout = child.stdout.take();
        let printed = printed.clone();
        std::thread::spawn(move || {
            if let Some(stdout) = stdout {
                read_lines(stdout, &printed);
            }
        })
    };
    let log_file = match &cfg.log_file {
        Some(path) => Some(std::fs::File::create(path)?),
        None => None,
    };
    let err_thread = {
        let stderr = child.stderr.take();
        std::thread::spawn(move || match (stderr, log_file) {
            (Some(stderr), Some(file)) => tail_lines(Tee(stderr, file)),
            (Some(stderr), None) => tail_lines(stderr),
            (None, _) => VecDeque::new(),
        })
    };
    let rss = || {
        read_proc(&PathBuf::from(format!("/proc/{pid}/status")))
            .and_then(|t| status_kib(&t, "VmRSS"))
    };

    tokio::time::sleep(WARM_UP).await;
    let first = Instant::now();
    // Per note: when it was first stored, its author, where it is; whether written after a move.
    let mut stored_at: HashMap<String, Stored> = HashMap::new();
    let mut moved: HashSet<usize> = HashSet::new();
    // Notes a relay missed while down, written when it returns.
    let mut pending: Vec<Vec<rb::Event>> = vec![Vec::new(); total];
    // Per return with a gap: when, and the notes of the gap.
    let mut gaps: Vec<(Instant, Vec<String>)> = Vec::new();
    let mut churn_log = Vec::new();
    let (mut rss_early, mut rss_peak) = (None, None);
    let early_at = first + cfg.publish_for / 10;
    let mut next_tick = Instant::now() + Duration::from_secs(10);
    let mut next_sample = Instant::now();
    let mut counter = 0u64;
    for (at, step) in steps {
        let due = first + at;
        loop {
            let now = Instant::now();
            if now >= next_sample {
                let kib = rss();
                rss_peak = rss_peak.max(kib);
                if rss_early.is_none() && now >= early_at {
                    rss_early = kib;
                }
                next_sample = now + cfg.sample_every;
                for relay in &fleet {
                    // What the relays were asked is not needed; kept bounded.
                    drop(relay.log.take());
                }
            }
            if now >= next_tick {
                progress(tick(started, &stored_at, &printed, rss_peak));
                next_tick = now + Duration::from_secs(10);
            }
            if now >= due {
                break;
            }
            let wake = due.min(next_sample).min(next_tick);
            tokio::time::sleep_until(wake.into()).await;
        }
        match step {
            Step::Note(f) => {
                counter += 1;
                let created = unix_now();
                let note = sign_note(&net.keys[f], created, &format!("live {f}.{counter}"))?;
                let id = note.id.to_hex();
                let mut on = Vec::new();
                for &r in &net.lists[f] {
                    if fleet[r].publish(&note).await? {
                        on.push(base + r as u16);
                    } else {
                        pending[r].push(note.clone());
                    }
                }
                if !on.is_empty() {
                    let after_move = moved.contains(&f);
                    let at = Instant::now();
                    stored_at.insert(
                        id,
                        Stored {
                            at,
                            follow: f,
                            on,
                            after_move,
                        },
                    );
                }
            }
            Step::Down(r) => {
                fleet[r].stop().await;
                let line = format!("{:>6.1}s relay {} down", secs(first), url(r));
                progress(SoakProgress::Churn(line.clone()));
                churn_log.push(line);
            }
            Step::Up(r) => {
                fleet[r].start().await?;
                let back = Instant::now();
                let mut gap = Vec::new();
                for note in std::mem::take(&mut pending[r]) {
                    let id = note.id.to_hex();
                    if fleet[r].publish(&note).await? {
                        let f = (net.keys.iter())
                            .position(|k| k.public_key() == note.pubkey)
                            .unwrap_or(0);
                        let entry = stored_at.entry(id.clone()).or_insert_with(|| Stored {
                            at: Instant::now(),
                            follow: f,
                            on: Vec::new(),
                            after_move: moved.contains(&f),
                        });
                        entry.on.push(base + r as u16);
                        gap.push(id);
                    }
                }
                let line = format!(
                    "{:>6.1}s relay {} back, {} notes written late",
                    secs(first),
                    url(r),
                    gap.len()
                );
                progress(SoakProgress::Churn(line.clone()));
                churn_log.push(line);
                if !gap.is_empty() {
                    gaps.push((back, gap));
                }
            }
            Step::Move(f, spare) => {
                net.lists[f] = vec![spare];
                moved.insert(f);
                let list = sign_list(&net.keys[f], unix_now(), [url(spare)].into_iter())?;
                for r in [0, 1, spare] {
                    fleet[r].publish(&list).await?;
                }
                let line = format!(
                    "{:>6.1}s follow {f} moves to {} only",
                    secs(first),
                    url(spare)
                );
                progress(SoakProgress::Churn(line.clone()));
                churn_log.push(line);
            }
        }
    }
    // Grace, still sampling.
    let end = Instant::now() + cfg.grace;
    while Instant::now() < end {
        let kib = rss();
        rss_peak = rss_peak.max(kib);
        rss_early = rss_early.or(kib);
        if Instant::now() >= next_tick {
            progress(tick(started, &stored_at, &printed, rss_peak));
            next_tick = Instant::now() + Duration::from_secs(10);
        }
        tokio::time::sleep(
            cfg.sample_every
                .min(end.saturating_duration_since(Instant::now())),
        )
        .await;
    }
    let rss_end = rss();
    rss_peak = rss_peak.max(rss_end);
    // SIGTERM saves like Ctrl-C; a feed that does not end in time is killed.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let exit_code = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.code(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = child.kill();
                    return child.wait().ok().and_then(|s| s.code());
                }
            }
        }
    })
    .await
    .map_err(|e| std::io::Error::other(format!("waiting for the feed: {e}")))?;
    let _ = out_thread.join();
    let stderr_tail: Vec<String> = err_thread.join().unwrap_or_default().into();
    for relay in fleet.iter_mut() {
        relay.stop().await;
    }

    let printed = printed.lock().unwrap_or_else(|p| p.into_inner());
    let mut delays = Vec::new();
    let (mut delivered, mut moved_total, mut moved_delivered) = (0, 0, 0);
    let mut missed = Vec::new();
    let mut live: Vec<(&String, &Stored)> = stored_at.iter().collect();
    live.sort_by_key(|(_, s)| s.at);
    for (id, note) in live {
        moved_total += usize::from(note.after_move);
        match printed.first.get(id) {
            Some(shown) => {
                delivered += 1;
                moved_delivered += usize::from(note.after_move);
                delays.push(shown.saturating_duration_since(note.at).as_millis() as u64);
            }
            None if missed.len() < MISSED_SHOWN => missed.push(Missed {
                follow: note.follow,
                at_secs: note.at.saturating_duration_since(first).as_secs_f64(),
                on: note.on.clone(),
            }),
            None => {}
        }
    }
    let catch_up: Vec<u64> = gaps
        .iter()
        .filter_map(|(back, ids)| {
            let last = ids
                .iter()
                .map(|id| printed.first.get(id).copied())
                .collect::<Option<Vec<Instant>>>()?
                .into_iter()
                .max()?;
            Some(last.saturating_duration_since(*back).as_millis() as u64)
        })
        .collect();
    let window_delivered = window
        .iter()
        .filter(|id| printed.first.contains_key(*id))
        .count();
    let foreign = printed.foreign;
    Ok(SoakReport {
        seed: cfg.seed,
        relays: total,
        follows: cfg.follows,
        window: window.len(),
        window_delivered,
        expected: stored_at.len(),
        delivered,
        moved: moved_total,
        moved_delivered,
        duplicates: printed.duplicates,
        foreign,
        delay: Spread::of(delays),
        catch_up: Spread::of(catch_up),
        rss_early_kib: rss_early,
        rss_end_kib: rss_end,
        rss_peak_kib: rss_peak,
        churn: churn_log,
        missed,
        exit_code,
        stderr_tail,
    })
}

fn secs(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// Where the run stands: since `started`, the notes expected so far (`stored`) and how many of
/// them were printed, and the feed's peak memory.
fn tick(
    started: Instant,
    stored: &HashMap<String, Stored>,
    printed: &Mutex<Printed>,
    rss_kib: Option<u64>,
) -> SoakProgress {
    let delivered = match printed.lock() {
        Ok(printed) => stored
            .keys()
            .filter(|id| printed.first.contains_key(*id))
            .count(),
        Err(_) => 0,
    };
    SoakProgress::Tick {
        elapsed: started.elapsed(),
        expected: stored.len(),
        delivered,
        rss_kib,
    }
}

/// A reader that copies what it reads into a file (a failed write is dropped: the log is an
/// aid, the report does not depend on it).
struct Tee<R, W>(R, W);

impl<R: std::io::Read, W: std::io::Write> std::io::Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        let _ = self.1.write_all(&buf[..n]);
        Ok(n)
    }
}

/// Reads the feed's `--json` lines: each a note, keyed by id.
fn read_lines(stdout: impl std::io::Read, printed: &Mutex<Printed>) {
    use std::io::BufRead;
    let reader = std::io::BufReader::new(stdout);
    for line in reader.split(b'\n') {
        let Ok(line) = line else {
            return;
        };
        let at = Instant::now();
        let id = serde_json::from_slice::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_owned));
        let Ok(mut printed) = printed.lock() else {
            return;
        };
        match id {
            None => printed.foreign += 1,
            Some(id) => {
                if printed.first.contains_key(&id) {
                    printed.duplicates += 1;
                } else if printed.first.len() < MAX_NOTES * 2 {
                    printed.first.insert(id, at);
                }
            }
        }
    }
}

fn sign_note(keys: &rb::Keys, at: u64, content: &str) -> Result<rb::Event, SoakError> {
    sign(keys, rb::Kind::TextNote, content, std::iter::empty(), at)
}

fn sign_list(
    keys: &rb::Keys,
    at: u64,
    relays: impl Iterator<Item = String>,
) -> Result<rb::Event, SoakError> {
    sign(
        keys,
        rb::Kind::RelayList,
        "",
        relays.map(|u| ["r".to_string(), u]),
        at,
    )
}

fn sign_contacts(reader: &rb::Keys, at: u64, follows: &[rb::Keys]) -> Result<rb::Event, SoakError> {
    let tags = follows
        .iter()
        .map(|k| ["p".to_string(), k.public_key().to_hex()]);
    sign(reader, rb::Kind::ContactList, "", tags, at)
}

/// An event of `kind` by `keys` with these two-part tags, dated `at`.
fn sign(
    keys: &rb::Keys,
    kind: rb::Kind,
    content: &str,
    tags: impl Iterator<Item = [String; 2]>,
    at: u64,
) -> Result<rb::Event, SoakError> {
    let tags = tags
        .map(rb::Tag::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| SoakError::Sign(e.to_string()))?;
    rb::EventBuilder::new(kind, content)
        .tags(tags)
        .custom_created_at(rb::Timestamp::from(at))
        .sign_with_keys(keys)
        .map_err(|e| SoakError::Sign(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_the_nearest_rank() {
        let s = Spread::of((1..=100).collect());
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, 51, 99, 100));
        assert_eq!(Spread::of(Vec::new()), Spread::default());
    }

    #[test]
    fn a_schedule_churns_every_cycle_and_moves_one_follow_each() {
        let mut cfg = SoakConfig::new(PathBuf::from("outbox"));
        cfg.publish_for = CYCLE * 2;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let net = draw_network(&cfg, &mut rng).unwrap();
        assert_eq!(net.spares, vec![8, 9]);
        assert!(net.lists.iter().all(|l| (1..=4).contains(&l.len())));
        let steps = schedule(&cfg, &net, &mut rng);
        let notes = steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Note(_)))
            .count();
        assert_eq!(notes, 600);
        let moves: Vec<usize> = steps
            .iter()
            .filter_map(|(_, s)| match s {
                Step::Move(f, _) => Some(*f),
                _ => None,
            })
            .collect();
        assert_eq!(moves.len(), 2);
        assert_ne!(moves[0], moves[1]);
        let downs = steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Down(_)))
            .count();
        let ups = steps
            .iter()
            .filter(|(_, s)| matches!(s, Step::Up(_)))
            .count();
        assert_eq!(downs, ups, "every relay that goes down comes back");
        assert!(steps.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

//! The live bench: the real runtime against real local relays that hold exactly what a
//! simulated world stores, with the simulator's numbers for the same strategy and world beside
//! it. A recall measured only in the simulator is a hypothesis about the feed; this checks it.
//!
//! For each session `s` of the world and each strategy:
//!
//! 1. **Relays.** Every world relay that is up in `s` listens on `127.0.0.1` at a port fixed for
//!    the whole bench (nostr-relay-builder `LocalRelay`, in-memory database loaded once with the
//!    events the world stores there; `on` lists already include retention and lost writes). Relays
//!    down in `s`, dead relays and URLs that are not relays of the world do not listen: their
//!    connections are refused at once. Each relay caps a filter at the world's `max_limit` for
//!    it (no cap: [`UNCAPPED`]).
//! 2. **Keys.** Authors are re-keyed and every world event is one signed note whose content
//!    names the world event, `created_at` moved by `real now − world.now` ([`rekey`](mod@rekey)).
//! 3. **Runtime.** The same path as `outbox feed --once`: [`nostr_outbox_runtime::start`], `since` one
//!    year back, relay lists given up front (no discovery, as the simulator has them), stats in
//!    an `nostr-outbox-stats` file store carried between sessions, the same base seed as the
//!    simulator's session loop (the runtime plans with `session_seed(seed, runs so far)`, the
//!    loop with `session_seed(seed, s)`). The penalty box starts empty every session: the
//!    simulator has none, and a relay set aside in one session would otherwise be left out of
//!    the next plan, measuring the penalty box instead of the routing.
//! 4. **Scoring.** Delivered notes map back to world events and are scored with the
//!    simulator's definitions ([`nostr_outbox_sim::delivered::score_delivered`]). Beside them: the
//!    simulator's own [`run_sessions`] for the strategy, and the simulator's score of the plan the
//!    runtime really sent (read from the relays' query hooks), which separates delivery (live vs
//!    that score) from learning divergence (that score vs the simulator's).
//!
//! 5. **Probes.** After the fetch, both sides probe the relays no plan of the session asked
//!    ([`nostr_outbox_core::probe`]) with the strategy config's `probe_connections`: the simulator in
//!    its session loop, the runtime after its slots closed, each leaving out every relay the
//!    session asked (every plan's, re-plans included, which is what both count as asked) and
//!    learning from the answers before the next session. The relays' logs of probe REQs are
//!    kept out of what the runtime asked ([`SessionResult::live_plan`]); the probes themselves
//!    are counted in [`SessionResult::probes`].
//!
//! 6. **Time** ([`LiveConfig::delay`]). Each relay sits behind a [`delay::DelayProxy`] that
//!    waits what the world's timing draws for it (connect time per connection, one query time
//!    per REQ page; a relay that is down and hangs is a black hole), so the runtime meets the
//!    world's clock. Each delivered note's arrival is recorded and the live timeline is measured
//!    with the simulator's definitions ([`nostr_outbox_sim::clock::time_score`]) beside the
//!    simulator's replay of the same session ([`LoopConfig::clock`]), which replays the client
//!    the live run uses ([`client_timing`]).
//!
//! 7. **Other clients** ([`clients`]). After the runtime's runs of a session, every
//!    [`LiveClient`] given (`outbox bench --live` gives the registered ones)
//!    reads the same relays, behind the same proxies: handed the same relay lists, it reads the
//!    follows' notes once per window (7 days, 1 year, 3 years, in that order), keeping its
//!    state from session to session. Each read is scored with the simulator's definitions for
//!    its window; beside it, the relays the client dialled and those that were asked for notes.
//!
//! The simulator runs with no clock step between sessions (live sessions run seconds apart, so
//! learned stats barely decay between them either) and with the one-year window only (the
//! widest window asked sets what both learn from).

pub mod clients;
pub mod delay;
pub mod fleet;
pub mod load;
pub mod rekey;
pub mod soak;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostr::types::Timestamp;
use nostr_outbox_core::{Router, RouterConfig, UrlPolicy};
use nostr_outbox_runtime::{FeedEvent, FeedInput, PenaltyBox, RuntimeConfig, SocketBudget};
use nostr_outbox_sim::clock::{ClientTiming, TimeScore, Timeline};
use nostr_outbox_sim::delivered::score_delivered;
use nostr_outbox_sim::probe::ProbeCost;
use nostr_outbox_sim::{
    run_sessions, score, Ask, Asks, LoopConfig, SimWorld, Window, WindowScore, World,
};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::clients::{ClientResult, ClientSession, ClientSessionResult, LiveClient};
use crate::delay::{DelayCaps, DelayProxy, Mode};
use crate::fleet::{free_port_range, FleetRelay, SeenFilter};
use crate::rekey::{event_index, rekey, sign_events, sign_relay_lists, Rekeyed};

#[doc(hidden)]
pub use inventory as __inventory;

/// One strategy to run live and simulated.
#[derive(Debug)]
pub struct LiveStrategy {
    /// The label shown in reports.
    pub label: String,
    /// The router config (strategy and budget).
    pub config: RouterConfig,
}

impl LiveStrategy {
    /// A strategy from TOML, labelled.
    pub fn from_toml(label: &str, toml: &str) -> Result<Self, nostr_outbox_core::ConfigError> {
        Ok(Self {
            label: label.to_string(),
            config: RouterConfig::from_toml(toml)?,
        })
    }
}

/// How the live bench runs.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Sessions (at most the world's).
    pub sessions: u32,
    /// Base planning seed, shared with the simulator's session loop.
    pub seed: u64,
    /// Timeouts and the rest of the runtime's knobs; `once`, `since`, `seed` and list
    /// discovery are set by the bench.
    pub runtime: RuntimeConfig,
    /// The socket budget of each session's client.
    pub budget: SocketBudget,
    /// Where to look for a free port range first.
    pub port_hint: u16,
    /// Threads for signing.
    pub threads: usize,
    /// Run sessions the way the simulator models them: one plan per session. No relay is set
    /// aside within a session (so nothing is re-planned around it), and the session ends
    /// [`ONE_PLAN_RACE`] after the first relay answered; relays that never answered count as
    /// failed, as the simulator records a relay that is down. Off, the runtime runs as
    /// `outbox feed --once` does and re-plans around relays it sets aside.
    pub one_plan: bool,
    /// Put each relay behind a delay proxy that waits what the world's timing draws
    /// ([`delay`](mod@delay)), and time the live run beside the simulator's clock
    /// ([`SessionResult::time`]). Off, relays answer at once and only recall is compared.
    pub delay: bool,
    /// The first session looks the relay lists up, as a new user's first run does: every list
    /// is stored on the reader's relays as a signed kind:10002 event, and the runtime is handed
    /// none and looks them up there (no indexer); later sessions are handed them, as a store
    /// that kept them would. The simulator's first session then waits for the lookup too
    /// ([`ClientTiming::lists_given`] off). Off, every session is handed every list.
    pub lookup_first: bool,
    /// The window fetched and scored: the feed's `since` and the simulator's plans and scores
    /// (1 year by default).
    pub window: Window,
}

/// The per-filter limit of a relay the world gives no cap: more than any world stores.
pub const UNCAPPED: usize = 100_000_000;

/// How long a one-plan session waits for the rest after the first relay answered: loaded local
/// relays answer in milliseconds, so this only bounds the wait for relays that are down.
pub const ONE_PLAN_RACE: Duration = Duration::from_secs(2);

impl Default for LiveConfig {
    /// Timeouts for relays on 127.0.0.1: a refused connection fails at once and a loaded
    /// relay answers in milliseconds, so connect 1 s and EOSE 10 s leave room for a shared,
    /// busy machine without slowing down failures (those are refusals, not timeouts).
    fn default() -> Self {
        let mut runtime = RuntimeConfig::fast_for_tests();
        runtime.connect_timeout = Duration::from_secs(1);
        runtime.eose_timeout = Duration::from_secs(10);
        Self {
            sessions: 5,
            seed: 0,
            runtime,
            budget: SocketBudget::default(),
            port_hint: 21_000,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            one_plan: false,
            delay: false,
            lookup_first: false,
            window: Window::Y1,
        }
    }
}

impl LiveConfig {
    /// Relays behind delay proxies ([`LiveConfig::delay`]) and the runtime at its defaults
    /// (connect 10 s, EOSE 15 s, backoff from 500 ms, lookup grace 2 s, debounce 500 ms,
    /// deadline 90 s, the desktop socket budget), so the live timeline is the one
    /// `outbox feed --once` would have on the world's network; NIP-11 is not asked (the local
    /// relays serve no documents, and the clock skips them).
    pub fn timed() -> Self {
        Self {
            runtime: RuntimeConfig {
                limits: nostr_outbox_runtime::connection::limits::LimitsConfig::fast_for_tests(),
                ..RuntimeConfig::default()
            },
            delay: true,
            ..Self::default()
        }
    }
}

/// The client the simulator's clock replays for a runtime run with `runtime`: its connect and
/// EOSE timeouts, strikes, first backoff, pages in flight, lookup grace, re-plan debounce,
/// deadline (none: never), `budget`'s lasting and reserved sockets, and how the runtime
/// carries a plan out (its `schedule`).
pub fn client_timing(runtime: &RuntimeConfig, budget: SocketBudget) -> ClientTiming {
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    ClientTiming {
        connect_timeout_ms: ms(runtime.connect_timeout),
        eose_timeout_ms: ms(runtime.eose_timeout),
        attempts: runtime.penalty.strikes,
        backoff_ms: ms(runtime.backoff.initial),
        concurrent_pages: runtime.limits.concurrent_pages,
        lookup_grace_ms: ms(runtime.lookup_grace),
        debounce_ms: ms(runtime.replan_debounce),
        deadline_ms: runtime.deadline.map_or(f64::INFINITY, ms),
        lasting_sockets: budget.lasting_sockets(),
        reserve_sockets: budget.reserve,
        policy: nostr_outbox_sim::clock::Policy {
            aside_on_timeout: runtime.schedule.aside_on_connect_timeout,
            early_waves: runtime.schedule.early_waves,
            probe_timeout_ms: Some(ms(runtime.schedule.probe_connect_timeout)),
        },
        ..ClientTiming::default()
    }
}

/// What the bench reports as it goes.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Notes signed and relays loaded.
    Prepared {
        /// Notes signed.
        events: usize,
        /// Relays loaded (those that exist in the world).
        relays: usize,
        /// Time spent signing and loading.
        took: Duration,
    },
    /// One strategy's session is done.
    Session {
        /// The strategy's label.
        label: &'a str,
        /// The result.
        result: &'a SessionResult,
    },
    /// One other client's session is done ([`clients`]).
    Client {
        /// The client's label.
        label: &'a str,
        /// The result.
        result: &'a ClientSessionResult,
    },
}

/// One strategy in one session.
#[derive(Clone, Debug, Serialize)]
pub struct SessionResult {
    /// The session.
    pub session: u32,
    /// Declared and total recall of what the runtime delivered (1-year window).
    pub live: WindowScore,
    /// The simulator's own session loop for the same strategy and world.
    pub simulated: WindowScore,
    /// The simulator's score of what the runtime asked, as the relays saw it: per relay, every
    /// author named in a kind:1 filter. With one plan per session that is exactly the plan; when
    /// the runtime re-plans within a session it joins every plan's asks, an upper bound on what
    /// those plans fetch (an answer cut short by a re-plan is credited).
    pub live_plan: WindowScore,
    /// The runtime sent exactly the simulator's plan (same relays, same authors).
    pub same_plan: bool,
    /// REQs the relays received (every page and chunk).
    pub reqs: u64,
    /// Round trips the runtime reports (feed pages and lookups).
    pub round_trips: u64,
    /// Events received, duplicates included, as the runtime reports.
    pub events_received: u64,
    /// Distinct notes delivered.
    pub notes: u64,
    /// Kind:1 filters that matched more events than their limit (full pages: with paging the
    /// runtime asks for the next page; without, those events were lost).
    pub capped: usize,
    /// Relays the runtime set aside during the session.
    pub set_aside: usize,
    /// Plans the runtime made (more than one when a relay was set aside and re-planned).
    pub plans: u64,
    /// The planning seed the runtime reports; equal to the simulator's for the session.
    pub seed_matches: bool,
    /// What the runtime's probes did after the fetch, beside the simulator's.
    pub probes: ProbeCounts,
    /// The most sockets the runtime held at once (feed, reader relays, probes).
    pub sockets: usize,
    /// Wall time of the session.
    pub elapsed: Duration,
    /// When the notes arrived, live and simulated (`None`: relays were not delayed,
    /// [`LiveConfig::delay`]).
    pub time: Option<SessionTime>,
}

/// A live and a simulated figure agree when they differ by at most this share of the
/// simulated one…
pub const AGREE_SHARE: f64 = 0.15;

/// …or by at most this many ms, whichever is more.
pub const AGREE_MS: f64 = 200.0;

/// When a session's notes arrived (the 1-year window), live and simulated, measured alike
/// ([`nostr_outbox_sim::clock::time_score`]; ms after the run's start).
#[derive(Clone, Debug, Serialize)]
pub struct SessionTime {
    /// The live run: each delivered note at the moment the runtime handed it over, the fetch
    /// settled at the runtime's last `Settled`, the end when its feed closed.
    pub live: TimeScore,
    /// The simulator's replay of the session on the world's clock.
    pub simulated: TimeScore,
    /// The first screen, live beside simulated.
    pub screen: Agreement,
    /// 90% of the run's fetch in, live beside simulated.
    pub p90: Agreement,
    /// Each delivered note of the window, in arrival order: its world event and ms after the
    /// run's start.
    #[serde(skip)]
    pub arrivals: Vec<(u32, f64)>,
}

impl SessionTime {
    /// Whether the first screen and 90% both agree.
    pub fn agrees(&self) -> bool {
        self.screen.agree && self.p90.agree
    }
}

/// One time figure live beside simulated, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Agreement {
    /// Live (`None`: never reached).
    pub live_ms: Option<f64>,
    /// Simulated (`None`: never reached).
    pub simulated_ms: Option<f64>,
    /// Within `max(AGREE_SHARE × simulated, AGREE_MS)` of each other, or both never reached.
    pub agree: bool,
}

impl Agreement {
    /// Compares a live figure with a simulated one ([`AGREE_SHARE`], [`AGREE_MS`]).
    pub fn new(live_ms: Option<f64>, simulated_ms: Option<f64>) -> Self {
        let agree = match (live_ms, simulated_ms) {
            (Some(l), Some(s)) => (l - s).abs() <= (AGREE_SHARE * s).max(AGREE_MS),
            (None, None) => true,
            _ => false,
        };
        Self {
            live_ms,
            simulated_ms,
            agree,
        }
    }
}

/// A session's probes, live and simulated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeCounts {
    /// Relays the runtime probed.
    pub live: u64,
    /// Of those, relays that answered.
    pub live_answered: u64,
    /// Notes the runtime's probes returned.
    pub live_events: u64,
    /// Relays the simulator probed.
    pub simulated: u64,
    /// Of those, relays up in the session (that answered).
    pub simulated_answered: u64,
    /// Notes the simulator's probes returned.
    pub simulated_events: u64,
}

/// One strategy over every session.
#[derive(Clone, Debug, Serialize)]
pub struct StrategyResult {
    /// The label.
    pub label: String,
    /// The strategy's name as the router reports it.
    pub strategy: String,
    /// Per session.
    pub sessions: Vec<SessionResult>,
}

/// The whole bench.
#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    /// The world's name.
    pub world: String,
    /// Follows.
    pub follows: usize,
    /// World events (one signed note each).
    pub events: usize,
    /// Relays that exist in the world (each a local relay).
    pub relays: usize,
    /// Distinct URLs mapped (relays and URLs that only appear in lists, the latter never
    /// listening).
    pub urls: usize,
    /// Relays with a per-filter cap.
    pub capped_relays: usize,
    /// Sessions ran with one plan each ([`LiveConfig::one_plan`]).
    pub one_plan: bool,
    /// Relays were behind delay proxies and the runs timed ([`LiveConfig::delay`]).
    pub delay: bool,
    /// The first session looked the lists up ([`LiveConfig::lookup_first`]).
    pub lookup_first: bool,
    /// The window fetched and scored ([`LiveConfig::window`]).
    pub window: Window,
    /// Signing and loading.
    pub prepare: Duration,
    /// Per strategy.
    pub strategies: Vec<StrategyResult>,
    /// Per other client ([`clients`]), in the order given.
    pub clients: Vec<ClientResult>,
    /// Whole run.
    pub elapsed: Duration,
}

/// A live bench that could not run.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No strategies, or zero sessions.
    #[error("nothing to run: {0}")]
    Empty(&'static str),
    /// Re-keying failed.
    #[error(transparent)]
    Rekey(#[from] rekey::RekeyError),
    /// No free port range.
    #[error("no {0} free consecutive ports on 127.0.0.1")]
    Ports(usize),
    /// A relay could not start or be loaded.
    #[error(transparent)]
    Fleet(#[from] fleet::FleetError),
    /// A delay proxy could not listen.
    #[error(transparent)]
    Proxy(#[from] delay::ListenError),
    /// The temporary stats directory.
    #[error("stats directory: {0}")]
    Io(#[from] std::io::Error),
}

fn unix_now() -> u64 {
    Timestamp::now().as_secs()
}

/// Runs every strategy live and simulated on `world` and reports both side by side.
pub async fn run_live(
    world: World,
    strategies: &[LiveStrategy],
    cfg: &LiveConfig,
    progress: impl FnMut(Progress<'_>),
) -> Result<LiveReport, LiveError> {
    run_live_with_clients(world, strategies, &[], cfg, progress).await
}

/// [`run_live`], and after the runtime's runs of each session, each of `clients` on the same
/// relays ([`clients`]).
pub async fn run_live_with_clients(
    world: World,
    strategies: &[LiveStrategy],
    clients: &[Box<dyn LiveClient>],
    cfg: &LiveConfig,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<LiveReport, LiveError> {
    let started = Instant::now();
    if strategies.is_empty() {
        return Err(LiveError::Empty("no strategies"));
    }
    let sessions = cfg.sessions.min(world.sessions);
    if sessions == 0 {
        return Err(LiveError::Empty("no sessions"));
    }
    // One URL policy for the world (the first strategy's): lists are read through it live and
    // simulated alike.
    let policy = strategies[0].config.url_policy.clone();
    let live_policy = UrlPolicy {
        allow_loopback: true,
        ..policy.clone()
    };
    let sim = SimWorld::with_policy(world, &policy);
    let world = &sim.world;

    // Ports, keys, notes, relays.
    let prepare_started = Instant::now();
    let url_count = count_urls(world, &policy);
    // Delayed, each relay listens on a port of its own behind the proxy that takes its URL's.
    let port_count = if cfg.delay { 2 * url_count } else { url_count };
    let base = free_port_range(port_count, cfg.port_hint).ok_or(LiveError::Ports(port_count))?;
    let present = unix_now();
    let rekeyed = rekey(world, &policy, base, present)?;
    // Signing blocks this task for a moment on its own threads; nothing else runs yet.
    let notes = sign_events(world, &rekeyed.keys, rekeyed.shift, cfg.threads);
    // Per relay of the fleet, its URL's port (where the runtime connects).
    let mut url_ports: Vec<u16> = Vec::new();
    let mut fleet: Vec<FleetRelay> = Vec::new();
    for (i, r) in world.relays().iter().enumerate().filter(|(_, r)| r.exists) {
        let Some(port) = rekeyed.port_of(world, i as u32) else {
            continue;
        };
        let cap = r.max_limit.map_or(UNCAPPED, |m| (m as usize).max(1));
        // At most one fleet relay per URL: the second half of the range has room for each.
        let listen = if cfg.delay {
            base + (url_count + fleet.len()) as u16
        } else {
            port
        };
        fleet.push(FleetRelay::new(i as u32, listen, cap));
        url_ports.push(port);
    }
    let caps = DelayCaps::of_timeouts(cfg.runtime.connect_timeout, cfg.runtime.eose_timeout);
    let mut proxies: Vec<DelayProxy> = if cfg.delay {
        (fleet.iter().zip(&url_ports))
            .map(|(f, &port)| {
                let url = &world.relays()[f.relay as usize].url;
                DelayProxy::new(url, world.timing(f.relay), port, f.port, caps)
            })
            .collect()
    } else {
        Vec::new()
    };
    let slot_of: HashMap<u32, usize> = fleet
        .iter()
        .enumerate()
        .map(|(i, f)| (f.relay, i))
        .collect();
    for (e, note) in world.events().iter().zip(&notes) {
        for r in world.event_relays(e) {
            if let Some(&i) = slot_of.get(r) {
                fleet[i].store(note).await?;
            }
        }
    }
    drop(notes);
    if cfg.lookup_first {
        // Every list on every reader relay, for the first session's lookup.
        let lists = sign_relay_lists(&rekeyed, &rekeyed.relay_lists)?;
        for reader in &world.reader_relays {
            let at = (world.relay_id(reader)).and_then(|r| slot_of.get(&r).copied());
            for list in at.iter().flat_map(|&i| lists.iter().map(move |l| (i, l))) {
                fleet[list.0].store(list.1).await?;
            }
        }
    }
    let prepare = prepare_started.elapsed();
    progress(Progress::Prepared {
        events: world.events().len(),
        relays: fleet.len(),
        took: prepare,
    });

    // The simulator's own runs, and the plans it made per session (to compare with live),
    // timed on the world's clock with the client the live run uses when relays are delayed.
    // The bench hands the runtime every relay list (but, with `lookup_first`, in the first
    // session): no other run waits for a lookup.
    let client = ClientTiming {
        lists_given: !cfg.lookup_first,
        ..client_timing(&cfg.runtime, cfg.budget)
    };
    let loop_cfg = LoopConfig {
        sessions,
        windows: vec![cfg.window],
        session_interval_secs: 0,
        seed: cfg.seed,
        timing_repeats: 0,
        replan_on_failure: !cfg.one_plan,
        monitor_prior: false,
        clock: cfg.delay.then_some(cfg.window),
        client: client.clone(),
        open: None,
    };
    let mut simulated: Vec<Simulated> = Vec::new();
    for st in strategies {
        let mut router = Router::from_config(&st.config);
        let mut plans = Vec::new();
        let run = run_sessions(&sim, &mut router, &loop_cfg, |_, plan, _| {
            plans.push(Asks::from_plan(&sim, plan));
        });
        let scores = run
            .sessions
            .iter()
            .map(|o| o.score.window(cfg.window).cloned().expect("window scored"))
            .collect();
        let probes = run.sessions.iter().map(|o| o.score.probe.clone()).collect();
        let times = run.sessions.iter().map(|o| o.score.time.clone()).collect();
        simulated.push(Simulated {
            strategy: run.strategy,
            scores,
            plans,
            probes,
            times,
        });
    }

    // Live.
    let signed_lists = if clients.is_empty() {
        Vec::new()
    } else {
        sign_lists(&rekeyed)
    };
    let mut client_results: Vec<ClientResult> = clients
        .iter()
        .map(|c| ClientResult {
            label: c.label(),
            sessions: Vec::new(),
        })
        .collect();
    let dir = tempfile::tempdir()?;
    let since_world = world.now.saturating_sub(cfg.window.secs());
    let since_live = (since_world as i64 + rekeyed.shift).max(0) as u64;
    let mut results: Vec<StrategyResult> = strategies
        .iter()
        .zip(&simulated)
        .map(|(st, sim)| StrategyResult {
            label: st.label.clone(),
            strategy: sim.strategy.clone(),
            sessions: Vec::new(),
        })
        .collect();
    for s in 0..sessions {
        for f in fleet.iter_mut() {
            if world.is_up(f.relay, s) {
                f.start().await?;
            } else {
                f.stop().await;
            }
        }
        for (i, st) in strategies.iter().enumerate() {
            for f in &fleet {
                f.log.take();
            }
            relisten(&mut proxies, &fleet, world, s).await?;
            let session_started = Instant::now();
            let store = Arc::new(nostr_outbox_stats::FileStore::new(
                dir.path().join(format!("strategy-{i}.json")),
            ));
            let mut input = FeedInput::new(
                Router::from_config(&st.config).with_policy(live_policy.clone()),
                rekeyed.follows.clone(),
                &rekeyed.reader_relays,
            );
            let lookup = cfg.lookup_first && s == 0;
            if !lookup {
                input.relay_lists = rekeyed.relay_lists.clone();
            }
            input.store = store;
            input.penalties = PenaltyBox::new();
            let mut runtime = cfg.runtime.clone();
            runtime.once = true;
            // A first run's lookup asks the reader's relays, which hold every list here.
            runtime.discover_lists = lookup;
            runtime.indexers = Vec::new();
            runtime.since = Some(Timestamp::from(since_live));
            runtime.seed = cfg.seed;
            // Every session at the world's present, as the simulator runs them: what is learned
            // from notes' ages does not depend on how long the bench has been running.
            runtime.clock = Some(present);
            if cfg.one_plan {
                runtime.penalty.strikes = u32::MAX;
                // Delayed relays take up to a connect and a page to answer at all.
                runtime.eose_race = Some(if cfg.delay {
                    ONE_PLAN_RACE + cfg.runtime.connect_timeout + cfg.runtime.eose_timeout
                } else {
                    ONE_PLAN_RACE
                });
            }
            let run_started = Instant::now();
            // A client of its own per session: its sockets' peak is the session's, and no
            // socket a previous session left idle is reused.
            let session_client = nostr_outbox_runtime::Client::with(runtime, cfg.budget, None);
            let (handle, rx) = nostr_outbox_runtime::start(input, &session_client).await;
            let got = collect(rx, &rekeyed, world.events().len(), run_started).await;
            let summary = handle.wait().await;
            let mut live = score_delivered(&sim, &got.delivered, s, &[cfg.window]).remove(0);
            // What the probes found beyond the feed, counted apart as the simulator counts it.
            let with_found: Vec<bool> = (got.delivered.iter().zip(&got.found))
                .map(|(d, f)| *d || *f)
                .collect();
            live.found = score_delivered(&sim, &with_found, s, &[cfg.window])[0]
                .declared_fetched
                .saturating_sub(live.declared_fetched);
            // A probed relay was asked nothing else in the session: what it logged is the
            // probe, not the plan.
            let probed = |port: u16| {
                live_policy
                    .canonicalize(&format!("ws://127.0.0.1:{port}"))
                    .is_ok_and(|url| summary.probes.relays.contains_key(&url))
            };
            let seen: Vec<(u32, Vec<SeenFilter>)> = (fleet.iter().zip(&url_ports))
                .map(|(f, &port)| {
                    let log = f.log.take();
                    (f.relay, if probed(port) { Vec::new() } else { log })
                })
                .collect();
            let asks = asks_from_seen(world, &rekeyed, &seen);
            let live_plan = score(&sim, &asks, s, &[cfg.window])
                .window(cfg.window)
                .cloned()
                .expect("window scored");
            let Simulated {
                scores: sim_scores,
                plans: sim_plans,
                probes: sim_probes,
                times: sim_times,
                ..
            } = &simulated[i];
            let sim_probe = &sim_probes[s as usize];
            let time = sim_times[s as usize].as_ref().map(|simulated| {
                session_time(
                    &sim,
                    s,
                    since_world,
                    &got,
                    &client,
                    live.available,
                    simulated,
                )
            });
            let result = SessionResult {
                session: s,
                live,
                simulated: sim_scores[s as usize].clone(),
                live_plan,
                same_plan: same_asks(&asks, &sim_plans[s as usize], world, s),
                reqs: seen
                    .iter()
                    .map(|(_, f)| f.iter().filter(|f| f.kinds == [1]).count() as u64)
                    .sum(),
                round_trips: summary.round_trips,
                events_received: summary.events_received,
                notes: summary.events,
                capped: capped_filters(world, &rekeyed, &seen),
                set_aside: summary.penalised.len(),
                plans: summary.plans,
                seed_matches: summary.seed == loop_cfg.seed_for(s),
                probes: ProbeCounts {
                    live: summary.probes.probed() as u64,
                    live_answered: summary.probes.answered() as u64,
                    live_events: summary.probes.events(),
                    simulated: sim_probe.connections,
                    simulated_answered: sim_probe.reqs,
                    simulated_events: sim_probe.events,
                },
                sockets: summary.sockets.peak,
                elapsed: session_started.elapsed(),
                time,
            };
            progress(Progress::Session {
                label: &st.label,
                result: &result,
            });
            results[i].sessions.push(result);
        }
        for (c, client) in clients.iter().enumerate() {
            for f in &fleet {
                f.log.take();
            }
            relisten(&mut proxies, &fleet, world, s).await?;
            let session_started = Instant::now();
            let reads: Vec<(Window, u64)> = Window::ALL
                .iter()
                .map(|&w| {
                    let since = world.now.saturating_sub(w.secs());
                    (w, (since as i64 + rekeyed.shift).max(0) as u64)
                })
                .collect();
            let run = client
                .run(ClientSession {
                    session: s,
                    follows: &rekeyed.follows,
                    reader_relays: &rekeyed.reader_relays,
                    relay_lists: &signed_lists,
                    reads: &reads,
                    max_events: world.events().len() + 1_000,
                    // What one dial and one answer may take in the runtime.
                    read_timeout: cfg.runtime.connect_timeout + cfg.runtime.eose_timeout,
                })
                .await;
            let mut all = vec![false; world.events().len()];
            let windows = (reads.iter().zip(&run.reads))
                .map(|(&(w, _), notes)| {
                    let delivered = delivered_notes(notes, &rekeyed, world.events().len());
                    for (a, d) in all.iter_mut().zip(&delivered) {
                        *a |= *d;
                    }
                    score_delivered(&sim, &delivered, s, &[w]).remove(0)
                })
                .collect();
            let asked = fleet
                .iter()
                .filter(|f| f.log.take().iter().any(|f| f.kinds == [1]))
                .count();
            let result = ClientSessionResult {
                session: s,
                windows,
                dialled: run.dialled,
                asked,
                notes: all.iter().filter(|d| **d).count() as u64,
                elapsed: session_started.elapsed(),
            };
            let label = &client_results[c].label;
            progress(Progress::Client {
                label,
                result: &result,
            });
            client_results[c].sessions.push(result);
        }
    }
    for proxy in proxies.iter_mut() {
        proxy.stop().await;
    }
    for f in fleet.iter_mut() {
        f.stop().await;
    }
    Ok(LiveReport {
        world: world.name.clone(),
        follows: world.follows.len(),
        events: world.events().len(),
        relays: fleet.len(),
        urls: rekeyed.urls.len(),
        capped_relays: world
            .relays()
            .iter()
            .filter(|r| r.exists && r.max_limit.is_some())
            .count(),
        one_plan: cfg.one_plan,
        lookup_first: cfg.lookup_first,
        window: cfg.window,
        delay: cfg.delay,
        prepare,
        strategies: results,
        clients: client_results,
        elapsed: started.elapsed(),
    })
}

/// Proxies anew for every run: each starts its connection count at zero, as the simulator's
/// draws do, and no connection of an earlier run is left open. Nothing without proxies.
async fn relisten(
    proxies: &mut [DelayProxy],
    fleet: &[FleetRelay],
    world: &World,
    s: u32,
) -> Result<(), LiveError> {
    for (f, proxy) in fleet.iter().zip(proxies.iter_mut()) {
        if world.is_up(f.relay, s) {
            proxy.listen(Mode::Forward { session: s }).await?;
        } else if world.timing(f.relay).hangs {
            proxy.listen(Mode::BlackHole).await?;
        } else {
            proxy.stop().await;
        }
    }
    Ok(())
}

/// The relay lists as signed kind:10002 events, for clients that take events.
fn sign_lists(rekeyed: &Rekeyed) -> Vec<nostr::event::Event> {
    use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
    (rekeyed.relay_lists.iter())
        .filter_map(|list| {
            let i = *rekeyed.follow_of.get(&list.author)? as usize;
            let secret = rekeyed.keys.get(i)?.secret_key().to_secret_bytes();
            let keys = nostr::key::Keys::new(nostr::key::SecretKey::from_slice(&secret).ok()?);
            let tags = (list.tags.iter()).filter_map(|t| Tag::parse(t.iter().cloned()).ok());
            EventBuilder::new(Kind::RelayList, "")
                .tags(tags)
                .custom_created_at(Timestamp::from(list.created_at))
                .finalize(&keys)
                .ok()
        })
        .collect()
}

/// Which world events `notes` hold (notes that name a world event and come from that event's
/// re-keyed author; anything else is ignored).
fn delivered_notes(notes: &[nostr::event::Event], rekeyed: &Rekeyed, events: usize) -> Vec<bool> {
    let mut delivered = vec![false; events];
    for event in notes {
        if let Some(i) = event_index(&event.content).filter(|&i| i < events) {
            if rekeyed.follow_of.contains_key(&event.pubkey) {
                delivered[i] = true;
            }
        }
    }
    delivered
}

/// The simulator's run of one strategy: per session its 1-year score, its plan, its probes and
/// its time figures (when timed).
struct Simulated {
    strategy: String,
    scores: Vec<WindowScore>,
    plans: Vec<Asks>,
    probes: Vec<ProbeCost>,
    times: Vec<Option<TimeScore>>,
}

fn count_urls(world: &World, policy: &UrlPolicy) -> usize {
    // Re-keying with any base gives the count; ports are checked afterwards.
    rekey::rekey(world, policy, 10_000, world.now).map_or(0, |r| r.urls.len())
}

/// What a run delivered, and when.
struct Collected {
    /// Per world event, whether it was delivered.
    delivered: Vec<bool>,
    /// Per world event, whether a probe found it after the fetch (`FeedEvent::Found`: the
    /// runtime passes on only notes no relay delivered).
    found: Vec<bool>,
    /// Each delivered world event, in arrival order, with ms after the run's start.
    arrivals: Vec<(u32, f64)>,
    /// The runtime's last `Settled`, ms.
    settled_ms: Option<f64>,
    /// When the feed closed, ms.
    end_ms: f64,
}

/// Drains the feed channel: which world events were delivered (notes that name a world event
/// and come from that event's re-keyed author; anything else is ignored) and when, in ms after
/// `started`.
async fn collect(
    mut rx: mpsc::Receiver<FeedEvent>,
    rekeyed: &Rekeyed,
    events: usize,
    started: Instant,
) -> Collected {
    let ms = || started.elapsed().as_secs_f64() * 1_000.0;
    let mut delivered = vec![false; events];
    let mut found = vec![false; events];
    let mut arrivals = Vec::new();
    let mut settled_ms = None;
    while let Some(ev) = rx.recv().await {
        let event = match ev {
            FeedEvent::Note { event, .. } => event,
            FeedEvent::Found { event, .. } => {
                let i = event_index(&event.content).filter(|&i| i < events);
                if let Some(i) = i.filter(|_| rekeyed.follow_of.contains_key(&event.pubkey)) {
                    found[i] = true;
                }
                continue;
            }
            FeedEvent::Status(nostr_outbox_runtime::Status::Settled) => {
                settled_ms = Some(ms());
                continue;
            }
            FeedEvent::Status(_) => continue,
        };
        let Some(i) = event_index(&event.content).filter(|&i| i < events) else {
            continue;
        };
        if rekeyed.follow_of.contains_key(&event.pubkey) && !delivered[i] {
            delivered[i] = true;
            arrivals.push((i as u32, ms()));
        }
    }
    Collected {
        delivered,
        found,
        arrivals,
        settled_ms,
        end_ms: ms(),
    }
}

/// The live run's notes of the window (`since` and later) as a timeline, measured as the
/// simulator measures its replay, beside the simulator's figures.
fn session_time(
    sim: &SimWorld,
    session: u32,
    since: u64,
    got: &Collected,
    client: &ClientTiming,
    reachable: u64,
    simulated: &TimeScore,
) -> SessionTime {
    let events = sim.world.events();
    let arrivals: Vec<(u32, f64)> = (got.arrivals.iter().copied())
        .filter(|&(e, _)| events[e as usize].created_at >= since)
        .collect();
    let timeline = Timeline {
        arrived: arrivals.iter().map(|&(e, t)| (e, Some(t))).collect(),
        settled_ms: got.settled_ms.unwrap_or(got.end_ms),
        end_ms: got.end_ms,
        ..Timeline::default()
    };
    let ideal = nostr_outbox_sim::clock::fastest(sim, session, since, client);
    let live = nostr_outbox_sim::clock::time_score(sim, &timeline, reachable, Some(&ideal));
    SessionTime {
        screen: Agreement::new(live.screen_ms, simulated.screen_ms),
        p90: Agreement::new(live.p90_ms, simulated.p90_ms),
        live,
        simulated: simulated.clone(),
        arrivals,
    }
}

/// The plan the runtime sent, as the relays saw it: per relay, every author named in a kind:1
/// filter (pages and chunks joined).
fn asks_from_seen(world: &World, rekeyed: &Rekeyed, seen: &[(u32, Vec<SeenFilter>)]) -> Asks {
    let mut entries = Vec::new();
    for (relay, filters) in seen {
        let mut authors: Vec<u32> = filters
            .iter()
            .filter(|f| f.kinds == [1])
            .flat_map(|f| f.authors.iter())
            .filter_map(|pk| {
                let pk = nostr::key::PublicKey::from_slice(pk).ok()?;
                rekeyed.follow_of.get(&pk).copied()
            })
            .collect();
        if authors.is_empty() {
            continue;
        }
        authors.sort_unstable();
        authors.dedup();
        entries.push(Ask {
            url: world.relays()[*relay as usize].url.clone(),
            relay: Some(*relay),
            authors,
        });
    }
    Asks {
        entries,
        orphans: None,
        foreign_authors: 0,
    }
}

/// Whether the runtime asked every relay that answers in `session` about exactly the authors
/// the simulator's plan asked it about (relays that do not answer cannot be seen live).
fn same_asks(live: &Asks, sim: &Asks, world: &World, session: u32) -> bool {
    let answering = |asks: &Asks| -> BTreeMap<u32, Vec<u32>> {
        asks.entries
            .iter()
            .filter_map(|e| {
                let r = e.relay?;
                world
                    .is_up(r, session)
                    .then(|| (r, e.authors.clone()))
                    .filter(|(_, a)| !a.is_empty())
            })
            .collect()
    };
    answering(live) == answering(sim)
}

/// Kind:1 filters for which the relay held more matching events than its cap.
fn capped_filters(world: &World, rekeyed: &Rekeyed, seen: &[(u32, Vec<SeenFilter>)]) -> usize {
    let mut capped = 0;
    for (relay, filters) in seen {
        for f in filters.iter().filter(|f| f.kinds == [1]) {
            let limit = f.limit.unwrap_or(UNCAPPED);
            let mut matching = 0usize;
            for pk in &f.authors {
                let Some(a) = nostr::key::PublicKey::from_slice(pk)
                    .ok()
                    .and_then(|pk| rekeyed.follow_of.get(&pk).copied())
                else {
                    continue;
                };
                let since = f.since.map(|t| (t as i64 - rekeyed.shift).max(0) as u64);
                let until = f.until.map(|t| (t as i64 - rekeyed.shift).max(0) as u64);
                matching += world
                    .author_events_since(a, since.unwrap_or(0))
                    .iter()
                    .filter(|e| until.is_none_or(|u| e.created_at <= u))
                    .filter(|e| world.event_relays(e).contains(relay))
                    .count();
            }
            if matching > limit {
                capped += 1;
            }
        }
    }
    capped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_agree_within_a_share_or_a_floor() {
        // The floor: 200 ms either way of a short figure.
        assert!(Agreement::new(Some(300.0), Some(100.0)).agree);
        assert!(!Agreement::new(Some(301.0), Some(100.0)).agree);
        // The share: 15% of a long one.
        assert!(Agreement::new(Some(11_500.0), Some(10_000.0)).agree);
        assert!(!Agreement::new(Some(8_400.0), Some(10_000.0)).agree);
        // Never reached on both sides agrees; on one side does not.
        assert!(Agreement::new(None, None).agree);
        assert!(!Agreement::new(Some(1.0), None).agree);
    }

    /// The timed bench runs the runtime at its defaults, which the clock replays by default.
    #[test]
    fn the_timed_bench_runs_the_clocks_client() {
        assert_eq!(
            client_timing(&LiveConfig::timed().runtime, SocketBudget::default()),
            ClientTiming::default()
        );
    }
}

//! The benchmark suite: every registered strategy and the named combinations, on generated
//! worlds, through the session loop, aggregated over seeds.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use nostr_outbox_core::{default_probes, registry, Router, RouterConfig, DEFAULT_MAX_CONNECTIONS};
use nostr_outbox_world::{generate_in, Family, Profile};
use serde::Serialize;

use crate::ceiling::{run_ceiling, CEILING};
use crate::mean::MeanSe;
use crate::route_rows::{route_rows, RouteRecord, RouteRow};
use crate::routes::{score_routes, RouteLoopConfig};
use crate::run_record::RunRecord;
use crate::score::{PlanScore, WindowScore};
use crate::session::{median, run_oracle, run_sessions, LoopConfig, ORACLE};
use crate::share::{ceiling_shares, ShareRow};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// How a bound row (learnable ceiling, oracle) is scored on a world.
type BoundRun = fn(&SimWorld, &LoopConfig, usize) -> Vec<crate::session::SessionOutcome>;

/// Combinations that are config, not code: (label, full router config without
/// `max_connections`). Run when their strategies and scorers are registered.
pub const COMBINATIONS: &[(&str, &str)] = &[
    // The published Thompson rows, which know nothing of latency.
    (
        "stochastic+thompson",
        "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\nlatency_discount = false\n",
    ),
    // The published latency-discount variant: each relay's Thompson score times
    // `1 / (1 + latency_ms / 1000)`, latency learned from each run's answers.
    (
        "stochastic+thompson+latency",
        "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\nlatency_discount = true\n",
    ),
    // Filter decomposition's per-author fan-out with each list ranked by Thompson draws
    // instead of list order: the published "filter decomposition + Thompson" row.
    (
        "fd+thompson",
        "[strategy]\ntype = \"filter_decomposition\"\n[strategy.scorer]\ntype = \"thompson\"\nlatency_discount = false\n",
    ),
    (
        "greedy+fixed_thompson",
        "[strategy]\ntype = \"greedy\"\n[strategy.scorer]\ntype = \"fixed_thompson\"\nlatency_discount = false\n",
    ),
    // `recall` on a table holding the relay hints the client knows: the world's (kind:3,
    // pointer, seen-on) and the relays learned stats saw notes arrive on.
    (
        "recall+hints",
        "hints = true\n[strategy]\ntype = \"recall\"\n",
    ),
];

/// One row of the suite: a label and a router config (TOML, without `max_connections`: the
/// bench sets the budget).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SuiteEntry {
    /// Row label.
    pub label: String,
    /// Router config TOML.
    pub toml: String,
}

/// The suite, defined in one place: every registered strategy with its example config, then
/// [`COMBINATIONS`].
pub fn default_suite() -> Vec<SuiteEntry> {
    let mut suite: Vec<SuiteEntry> = registry::strategies()
        .into_iter()
        .map(|d| SuiteEntry {
            label: d.name.to_string(),
            toml: example_config(d),
        })
        .collect();
    suite.extend(COMBINATIONS.iter().map(|(label, toml)| SuiteEntry {
        label: (*label).to_string(),
        toml: (*toml).to_string(),
    }));
    suite
}

/// A strategy's registered example as a router config. An example that cannot be made leaves
/// only the `type`, so resolving the entry skips it with the config's own complaint.
fn example_config(d: &registry::StrategyDescriptor) -> String {
    let table = d.example_table().unwrap_or_else(|_| {
        let mut bare = toml::Table::new();
        bare.insert("type".into(), d.name.into());
        bare
    });
    let mut root = toml::Table::new();
    root.insert("strategy".into(), toml::Value::Table(table));
    toml::to_string(&root).unwrap_or_else(|_| format!("[strategy]\ntype = {:?}\n", d.name))
}

/// A suite entry that cannot run here, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Row label.
    pub label: String,
    /// Why (usually: a strategy or scorer it names is not registered yet).
    pub reason: String,
}

/// Parses every entry; entries whose config does not parse (typically a strategy or scorer
/// that is not registered yet) are skipped with the reason.
pub fn resolve(suite: &[SuiteEntry]) -> (Vec<(String, RouterConfig)>, Vec<Skipped>) {
    let mut ready = Vec::new();
    let mut skipped = Vec::new();
    for e in suite {
        match RouterConfig::from_toml(&e.toml) {
            Ok(c) => ready.push((e.label.clone(), c)),
            Err(err) => {
                let reason = err
                    .issues
                    .iter()
                    .map(|i| i.to_string().trim().to_string())
                    .collect::<Vec<_>>()
                    .join("; ");
                skipped.push(Skipped {
                    label: e.label.clone(),
                    reason,
                });
            }
        }
    }
    (ready, skipped)
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchConfig {
    /// World sizes.
    pub profiles: Vec<Profile>,
    /// World seeds (one world per profile and seed).
    pub seeds: Vec<u64>,
    /// Sessions per strategy.
    pub sessions: u32,
    /// Windows scored.
    pub windows: Vec<Window>,
    /// Routed-relay budget of every strategy and the oracle.
    pub budget: usize,
    /// Only these labels (all when `None`).
    pub only: Option<Vec<String>>,
    /// Include the oracle row.
    pub oracle: bool,
    /// Include the learnable-ceiling row ([`crate::ceiling`]).
    pub ceiling: bool,
    /// Clock step between sessions, for the decay of learned stats.
    pub session_interval_secs: u64,
    /// Extra timed planning runs per strategy and world.
    pub timing_repeats: usize,
    /// Worker threads (0 = one per core).
    pub threads: usize,
    /// Also run every strategy with the world's monitor data applied before session 0
    /// ([`LoopConfig::monitor_prior`]) and report the comparison ([`BenchReport::monitors`]).
    pub monitors: bool,
    /// How the worlds' knobs are drawn ([`Family`]).
    pub family: Family,
    /// Also score the inbox and publish routes on every world ([`BenchReport::routes`]).
    pub routes: bool,
    /// Relays probed per session by every strategy that learns, instead of each config's
    /// `probe_connections` (`Some(0)`: the published benchmark's model, no probes).
    pub probes: Option<usize>,
    /// The window timed on the worlds' clock ([`LoopConfig::clock`]; `None`: recall only).
    #[serde(default)]
    pub clock: Option<Window>,
    /// Within a session, set aside the relays that did not answer and plan again without them,
    /// as the runtime does ([`LoopConfig::replan_on_failure`]); off, one plan per session: the
    /// published benchmark's model.
    #[serde(default)]
    pub replan: bool,
    /// After each session's fetch, keep every row's feed open this many seconds and score it
    /// ([`crate::open`], [`BenchReport::open`]); `None`: not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<u64>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            profiles: vec![Profile::Small, Profile::Medium, Profile::Large],
            seeds: vec![1, 2],
            sessions: 5,
            windows: Window::ALL.to_vec(),
            budget: DEFAULT_MAX_CONNECTIONS,
            only: None,
            oracle: true,
            ceiling: true,
            session_interval_secs: LoopConfig::default().session_interval_secs,
            timing_repeats: LoopConfig::default().timing_repeats,
            threads: 0,
            monitors: false,
            family: Family::Default,
            routes: true,
            probes: None,
            clock: Some(Window::D7),
            replan: false,
            open: None,
        }
    }
}

/// Progress of a running bench.
#[derive(Clone, Debug)]
pub enum Progress {
    /// The number of (strategy, world) runs ahead, the route scoring of each world
    /// ([`BenchConfig::routes`]) counted as one.
    Start {
        /// Total runs.
        total: usize,
    },
    /// One run finished.
    Done {
        /// Its label.
        label: String,
        /// Its world.
        world: String,
    },
}

/// Declared and total recall of one window for a row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RowWindow {
    /// The window.
    pub window: Window,
    /// Declared recall in the first session, over the worlds where some event was
    /// declared-available (`n` = 0: none was, recall does not apply).
    pub first: MeanSe,
    /// Declared recall in the last session (over worlds as for `first`).
    pub last: MeanSe,
    /// Total recall in the last session, over the worlds where some event was available.
    pub total_last: MeanSe,
    /// REQ pages sent to fetch the window in the last session.
    pub round_trips: MeanSe,
    /// Events the relays returned for the window in the last session (duplicates included).
    pub events: MeanSe,
    /// Events returned per distinct note fetched in the last session: the price of asking
    /// several relays about one author (1 = no note came twice; 0 when nothing was fetched).
    pub events_per_note: MeanSe,
    /// Declared recall with what the session's probes found beyond the plan, first session
    /// ([`WindowScore::declared_with_found`]): what a client delivers.
    pub first_with_found: MeanSe,
    /// The same in the last session.
    pub last_with_found: MeanSe,
}

/// One strategy's aggregate over worlds (profiles × seeds), last session unless noted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Label.
    pub label: String,
    /// Per window.
    pub windows: Vec<RowWindow>,
    /// Connections.
    pub connections: MeanSe,
    /// Disclosure.
    pub disclosure: MeanSe,
    /// Relays told about each follow, mean over follows ([`PlanScore::per_follow`]).
    pub per_follow: MeanSe,
    /// The most relays told about one follow, over every world.
    pub per_follow_max: usize,
    /// Orphans before the residual.
    pub orphans: MeanSe,
    /// Author coverage.
    pub author_coverage: MeanSe,
    /// Relay load concentration.
    pub load_concentration: MeanSe,
    /// Median over worlds of the median planning time, µs.
    pub plan_us: f64,
    /// Median over worlds of [`RunRecord::plan_us_cold`], µs: a session's first plan.
    pub plan_us_cold: f64,
    /// Median over worlds of [`RunRecord::plan_us_warm`], µs: plans repeated with the final
    /// stats.
    pub plan_us_warm: f64,
    /// What probing cost per session, over every session of every world.
    pub probes: ProbeRow,
    /// When the clock's window arrived, in the first and the last session (`None`: not timed).
    pub time: Option<TimeRow>,
}

/// When a row's feed arrived ([`crate::clock::TimeScore`]): the first session (a first run:
/// nothing learned, no lists kept) and the last.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeRow {
    /// First session.
    pub first: TimeFigures,
    /// Last session.
    pub last: TimeFigures,
}

/// One session's time figures over worlds, ms unless noted; each over the worlds where it
/// exists (a feed that never filled a screen has no screen time).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeFigures {
    /// The first note.
    pub first_note: MeanSe,
    /// The first screen ([`crate::clock::SCREEN`] newest notes of the run's fetch) in.
    pub screen: MeanSe,
    /// 90% of the run's fetch in.
    pub p90: MeanSe,
    /// The last note in.
    pub last_note: MeanSe,
    /// The run ended.
    pub end: MeanSe,
    /// Share of the run's own fetch in at each of [`crate::clock::COMPLETENESS_AT_MS`].
    pub own: Vec<MeanSe>,
    /// Share of the reachable notes in at each of [`crate::clock::COMPLETENESS_AT_MS`].
    pub reachable: Vec<MeanSe>,
    /// Worlds whose screen never filled before the deadline.
    pub no_screen: usize,
    /// The first screen's time over the same notes' on the time ceiling, per world.
    pub screen_ratio: MeanSe,
    /// 90%'s time over the same notes' on the time ceiling, per world.
    pub p90_ratio: MeanSe,
}

impl TimeFigures {
    fn of(scores: &[&crate::clock::TimeScore]) -> Self {
        let over = |f: &dyn Fn(&crate::clock::TimeScore) -> Option<f64>| {
            MeanSe::of(&scores.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
        };
        let at = |own: bool| {
            (crate::clock::COMPLETENESS_AT_MS.iter())
                .map(|&ms| over(&|s| s.at(ms).map(|c| if own { c.own } else { c.reachable })))
                .collect()
        };
        Self {
            first_note: over(&|s| s.first_note_ms),
            screen: over(&|s| s.screen_ms),
            p90: over(&|s| s.p90_ms),
            last_note: over(&|s| s.last_note_ms),
            end: over(&|s| Some(s.end_ms)),
            own: at(true),
            reachable: at(false),
            no_screen: scores
                .iter()
                .filter(|s| s.fetched > 0 && s.screen_ms.is_none())
                .count(),
            screen_ratio: over(&|s| s.screen_ratio()),
            p90_ratio: over(&|s| s.p90_ratio()),
        }
    }
}

/// Per session: what the probes after the fetch cost ([`crate::probe::ProbeCost`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProbeRow {
    /// Short connections opened.
    pub connections: MeanSe,
    /// REQs answered.
    pub reqs: MeanSe,
    /// Follow-relay pairs named (disclosure).
    pub filters: MeanSe,
    /// Events returned.
    pub events: MeanSe,
}

impl Row {
    /// The row's window aggregate.
    pub fn window(&self, w: Window) -> Option<&RowWindow> {
        self.windows.iter().find(|x| x.window == w)
    }
}

/// A finished bench.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// What ran.
    pub config: BenchConfig,
    /// Suite entries that did not run.
    pub skipped: Vec<Skipped>,
    /// Rows over every world, sorted by 1-year recall (best first), oracle last.
    pub rows: Vec<Row>,
    /// Rows per profile, same order.
    pub rows_by_profile: BTreeMap<String, Vec<Row>>,
    /// Every run.
    pub runs: Vec<RunRecord>,
    /// Per row but the bounds, in the rows' order: recall as a share of the learnable
    /// ceiling, world by world ([`crate::share`]).
    pub shares: Vec<ShareRow>,
    /// With [`BenchConfig::monitors`]: per strategy, recall with and without the monitor
    /// prior (empty otherwise).
    pub monitors: Vec<MonitorRow>,
    /// With [`BenchConfig::monitors`]: every run with the monitor prior applied.
    pub monitor_runs: Vec<RunRecord>,
    /// With [`BenchConfig::routes`]: inbox recall and publish reach of the routes library and of
    /// a naive client, over every world (empty otherwise).
    pub routes: Vec<RouteRow>,
    /// With [`BenchConfig::routes`]: every world's route scores.
    pub route_runs: Vec<RouteRecord>,
    /// With [`BenchConfig::open`]: per row, the feed left open (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<OpenRow>,
}

/// One row's open feed over worlds: each world's sessions pooled, then the mean over worlds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpenRow {
    /// Row label ([`CEILING`]'s row is the live ceiling).
    pub label: String,
    /// Live completeness: notes delivered over notes that arrived on a listed relay while it
    /// was up, every session of a world together.
    pub completeness: MeanSe,
    /// This row's completeness minus `recall`'s, paired by world (n = 0 without a recall row).
    pub vs_recall: MeanSe,
    /// Delay from arrival to delivery, seconds: the median, mean over sessions and worlds.
    pub delay_p50: MeanSe,
    /// The 99th percentile, mean over sessions and worlds.
    pub delay_p99: MeanSe,
    /// Share of gaps (a subscribed relay down and back while open) whose notes were asked
    /// for once it was back, per world.
    pub gaps_filled: MeanSe,
    /// From a relay's return to its gap delivered, seconds: the median, mean over sessions.
    pub catch_up_p50: MeanSe,
    /// Sockets held, mean over the time open, per session.
    pub sockets: MeanSe,
    /// REQs sent per session.
    pub reqs: MeanSe,
    /// Events moved per session.
    pub events: MeanSe,
    /// Plans made while open, per session.
    pub plans: MeanSe,
    /// Notes counted per session.
    pub notes: MeanSe,
}

/// The live ceiling of every session of `sim` ([`crate::open::ceiling`]).
fn live_ceiling(
    budget: usize,
    sim: &SimWorld,
    cfg: &LoopConfig,
    open: &crate::open::OpenConfig,
) -> Vec<crate::open::OpenScore> {
    (0..cfg.sessions)
        .map(|s| {
            let hour = crate::open::OpenWorld::draw(sim, s, open.secs as f64, &open.model);
            crate::open::ceiling(&hour, budget)
        })
        .collect()
}

/// The label of the open-feed row of the best relays of the budget, chosen knowing the hour.
pub const LIVE_BUDGET_CEILING: &str = "live ceiling at budget";

/// The open-feed rows: strategies by live completeness, the live ceilings last (every holder,
/// then the budget's best relays).
pub fn open_rows(runs: &[RunRecord]) -> Vec<OpenRow> {
    // The budget's ceiling is read off the live ceiling's scores, as a row of its own.
    let at_budget: Vec<RunRecord> = (runs.iter())
        .filter(|r| r.label == CEILING && !r.open.is_empty())
        .map(|r| RunRecord {
            label: LIVE_BUDGET_CEILING.to_string(),
            sessions: Vec::new(),
            open: (r.open.iter())
                .map(|o| crate::open::OpenScore {
                    delivered: o.at_budget,
                    delay_p50: None,
                    delay_p99: None,
                    sockets: 0.0,
                    reqs: 0,
                    dials: 0,
                    events: 0.0,
                    ..o.clone()
                })
                .collect(),
            ..r.clone()
        })
        .collect();
    let all: Vec<RunRecord> = runs.iter().cloned().chain(at_budget).collect();
    let runs = all.as_slice();
    let mut labels: Vec<&str> = (runs.iter())
        .filter(|r| !r.open.is_empty())
        .map(|r| r.label.as_str())
        .collect();
    labels.sort_unstable();
    labels.dedup();
    let pooled = |r: &RunRecord| {
        let (d, n) = (r.open.iter()).fold((0, 0), |(d, n), o| (d + o.delivered, n + o.notes));
        (n > 0).then(|| d as f64 / n as f64)
    };
    let mut rows: Vec<OpenRow> = labels
        .into_iter()
        .map(|label| {
            let mine: Vec<&RunRecord> = (runs.iter())
                .filter(|r| r.label == label && !r.open.is_empty())
                .collect();
            let per_session = |f: &dyn Fn(&crate::open::OpenScore) -> Option<f64>| {
                let xs: Vec<f64> = (mine.iter().flat_map(|r| r.open.iter()))
                    .filter_map(f)
                    .collect();
                MeanSe::of(&xs)
            };
            let paired: Vec<f64> = (mine.iter())
                .filter_map(|r| {
                    let base = runs.iter().find(|b| {
                        b.label == "recall" && b.profile == r.profile && b.seed == r.seed
                    })?;
                    Some(pooled(r)? - pooled(base)?)
                })
                .collect();
            let filled: Vec<f64> = (mine.iter())
                .filter_map(|r| {
                    let (f, g) =
                        (r.open.iter()).fold((0, 0), |(f, g), o| (f + o.gaps_filled, g + o.gaps));
                    (g > 0).then(|| f as f64 / g as f64)
                })
                .collect();
            OpenRow {
                label: label.to_string(),
                completeness: MeanSe::of(
                    &mine.iter().filter_map(|r| pooled(r)).collect::<Vec<_>>(),
                ),
                vs_recall: MeanSe::of(&paired),
                delay_p50: per_session(&|o| o.delay_p50),
                delay_p99: per_session(&|o| o.delay_p99),
                gaps_filled: MeanSe::of(&filled),
                catch_up_p50: per_session(&|o| o.catch_up_p50),
                sockets: per_session(&|o| Some(o.sockets)),
                reqs: per_session(&|o| Some(o.reqs as f64)),
                events: per_session(&|o| Some(o.events)),
                plans: per_session(&|o| Some(o.plans as f64)),
                notes: per_session(&|o| Some(o.notes as f64)),
            }
        })
        .collect();
    let rank = |label: &str| match label {
        CEILING => 1,
        LIVE_BUDGET_CEILING => 2,
        _ => 0,
    };
    rows.sort_by(|a, b| {
        rank(&a.label)
            .cmp(&rank(&b.label))
            .then(b.completeness.mean.total_cmp(&a.completeness.mean))
            .then(a.label.cmp(&b.label))
    });
    rows
}

/// One strategy's declared recall (the sort window, see [`sort_window`]) in the first and the
/// last session, over every world, without and with the monitor prior.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MonitorRow {
    /// Row label.
    pub label: String,
    /// The window compared.
    pub window: Window,
    /// First session, cold start.
    pub first: MeanSe,
    /// First session, monitor data applied before it.
    pub first_monitored: MeanSe,
    /// Last session, cold start.
    pub last: MeanSe,
    /// Last session, monitor data applied before the first.
    pub last_monitored: MeanSe,
    /// First session, with minus without, paired by world: its standard error is the one that
    /// says whether the difference is real (the worlds' spread cancels out).
    pub first_gain: MeanSe,
    /// Last session, with minus without, paired by world.
    pub last_gain: MeanSe,
}

/// One unit of a bench's work (worlds are indexes into the bench's list of worlds).
#[derive(Clone, Copy)]
enum Task {
    /// Generate world `w`.
    Generate(usize),
    /// Score the inbox and publish routes on world `w`.
    Routes(usize),
    /// A bound row (label, how it is scored) on world `w`.
    Bound(usize, &'static str, BoundRun),
    /// Suite row `r` on world `w`.
    Strategy(usize, usize),
}

/// A generated world, ready for the bench's tasks.
struct PreparedWorld {
    profile: Profile,
    seed: u64,
    name: String,
    sim: SimWorld,
    loop_cfg: LoopConfig,
}

/// The world (`profile`, `seed`) of the bench, with sessions enough for `cfg`, and the session
/// loop every row of it runs.
fn prepare_world(cfg: &BenchConfig, profile: Profile, seed: u64) -> PreparedWorld {
    let mut world = generate_in(cfg.family, profile, seed);
    if world.sessions < cfg.sessions {
        let model = nostr_outbox_world::WorldModel {
            sessions: cfg.sessions,
            ..cfg
                .family
                .model(&nostr_outbox_world::WorldModel::for_profile(profile), seed)
        };
        world = nostr_outbox_world::generate_with(&model, &world.name, seed)
            .expect("generated worlds are well-formed");
    }
    let name = world.name.clone();
    PreparedWorld {
        profile,
        seed,
        name,
        sim: SimWorld::new(world),
        loop_cfg: LoopConfig {
            sessions: cfg.sessions,
            windows: cfg.windows.clone(),
            session_interval_secs: cfg.session_interval_secs,
            seed,
            timing_repeats: cfg.timing_repeats,
            replan_on_failure: cfg.replan,
            monitor_prior: false,
            clock: cfg.clock,
            client: Default::default(),
            open: cfg.open.map(|secs| crate::open::OpenConfig {
                // The feed holds as many sockets as the bench's connections, polling the rest.
                sockets: cfg.budget,
                ..crate::open::OpenConfig::for_secs(secs)
            }),
        },
    }
}

/// Where one world waits for its tasks: put there once generated, taken by each task, dropped
/// after the last. Its lock is a leaf: held only to put, wait for or drop the world.
struct WorldSlot {
    world: Mutex<SlotState>,
    ready: Condvar,
    /// Tasks of the world not yet done.
    left: AtomicUsize,
}

/// What a [`WorldSlot`] holds.
enum SlotState {
    /// Not generated yet.
    Pending,
    /// Generated.
    Ready(Arc<PreparedWorld>),
    /// Its generation panicked: its tasks panic too, instead of waiting for ever.
    Failed,
    /// Every task is done.
    Dropped,
}

impl WorldSlot {
    fn new(tasks: usize) -> Self {
        Self {
            world: Mutex::new(SlotState::Pending),
            ready: Condvar::new(),
            left: AtomicUsize::new(tasks),
        }
    }

    fn set(&self, state: SlotState) {
        // A poisoned lock still holds a state to replace.
        *self.world.lock().unwrap_or_else(|e| e.into_inner()) = state;
        self.ready.notify_all();
    }

    /// Generates the world with `make` and puts it; if `make` panics, the world's tasks are
    /// told, and the panic goes on.
    fn generate(&self, make: impl FnOnce() -> PreparedWorld) {
        struct OnPanic<'a>(&'a WorldSlot);
        impl Drop for OnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.set(SlotState::Failed);
                }
            }
        }
        let guard = OnPanic(self);
        let world = make();
        std::mem::forget(guard);
        self.set(SlotState::Ready(Arc::new(world)));
    }

    /// The world, once its generating task (always taken before the world's other tasks) has
    /// put it.
    fn get(&self) -> Arc<PreparedWorld> {
        let guard = self.world.lock().unwrap_or_else(|e| e.into_inner());
        let guard = self
            .ready
            .wait_while(guard, |w| matches!(w, SlotState::Pending))
            .unwrap_or_else(|e| e.into_inner());
        match &*guard {
            SlotState::Ready(world) => Arc::clone(world),
            _ => panic!("the world's generation failed"),
        }
    }

    /// One task of the world is done; after the last, the world is dropped.
    fn done(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            let world = std::mem::replace(
                &mut *self.world.lock().unwrap_or_else(|e| e.into_inner()),
                SlotState::Dropped,
            );
            drop(world);
        }
    }
}

/// Runs the bench. Worlds are generated once each and shared by every strategy; work is spread
/// over `cfg.threads` threads by task (one row, bound or route scoring on one world).
pub fn run_bench(
    cfg: &BenchConfig,
    suite: &[SuiteEntry],
    progress: &(dyn Fn(Progress) + Sync),
) -> BenchReport {
    let (ready, mut skipped) = resolve(suite);
    let ready: Vec<(String, RouterConfig)> = match &cfg.only {
        None => ready,
        Some(only) => {
            for want in only {
                if want != ORACLE
                    && !ready.iter().any(|(l, _)| l == want)
                    && !skipped.iter().any(|s| &s.label == want)
                {
                    skipped.push(Skipped {
                        label: want.clone(),
                        reason: "not in the suite".into(),
                    });
                }
            }
            skipped.retain(|s| only.contains(&s.label));
            ready
                .into_iter()
                .filter(|(l, _)| only.contains(l))
                .collect()
        }
    };
    for s in &skipped {
        tracing::info!(label = %s.label, reason = %s.reason, "skipping suite entry");
    }
    let oracle = cfg.oracle;
    let mut jobs: Vec<(Profile, u64)> = cfg
        .profiles
        .iter()
        .flat_map(|&p| cfg.seeds.iter().map(move |&s| (p, s)))
        .collect();
    // Biggest worlds first, so the slowest job does not start last.
    jobs.sort_by_key(|&(p, s)| (std::cmp::Reverse(p), s));
    let ceiling = cfg.ceiling;
    let per_world =
        ready.len() + usize::from(oracle) + usize::from(ceiling) + usize::from(cfg.routes);
    progress(Progress::Start {
        total: jobs.len() * per_world,
    });

    // Work is spread by task, not by world: one world's rows, bounds and routes run on every
    // thread at once, so the biggest world does not leave the other threads idle. A world is
    // generated by the task queued before its first row (one world ahead of the rows being
    // run), shared by its tasks, and dropped when its last task is done.
    let mut tasks: Vec<Task> = Vec::new();
    for (w, _) in jobs.iter().enumerate() {
        if w == 0 {
            tasks.push(Task::Generate(0));
        }
        if w + 1 < jobs.len() {
            tasks.push(Task::Generate(w + 1));
        }
        // The longest first: the routes, the ceilings, then the strategies.
        if cfg.routes {
            tasks.push(Task::Routes(w));
        }
        if ceiling {
            tasks.push(Task::Bound(w, CEILING, run_ceiling));
        }
        if oracle {
            tasks.push(Task::Bound(w, ORACLE, run_oracle));
        }
        tasks.extend((0..ready.len()).map(|i| Task::Strategy(w, i)));
    }
    let slots: Vec<WorldSlot> = jobs.iter().map(|_| WorldSlot::new(per_world)).collect();
    let threads = if cfg.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        cfg.threads
    }
    .min(tasks.len().max(1));
    let next = AtomicUsize::new(0);
    let runs = Mutex::new((Vec::new(), Vec::new(), Vec::new()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&task) = tasks.get(i) else {
                    break;
                };
                let w = match task {
                    Task::Generate(w) => {
                        let (profile, seed) = jobs[w];
                        slots[w].generate(|| prepare_world(cfg, profile, seed));
                        continue;
                    }
                    Task::Routes(w) | Task::Bound(w, _, _) | Task::Strategy(w, _) => w,
                };
                let world = slots[w].get();
                let (profile, seed) = (world.profile, world.seed);
                let (mut local, mut local_monitored, mut route_run) =
                    (Vec::new(), Vec::new(), None);
                match task {
                    Task::Generate(_) => {}
                    Task::Routes(_) => {
                        route_run = Some(RouteRecord {
                            profile,
                            seed,
                            sessions: score_routes(
                                &world.sim.world,
                                &world.sim.policy,
                                &RouteLoopConfig {
                                    sessions: cfg.sessions,
                                    windows: cfg.windows.clone(),
                                    session_interval_secs: cfg.session_interval_secs,
                                    ..RouteLoopConfig::default()
                                },
                            ),
                        });
                        progress(Progress::Done {
                            label: crate::routes::ROUTES_LABEL.to_string(),
                            world: world.name.clone(),
                        });
                    }
                    Task::Strategy(_, r) => {
                        let (label, config) = &ready[r];
                        let record = |loop_cfg: &LoopConfig| {
                            let mut router = Router::new(&*config.strategy, cfg.budget)
                                .with_probes(
                                    cfg.probes
                                        .or(config.probe_connections)
                                        .unwrap_or_else(|| default_probes(cfg.budget)),
                                )
                                .with_hints(config.hints);
                            let run = run_sessions(&world.sim, &mut router, loop_cfg, |_, _, _| {});
                            RunRecord {
                                label: label.clone(),
                                profile,
                                seed,
                                plan_us: run.plan_us_median,
                                plan_us_cold: run.plan_us_cold,
                                plan_us_warm: run.plan_us_warm,
                                sessions: run.sessions.into_iter().map(|s| s.score).collect(),
                                open: run.open,
                            }
                        };
                        local.push(record(&world.loop_cfg));
                        if cfg.monitors {
                            local_monitored.push(record(&LoopConfig {
                                monitor_prior: true,
                                timing_repeats: 0,
                                ..world.loop_cfg.clone()
                            }));
                        }
                        progress(Progress::Done {
                            label: label.clone(),
                            world: world.name.clone(),
                        });
                    }
                    // The two bounds, scored like any strategy.
                    Task::Bound(_, label, run) => {
                        let outcomes = run(&world.sim, &world.loop_cfg, cfg.budget);
                        let mut times: Vec<f64> = outcomes.iter().map(|o| o.plan_us).collect();
                        let cold = times.iter().sum::<f64>() / times.len().max(1) as f64;
                        let plan_us = median(&mut times);
                        local.push(RunRecord {
                            label: label.to_string(),
                            profile,
                            seed,
                            plan_us,
                            plan_us_cold: cold,
                            plan_us_warm: plan_us,
                            sessions: outcomes.into_iter().map(|o| o.score).collect(),
                            open: match (label, &world.loop_cfg.open) {
                                (CEILING, Some(open)) => {
                                    live_ceiling(cfg.budget, &world.sim, &world.loop_cfg, open)
                                }
                                _ => Vec::new(),
                            },
                        });
                        progress(Progress::Done {
                            label: label.to_string(),
                            world: world.name.clone(),
                        });
                    }
                }
                drop(world);
                slots[w].done();
                let mut all = runs
                    .lock()
                    .expect("no worker panics while holding the lock");
                all.0.extend(local);
                all.1.extend(local_monitored);
                all.2.extend(route_run);
            });
        }
    });
    let (mut runs, mut monitor_runs, mut route_runs) = runs.into_inner().expect("workers are done");
    route_runs.sort_by_key(|r: &RouteRecord| (r.profile, r.seed));
    let routes = route_rows(&route_runs, &cfg.windows);
    for runs in [&mut runs, &mut monitor_runs] {
        runs.sort_by(|a, b| {
            (a.profile, a.seed, a.label.as_str()).cmp(&(b.profile, b.seed, b.label.as_str()))
        });
    }
    let rows = aggregate(&runs, &cfg.windows, |_| true);
    let rows_by_profile = cfg
        .profiles
        .iter()
        .map(|&p| {
            (
                p.name().to_string(),
                aggregate(&runs, &cfg.windows, |r| r.profile == p),
            )
        })
        .collect();
    let monitors = compare_monitors(&rows, &runs, &monitor_runs, &cfg.windows);
    let shares = ceiling_shares(&runs, rows.iter().map(|r| r.label.as_str()), &cfg.windows);
    let open = open_rows(&runs);
    BenchReport {
        config: cfg.clone(),
        skipped,
        rows,
        rows_by_profile,
        runs,
        shares,
        monitors,
        monitor_runs,
        routes,
        route_runs,
        open,
    }
}

/// Per strategy row (in the rows' order) that also ran with the monitor prior: first- and
/// last-session declared recall at the sort window, without and with it.
fn compare_monitors(
    rows: &[Row],
    runs: &[RunRecord],
    monitor_runs: &[RunRecord],
    windows: &[Window],
) -> Vec<MonitorRow> {
    let Some(window) = sort_window(windows) else {
        return Vec::new();
    };
    let score = |run: &RunRecord, pick: fn(&[PlanScore]) -> Option<&PlanScore>| {
        pick(&run.sessions)
            .and_then(|s| s.window(window))
            .and_then(WindowScore::declared)
    };
    let recall = |runs: &[RunRecord], label: &str, pick: fn(&[PlanScore]) -> Option<&PlanScore>| {
        MeanSe::of(
            &runs
                .iter()
                .filter(|r| r.label == label)
                .filter_map(|r| score(r, pick))
                .collect::<Vec<_>>(),
        )
    };
    let gain = |label: &str, pick: fn(&[PlanScore]) -> Option<&PlanScore>| {
        MeanSe::of(
            &monitor_runs
                .iter()
                .filter(|m| m.label == label)
                .filter_map(|m| {
                    let cold = runs
                        .iter()
                        .find(|r| r.label == label && r.profile == m.profile && r.seed == m.seed)?;
                    Some(score(m, pick)? - score(cold, pick)?)
                })
                .collect::<Vec<_>>(),
        )
    };
    rows.iter()
        .filter(|row| monitor_runs.iter().any(|r| r.label == row.label))
        .map(|row| MonitorRow {
            label: row.label.clone(),
            window,
            first: recall(runs, &row.label, <[PlanScore]>::first),
            first_monitored: recall(monitor_runs, &row.label, <[PlanScore]>::first),
            last: recall(runs, &row.label, <[PlanScore]>::last),
            last_monitored: recall(monitor_runs, &row.label, <[PlanScore]>::last),
            first_gain: gain(&row.label, <[PlanScore]>::first),
            last_gain: gain(&row.label, <[PlanScore]>::last),
        })
        .collect()
}

/// The window rows are sorted by (and the bench table's costs are shown for): 1 year when
/// scored, else the longest scored.
pub fn sort_window(windows: &[Window]) -> Option<Window> {
    if windows.contains(&Window::Y1) {
        Some(Window::Y1)
    } else {
        windows.iter().max().copied()
    }
}

fn aggregate(
    runs: &[RunRecord],
    windows: &[Window],
    keep: impl Fn(&RunRecord) -> bool,
) -> Vec<Row> {
    let mut labels: Vec<&str> = runs
        .iter()
        .filter(|r| keep(r))
        .map(|r| r.label.as_str())
        .collect();
    labels.sort_unstable();
    labels.dedup();
    let mut rows: Vec<Row> = labels
        .into_iter()
        .map(|label| {
            let mine: Vec<&RunRecord> = runs
                .iter()
                .filter(|r| keep(r) && r.label == label)
                .collect();
            let last = |f: &dyn Fn(&PlanScore) -> f64| -> MeanSe {
                MeanSe::of(
                    &mine
                        .iter()
                        .filter_map(|r| r.sessions.last())
                        .map(f)
                        .collect::<Vec<_>>(),
                )
            };
            // Ratios with nothing to divide by are left out, not counted as 0 or 1.
            let last_some = |f: &dyn Fn(&PlanScore) -> Option<f64>| -> MeanSe {
                MeanSe::of(
                    &mine
                        .iter()
                        .filter_map(|r| r.sessions.last())
                        .filter_map(f)
                        .collect::<Vec<_>>(),
                )
            };
            let first_some = |f: &dyn Fn(&PlanScore) -> Option<f64>| -> MeanSe {
                MeanSe::of(
                    &mine
                        .iter()
                        .filter_map(|r| r.sessions.first())
                        .filter_map(f)
                        .collect::<Vec<_>>(),
                )
            };
            let mut windows_sorted = windows.to_vec();
            windows_sorted.sort();
            windows_sorted.dedup();
            let windows = windows_sorted
                .iter()
                .map(|&w| {
                    let decl = move |s: &PlanScore| s.window(w).and_then(WindowScore::declared);
                    let found =
                        move |s: &PlanScore| s.window(w).and_then(WindowScore::declared_with_found);
                    let total = move |s: &PlanScore| s.window(w).and_then(WindowScore::total);
                    let trips =
                        move |s: &PlanScore| s.cost(w).map_or(0.0, |c| c.round_trips as f64);
                    let events = move |s: &PlanScore| s.cost(w).map_or(0.0, |c| c.events as f64);
                    let per_note = move |s: &PlanScore| match (s.cost(w), s.window(w)) {
                        (Some(c), Some(x)) if x.fetched > 0 => c.events as f64 / x.fetched as f64,
                        _ => 0.0,
                    };
                    RowWindow {
                        window: w,
                        first: first_some(&decl),
                        last: last_some(&decl),
                        total_last: last_some(&total),
                        round_trips: last(&trips),
                        events: last(&events),
                        events_per_note: last(&per_note),
                        first_with_found: first_some(&found),
                        last_with_found: last_some(&found),
                    }
                })
                .collect();
            let mut times: Vec<f64> = mine.iter().map(|r| r.plan_us).collect();
            let mut cold: Vec<f64> = mine.iter().map(|r| r.plan_us_cold).collect();
            let mut warm: Vec<f64> = mine.iter().map(|r| r.plan_us_warm).collect();
            let per_session = |f: &dyn Fn(&crate::probe::ProbeCost) -> u64| {
                MeanSe::of(
                    &mine
                        .iter()
                        .flat_map(|r| r.sessions.iter())
                        .map(|s| f(&s.probe) as f64)
                        .collect::<Vec<_>>(),
                )
            };
            let probes = ProbeRow {
                connections: per_session(&|p| p.connections),
                reqs: per_session(&|p| p.reqs),
                filters: per_session(&|p| p.filters),
                events: per_session(&|p| p.events),
            };
            let timed = |pick: &dyn Fn(&RunRecord) -> Option<&PlanScore>| {
                let scores: Vec<&crate::clock::TimeScore> = (mine.iter())
                    .filter_map(|r| pick(r))
                    .filter_map(|s| s.time.as_ref())
                    .collect();
                (!scores.is_empty()).then(|| TimeFigures::of(&scores))
            };
            let time = match (
                timed(&|r| r.sessions.first()),
                timed(&|r| r.sessions.last()),
            ) {
                (Some(first), Some(last)) => Some(TimeRow { first, last }),
                _ => None,
            };
            Row {
                label: label.to_string(),
                windows,
                connections: last(&|s| s.connections as f64),
                disclosure: last(&|s| s.disclosure as f64),
                per_follow: last(&|s| s.per_follow),
                per_follow_max: mine
                    .iter()
                    .filter_map(|r| r.sessions.last())
                    .map(|s| s.per_follow_max)
                    .max()
                    .unwrap_or(0),
                orphans: last(&|s| s.orphans.unwrap_or(0) as f64),
                author_coverage: last(&|s| s.author_coverage),
                load_concentration: last(&|s| s.load_concentration),
                plan_us: median(&mut times),
                plan_us_cold: median(&mut cold),
                plan_us_warm: median(&mut warm),
                probes,
                time,
            }
        })
        .collect();
    let key = sort_window(windows);
    rows.sort_by(|a, b| {
        // Strategies by recall, then the two ceilings: learnable, then omniscient.
        let bound = |r: &Row| match r.label.as_str() {
            ORACLE => 2,
            CEILING => 1,
            _ => 0,
        };
        let recall = |r: &Row| key.and_then(|w| r.window(w)).map_or(0.0, |x| x.last.mean);
        bound(a)
            .cmp(&bound(b))
            .then_with(|| recall(b).total_cmp(&recall(a)))
            .then_with(|| a.label.cmp(&b.label))
    });
    rows
}

impl BenchReport {
    /// Mean declared recall per session for `window`, per label (over every world where some
    /// event was declared-available; 0 when there is none): the data of the recall-by-session
    /// chart.
    pub fn series(&self, window: Window) -> Vec<(String, Vec<f64>)> {
        self.rows
            .iter()
            .map(|row| {
                let mine: Vec<&RunRecord> =
                    self.runs.iter().filter(|r| r.label == row.label).collect();
                let sessions = mine.iter().map(|r| r.sessions.len()).max().unwrap_or(0);
                let values = (0..sessions)
                    .map(|s| {
                        let xs: Vec<f64> = mine
                            .iter()
                            .filter_map(|r| r.sessions.get(s))
                            .filter_map(|p| p.window(window))
                            .filter_map(WindowScore::declared)
                            .collect();
                        MeanSe::of(&xs).mean
                    })
                    .collect();
                (row.label.clone(), values)
            })
            .collect()
    }

    /// The report with every timing set to zero (timings vary from run to run; snapshots and
    /// comparisons use this).
    pub fn without_timings(&self) -> Self {
        let mut r = self.clone();
        for row in r
            .rows
            .iter_mut()
            .chain(r.rows_by_profile.values_mut().flatten())
        {
            (row.plan_us, row.plan_us_cold, row.plan_us_warm) = (0.0, 0.0, 0.0);
        }
        for run in r.runs.iter_mut().chain(&mut r.monitor_runs) {
            (run.plan_us, run.plan_us_cold, run.plan_us_warm) = (0.0, 0.0, 0.0);
        }
        r.config.threads = 0;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(declared: (u64, u64), total: (u64, u64)) -> PlanScore {
        let ratio = |(n, d): (u64, u64)| if d == 0 { 1.0 } else { n as f64 / d as f64 };
        PlanScore {
            session: 0,
            connections: 1,
            disclosure: 1,
            per_follow: 1.0,
            per_follow_max: 1,
            author_coverage: 1.0,
            orphans: Some(0),
            load_concentration: 1.0,
            windows: vec![WindowScore {
                window: Window::D7,
                available: total.1,
                declared_available: declared.1,
                fetched: total.0,
                declared_fetched: declared.0,
                declared_recall: ratio(declared),
                total_recall: ratio(total),
                found: 0,
            }],
            cost: Vec::new(),
            probe: Default::default(),
            time: None,
        }
    }

    fn run(label: &str, seed: u64, s: PlanScore) -> RunRecord {
        RunRecord {
            label: label.into(),
            profile: Profile::Small,
            seed,
            plan_us: 0.0,
            plan_us_cold: 0.0,
            plan_us_warm: 0.0,
            sessions: vec![s],
            open: Vec::new(),
        }
    }

    #[test]
    fn recall_with_nothing_available_is_left_out_not_counted_as_full() {
        let runs = vec![
            // Nothing available on either world: no recall at all.
            run("empty", 1, score((0, 0), (0, 0))),
            run("empty", 2, score((0, 0), (0, 0))),
            // One world with nothing available, one at 50%: the mean is 50%, over one world.
            run("half", 1, score((0, 0), (0, 0))),
            run("half", 2, score((1, 2), (2, 4))),
        ];
        let rows = aggregate(&runs, &[Window::D7], |_| true);
        let window = |label: &str| {
            rows.iter()
                .find(|r| r.label == label)
                .and_then(|r| r.window(Window::D7))
                .cloned()
                .unwrap()
        };
        let empty = window("empty");
        for m in [empty.first, empty.last, empty.total_last] {
            assert_eq!(m.n, 0, "{m:?}");
        }
        let half = window("half");
        for m in [half.first, half.last, half.total_last] {
            assert_eq!((m.n, m.mean), (1, 0.5), "{m:?}");
        }
        assert_eq!(score((0, 0), (0, 0)).windows[0].declared(), None);
        assert_eq!(score((0, 0), (0, 0)).windows[0].total(), None);
        assert_eq!(score((1, 2), (0, 3)).windows[0].declared(), Some(0.5));
        assert_eq!(score((1, 2), (0, 3)).windows[0].total(), Some(0.0));
    }

    #[test]
    fn every_world_of_a_bench_re_plans_when_asked() {
        for replan in [false, true] {
            let cfg = BenchConfig {
                replan,
                sessions: 1,
                ..BenchConfig::default()
            };
            let world = prepare_world(&cfg, Profile::Small, 1);
            assert_eq!(world.loop_cfg.replan_on_failure, replan);
        }
    }

    #[test]
    fn monitor_gains_are_paired_by_world() {
        let frac = |pct: u64| score((pct, 100), (pct, 100));
        // World 1 is easy, world 2 hard; monitor data adds 2 points on each. Unpaired, the
        // worlds' spread would swamp the gain; paired, it has no spread at all.
        let runs = vec![run("s", 1, frac(80)), run("s", 2, frac(20))];
        let monitor_runs = vec![run("s", 2, frac(22)), run("s", 1, frac(82))];
        let rows = aggregate(&runs, &[Window::D7], |_| true);
        let cmp = compare_monitors(&rows, &runs, &monitor_runs, &[Window::D7]);
        assert_eq!(cmp.len(), 1);
        let gain = cmp[0].first_gain;
        assert_eq!(gain.n, 2);
        assert!((gain.mean - 0.02).abs() < 1e-12, "{gain:?}");
        assert!(gain.se < 1e-12, "{gain:?}");
        assert!(cmp[0].first.se > 0.2, "{:?}", cmp[0].first);
        // A monitored run without its cold twin is not paired.
        let lone = vec![run("s", 3, frac(50))];
        let cmp = compare_monitors(&rows, &runs, &lone, &[Window::D7]);
        assert_eq!(cmp[0].first_gain.n, 0);
    }
}

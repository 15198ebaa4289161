//! The session loop (plan → fetch → learn) and the oracle.
//!
//! For session `s`: the router plans with what it learned so far; the plan's REQs are simulated
//! against the world for session `s`, paged as the runtime pages ([`mod@crate::fetch`]), once per
//! scored window; the strategy observes only what its own REQs returned with the widest window
//! ([`Observation`]); what those REQs returned goes through a [`RoundRecorder`] into
//! [`DeliveryStats::record_round`], as the live runtime's relay frames do. Stateless strategies
//! ignore the stats; learning ones keep them across sessions.
//!
//! A router that takes relay hints ([`Router::hints`]) plans each session on a table holding
//! the world's hints and the relays the stats so far saw each follow's notes arrive on, the
//! reader's relays answering for the residual among them ([`SimWorld::hinted_table`]); its
//! probes and re-plans use that table too. Any other router plans on [`SimWorld::table`].

use std::collections::BinaryHeap;
use std::time::Instant;

use std::collections::HashSet;

use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::{
    plan_probes, DeliveryStats, Plan, PlanContext, Probe, ProbeBudget, RouteTable, Router,
};
use serde::{Deserialize, Serialize};

use crate::asks::Asks;
use crate::holdings::Holdings;
use crate::observe::Observation;
use crate::probe::{probe_recorded, Probed};
use crate::replan::replan_around_failures;
use crate::score::{score_each_window, score_observe_into, PlanScore};
use crate::sim_world::SimWorld;
use crate::window::Window;

/// How the loop runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopConfig {
    /// Sessions to run (past the world's last session, every relay is down).
    pub sessions: u32,
    /// Windows to score.
    pub windows: Vec<Window>,
    /// How far the clock moves between sessions, for decaying learned stats. Events are always
    /// evaluated at the world's `now`. Default one hour: the published study ran its sessions
    /// back to back, and with the core's default decay (0.95 per hour) a one-day gap forgets
    /// about 70% of what a session taught.
    pub session_interval_secs: u64,
    /// Base seed; session `s` plans with [`LoopConfig::seed_for`]`(s)`.
    pub seed: u64,
    /// Extra timed planning runs after the loop (with the final stats), for the median.
    pub timing_repeats: usize,
    /// Within a session, set aside the asked relays that did not answer and plan again without
    /// them until a plan's relays all answer, as the live runtime does (see
    /// [`nostr_outbox_client::Network`]); the session fetches what every plan's answering relays
    /// returned. Off: one plan per session, the published benchmark's model.
    #[serde(default)]
    pub replan_on_failure: bool,
    /// Before session 0, seed the stats with the world's NIP-66 monitor data
    /// ([`nostr_outbox_client::apply_monitor_prior`] at the world's `now`), as the runtime does with
    /// `--monitors`. Off, or a world without `monitor`: a cold start knowing nothing.
    #[serde(default)]
    pub monitor_prior: bool,
    /// Time each session's fetch of this window on the world's clock ([`crate::clock`]) and
    /// keep it in [`PlanScore::time`], and let probes fail on relays slower to accept than the
    /// client waits, as in the runtime; `None`: recall only, and every live relay answers.
    #[serde(default)]
    pub clock: Option<Window>,
    /// The client the clock replays (the runtime's knobs; its defaults unless a caller runs the
    /// runtime with others, as the live bench does).
    #[serde(default)]
    pub client: crate::clock::ClientTiming,
    /// After each session's fetch, keep the feed open this long and score what it delivers
    /// ([`crate::open`]); `None`: the session ends with its fetch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<crate::open::OpenConfig>,
}

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            sessions: 5,
            windows: Window::ALL.to_vec(),
            session_interval_secs: 3_600,
            seed: 0,
            timing_repeats: 3,
            replan_on_failure: false,
            monitor_prior: false,
            clock: Some(Window::D7),
            client: crate::clock::ClientTiming::default(),
            open: None,
        }
    }
}

impl LoopConfig {
    /// The planning seed of session `s`: the same draw as the runtime's run number `s` with
    /// this base seed.
    pub fn seed_for(&self, s: u32) -> u64 {
        nostr_outbox_core::session_seed(self.seed, u64::from(s))
    }

    /// The widest window asked (what every simulated REQ's `since` is set from).
    pub fn widest(&self) -> u64 {
        self.windows.iter().map(|w| w.secs()).max().unwrap_or(0)
    }
}

/// One session of one strategy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionOutcome {
    /// Every metric of the session's plan.
    pub score: PlanScore,
    /// Planning time of this session's plan, µs: the session's first plan (the widest
    /// window's), made cold, after the previous session's fetch and learning.
    pub plan_us: f64,
}

/// One strategy's run over all sessions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StrategyRun {
    /// The strategy's name as the router reports it.
    pub strategy: String,
    /// Per session.
    pub sessions: Vec<SessionOutcome>,
    /// Median planning time over every timed run (each session's first plan and the
    /// [`LoopConfig::timing_repeats`] after the loop), µs.
    pub plan_us_median: f64,
    /// Mean over sessions of each session's first plan's time, µs: planning cold, as a client
    /// plans once per run.
    pub plan_us_cold: f64,
    /// Median of the [`LoopConfig::timing_repeats`] plans made back to back with the final
    /// stats after the loop, µs (0 without repeats): planning warm.
    pub plan_us_warm: f64,
    /// The learned stats at the end.
    #[serde(skip)]
    pub stats: DeliveryStats,
    /// Per session, the feed left open after its fetch ([`LoopConfig::open`]; empty without).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<crate::open::OpenScore>,
}

/// What the session loop shows of one session once it has learned from it.
#[derive(Debug)]
pub struct SessionView<'a> {
    /// The 0-based session.
    pub session: u32,
    /// The session's plan: the one made for the widest window, which the session learned from.
    pub plan: &'a Plan,
    /// Per scored window (in [`LoopConfig::windows`] order), the plan made for it: the
    /// window's own plan for a router that reads the window ([`Router::reads_window`]), else
    /// [`SessionView::plan`]. The widest window's is always [`SessionView::plan`]. Each is the
    /// session's first plan for its window, before any re-plan around failures.
    pub window_plans: &'a [(Window, &'a Plan)],
    /// Per scored window (in [`LoopConfig::windows`] order), what the session asked for it:
    /// every wave together when it re-plans around failures
    /// ([`LoopConfig::replan_on_failure`]), else its first plan's asks alone.
    pub window_asks: &'a [(Window, &'a Asks)],
    /// What the session's REQs returned (the widest window's plan).
    pub observation: &'a Observation,
    /// The stats learned so far, this session included: what the next session plans with.
    pub stats: &'a DeliveryStats,
    /// The route table the session's plans were made on (their relay ids are this table's):
    /// [`SimWorld::table`], or for a router that takes hints, the session's hinted table.
    pub table: &'a RouteTable,
}

/// Runs the session loop for one router on one world. `on_session` sees each session's plan
/// and observation (to write plan files, or to feed a richer learner); see
/// [`run_sessions_with`] for everything else a session shows.
pub fn run_sessions(
    sim: &SimWorld,
    router: &mut Router,
    cfg: &LoopConfig,
    mut on_session: impl FnMut(u32, &Plan, &Observation),
) -> StrategyRun {
    run_sessions_with(sim, router, cfg, |v| {
        on_session(v.session, v.plan, v.observation)
    })
}

/// [`run_sessions`], with `on_session` seeing each session's [`SessionView`]: its plans per
/// window and the stats learned after it, besides its plan and observation.
pub fn run_sessions_with(
    sim: &SimWorld,
    router: &mut Router,
    cfg: &LoopConfig,
    mut on_session: impl FnMut(&SessionView<'_>),
) -> StrategyRun {
    let mut stats = DeliveryStats::new();
    if cfg.monitor_prior && !sim.world.monitor().is_empty() {
        let summary = nostr_outbox_client::apply_monitor_prior(
            &mut stats,
            &sim.world.monitor_reports(),
            &sim.policy,
            sim.world.now,
        );
        tracing::debug!(?summary, "monitor prior applied");
    }
    // Capacity for at most the sessions a world may describe: a larger count grows as it runs.
    let reserve = cfg.sessions.min(nostr_outbox_world::MAX_SESSIONS) as usize;
    let mut times = Vec::with_capacity(reserve + cfg.timing_repeats);
    let mut sessions = Vec::with_capacity(reserve);
    let mut open = Vec::new();
    let since = sim.world.now.saturating_sub(cfg.widest());
    let span = tracing::debug_span!("sessions", strategy = router.strategy());
    let _guard = span.enter();
    for s in 0..cfg.sessions {
        let now = sim.world.now + u64::from(s) * cfg.session_interval_secs;
        stats.begin_session();
        let hinted = router.hints().then(|| sim.hinted_table(&stats));
        let table = hinted.as_ref().unwrap_or(&sim.table);
        let started = Instant::now();
        let ctx = PlanContext::at(now).seed(cfg.seed_for(s));
        let plan = router.plan_with(table, &stats, ctx.window(cfg.widest()));
        let plan_us = started.elapsed().as_secs_f64() * 1e6;
        times.push(plan_us);
        let first = Asks::from_table_plan(sim, table, &plan);
        let waves = if cfg.replan_on_failure {
            replan_around_failures(
                sim,
                router,
                &stats,
                ctx.window(cfg.widest()),
                s,
                first,
                &cfg.client,
            )
        } else {
            vec![first]
        };
        let asks = merged(&waves);
        // A narrower window whose own plan differs is scored with it; what the session learns
        // from, and its connections, disclosure and coverage, stay the widest window's plan.
        let narrower = if router.reads_window() {
            narrower_plans(sim, router, table, &stats, ctx, cfg, s)
        } else {
            Vec::new()
        };
        let own: Vec<(Window, &Asks)> = (narrower.iter())
            .filter(|n| n.asks != asks)
            .map(|n| (n.window, &n.asks))
            .collect();
        let shared: Vec<Window> = (cfg.windows.iter().copied())
            .filter(|w| own.iter().all(|(o, _)| o != w))
            .collect();
        // The fetch the session is observed by is the one it learns from: fetched once.
        let mut recorder = RoundRecorder::new();
        let (mut score, observation) =
            score_observe_into(sim, &asks, s, &shared, since, Some(&mut recorder));
        for (window, plan) in &own {
            score.add_windows(crate::score::score(sim, plan, s, &[*window]));
        }
        let probes = router.probe_budget();
        let (probe, probed) = learn_from(
            sim,
            table,
            &asks,
            s,
            since,
            &mut stats,
            now,
            (probes, cfg.clock.map(|_| &cfg.client)),
            recorder,
        );
        let (window_plans, window_asks): (Vec<_>, Vec<_>) = (cfg.windows.iter())
            .map(|&w| match narrower.iter().find(|n| n.window == w) {
                Some(own) => ((w, &own.plan), (w, &own.asks)),
                None => ((w, &plan), (w, &asks)),
            })
            .unzip();
        // What the probes returned beyond each window's own fetch reaches the feed too.
        crate::score::add_found(sim, &mut score, &window_asks, s, &probe.returned);
        score.probe = probe.cost;
        if let Some(w) = cfg.clock {
            let waves = narrower
                .iter()
                .find(|n| n.window == w)
                .map_or(&waves, |n| &n.waves);
            let run = crate::clock::RunShape {
                waves,
                lists_kept: s > 0,
                probes: &probed,
                probes_at_once: nostr_outbox_core::probes_at_once(router.max_connections()),
            };
            let (time, latency) = time_session(sim, s, w, run, &cfg.client, &score);
            score.time = Some(time);
            // What the runtime records as it runs: each answering relay's first EOSE latency.
            for (url, ms) in &latency {
                stats.record_latency(url, *ms, now);
            }
        }
        if let Some(open_cfg) = &cfg.open {
            // The feed holds the session's last plan once its fetch is done.
            let held = waves.last().unwrap_or(&asks);
            let hour = crate::open::OpenWorld::draw(sim, s, open_cfg.secs as f64, &open_cfg.model);
            let learn_at = now + open_cfg.secs.min(cfg.session_interval_secs);
            open.push(crate::open::keep_open(
                sim,
                &hour,
                s,
                ctx.window(cfg.widest()),
                held,
                router,
                &mut stats,
                open_cfg,
                &cfg.client,
                learn_at,
            ));
        }
        on_session(&SessionView {
            session: s,
            plan: &plan,
            window_plans: &window_plans,
            window_asks: &window_asks,
            observation: &observation,
            stats: &stats,
            table,
        });
        tracing::debug!(
            session = s,
            connections = score.connections,
            "session scored"
        );
        sessions.push(SessionOutcome { score, plan_us });
    }
    let plan_us_cold = times.iter().sum::<f64>() / times.len().max(1) as f64;
    let mut warm = Vec::with_capacity(cfg.timing_repeats);
    let now = sim.world.now + u64::from(cfg.sessions) * cfg.session_interval_secs;
    let hinted = (router.hints() && cfg.timing_repeats > 0).then(|| sim.hinted_table(&stats));
    let table = hinted.as_ref().unwrap_or(&sim.table);
    for i in 0..cfg.timing_repeats {
        let started = Instant::now();
        let plan = router.plan_with(
            table,
            &stats,
            PlanContext::at(now)
                .seed(cfg.seed_for(cfg.sessions + i as u32))
                .window(cfg.widest()),
        );
        warm.push(started.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(plan);
    }
    times.extend_from_slice(&warm);
    StrategyRun {
        strategy: router.strategy().to_string(),
        sessions,
        plan_us_median: median(&mut times),
        plan_us_cold,
        plan_us_warm: median(&mut warm),
        stats,
        open,
    }
}

/// A window's own plan in a session: the plan, every wave of it (the plan, then each re-plan
/// around failures) and what the waves asked together.
struct WindowPlan {
    window: Window,
    plan: Plan,
    waves: Vec<Asks>,
    asks: Asks,
}

/// What every wave of a run asked, together.
fn merged(waves: &[Asks]) -> Asks {
    (waves.iter().cloned())
        .reduce(|mut all, later| {
            all.merge(later);
            all
        })
        .unwrap_or_default()
}

/// Times one session's `run` of `window` on the world's clock, as `client` runs it; reachable
/// notes are `score`'s for the window. Returns the time figures and each answering relay's
/// latency ([`crate::clock::Timeline::latency`]).
pub(crate) fn time_session(
    sim: &SimWorld,
    session: u32,
    window: Window,
    run: crate::clock::RunShape<'_>,
    client: &crate::clock::ClientTiming,
    score: &PlanScore,
) -> (crate::clock::TimeScore, Vec<(String, f64)>) {
    let since = sim.world.now.saturating_sub(window.secs());
    let timeline = crate::clock::replay(sim, session, since, run, client);
    let ideal = crate::clock::fastest(sim, session, since, client);
    let reachable = match score.window(window) {
        Some(w) => w.available,
        // A window timed but not scored: what some relay would return is the same whatever
        // the plan.
        None => (crate::score::score(sim, &merged(run.waves), session, &[window]).window(window))
            .map_or(0, |w| w.available),
    };
    let mut score = crate::clock::time_score(sim, &timeline, reachable, Some(&ideal));
    score.wait = crate::clock::screen_wait(sim, session, client, &timeline, &ideal, run.waves);
    (score, timeline.latency)
}

/// For a router whose plans depend on the window: the plan made for each window narrower than
/// the widest (same stats, same seed), with what it asks once re-planned around failures
/// alike, to be scored as if the client had asked for only that window.
fn narrower_plans(
    sim: &SimWorld,
    router: &mut Router,
    table: &RouteTable,
    stats: &DeliveryStats,
    ctx: PlanContext,
    cfg: &LoopConfig,
    session: u32,
) -> Vec<WindowPlan> {
    let narrower = cfg.windows.iter().filter(|w| w.secs() < cfg.widest());
    narrower
        .map(|&window| {
            let ctx = ctx.window(window.secs());
            let plan = router.plan_with(table, stats, ctx);
            let first = Asks::from_table_plan(sim, table, &plan);
            let waves = if cfg.replan_on_failure {
                replan_around_failures(sim, router, stats, ctx, session, first, &cfg.client)
            } else {
                vec![first]
            };
            WindowPlan {
                window,
                plan,
                asks: merged(&waves),
                waves,
            }
        })
        .collect()
}

/// [`learn_from`] after fetching `asks` itself: for tests that do not score the fetch.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
fn learn(
    sim: &SimWorld,
    table: &RouteTable,
    asks: &Asks,
    session: u32,
    since: u64,
    stats: &mut DeliveryStats,
    now: u64,
    probes: ProbeBudget,
) -> crate::probe::ProbeCost {
    let mut recorder = RoundRecorder::new();
    crate::fetch::fetch_recorded(sim, asks, session, since, &mut recorder);
    learn_from(
        sim,
        table,
        asks,
        session,
        since,
        stats,
        now,
        (probes, None),
        recorder,
    )
    .0
    .cost
}

/// Learns from what `asks` returned in `session` with `since`, once `recorder` has seen that
/// fetch (the same fetch the session is scored by): every relay's frames go through a
/// [`RoundRecorder`] and the session's round into [`DeliveryStats::record_round`]. Relays
/// that are down fail and never answer: the session's end counts them as not answered. Then,
/// within `probes`, the relays the fetch did not ask are probed ([`nostr_outbox_core::probe`]) and
/// learned from in a second round, measured against what the fetch returned; returns what the
/// probes cost and returned, and the relays probed. Probes are planned over `table`, the table the session
/// planned with; on the world's clock (`client` given) probes connect as `client` does (see
/// [`probe_recorded`]).
#[allow(clippy::too_many_arguments)]
fn learn_from(
    sim: &SimWorld,
    table: &RouteTable,
    asks: &Asks,
    session: u32,
    since: u64,
    stats: &mut DeliveryStats,
    now: u64,
    (probes, client): (ProbeBudget, Option<&crate::clock::ClientTiming>),
    mut recorder: RoundRecorder,
) -> (Probed, Vec<Probe>) {
    if let Some(round) = recorder.take_final_round() {
        stats.record_round(&round, now);
    }
    if probes.connections == 0 {
        return (Probed::default(), Vec::new());
    }
    let asked: HashSet<&str> = asks.entries.iter().map(|a| a.url.as_str()).collect();
    let plan = plan_probes(table, stats, &asked, &probes, now);
    let probed = probe_recorded(sim, &plan, session, since, client, &mut recorder);
    if let Some(round) = recorder.take_final_round() {
        stats.record_round(&round, now);
    }
    (probed, plan.probes)
}

/// The median of `xs` (0 when empty).
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The omniscient selection for `session`: knowing every event's relays and which relays are up,
/// greedily pick up to `budget` relays by how many not-yet-covered events of `window` they would
/// return (weighted set cover, lazy gains), ask each chosen relay about every follow it holds
/// such events for, and put every follow left out on the reader's relays (the residual). Any
/// relay of the world may be chosen, listed or not: it is the ceiling of what any router could
/// fetch with this many connections.
pub fn oracle_asks(sim: &SimWorld, session: u32, budget: usize, window: Window) -> Asks {
    oracle_asks_within(sim, session, budget, window, OracleScope::AnyRelay)
}

/// Which relays an oracle may ask about an author.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OracleScope {
    /// Any relay of the world that holds the author's notes: the ceiling of any router.
    AnyRelay,
    /// Only the author's declared write relays: the ceiling of an outbox-model router, which
    /// may only ask a relay about follows who list it.
    DeclaredOnly,
}

/// [`oracle_asks`] restricted to `scope`.
pub fn oracle_asks_within(
    sim: &SimWorld,
    session: u32,
    budget: usize,
    window: Window,
    scope: OracleScope,
) -> Asks {
    // Fetchable events of the window, and per relay the events it would return.
    let held = Holdings::of(sim, window, |a, r| {
        (scope == OracleScope::AnyRelay || sim.is_declared(a, r)) && sim.world.is_up(r, session)
    });
    let (per_relay, event_author) = (&held.per_relay, &held.event_author);
    let mut covered = vec![false; event_author.len()];
    let mut heap: BinaryHeap<(usize, std::cmp::Reverse<u32>, usize)> = per_relay
        .iter()
        .enumerate()
        .filter(|(_, evs)| !evs.is_empty())
        .map(|(r, evs)| (evs.len(), std::cmp::Reverse(r as u32), 0))
        .collect();
    let mut chosen: Vec<u32> = Vec::new();
    while chosen.len() < budget {
        let Some((gain, rr, round)) = heap.pop() else {
            break;
        };
        let r = rr.0;
        if round != chosen.len() {
            let fresh = per_relay[r as usize]
                .iter()
                .filter(|&&e| !covered[e as usize])
                .count();
            if fresh > 0 {
                heap.push((fresh, rr, chosen.len()));
            }
            continue;
        }
        if gain == 0 {
            break;
        }
        for &e in &per_relay[r as usize] {
            covered[e as usize] = true;
        }
        chosen.push(r);
    }
    held.asks(sim, &chosen)
}

/// The label of the oracle row ([`run_oracle`]).
pub const ORACLE: &str = "oracle";

/// Scores the oracle in every session: the year's plan for connections, disclosure and the
/// year, and each other window with the oracle's plan for that window.
pub fn run_oracle(sim: &SimWorld, cfg: &LoopConfig, budget: usize) -> Vec<SessionOutcome> {
    run_oracle_within(sim, cfg, budget, OracleScope::AnyRelay)
}

/// Scores the oracle restricted to `scope` in every session.
pub fn run_oracle_within(
    sim: &SimWorld,
    cfg: &LoopConfig,
    budget: usize,
    scope: OracleScope,
) -> Vec<SessionOutcome> {
    (0..cfg.sessions)
        .map(|s| {
            let started = Instant::now();
            let year = oracle_asks_within(sim, s, budget, Window::Y1, scope);
            let others: Vec<(Window, Asks)> = cfg
                .windows
                .iter()
                .filter(|&&w| w != Window::Y1)
                .map(|&w| (w, oracle_asks_within(sim, s, budget, w, scope)))
                .collect();
            let plan_us = started.elapsed().as_secs_f64() * 1e6;
            // Connections and disclosure are the year's plan's; every other window is scored
            // with the plan made for it.
            let plans: Vec<(Window, &Asks)> = cfg
                .windows
                .iter()
                .map(|&w| {
                    let own = others.iter().find(|(o, _)| *o == w);
                    (w, own.map_or(&year, |(_, asks)| asks))
                })
                .collect();
            let mut score = score_each_window(sim, &year, &plans, s);
            timed(sim, cfg, s, &plans, &mut score);
            SessionOutcome { score, plan_us }
        })
        .collect()
}

/// With [`LoopConfig::clock`]: times a bound's plan for the clock's window as a run that knows
/// the lists from the start, asks once and probes nothing.
fn timed(
    sim: &SimWorld,
    cfg: &LoopConfig,
    session: u32,
    plans: &[(Window, &Asks)],
    score: &mut crate::score::PlanScore,
) {
    let Some(w) = cfg.clock else {
        return;
    };
    if let Some((_, asks)) = plans.iter().find(|(o, _)| *o == w) {
        let waves = [(*asks).clone()];
        let run = crate::clock::RunShape {
            waves: &waves,
            lists_kept: true,
            probes: &[],
            probes_at_once: 1,
        };
        let (time, _) = time_session(sim, session, w, run, &cfg.client, score);
        score.time = Some(time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::observe;
    use crate::score::score;
    use nostr_outbox_world::{generate, Profile};

    /// Each window of the oracle is scored with the oracle's plan for that window, which for
    /// the week and three years is not the year's plan.
    #[test]
    fn the_oracle_scores_each_window_with_its_own_plan() {
        let sim = SimWorld::new(generate(Profile::Small, 3));
        let cfg = LoopConfig {
            sessions: 2,
            ..LoopConfig::default()
        };
        let oracle = run_oracle(&sim, &cfg, 20);
        let mut differs = false;
        for (s, o) in (0u32..).zip(&oracle) {
            let year = oracle_asks(&sim, s, 20, Window::Y1);
            for w in [Window::D7, Window::Y3] {
                let own = score(&sim, &oracle_asks(&sim, s, 20, w), s, &[w]);
                assert_eq!(o.score.window(w), own.window(w), "session {s}, {w:?}");
                differs |= score(&sim, &year, s, &[w]).window(w) != own.window(w);
            }
            let as_year = score(&sim, &year, s, &[Window::Y1]);
            assert_eq!(o.score.window(Window::Y1), as_year.window(Window::Y1));
            assert_eq!(o.score.disclosure, as_year.disclosure);
        }
        assert!(differs, "the year's plan scores the other windows the same");
    }

    /// Learning through the recorder, from the pages' events, learns what each session's
    /// observation reports: per asked relay, answered or not, and the distinct events per
    /// author; a relay whose paging was cut off is compare-only, as in the runtime.
    #[test]
    fn the_recorder_learns_what_the_observation_reports() {
        nostr_outbox_strategies::link();
        let sim = SimWorld::new(generate(Profile::Small, 7));
        let mut router = Router::from_toml("max_connections = 12\n[strategy]\ntype = \"greedy\"\n")
            .expect("valid config");
        let cfg = LoopConfig::default();
        let since = sim.world.now.saturating_sub(cfg.widest());
        let (mut got, mut expected) = (DeliveryStats::new(), DeliveryStats::new());
        let (mut down, mut events) = (0, 0u64);
        for s in 0..cfg.sessions {
            let now = sim.world.now + u64::from(s) * 3_600;
            got.begin_session();
            expected.begin_session();
            let plan = router.plan_with(
                &sim.table,
                &expected,
                PlanContext::at(now).seed(cfg.seed_for(s)),
            );
            let asks = Asks::from_plan(&sim, &plan);
            let seen = observe(&sim, &asks, s, since);
            let mut report = seen.round_report(&sim);
            for (relay, o) in report.relays.iter_mut().zip(&seen.relays) {
                relay.compare_only = o.up && o.cost.cut_chunks > 0;
                down += usize::from(!o.up);
                events += o.returned.iter().map(|r| u64::from(r.events)).sum::<u64>();
            }
            expected.record_round(&report, now);
            learn(
                &sim,
                &sim.table,
                &asks,
                s,
                since,
                &mut got,
                now,
                ProbeBudget::new(0),
            );
            assert_eq!(got, expected, "session {s}");
        }
        assert!(down > 0 && events > 0, "down {down}, events {events}");
    }
}

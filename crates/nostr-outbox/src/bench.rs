//! `outbox bench`: every registered strategy side by side on generated worlds, or one strategy
//! on one world file with its plans written out.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use comfy_table::{Cell, Table};

use crate::table::{right, styled_table};
use indicatif::{ProgressBar, ProgressStyle};
use nostr_outbox_core::{Router, RouterConfig};
use nostr_outbox_sim::probe::ProbeCost;
use nostr_outbox_sim::{
    default_suite, run_bench, run_best_fixed, run_ceiling, run_sessions_with, BenchConfig,
    BenchReport, Family, FixedSearch, LoopConfig, MeanSe, PlanFile, Profile, Progress, SessionView,
    SimWorld, StrategyRun, Window, World, BEST_FIXED, CEILING, MAX_EXHAUSTIVE_SETS, MAX_SESSIONS,
};

/// Options of `outbox bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these suite rows (comma-separated labels, e.g. `greedy,direct`); the learnable
    /// ceiling and oracle rows are always added.
    #[arg(long, value_delimiter = ',')]
    strategies: Option<Vec<String>>,
    /// World profiles (comma-separated: small, medium, large, huge).
    #[arg(long, value_delimiter = ',', default_value = "small,medium,large")]
    profiles: Vec<Profile>,
    /// World seeds per profile: `N` for seeds 1..=N, or `A-B` for seeds A..=B (a set kept
    /// apart from the one a change was tuned on).
    #[arg(long, default_value = "2", value_parser = parse_seeds)]
    seeds: Seeds,
    /// How the worlds' knobs are drawn: `default`, or a family that draws them anew for every
    /// seed (`decay`: fewer live relays, flakier answers, lossier writes; `amnesia`: relays
    /// prune harder; `churn`: more movers, varied hub shares and lists; `skew`: the top ten
    /// follows carry 40–60% of a year's notes, and a few prolific ones keep everything on one
    /// relay only they list; `indexed`: widely listed relays that answer and keep no notes,
    /// and lists of dozens; `sparse`: lists of mostly one or two relays, more such prolific
    /// follows; `dense`: lists of mostly five to nine relays, more of dozens; `hinted`: the
    /// default network with relay hints; `tail`: two to six prolific follows on relays of
    /// their own amid mostly dead relays; `patchy`: the default network where a follow's notes
    /// miss some of its relays).
    #[arg(long, default_value = "default")]
    family: Family,
    /// Sessions per strategy (plan → fetch → learn) [default: 5; with --world, every session
    /// the world describes, and at most that many].
    #[arg(long)]
    sessions: Option<u32>,
    /// Windows to score (comma-separated: 7d, 1yr, 3yr). With --live, one (default 1yr).
    #[arg(long, value_delimiter = ',', default_value = "7d,1yr,3yr")]
    windows: Vec<Window>,
    /// Routed-relay budgets (max connections) for every strategy and the ceilings; several
    /// (comma-separated, e.g. `4,8,20`) print one table each. With --world or --live, one.
    #[arg(long, value_delimiter = ',')]
    budget: Vec<usize>,
    /// Clock step between sessions, in seconds (decay of learned stats).
    #[arg(long)]
    interval: Option<u64>,
    /// Write the full report (every run, every session) as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw declared 1-year recall by session per strategy as SVG here.
    #[arg(long)]
    chart: Option<PathBuf>,
    /// Run one strategy on this world file instead of the suite (needs --config), or with
    /// --live the world to load into local relays.
    #[arg(long)]
    world: Option<PathBuf>,
    /// Router config (TOML) for --world; with --live, the strategy to run live (labelled by its
    /// strategy, beside any --strategies rows).
    #[arg(long, requires = "world")]
    config: Option<PathBuf>,
    /// With --world: write the plan of session N as DIR/session-N.json (outbox-plan/1), and
    /// the plan it made for each scored window W as DIR/session-N-W.json (session-3-7d.json);
    /// with --replan also what every wave of the session asked for W, as
    /// DIR/session-N-W-asked.json.
    #[arg(long, requires = "world")]
    plans_out: Option<PathBuf>,
    /// With --world: write the stats learned by the end of session N as DIR/stats-N.json (the
    /// JSON stats file `outbox plan --stats` and `outbox feed --stats` read).
    #[arg(long, requires = "world")]
    stats_out: Option<PathBuf>,
    /// Run the real runtime against local relays loaded with a world (--world, or the small
    /// profile) beside the simulator's numbers (--strategies, default greedy,recall); each
    /// relay answers through a proxy that waits the world's timing, and the live timeline is
    /// printed beside the simulator's clock.
    #[arg(long, conflicts_with_all = ["plans_out", "stats_out"])]
    live: bool,
    /// The base planning seed: session N plans with the draw `outbox plan --seed S --session
    /// N` makes [default: 0 with --world; 1 with --live, where it also seeds a generated world].
    #[arg(long)]
    seed: Option<u64>,
    /// With --live: one plan per session, as the simulator models a session (no relay set
    /// aside and re-planned around within a session).
    #[arg(long, requires = "live")]
    one_plan: bool,
    /// With --live: the first session looks the relay lists up on the reader's relays, as a new
    /// user's first run does (every list is stored there), instead of being handed them; the
    /// simulator's first session waits for the lookup too.
    #[arg(long, requires = "live")]
    lookup_first: bool,
    /// Also run every strategy with the worlds' NIP-66 monitor data applied before the first
    /// session, and print first- and last-session recall without and with it. With --world:
    /// apply the world file's monitor data.
    #[arg(long, conflicts_with = "live")]
    monitors: bool,
    /// Also score the inbox and publish routes on every world and print their table (inbox
    /// recall, publish reach). Left out of the default run, where it took a third of the time.
    #[arg(long, conflicts_with_all = ["world", "live"])]
    routes: bool,
    /// Relays every learning strategy probes per session after its fetch, instead of its
    /// config's `probe_connections` (default: twice the budget, and at least 120); 0 is the published
    /// benchmark's model, where a session learns only what its plan fetched.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=1000))]
    probes: Option<u16>,
    /// Within each session, set aside the relays that did not answer, then those that answered
    /// with none of their follows' notes where others returned some, and re-plan their follows
    /// without them, in the order the world's clock sets them aside, as the runtime does
    /// (`outbox feed`, `--live`); without it a session is one
    /// plan, the published benchmark's model, and a relay that is down loses its follows'
    /// notes for the session.
    #[arg(long, conflicts_with = "live")]
    replan: bool,
    /// After each session's fetch, keep every row's feed open this long (`1h`, `30m`; `0`:
    /// not measured, the default) while notes arrive, relays drop and come back and follows
    /// move, and print the open feed's table: live completeness, delay, catch-up and cost
    /// beside the live ceiling. Learning strategies learn from it too.
    #[arg(long, value_parser = parse_open, conflicts_with_all = ["world", "live"])]
    open: Option<u64>,
}

/// The longest a feed may be kept open per session (a day).
const MAX_OPEN_SECS: u64 = 86_400;

/// `--open`: a duration (`1h`, `90s`, `0`), at most a day.
fn parse_open(text: &str) -> Result<u64, String> {
    let secs = match text.trim() {
        "0" => 0,
        t => humantime::parse_duration(t)
            .map_err(|e| format!("expected a duration such as 1h or 30m: {e}"))?
            .as_secs(),
    };
    if secs > MAX_OPEN_SECS {
        return Err(format!("at most {MAX_OPEN_SECS} seconds (a day)"));
    }
    Ok(secs)
}

/// How many budgets one `--budget` list may hold: each runs the whole suite.
const MAX_BUDGETS: usize = 16;

/// The most world seeds one run takes (each is a world per profile).
const MAX_SEEDS: u64 = 10_000;

/// The world seeds of a run, inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seeds {
    first: u64,
    last: u64,
}

impl Seeds {
    fn range(self) -> std::ops::RangeInclusive<u64> {
        self.first..=self.last
    }
}

/// `N` (seeds 1..=N) or `A-B` (seeds A..=B), non-empty and at most [`MAX_SEEDS`] seeds.
fn parse_seeds(text: &str) -> Result<Seeds, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected N or A-B (whole numbers), got {:?}", t.trim()))
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => (1, number(text)?),
    };
    if last < first || (first == 1 && last == 0) {
        return Err(format!("no seeds in {text:?}"));
    }
    if last - first >= MAX_SEEDS {
        return Err(format!("at most {MAX_SEEDS} seeds per run"));
    }
    Ok(Seeds { first, last })
}

/// The window `bench --live` fetches and scores: the one `--windows` names, or 1 year when it
/// names the default three.
fn live_window(windows: &[Window]) -> anyhow::Result<Window> {
    match windows {
        [one] => Ok(*one),
        [Window::D7, Window::Y1, Window::Y3] => Ok(Window::Y1),
        _ => bail!("--live fetches one window: give --windows 7d, 1yr or 3yr"),
    }
}

/// Sessions per strategy on generated worlds when `--sessions` is not given.
const DEFAULT_SESSIONS: u32 = 5;

/// The base planning seed of `bench --world` when `--seed` is not given.
pub const WORLD_SEED: u64 = 0;

/// The base seed of `bench --live` when `--seed` is not given.
const LIVE_SEED: u64 = 1;

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The report and chart must not be written over what the bench reads.
    let mut inputs = crate::files::RunFiles::default();
    if let Some(world) = &args.world {
        inputs.add("the world file (--world)", world);
    }
    if let Some(config) = &args.config {
        inputs.add("the router config (--config)", config);
    }
    for (flag, out) in [("--json", &args.json), ("--chart", &args.chart)] {
        if let Some(out) = out {
            inputs.refuse_output(flag, out)?;
        }
    }
    if args.seed.is_some() && !args.live && args.world.is_none() {
        bail!("--seed needs --world or --live (generated worlds take --seeds)");
    }
    if args.live {
        return crate::live::run(crate::live::Options {
            world: args.world,
            config: args.config,
            strategies: args.strategies,
            sessions: args.sessions.unwrap_or(DEFAULT_SESSIONS),
            seed: args.seed.unwrap_or(LIVE_SEED),
            budget: single_budget(&args.budget)?,
            one_plan: args.one_plan,
            lookup_first: args.lookup_first,
            probes: args.probes.map(usize::from),
            window: live_window(&args.windows)?,
        });
    }
    if let Some(world) = &args.world {
        let config = args.config.as_deref().context("--world needs --config")?;
        return run_one(&args, world, config);
    }
    let sessions = args.sessions.unwrap_or(DEFAULT_SESSIONS);
    if sessions == 0 || args.profiles.is_empty() || args.windows.is_empty() {
        bail!("--sessions, --profiles and --windows must not be empty or zero");
    }
    if sessions > MAX_SESSIONS {
        bail!("--sessions {sessions}: at most {MAX_SESSIONS} sessions");
    }
    if args.budget.contains(&0) {
        bail!("--budget must be at least 1");
    }
    if args.budget.len() > MAX_BUDGETS {
        bail!("--budget: at most {MAX_BUDGETS} budgets (each runs the whole suite)");
    }
    let budgets = if args.budget.is_empty() {
        vec![BenchConfig::default().budget]
    } else {
        args.budget.clone()
    };
    let mut reports = Vec::with_capacity(budgets.len());
    for &budget in &budgets {
        let mut cfg = BenchConfig {
            profiles: args.profiles.clone(),
            seeds: args.seeds.range().collect(),
            sessions,
            windows: args.windows.clone(),
            only: args.strategies.clone(),
            budget,
            monitors: args.monitors,
            family: args.family,
            probes: args.probes.map(usize::from),
            routes: args.routes,
            replan: args.replan,
            open: args.open.filter(|&secs| secs > 0),
            ..BenchConfig::default()
        };
        if let Some(i) = args.interval {
            cfg.session_interval_secs = i;
        }
        let report = run_suite(&cfg)?;
        if let Some(path) = &args.chart {
            let path = per_budget_path(path, budget, budgets.len());
            let window = if cfg.windows.contains(&Window::Y1) {
                Window::Y1
            } else {
                cfg.windows[0]
            };
            crate::chart::draw(&path, &report.series(window), window)
                .with_context(|| format!("drawing {}", path.display()))?;
        }
        reports.push(report);
    }
    if let Some(path) = &args.json {
        let json = match reports.as_slice() {
            [one] => serde_json::to_string_pretty(one),
            all => serde_json::to_string_pretty(all),
        }
        .context("serialising the report")?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the suite once at `cfg`, with a progress bar, and prints its table and legend.
fn run_suite(cfg: &BenchConfig) -> anyhow::Result<BenchReport> {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
            .expect("the template is valid"),
    );
    let started = Instant::now();
    let report = run_bench(cfg, &default_suite(), &|p| match p {
        Progress::Start { total } => bar.set_length(total as u64),
        Progress::Done { label, world } => {
            bar.set_message(format!("{label} on {}", crate::text::escape(&world)));
            bar.inc(1);
        }
    });
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    for s in &report.skipped {
        eprintln!("skipped {}: {}", s.label, s.reason);
    }
    out!("{}", render_table(&report))?;
    if report
        .shares
        .iter()
        .any(|r| r.windows.iter().any(|w| w.worlds > 0))
    {
        out!("{}", render_share_table(&report))?;
        out!(
            "× ceiling = declared recall in the last session over the learnable ceiling's on the \
             same world, mean over worlds (the worst world: its share, profile and seed); falls = \
             sessions more than {0:.0} points below the session before, of all sessions after \
             the first; own = those more than {0:.0} points beyond what the ceiling lost on the \
             same world between the same sessions (fewer relays answering lowers every router's \
             recall).",
            nostr_outbox_sim::FALL_POINTS
        )?;
    }
    if report.rows.iter().any(|r| r.probes.connections.mean > 0.0) {
        out!("{}", render_probe_table(&report))?;
        out!(
            "Probes: after each session's fetch, relays the plan did not ask, each asked about the \
             follows who list it for their newest notes; per session, mean over every session \
             and world. Probe notes are learned from and never counted in the plan's recall; \
             +found = declared recall of the plan → with the notes only the probes returned, \
             which a client delivers after its fetch (the runtime's `FeedEvent::Found`)."
        )?;
    }
    if report.rows.iter().any(|r| r.time.is_some()) {
        out!("{}", render_time_table(&report))?;
        out!(
            "Time ({} window, on the worlds' clock), seconds after the start, mean over worlds: \
             the first note; the first screen (the newest {} notes of the run's fetch all in; \
             `never`: worlds where one came only after the deadline); 90% of the run's fetch; \
             × best = that time over the same notes' on the time ceiling (each from the \
             fastest relay holding it, one connect and one page after the start), mean of the \
             worlds' ratios; \
             when the run ends (probes done, or the {:.0} s deadline); @2s = share of the run's \
             own fetch, and of every reachable note, in after two seconds. s1 is a first run \
             (nothing learned, lists looked up before routed relays are asked); later sessions \
             keep the lists. The learnable ceiling's row holds the time ceiling instead, over \
             every reachable note (a bound no plan can beat; no socket budget).",
            report.config.clock.map_or("7d".into(), |w| w.to_string()),
            nostr_outbox_sim::clock::SCREEN,
            nostr_outbox_sim::clock::ClientTiming::default().deadline_ms / 1000.0,
        )?;
    }
    if !report.open.is_empty() {
        out!("{}", render_open_table(&report))?;
        out!(
            "Open feed ({}, after every session's fetch; each world's sessions pooled, mean ± SE \
             over worlds): live = notes delivered ÷ notes that arrived on a relay their author \
             listed while it was up; Δ recall = live minus recall's, paired by world; delay = \
             arrival on a relay to delivery, median and 99th percentile, seconds (an open \
             subscription's push taken as instant); gaps filled = relays subscribed that went \
             down and came back whose missed notes were asked for; catch-up = return to those \
             notes delivered, median, seconds; sockets = held on average; REQs, events and \
             plans per session. Rows of {} keep their selection and never back-fill; every \
             other row re-dials, fills gaps, re-plans around set-asides and new lists, and holds \
             as many sockets as the budget, polling the rest every 30 s. The live ceiling \
             delivers every note from its first holder at once; \"best N\" holds the N relays \
             that, knowing the hour, deliver the most, for the whole hour.",
            humantime::format_duration(std::time::Duration::from_secs(
                report.config.open.unwrap_or(0)
            )),
            nostr_outbox_sim::open::PEERS.join(", "),
        )?;
    }
    if !report.monitors.is_empty() {
        out!("{}", render_monitor_table(&report))?;
        out!(
            "Δ = recall with monitor data minus without, paired by world, mean ± SE of the \
             paired differences."
        )?;
    }
    out!(
        "{} worlds ({}{}), seeds {}, {} sessions{}, budget {}; recall = declared recall in the last \
         session, mean ± SE over worlds; `1yr s1` is the first session; REQs = pages sent and \
         events = events returned (duplicates included) fetching that window in the last \
         session, relays capping each REQ, mean over worlds; ev/note = events returned per \
         distinct note fetched; plan µs cold = a session's first plan, mean over sessions, and \
         warm = the median of {} plans repeated with the final stats, median over worlds (the \
         two bounds learn nothing: the median of their sessions' plans); the learnable ceiling \
         knows where events are stored and how often each relay answers, the oracle also which \
         relays answer in each session. {:.1}s",
        report.config.profiles.len() * report.config.seeds.len(),
        report
            .config
            .profiles
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join("+"),
        match report.config.family {
            Family::Default => String::new(),
            family => format!(", family {family}"),
        },
        seed_span(&report.config.seeds),
        report.config.sessions,
        if report.config.replan {
            " (each re-planned around the relays that did not answer or answered empty, as the runtime does)"
        } else {
            " (one plan each; --replan re-plans around relays that do not answer or answer empty, as the runtime does)"
        },
        report.config.budget,
        report.config.timing_repeats,
        elapsed.as_secs_f64()
    )?;
    if !report.config.routes {
        out!("Inbox and publish routes: not scored (--routes adds their table).")?;
    }
    if !report.routes.is_empty() {
        out!("{}", render_route_table(&report))?;
        out!(
            "routes: inbox recall = mentions of the reader found on the relays the inbox route \
             asks (the reader's NIP-65 read relays) ÷ mentions some answering relay stores; \
             publish reach = tagged people with a publish target among their read relays that \
             answers ÷ tagged people who declare read relays; naive = inbox from the reader's \
             configured relays only, publishing to the author's write relays only. Last \
             session, mean ± SE over worlds; relays = relays the inbox asks, and a tagged note \
             is sent to."
        )?;
    }
    Ok(report)
}

/// The seeds as `A–B` (or one seed).
fn seed_span(seeds: &[u64]) -> String {
    match (seeds.iter().min(), seeds.iter().max()) {
        (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
        (Some(a), _) => a.to_string(),
        _ => "none".to_string(),
    }
}

/// `path` as given for one budget; with several, `stem-b<budget>.ext` for each.
fn per_budget_path(path: &std::path::Path, budget: usize, budgets: usize) -> PathBuf {
    if budgets <= 1 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-b{budget}.{}", ext.to_string_lossy()),
        None => format!("{stem}-b{budget}"),
    };
    path.with_file_name(name)
}

/// The one budget `--world` and `--live` take, if given.
fn single_budget(budgets: &[usize]) -> anyhow::Result<Option<usize>> {
    match budgets {
        [] => Ok(None),
        [0] => bail!("--budget must be at least 1"),
        [one] => Ok(Some(*one)),
        _ => bail!("--world and --live take one --budget"),
    }
}

/// A mean recall as a percentage with its standard error; `-` when no world had anything to
/// recall (0 of 0 is not 100%).
fn pct(m: &MeanSe) -> String {
    if m.n == 0 {
        "-".to_string()
    } else if m.n > 1 {
        format!("{:.1} ±{:.1}", m.mean * 100.0, m.se * 100.0)
    } else {
        format!("{:.1}", m.mean * 100.0)
    }
}

/// The side-by-side table: strategies as rows (sorted by 1-year recall), then the learnable
/// ceiling and the oracle.
pub fn render_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let windows = &report.config.windows;
    let mut header = vec!["strategy".to_string()];
    for w in windows {
        if *w == Window::Y1 {
            header.push("1yr s1".to_string());
        }
        header.push(format!("{w}"));
    }
    if windows.contains(&Window::Y1) {
        header.push("1yr total".to_string());
    }
    // Cost of fetching one window (1 year when scored): REQ pages and events returned.
    let cost_window = nostr_outbox_sim::bench::sort_window(windows);
    if let Some(w) = cost_window {
        header.push(format!("{w} REQs"));
        header.push(format!("{w} events"));
        header.push(format!("{w} ev/note"));
    }
    header.extend(
        [
            "conns",
            "disclosure",
            "per follow",
            "max",
            "orphans",
            "top relay",
            "plan µs cold",
            "warm",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    table.set_header(header);
    for row in &report.rows {
        let mut cells = vec![Cell::new(&row.label)];
        for w in windows {
            let Some(rw) = row.window(*w) else { continue };
            if *w == Window::Y1 {
                cells.push(right(pct(&rw.first)));
            }
            cells.push(right(pct(&rw.last)));
        }
        if let Some(rw) = row.window(Window::Y1) {
            cells.push(right(pct(&rw.total_last)));
        }
        if let Some(rw) = cost_window.and_then(|w| row.window(w)) {
            cells.push(right(format!("{:.0}", rw.round_trips.mean)));
            cells.push(right(format!("{:.0}", rw.events.mean)));
            cells.push(right(format!("{:.2}", rw.events_per_note.mean)));
        }
        for text in [
            format!("{:.1}", row.connections.mean),
            format!("{:.0}", row.disclosure.mean),
            format!("{:.2}", row.per_follow.mean),
            row.per_follow_max.to_string(),
            format!("{:.0}", row.orphans.mean),
            format!("{:.0}%", row.load_concentration.mean * 100.0),
            format!("{:.0}", row.plan_us_cold),
            format!("{:.0}", row.plan_us_warm),
        ] {
            cells.push(right(text));
        }
        table.add_row(cells);
    }
    table
}

/// The open feed: per row, live completeness, delay, catch-up and cost; the live ceiling last.
pub fn render_open_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    table.set_header(vec![
        "strategy",
        "live",
        "Δ recall",
        "delay p50",
        "p99",
        "gaps filled",
        "catch-up",
        "sockets",
        "REQs",
        "events",
        "plans",
        "notes",
    ]);
    let secs = |m: &MeanSe| {
        if m.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", m.mean)
        }
    };
    for row in &report.open {
        let label = match row.label.as_str() {
            CEILING => "live ceiling".to_string(),
            nostr_outbox_sim::bench::LIVE_BUDGET_CEILING => {
                format!("live ceiling, best {}", report.config.budget)
            }
            _ => row.label.clone(),
        };
        let ceiling =
            row.label == CEILING || row.label == nostr_outbox_sim::bench::LIVE_BUDGET_CEILING;
        let mut cells = vec![Cell::new(label)];
        for text in [
            pct(&row.completeness),
            if row.vs_recall.n == 0 || row.label == "recall" {
                "-".to_string()
            } else {
                format!(
                    "{:+.1} ±{:.1}",
                    row.vs_recall.mean * 100.0,
                    row.vs_recall.se * 100.0
                )
            },
            secs(&row.delay_p50),
            secs(&row.delay_p99),
            if ceiling {
                "-".to_string()
            } else {
                pct(&row.gaps_filled)
            },
            secs(&row.catch_up_p50),
            format!("{:.1}", row.sockets.mean),
            format!("{:.0}", row.reqs.mean),
            format!("{:.0}", row.events.mean),
            format!("{:.1}", row.plans.mean),
            format!("{:.0}", row.notes.mean),
        ] {
            cells.push(right(text));
        }
        table.add_row(cells);
    }
    table
}

/// Per strategy and window: recall as a share of the learnable ceiling, world by world (mean,
/// and the worst world), and the sessions that fell below the one before.
pub fn render_share_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let windows = &report.config.windows;
    let mut header = vec!["strategy".to_string()];
    header.extend(windows.iter().map(|w| format!("{w} × ceiling (worst)")));
    header.extend(windows.iter().map(|w| format!("{w} falls (own)")));
    table.set_header(header);
    for row in &report.shares {
        let mut cells = vec![Cell::new(&row.label)];
        for w in &row.windows {
            let text = match (w.mean, &w.worst) {
                (Some(mean), Some(worst)) => format!(
                    "{mean:.2} ({:.2} {} {})",
                    worst.share,
                    worst.profile.name(),
                    worst.seed
                ),
                _ => "—".to_string(),
            };
            cells.push(right(text));
        }
        for w in &row.windows {
            cells.push(right(format!("{}/{} ({})", w.falls, w.steps, w.own_falls)));
        }
        table.add_row(cells);
    }
    table
}

/// What probing cost, per strategy that probed: connections, REQs, follows named and events
/// per session.
pub fn render_probe_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let windows = &report.config.windows;
    let last = report.config.sessions;
    let mut header: Vec<String> = ["strategy", "probe conns", "probe REQs", "follows named"]
        .map(String::from)
        .into();
    header.push("probe events".to_string());
    for w in windows {
        header.push(format!("{w} s1 +found"));
        header.push(format!("{w} s{last} +found"));
    }
    table.set_header(header);
    // Declared recall of the plan → with what the probes found beyond it.
    let with = |plan: &MeanSe, found: &MeanSe| {
        if plan.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1} → {:.1}", plan.mean * 100.0, found.mean * 100.0)
        }
    };
    for row in report
        .rows
        .iter()
        .filter(|r| r.probes.connections.mean > 0.0)
    {
        let p = &row.probes;
        let mut cells = vec![Cell::new(&row.label)];
        for m in [&p.connections, &p.reqs, &p.filters, &p.events] {
            cells.push(right(format!("{:.1}", m.mean)));
        }
        for w in windows {
            let (first, last) = row.window(*w).map_or(("-".into(), "-".into()), |x| {
                (
                    with(&x.first, &x.first_with_found),
                    with(&x.last, &x.last_with_found),
                )
            });
            cells.push(right(first));
            cells.push(right(last));
        }
        table.add_row(cells);
    }
    table
}

/// With `--monitors`: per strategy, declared recall in the first and the last session without
/// and with the monitor prior, and the difference.
pub fn render_monitor_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let Some(first) = report.monitors.first() else {
        return table;
    };
    let (w, last) = (first.window, report.config.sessions);
    table.set_header(vec![
        "strategy".to_string(),
        format!("{w} s1"),
        format!("{w} s1 +monitors"),
        "Δ s1".to_string(),
        format!("{w} s{last}"),
        format!("{w} s{last} +monitors"),
        format!("Δ s{last}"),
    ]);
    let delta = |d: &MeanSe| {
        if d.n == 0 {
            "-".to_string()
        } else {
            format!("{:+.1} ±{:.1}", d.mean * 100.0, d.se * 100.0)
        }
    };
    for row in &report.monitors {
        let cells = [
            pct(&row.first),
            pct(&row.first_monitored),
            delta(&row.first_gain),
            pct(&row.last),
            pct(&row.last_monitored),
            delta(&row.last_gain),
        ];
        let mut out = vec![Cell::new(&row.label)];
        out.extend(cells.into_iter().map(right));
        table.add_row(out);
    }
    table
}

/// The route table: inbox recall per window and publish reach, for the routes library and for
/// a client that ignores NIP-65's read markers.
pub fn render_route_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let Some(first) = report.routes.first() else {
        return table;
    };
    let mut header = vec!["routes".to_string()];
    header.extend(first.windows.iter().map(|w| format!("{} inbox", w.window)));
    header.extend(["publish reach", "inbox relays", "publish relays"].map(String::from));
    table.set_header(header);
    for row in &report.routes {
        let mut cells = vec![Cell::new(&row.label)];
        let mut values: Vec<String> = row.windows.iter().map(|w| pct(&w.inbox_recall)).collect();
        values.push(pct(&row.publish_reach));
        for m in [&row.inbox_relays, &row.publish_relays] {
            values.push(if m.n == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", m.mean)
            });
        }
        cells.extend(values.into_iter().map(right));
        table.add_row(cells);
    }
    table
}

/// One session's recall as a percentage; `-` when there was nothing to recall.
fn recall_cell(recall: Option<f64>) -> String {
    recall.map_or_else(|| "-".to_string(), |r| format!("{:.1}", r * 100.0))
}

/// One strategy on one world file, every session, plans written out.
fn run_one(args: &Args, world_path: &Path, config_path: &Path) -> anyhow::Result<ExitCode> {
    let text = crate::text::read_bounded(config_path, crate::text::MAX_CONFIG_BYTES)
        .context("reading config")?;
    let config = RouterConfig::from_toml(&text)
        .with_context(|| format!("in config {}", config_path.display()))?;
    let world = World::read_path(world_path)
        .with_context(|| format!("reading world {}", world_path.display()))?;
    let sessions = world
        .sessions_to_run(args.sessions)
        .map_err(|e| anyhow::anyhow!("--sessions: {e}"))?;
    let sim = SimWorld::with_policy(world, &config.url_policy);
    let budget = single_budget(&args.budget)?.unwrap_or(config.max_connections);
    let mut router = Router::new(&*config.strategy, budget).with_probes(
        (args.probes.map(usize::from))
            .or(config.probe_connections)
            .unwrap_or_else(|| nostr_outbox_core::default_probes(budget)),
    );
    for dir in [&args.plans_out, &args.stats_out].into_iter().flatten() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Sorted as scores list them, so the columns line up.
    let mut windows = args.windows.clone();
    windows.sort();
    windows.dedup();
    let cfg = LoopConfig {
        sessions,
        windows,
        session_interval_secs: args
            .interval
            .unwrap_or(LoopConfig::default().session_interval_secs),
        seed: args.seed.unwrap_or(WORLD_SEED),
        monitor_prior: args.monitors,
        replan_on_failure: args.replan,
        ..LoopConfig::default()
    };
    let mut write_error: Option<anyhow::Error> = None;
    let run = run_sessions_with(&sim, &mut router, &cfg, |v| {
        if write_error.is_none() {
            write_error = write_session(args, &sim, v).err();
        }
    });
    if let Some(e) = write_error {
        return Err(e);
    }
    let mut table = styled_table();
    let mut header = vec!["session".to_string()];
    header.extend(cfg.windows.iter().map(|w| format!("{w} declared")));
    header.extend(cfg.windows.iter().map(|w| format!("{w} total")));
    header.extend(cfg.windows.iter().map(|w| format!("{w} REQs")));
    header.extend(cfg.windows.iter().map(|w| format!("{w} events")));
    header.extend(["conns", "disclosure", "orphans", "plan µs"].map(String::from));
    table.set_header(header);
    for (s, o) in run.sessions.iter().enumerate() {
        let mut cells = vec![s.to_string()];
        cells.extend(o.score.windows.iter().map(|w| recall_cell(w.declared())));
        cells.extend(o.score.windows.iter().map(|w| recall_cell(w.total())));
        cells.extend(o.score.cost.iter().map(|c| c.cost.round_trips.to_string()));
        cells.extend(o.score.cost.iter().map(|c| c.cost.events.to_string()));
        cells.push(o.score.connections.to_string());
        cells.push(o.score.disclosure.to_string());
        cells.push(o.score.orphans.unwrap_or(0).to_string());
        cells.push(format!("{:.0}", o.plan_us));
        table.add_row(cells);
    }
    out!(
        "{}: {} on {}",
        run.strategy,
        sessions,
        crate::text::escape(&sim.world.name)
    )?;
    out!("{table}")?;
    out!(
        "plan µs: cold {:.0} (each session's first plan, mean over sessions), warm {:.0} (the \
         median of {} plans repeated with the final stats)",
        run.plan_us_cold,
        run.plan_us_warm,
        cfg.timing_repeats
    )?;
    if let Some(table) = render_session_times(&run, &cfg) {
        out!("{table}")?;
    }
    out!("{}", render_references(&sim, &cfg, budget, &run))?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&run).context("serialising the run")?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Under the `--world` table: when each session's feed of the clock's window arrived, in
/// seconds (`None` when the run was not timed).
fn render_session_times(run: &StrategyRun, cfg: &LoopConfig) -> Option<Table> {
    let window = cfg.clock?;
    let mut table = styled_table();
    table.set_header(vec![
        format!("{window} on the clock"),
        "first".to_string(),
        "screen".to_string(),
        "× best".to_string(),
        "90%".to_string(),
        "× best".to_string(),
        "last".to_string(),
        "ends".to_string(),
        "@1s".to_string(),
        "@2s".to_string(),
        "@5s".to_string(),
    ]);
    let secs = |ms: Option<f64>| ms.map_or("-".to_string(), |ms| format!("{:.2}", ms / 1000.0));
    let times = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
    for (s, o) in run.sessions.iter().enumerate() {
        let Some(t) = &o.score.time else { continue };
        let mut cells = vec![
            format!("session {s}"),
            secs(t.first_note_ms),
            secs(t.screen_ms),
            times(t.screen_ratio()),
            secs(t.p90_ms),
            times(t.p90_ratio()),
            secs(t.last_note_ms),
            secs(Some(t.end_ms)),
        ];
        cells.extend(
            t.completeness
                .iter()
                .map(|c| format!("{:.0}%", c.own * 100.0)),
        );
        table.add_row(cells.into_iter().map(right));
    }
    Some(table)
}

/// Under the `--world` table: the session's probe cost, then the reference rows (the best
/// fixed set of `budget` relays and the learnable ceiling) per session, and the fixed sets.
fn render_references(sim: &SimWorld, cfg: &LoopConfig, budget: usize, run: &StrategyRun) -> String {
    let mut text = String::new();
    let probes: Vec<&ProbeCost> = run.sessions.iter().map(|o| &o.score.probe).collect();
    if probes.iter().any(|p| p.connections > 0) {
        text.push_str("probes by session:");
        for (name, of) in [
            (
                "connections",
                (|p: &ProbeCost| p.connections) as fn(&ProbeCost) -> u64,
            ),
            ("REQs", |p| p.reqs),
            ("follows named", |p| p.filters),
            ("events", |p| p.events),
        ] {
            let values: Vec<String> = probes.iter().map(|p| of(p).to_string()).collect();
            text.push_str(&format!(" {name} {};", values.join(" ")));
        }
        text.pop();
        text.push('\n');
    }
    let (choices, fixed) = run_best_fixed(sim, cfg, budget);
    let ceiling = run_ceiling(sim, cfg, budget);
    text.push_str("declared recall by session:\n");
    let fixed_label = format!("{BEST_FIXED} {budget}");
    for (label, outcomes) in [(fixed_label.as_str(), &fixed), (CEILING, &ceiling)] {
        let windows: Vec<String> = cfg
            .windows
            .iter()
            .map(|&w| {
                let values: Vec<String> = outcomes
                    .iter()
                    .map(|o| recall_cell(o.score.window(w).and_then(|s| s.declared())))
                    .collect();
                format!("{w} {}", values.join(" "))
            })
            .collect();
        text.push_str(&format!("  {label:<18} {}\n", windows.join(" | ")));
    }
    let relays = sim.world.relays();
    for c in &choices {
        let urls: Vec<String> = (c.relays.iter())
            .map(|&r| crate::text::escape(&relays[r as usize].url))
            .collect();
        let how = match c.search {
            FixedSearch::Exhaustive { sets } => format!(
                "exhaustive over the {sets} sets of {} among the {} relays holding declared notes",
                c.relays.len(),
                c.candidates
            ),
            FixedSearch::Greedy => format!(
                "greedy: more than {MAX_EXHAUSTIVE_SETS} sets among the {} relays holding \
                 declared notes",
                c.candidates
            ),
        };
        text.push_str(&format!(
            "{fixed_label}, {}: {} ({how})\n",
            c.window,
            urls.join(", ")
        ));
    }
    text.pop();
    text
}

/// Writes what `--plans-out` and `--stats-out` ask for of one session.
fn write_session(args: &Args, sim: &SimWorld, v: &SessionView<'_>) -> anyhow::Result<()> {
    let s = v.session;
    if let Some(dir) = &args.plans_out {
        let write = |name: String, file: PlanFile| {
            let path = dir.join(name);
            std::fs::write(&path, file.to_json() + "\n")
                .with_context(|| format!("writing {}", path.display()))
        };
        let plan_file = |plan| PlanFile::from_plan(plan, v.table, s);
        write(format!("session-{s}.json"), plan_file(v.plan))?;
        for (window, plan) in v.window_plans {
            write(format!("session-{s}-{window}.json"), plan_file(plan))?;
        }
        // Re-planned sessions asked more than their first plans: what every wave asked.
        if args.replan {
            for (window, asks) in v.window_asks {
                let file = PlanFile::from_asks(asks, sim, v.plan.strategy(), s);
                write(format!("session-{s}-{window}-asked.json"), file)?;
            }
        }
    }
    if let Some(dir) = &args.stats_out {
        let path = dir.join(format!("stats-{s}.json"));
        nostr_outbox_stats::FileStore::new(&path)
            .save(v.stats)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// When each row's feed arrived (the clock's window, first and last session): time to the
/// first note, the first screen, 90% and the end of the run, and how much of the run's own
/// fetch and of the reachable notes was in after two seconds.
pub fn render_time_table(report: &BenchReport) -> Table {
    let mut table = styled_table();
    let last = report.config.sessions;
    let mut header = vec!["strategy".to_string()];
    for s in [1, last] {
        header.extend([
            format!("s{s} first"),
            format!("s{s} screen"),
            "× best".to_string(),
            format!("s{s} 90%"),
            "× best".to_string(),
            format!("s{s} ends"),
            format!("s{s} @2s own"),
            format!("s{s} @2s all"),
        ]);
    }
    table.set_header(header);
    let secs = |m: &MeanSe| {
        if m.n == 0 {
            "-".to_string()
        } else {
            format!("{:.1}", m.mean / 1000.0)
        }
    };
    let at_2s = |v: &[MeanSe]| {
        let i = nostr_outbox_sim::clock::COMPLETENESS_AT_MS
            .iter()
            .position(|&ms| ms == 2_000);
        i.and_then(|i| v.get(i)).map_or("-".to_string(), pct)
    };
    for row in &report.rows {
        let Some(time) = &row.time else { continue };
        let mut cells = vec![Cell::new(&row.label)];
        for f in [&time.first, &time.last] {
            let screen = if f.no_screen > 0 {
                format!("{} ({} never)", secs(&f.screen), f.no_screen)
            } else {
                secs(&f.screen)
            };
            let times = |m: &MeanSe| {
                if m.n == 0 {
                    "-".to_string()
                } else {
                    format!("{:.1}", m.mean)
                }
            };
            for text in [
                secs(&f.first_note),
                screen,
                times(&f.screen_ratio),
                secs(&f.p90),
                times(&f.p90_ratio),
                secs(&f.end),
                at_2s(&f.own),
                at_2s(&f.reachable),
            ] {
                cells.push(right(text));
            }
        }
        table.add_row(cells);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--open` reads a duration, `0` for none, and refuses more than a day.
    #[test]
    fn open_takes_a_duration_of_at_most_a_day() {
        assert_eq!(parse_open("1h"), Ok(3_600));
        assert_eq!(parse_open("30m"), Ok(1_800));
        assert_eq!(parse_open("0"), Ok(0));
        assert!(parse_open("2days").is_err());
        assert!(parse_open("an hour").is_err());
    }

    /// A live run fetches one window: the one named, 1 year when none is, never several.
    #[test]
    fn a_live_run_fetches_the_one_window_named() {
        assert_eq!(live_window(&[Window::D7]).unwrap(), Window::D7);
        assert_eq!(live_window(&Window::ALL).unwrap(), Window::Y1);
        let err = live_window(&[Window::D7, Window::Y1]).unwrap_err();
        assert!(err.to_string().contains("one window"), "{err}");
    }

    /// The suite table shows planning time cold and warm, each from its own field.
    #[test]
    fn the_table_shows_plan_time_cold_and_warm() {
        nostr_outbox_strategies::link();
        let cfg = BenchConfig {
            profiles: vec![Profile::Small],
            seeds: vec![1],
            sessions: 1,
            windows: vec![Window::D7],
            only: Some(vec!["greedy".into()]),
            oracle: false,
            routes: false,
            threads: 1,
            ..BenchConfig::default()
        };
        let mut report = run_bench(&cfg, &default_suite(), &|_| {});
        for (i, row) in report.rows.iter_mut().enumerate() {
            (row.plan_us, row.plan_us_cold, row.plan_us_warm) = (1.0, 2000.0 + i as f64, 30.0);
        }
        let text = render_table(&report).to_string();
        let lines: Vec<Vec<String>> = text
            .lines()
            .filter(|l| l.starts_with('│'))
            .map(|l| {
                (l.trim_matches('│').split('┆'))
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect();
        let header = &lines[0];
        let at = |name: &str| header.iter().position(|h| h == name);
        let (cold, warm) = (at("plan µs cold").unwrap(), at("warm").unwrap());
        assert_eq!(at("plan µs"), None, "{header:?}");
        let greedy = lines.iter().find(|l| l[0] == "greedy").unwrap();
        assert_eq!(
            (greedy[cold].as_str(), greedy[warm].as_str()),
            ("2000", "30")
        );
    }

    #[test]
    fn seeds_are_a_count_or_an_inclusive_range() {
        let range = |t: &str| parse_seeds(t).map(|s| s.range().collect::<Vec<_>>());
        assert_eq!(range("3"), Ok(vec![1, 2, 3]));
        assert_eq!(range("1001-1003"), Ok(vec![1001, 1002, 1003]));
        assert_eq!(range(" 7 - 7 "), Ok(vec![7]));
        assert_eq!(range("0-1"), Ok(vec![0, 1]));
        for bad in [
            "0",
            "5-4",
            "",
            "a",
            "1-",
            "-3",
            "1-2-3",
            "99999999999999999999",
        ] {
            assert!(parse_seeds(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_seeds("10000").is_ok());
        assert!(parse_seeds("10001").is_err());
        assert!(parse_seeds("0-18446744073709551615").is_err());
    }
}

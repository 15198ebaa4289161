//! `outbox bench --live`: the real runtime against local relays loaded with a world, beside the
//! simulator's numbers for the same strategies and world (the work is in `nostr-outbox-live`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use comfy_table::{Cell, Table};

use nostr_outbox_core::RouterConfig;
use nostr_outbox_live::clients::{registered_clients, ClientSetup};
use nostr_outbox_live::{
    run_live_with_clients, Agreement, LiveConfig, LiveReport, LiveStrategy, Progress, SessionTime,
    AGREE_MS, AGREE_SHARE,
};
use nostr_outbox_sim::bench::resolve;
use nostr_outbox_sim::{default_suite, generate, BenchConfig, Profile, Window, World};

use crate::table::{right, styled_table};

/// Suite rows run when `--strategies` is not given.
const DEFAULT_STRATEGIES: [&str; 2] = ["greedy", "recall"];

/// What `outbox bench` hands over with `--live`.
#[derive(Debug)]
pub struct Options {
    /// A world file; otherwise the small profile generated with `seed`.
    pub world: Option<PathBuf>,
    /// A router config file to run, labelled by its strategy.
    pub config: Option<PathBuf>,
    /// Suite row labels (default: `greedy,recall` when no config is given).
    pub strategies: Option<Vec<String>>,
    /// Sessions (at most the world's).
    pub sessions: u32,
    /// World seed (when generated) and base planning seed.
    pub seed: u64,
    /// Routed-relay budget.
    pub budget: Option<usize>,
    /// One plan per session, as the simulator models a session.
    pub one_plan: bool,
    /// The first session looks the relay lists up on the reader's relays.
    pub lookup_first: bool,
    /// Relays probed per session after the fetch, live and simulated alike, instead of each
    /// config's `probe_connections`.
    pub probes: Option<usize>,
    /// The window fetched and scored.
    pub window: Window,
}

pub fn run(opts: Options) -> anyhow::Result<ExitCode> {
    if opts.sessions == 0 {
        bail!("--sessions must not be zero");
    }
    let world = match &opts.world {
        Some(path) => {
            World::read_path(path).with_context(|| format!("reading world {}", path.display()))?
        }
        None => generate(Profile::Small, opts.seed),
    };
    let wanted: Vec<String> = match (&opts.strategies, &opts.config) {
        (Some(labels), _) => labels.clone(),
        (None, Some(_)) => Vec::new(),
        (None, None) => DEFAULT_STRATEGIES.map(String::from).to_vec(),
    };
    let suite = default_suite();
    let (mut resolved, skipped) = resolve(&suite);
    let mut strategies = Vec::new();
    // A config file's strategy runs at its own budget unless --budget says otherwise.
    let mut budget = opts.budget.unwrap_or(BenchConfig::default().budget);
    if let Some(path) = &opts.config {
        let text = crate::text::read_bounded(path, crate::text::MAX_CONFIG_BYTES)
            .context("reading config")?;
        let mut config = RouterConfig::from_toml(&text)
            .with_context(|| format!("in config {}", path.display()))?;
        budget = opts.budget.unwrap_or(config.max_connections);
        config.max_connections = budget;
        if let Some(probes) = opts.probes {
            config.probe_connections = Some(probes);
        }
        strategies.push(LiveStrategy {
            label: config.strategy.label(),
            config,
        });
    }
    for label in &wanted {
        if strategies.iter().any(|s: &LiveStrategy| &s.label == label) {
            bail!("strategy {label:?} is both --config's and a --strategies row: give one");
        }
        if let Some(s) = skipped.iter().find(|s| &s.label == label) {
            bail!("strategy {label:?} cannot run: {}", s.reason);
        }
        let Some(at) = resolved.iter().position(|(l, _)| l == label) else {
            let known: Vec<&str> = suite.iter().map(|e| e.label.as_str()).collect();
            bail!(
                "unknown or repeated strategy {label:?} (suite rows: {})",
                known.join(", ")
            );
        };
        let (_, mut config) = resolved.remove(at);
        config.max_connections = budget;
        if let Some(probes) = opts.probes {
            config.probe_connections = Some(probes);
        }
        strategies.push(LiveStrategy {
            label: label.clone(),
            config,
        });
    }
    // Relays behind the world's clock, the runtime at its defaults.
    let cfg = LiveConfig {
        sessions: opts.sessions,
        seed: opts.seed,
        one_plan: opts.one_plan,
        lookup_first: opts.lookup_first,
        window: opts.window,
        ..LiveConfig::timed()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let started = Instant::now();
    eprintln!(
        "live bench on {} ({} follows, {} events): signing and loading…",
        world.name,
        world.follows.len(),
        world.events().len()
    );
    // Other clients on the same relays: those a crate linked into this binary registered
    // (`nostr_outbox_live::clients`); the published `outbox` links none.
    let clients = registered_clients(&ClientSetup {
        budget,
        seed: opts.seed,
    });
    let report = runtime.block_on(run_live_with_clients(
        world,
        &strategies,
        &clients,
        &cfg,
        |p| match p {
            Progress::Prepared {
                events,
                relays,
                took,
            } => eprintln!(
                "{events} notes on {relays} relays in {:.1}s",
                took.as_secs_f64()
            ),
            Progress::Session { label, result } => eprintln!(
                "{label} session {}: live {}%, simulated {}%; probed {}/{}, answered {}/{}, \
             notes {}/{} live/simulated; {} sockets at most{} ({:.1}s)",
                result.session,
                percent(result.live.declared()),
                percent(result.simulated.declared()),
                result.probes.live,
                result.probes.simulated,
                result.probes.live_answered,
                result.probes.simulated_answered,
                result.probes.live_events,
                result.probes.simulated_events,
                result.sockets,
                result.time.as_ref().map_or_else(String::new, |t| format!(
                    "; first screen {} s, 90% {} s live/simulated",
                    pair(&t.screen),
                    pair(&t.p90)
                )),
                result.elapsed.as_secs_f64()
            ),
            Progress::Client { label, result } => eprintln!(
            "{label} session {}: 7d {}%, 1yr {}%, 3yr {}%; {} relays dialled, {} asked ({:.1}s)",
            result.session,
            percent(result.window(Window::D7).and_then(|w| w.declared())),
            percent(result.window(Window::Y1).and_then(|w| w.declared())),
            percent(result.window(Window::Y3).and_then(|w| w.declared())),
            result.dialled,
            result.asked,
            result.elapsed.as_secs_f64()
        ),
        },
    ))?;
    out!("{}", render(&report))?;
    out!(
        "{}: {} follows, {} events on {} local relays ({} URLs, {} with a per-REQ cap), budget \
         {budget}, {}; declared recall, {} window. live = notes the runtime delivered; \
         simulated = the simulator's session loop; live plan = the simulator's score of what the \
         relays were asked; probed = relays probed after the fetch; +found = live and simulated \
         with the notes only the probes returned, which the runtime passes on after the fetch.{} {:.1}s (signing and loading {:.1}s)",
        report.world,
        report.follows,
        report.events,
        report.relays,
        report.urls,
        report.capped_relays,
        match (report.one_plan, report.lookup_first) {
            (true, _) => "one plan per session",
            (false, false) => "runtime as `outbox feed --once` (re-plans around relays it sets aside)",
            (false, true) => {
                "runtime as `outbox feed --once` (re-plans around relays it sets aside; the first \
                 session looks the lists up on the reader's relays, later ones are handed them)"
            }
        },
        report.window,
        if report.delay {
            format!(
                " Each relay behind a proxy waiting the world's timing; screen = the newest 50 \
                 notes of the run's fetch all in, 90% = 90% of it in, seconds after the start, \
                 live/simulated; agree = both within max({:.0}%, {AGREE_MS:.0} ms) of the \
                 simulated figure.",
                AGREE_SHARE * 100.0
            )
        } else {
            String::new()
        },
        started.elapsed().as_secs_f64(),
        report.prepare.as_secs_f64()
    )?;
    if !report.clients.is_empty() {
        out!("{}", render_clients(&report))?;
        out!(
            "Other clients on the same relays and proxies, after the runtime's runs of each \
             session, handed the same relay lists and keeping their state between sessions: one \
             read per window (kind:1 notes of the follows since 7 days, 1 year, 3 years), each \
             scored as declared recall of its window; dialled = relays the client connected to \
             or tried, the reader's included; asked = relays that were asked for notes."
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per other client and session.
fn render_clients(report: &LiveReport) -> Table {
    let mut table = styled_table();
    table.set_header(vec![
        "client", "session", "7d %", "1yr %", "3yr %", "notes", "dialled", "asked", "s",
    ]);
    for client in &report.clients {
        for r in &client.sessions {
            let window = |w| percent(r.window(w).and_then(|w| w.declared()));
            table.add_row(vec![
                Cell::new(&client.label),
                right(r.session.to_string()),
                right(window(Window::D7)),
                right(window(Window::Y1)),
                right(window(Window::Y3)),
                right(r.notes.to_string()),
                right(r.dialled.to_string()),
                right(r.asked.to_string()),
                right(format!("{:.1}", r.elapsed.as_secs_f64())),
            ]);
        }
    }
    table
}

/// A recall as a percentage; `-` for 0 of 0 (nothing to recall is no evidence of 100%).
fn percent(recall: Option<f64>) -> String {
    recall.map_or_else(|| "-".to_string(), |r| format!("{:.1}", r * 100.0))
}

/// A time figure in seconds, `-` when never reached.
fn seconds(ms: Option<f64>) -> String {
    ms.map_or_else(|| "-".to_string(), |ms| format!("{:.2}", ms / 1_000.0))
}

/// Live and simulated, in seconds.
fn pair(a: &Agreement) -> String {
    format!("{}/{}", seconds(a.live_ms), seconds(a.simulated_ms))
}

/// Whether the first screen and 90% agree, naming what does not.
fn agreement(time: &SessionTime) -> String {
    match (time.screen.agree, time.p90.agree) {
        (true, true) => "yes".to_string(),
        (false, true) => "no: screen".to_string(),
        (true, false) => "no: 90%".to_string(),
        (false, false) => "no".to_string(),
    }
}

/// One row per strategy and session.
fn render(report: &LiveReport) -> Table {
    let mut table = styled_table();
    table.set_header(vec![
        "strategy",
        "session",
        "live %",
        "simulated %",
        "live plan %",
        "live − sim",
        "plans",
        "set aside",
        "REQs",
        "events rcvd",
        "notes",
        "probed live/sim",
        "+found % live/sim",
        "screen s live/sim",
        "90% s live/sim",
        "agree",
        "s",
    ]);
    for st in &report.strategies {
        for r in &st.sessions {
            let (live, sim) = (r.live.declared(), r.simulated.declared());
            let gap = live.zip(sim).map_or_else(
                || "-".to_string(),
                |(l, s)| format!("{:+.1}", l * 100.0 - s * 100.0),
            );
            table.add_row(vec![
                Cell::new(&st.label),
                right(r.session.to_string()),
                right(percent(live)),
                right(percent(sim)),
                right(percent(r.live_plan.declared())),
                right(gap),
                right(r.plans.to_string()),
                right(r.set_aside.to_string()),
                right(r.round_trips.to_string()),
                right(r.events_received.to_string()),
                right(r.notes.to_string()),
                right(format!("{}/{}", r.probes.live, r.probes.simulated)),
                right(format!(
                    "{}/{}",
                    percent(r.live.declared_with_found()),
                    percent(r.simulated.declared_with_found())
                )),
                right(r.time.as_ref().map_or("-".into(), |t| pair(&t.screen))),
                right(r.time.as_ref().map_or("-".into(), |t| pair(&t.p90))),
                Cell::new(r.time.as_ref().map_or("-".into(), agreement)),
                right(format!("{:.1}", r.elapsed.as_secs_f64())),
            ]);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use nostr_outbox_live::{SessionResult, StrategyResult};
    use nostr_outbox_sim::{Window, WindowScore};

    use super::*;

    fn window(fetched: u64, available: u64) -> WindowScore {
        let recall = if available == 0 {
            1.0
        } else {
            fetched as f64 / available as f64
        };
        WindowScore {
            window: Window::Y1,
            available,
            declared_available: available,
            fetched,
            declared_fetched: fetched,
            declared_recall: recall,
            total_recall: recall,
            found: 0,
        }
    }

    /// A report of a one-follow world of `events` events on one relay, with no results.
    fn report(events: usize) -> LiveReport {
        LiveReport {
            world: "w".into(),
            follows: 1,
            events,
            relays: 1,
            urls: 1,
            capped_relays: 0,
            one_plan: false,
            delay: false,
            lookup_first: false,
            window: Window::Y1,
            prepare: Duration::ZERO,
            strategies: Vec::new(),
            clients: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    /// The cells of `table`'s first row.
    fn first_row(table: &Table) -> Vec<String> {
        table
            .row(0)
            .expect("one row")
            .cell_iter()
            .map(|c| c.content())
            .collect()
    }

    #[test]
    fn nothing_to_recall_prints_a_dash() {
        let session = SessionResult {
            session: 0,
            live: window(0, 0),
            simulated: window(1, 4),
            live_plan: window(0, 0),
            same_plan: true,
            reqs: 0,
            round_trips: 0,
            events_received: 0,
            notes: 0,
            capped: 0,
            set_aside: 0,
            plans: 1,
            seed_matches: true,
            probes: Default::default(),
            sockets: 0,
            elapsed: Duration::ZERO,
            time: None,
        };
        let report = LiveReport {
            strategies: vec![StrategyResult {
                label: "greedy".into(),
                strategy: "greedy".into(),
                sessions: vec![session],
            }],
            ..report(0)
        };
        let row = first_row(&render(&report));
        // live, simulated, live plan, live − sim
        assert_eq!(row[2..6], ["-", "25.0", "-", "-"]);
    }

    #[test]
    fn client_rows_print_each_window_and_the_relays_dialled() {
        use nostr_outbox_live::clients::{ClientResult, ClientSessionResult};
        let mut year = window(3, 4);
        year.window = Window::Y1;
        let session = ClientSessionResult {
            session: 2,
            windows: vec![
                WindowScore {
                    window: Window::D7,
                    ..window(1, 2)
                },
                year,
            ],
            dialled: 31,
            asked: 20,
            notes: 3,
            elapsed: Duration::from_millis(1_500),
        };
        let report = LiveReport {
            clients: vec![ClientResult {
                label: "nostr-sdk".into(),
                sessions: vec![session],
            }],
            ..report(4)
        };
        let row = first_row(&render_clients(&report));
        // 3 years was not read: a dash, not 0.
        assert_eq!(
            row,
            [
                "nostr-sdk",
                "2",
                "50.0",
                "75.0",
                "-",
                "3",
                "31",
                "20",
                "1.5"
            ]
        );
    }

    #[test]
    fn time_figures_print_in_seconds_live_then_simulated() {
        assert_eq!(pair(&Agreement::new(Some(1_234.0), None)), "1.23/-");
        assert_eq!(pair(&Agreement::new(None, Some(80.0))), "-/0.08");
    }
}

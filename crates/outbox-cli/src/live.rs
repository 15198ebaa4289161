//! `outbox bench --live`: the real runtime against local relays loaded with a world, beside the
//! simulator's numbers for the same strategies and world (the work is in `outbox-live`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use outbox_live::{run_live, LiveConfig, LiveReport, LiveStrategy, Progress};
use outbox_sim::bench::resolve;
use outbox_sim::{default_suite, generate, BenchConfig, Profile, World};

/// Suite rows run when `--strategies` is not given.
const DEFAULT_STRATEGIES: [&str; 2] = ["greedy", "recall"];

/// What `outbox bench` hands over with `--live`.
#[derive(Debug)]
pub struct Options {
    /// A world file; otherwise the small profile generated with `seed`.
    pub world: Option<PathBuf>,
    /// Suite row labels.
    pub strategies: Option<Vec<String>>,
    /// Sessions (at most the world's).
    pub sessions: u32,
    /// World seed (when generated) and base planning seed.
    pub seed: u64,
    /// Routed-relay budget.
    pub budget: Option<usize>,
    /// One plan per session, as the simulator models a session.
    pub one_plan: bool,
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
    let wanted: Vec<String> = opts
        .strategies
        .clone()
        .unwrap_or_else(|| DEFAULT_STRATEGIES.map(String::from).to_vec());
    let suite = default_suite();
    let (mut resolved, skipped) = resolve(&suite);
    let budget = opts.budget.unwrap_or(BenchConfig::default().budget);
    let mut strategies = Vec::new();
    for label in &wanted {
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
        strategies.push(LiveStrategy {
            label: label.clone(),
            config,
        });
    }
    let cfg = LiveConfig {
        sessions: opts.sessions,
        seed: opts.seed,
        one_plan: opts.one_plan,
        ..LiveConfig::default()
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
    let report = runtime.block_on(run_live(world, &strategies, &cfg, |p| match p {
        Progress::Prepared {
            events,
            relays,
            took,
        } => eprintln!(
            "{events} notes on {relays} relays in {:.1}s",
            took.as_secs_f64()
        ),
        Progress::Session { label, result } => eprintln!(
            "{label} session {}: live {:.1}%, simulated {:.1}% ({:.1}s)",
            result.session,
            result.live.declared_recall * 100.0,
            result.simulated.declared_recall * 100.0,
            result.elapsed.as_secs_f64()
        ),
    }))?;
    out!("{}", render(&report))?;
    out!(
        "{}: {} follows, {} events on {} local relays ({} URLs, {} with a per-REQ cap), budget \
         {budget}, {}; declared recall, 1-year window. live = notes the runtime delivered; \
         simulated = the simulator's session loop; live plan = the simulator's score of what the \
         relays were asked. {:.1}s (signing and loading {:.1}s)",
        report.world,
        report.follows,
        report.events,
        report.relays,
        report.urls,
        report.capped_relays,
        if report.one_plan {
            "one plan per session"
        } else {
            "runtime as `outbox feed --once` (re-plans around relays it sets aside)"
        },
        started.elapsed().as_secs_f64(),
        report.prepare.as_secs_f64()
    )?;
    Ok(ExitCode::SUCCESS)
}

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

/// One row per strategy and session.
fn render(report: &LiveReport) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
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
        "s",
    ]);
    for st in &report.strategies {
        for r in &st.sessions {
            let live = r.live.declared_recall * 100.0;
            let sim = r.simulated.declared_recall * 100.0;
            table.add_row(vec![
                Cell::new(&st.label),
                right(r.session.to_string()),
                right(format!("{live:.1}")),
                right(format!("{sim:.1}")),
                right(format!("{:.1}", r.live_plan.declared_recall * 100.0)),
                right(format!("{:+.1}", live - sim)),
                right(r.plans.to_string()),
                right(r.set_aside.to_string()),
                right(r.round_trips.to_string()),
                right(r.events_received.to_string()),
                right(r.notes.to_string()),
                right(format!("{:.1}", r.elapsed.as_secs_f64())),
            ]);
        }
    }
    table
}

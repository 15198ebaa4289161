//! `outbox plan`: one plan for a world file, as an `outbox-plan/1` file, from no stats or from
//! a stats file (what `outbox feed` or `outbox bench --stats-out` learned).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use nostr_outbox_core::{
    check_plan, session_seed, DeliveryStats, PlanContext, Router, RouterConfig,
};
use nostr_outbox_sim::{PlanFile, Window, World};

/// Options of `outbox plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// World file (`outbox-world/1`): the reader, follows and relay lists.
    #[arg(long)]
    world: PathBuf,
    /// Router config (TOML): `max_connections` and a `[strategy]` table.
    #[arg(long)]
    config: PathBuf,
    /// The 0-based session the plan is for (recorded in the file; seeds randomised strategies)
    /// [default: with --stats, the sessions the stats counted, as the feed's next run; else 0].
    #[arg(long)]
    session: Option<u32>,
    /// Base seed for randomised strategies: session N plans with the draw the bench and the
    /// feed make for run N with this base seed (`outbox bench --world` uses 0).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Plan with these learned stats (a JSON stats file, as `outbox feed --stats` keeps and
    /// `outbox bench --stats-out` writes); checked as the feed checks it, never modified.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// The present to plan at, unix seconds (learned stats fade with time) [default: the
    /// world's `now`].
    #[arg(long)]
    now: Option<u64>,
    /// How far back the fetch asks: `7d`, `1yr`, `3yr` (the bench's windows) or a duration
    /// (`30d`, `12h`). Strategies that read it plan for it [default: none, any age].
    #[arg(long, value_parser = parse_window)]
    window: Option<u64>,
    /// Write the plan here instead of stdout; never over `--world`, `--config` or the stats
    /// file (and the files kept beside it).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Show which relay-list entries were dropped and why.
    #[arg(long)]
    explain: bool,
    /// Plan this many times and report the median planning time.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

/// A window as the bench labels it (`1yr` is 365 days), or a humantime duration, in seconds.
fn parse_window(text: &str) -> Result<u64, String> {
    if let Ok(window) = text.parse::<Window>() {
        return Ok(window.secs());
    }
    match crate::duration::parse(text) {
        Ok(d) if d.as_secs() > 0 => Ok(d.as_secs()),
        Ok(_) => Err("a window must be at least one second".into()),
        Err(e) => Err(format!(
            "expected 7d, 1yr, 3yr or a duration (30d, 12h): {e}"
        )),
    }
}

/// The stats to plan with: read from `path` without modifying it, or none learned.
fn load_stats(path: Option<&std::path::Path>) -> anyhow::Result<DeliveryStats> {
    let Some(path) = path else {
        return Ok(DeliveryStats::new());
    };
    let loaded = nostr_outbox_stats::read_stats_file(path)
        .with_context(|| format!("reading stats {}", path.display()))?;
    for warning in &loaded.warnings {
        eprintln!(
            "stats {}: {}",
            crate::text::escape(&path.display().to_string()),
            crate::text::escape(&warning.to_string())
        );
    }
    Ok(loaded.stats)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // The plan must not be written over what it is made from.
    if let Some(out) = &args.out {
        let mut files = crate::files::RunFiles::default();
        files.add("the world file (--world)", &args.world);
        files.add("the router config (--config)", &args.config);
        if let Some(stats) = &args.stats {
            files.add_store(&crate::store::Location::File(stats.clone()));
        }
        files.refuse_output("--out", out)?;
    }
    let text = crate::text::read_bounded(&args.config, crate::text::MAX_CONFIG_BYTES)
        .context("reading config")?;
    let config = RouterConfig::from_toml(&text)
        .with_context(|| format!("in config {}", args.config.display()))?;
    let world = World::read_path(&args.world)
        .with_context(|| format!("reading world {}", args.world.display()))?;
    let table = world.route_table(&config.url_policy);
    if args.explain {
        explain(&table);
    }

    let mut stats = load_stats(args.stats.as_deref())?;
    // A plan is a run: the session counter moves on as the feed's does before it plans.
    let counted = stats.session();
    stats.begin_session();
    let session = match args.session {
        Some(s) => s,
        None => match u32::try_from(counted) {
            Ok(s) => s,
            Err(_) => bail!("the stats count {counted} sessions: give --session"),
        },
    };
    let seed = session_seed(args.seed, u64::from(session));
    let mut ctx = PlanContext::at(args.now.unwrap_or(world.now)).seed(seed);
    if let Some(secs) = args.window {
        ctx = ctx.window(secs);
    }
    let mut router = Router::from_config(&config);
    let mut timings = Vec::with_capacity(args.repeat.max(1) as usize);
    let mut plan = None;
    for _ in 0..args.repeat.max(1) {
        // A fresh router per run, so stateful strategies are timed from the same start.
        router = Router::from_config(&config);
        let started = Instant::now();
        let p = router.plan_with(&table, &stats, ctx);
        timings.push(started.elapsed());
        plan = Some(p);
    }
    let plan = plan.expect("planned at least once");
    let violations = check_plan(&plan, &table, router.limits());
    for v in &violations {
        eprintln!("invariant violated: {v}");
    }

    let file = PlanFile::from_plan(&plan, &table, session);
    match &args.out {
        Some(path) => std::fs::write(path, file.to_json() + "\n")
            .with_context(|| format!("writing {}", path.display()))?,
        None => out!("{}", file.to_json())?,
    }
    let routed_authors = table.follow_count() - plan.residual().len();
    let counted = plan.routed_beyond_pool(&table, router.pool());
    eprintln!(
        "{}: {} connections ({} routed, {} beyond the reader's relays of max {}), {} follows: {} routed, {} residual, disclosure {}",
        plan.strategy(),
        file.connections(),
        plan.routed().len(),
        counted,
        router.max_connections(),
        table.follow_count(),
        routed_authors,
        plan.residual().len(),
        file.disclosure(),
    );
    if args.repeat > 1 {
        timings.sort_unstable();
        let median = timings[timings.len() / 2];
        eprintln!(
            "planning time: median {:.1} µs over {} runs (min {:.1}, max {:.1})",
            median.as_secs_f64() * 1e6,
            timings.len(),
            timings[0].as_secs_f64() * 1e6,
            timings[timings.len() - 1].as_secs_f64() * 1e6,
        );
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn explain(table: &nostr_outbox_core::RouteTable) {
    let report = table.drop_report();
    let with_list = table.authors().filter(|&a| table.has_list(a)).count();
    eprintln!(
        "route table: {} follows ({} with a relay list, {} without), {} relays, {} write edges",
        table.follow_count(),
        with_list,
        table.follow_count() - with_list,
        table.relay_count(),
        table.edge_count(),
    );
    eprintln!(
        "lists: {} superseded by newer ones, {} from non-follows ignored, {} read-only entries kept out of routing",
        report.superseded_lists, report.lists_not_followed, report.read_only_entries
    );
    if report.by_reason.is_empty() {
        eprintln!("dropped: nothing");
        return;
    }
    eprintln!("dropped {} entries:", report.total_dropped());
    for (reason, count) in &report.by_reason {
        let examples = report
            .examples
            .get(reason)
            .map(|e| {
                e.iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        eprintln!("  {count:>6}  {reason}  e.g. {examples}");
    }
}

//! `outbox plan`: one plan for a world file, as an `outbox-plan/1` file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use outbox_core::{check_plan, DeliveryStats, PlanContext, Router, RouterConfig};
use outbox_sim::{PlanFile, World};

/// Options of `outbox plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// World file (`outbox-world/1`): the reader, follows and relay lists.
    #[arg(long)]
    world: PathBuf,
    /// Router config (TOML): `max_connections` and a `[strategy]` table.
    #[arg(long)]
    config: PathBuf,
    /// The 0-based session the plan is for (recorded in the file; seeds randomised strategies).
    #[arg(long, default_value_t = 0)]
    session: u32,
    /// Base seed for randomised strategies.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the plan here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Show which relay-list entries were dropped and why.
    #[arg(long)]
    explain: bool,
    /// Plan this many times and report the median planning time.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
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

    let seed = args.seed.wrapping_add(u64::from(args.session));
    let stats = DeliveryStats::new();
    let mut router = Router::from_config(&config);
    let mut timings = Vec::with_capacity(args.repeat.max(1) as usize);
    let mut plan = None;
    for _ in 0..args.repeat.max(1) {
        // A fresh router per run, so stateful strategies are timed from the same start.
        router = Router::from_config(&config);
        let started = Instant::now();
        let p = router.plan_with(&table, &stats, PlanContext::at(world.now).seed(seed));
        timings.push(started.elapsed());
        plan = Some(p);
    }
    let plan = plan.expect("planned at least once");
    let violations = check_plan(&plan, &table, router.limits());
    for v in &violations {
        eprintln!("invariant violated: {v}");
    }

    let file = PlanFile::from_plan(&plan, &table, args.session);
    match &args.out {
        Some(path) => std::fs::write(path, file.to_json() + "\n")
            .with_context(|| format!("writing {}", path.display()))?,
        None => out!("{}", file.to_json())?,
    }
    let routed_authors = table.follow_count() - plan.residual().len();
    eprintln!(
        "{}: {} connections ({} routed of max {}), {} follows: {} routed, {} residual, disclosure {}",
        plan.strategy(),
        file.connections(),
        plan.routed().len(),
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

fn explain(table: &outbox_core::RouteTable) {
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

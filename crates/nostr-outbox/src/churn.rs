//! `outbox churn`: the churn scenario (relay lists changing between planning ticks), each
//! strategy re-planned plainly and wrapped in hysteresis, side by side.

use std::process::ExitCode;

use anyhow::{bail, Context};
use nostr_outbox_core::{registry, RouterConfig, StrategyConfig};
use nostr_outbox_sim::churn::{self, ChurnShape, ReportTable};

/// Options of `outbox churn`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registered strategies to compare (comma-separated), each with its registered example
    /// config, once re-planned plainly and once wrapped in hysteresis.
    #[arg(long, value_delimiter = ',', default_value = "greedy")]
    strategies: Vec<String>,
    /// Routed-relay budget.
    #[arg(long, default_value_t = 20)]
    budget: usize,
    /// Hysteresis margin.
    #[arg(long, default_value_t = nostr_outbox_strategies::nostr_outbox_hysteresis::DEFAULT_MARGIN)]
    margin: f64,
    /// Hysteresis settle window (humantime, e.g. `30s`).
    #[arg(long, default_value = nostr_outbox_strategies::nostr_outbox_hysteresis::DEFAULT_SETTLE)]
    settle: String,
    /// Seed of the scenario (and of randomised strategies).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Planning ticks.
    #[arg(long, default_value_t = 120)]
    ticks: usize,
    /// Seconds between ticks.
    #[arg(long, default_value_t = 5)]
    tick_secs: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let shape = ChurnShape {
        ticks: args.ticks,
        tick_secs: args.tick_secs,
        improvement_tick: args.ticks / 2,
        ..ChurnShape::default()
    };
    let scenario = churn::scenario(shape, args.seed);
    out!(
        "churn scenario: {} follows, {} relays, {} ticks every {}s, {} list changes per tick, \
         {} authors on a flapping relay, {:.0}% of listed follows gain a new relay at tick {}; \
         budget {}",
        shape.follows,
        shape.relays,
        shape.ticks,
        shape.tick_secs,
        shape.changes_per_tick,
        shape.flap_authors,
        shape.improvement_share * 100.0,
        shape.improvement_tick,
        args.budget
    )?;
    let mut all = Vec::new();
    for name in &args.strategies {
        let Some(descriptor) = registry::strategy(name) else {
            let known: Vec<_> = registry::strategies().iter().map(|d| d.name).collect();
            bail!("unknown strategy `{name}`; known: {}", known.join(", "));
        };
        let example = descriptor
            .example_table()
            .with_context(|| format!("example config of `{name}`"))?;
        let plain = strategy_config(example.clone())?;
        let mut wrapped = toml::Table::new();
        wrapped.insert("type".into(), "hysteresis".into());
        wrapped.insert("margin".into(), args.margin.into());
        wrapped.insert("settle".into(), args.settle.clone().into());
        wrapped.insert("inner".into(), example.into());
        let damped = strategy_config(wrapped)?;
        let wrapped_label = format!("hysteresis+{name}");
        let reports = churn::compare(
            &scenario,
            &[
                (name.as_str(), plain.as_ref()),
                (&wrapped_label, damped.as_ref()),
            ],
            args.budget,
            args.seed,
        );
        all.extend(reports);
    }
    out!("\n{}", ReportTable(&all))?;
    out!("recall~ is (follow, write relay) pairs asked, relative to the plain re-plan above it")?;
    for pair in all.chunks(2) {
        if let [plain, damped] = pair {
            out!(
                "{}: plain re-planning dials {:.1}x and churns {:.1}x as much as {}",
                plain.label,
                ratio(plain.dials, damped.dials),
                ratio(plain.churn(), damped.churn()),
                damped.label
            )?;
        }
    }
    let clean = all.iter().all(|r| r.uncovered == 0 && r.violations == 0);
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        eprintln!("some plan broke an invariant (see the uncovered and violation columns)");
        ExitCode::FAILURE
    })
}

/// A strategy table, parsed and validated exactly as a router config would be.
fn strategy_config(strategy: toml::Table) -> anyhow::Result<Box<dyn StrategyConfig>> {
    let mut root = toml::Table::new();
    root.insert("strategy".into(), strategy.into());
    let text = toml::to_string(&root)?;
    Ok(RouterConfig::from_toml(&text)?.strategy)
}

fn ratio(a: usize, b: usize) -> f64 {
    a as f64 / b.max(1) as f64
}

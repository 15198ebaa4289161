//! `outbox strategies`: what can be picked by name, with examples, and a self-check.

use std::process::ExitCode;

use outbox_core::registry;
use outbox_core::testkit::check_config_toml;

/// Options of `outbox strategies`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print an example config for each strategy and scorer.
    #[arg(long)]
    examples: bool,
    /// Check every registration: unique snake_case names, examples that parse and build, and
    /// the conformance suite on each built strategy. Exits non-zero on any failure.
    #[arg(long)]
    check: bool,
}

/// Wraps a `[strategy]` table body into a full router config.
pub fn router_config(strategy_body: &str) -> String {
    format!("max_connections = 20\n\n[strategy]\n{strategy_body}")
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let strategies = registry::strategies();
    let scorers = registry::scorers();
    if args.check {
        return check(&strategies, &scorers);
    }
    let width = strategies
        .iter()
        .map(|d| d.name.len())
        .chain(scorers.iter().map(|d| d.name.len()))
        .max()
        .unwrap_or(0);
    out!("strategies (pick with [strategy] type = \"...\"):")?;
    for d in &strategies {
        out!("  {:width$}  {}", d.name, d.summary)?;
        if args.examples {
            out!("\n{}\n", indent(&router_config(d.example)))?;
        }
    }
    out!("\nscorers (pick with [strategy.scorer] type = \"...\" where a strategy takes one):")?;
    for d in &scorers {
        out!("  {:width$}  {}", d.name, d.summary)?;
        if args.examples {
            out!(
                "\n{}\n",
                indent(&format!("[strategy.scorer]\n{}", d.example))
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(
    strategies: &[&'static registry::StrategyDescriptor],
    scorers: &[&'static registry::ScorerDescriptor],
) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for name in strategies
        .iter()
        .map(|d| d.name)
        .chain(scorers.iter().map(|d| d.name))
    {
        if !registry::is_snake_case(name) {
            problems.push(format!("`{name}`: name is not snake_case"));
        }
        if names.contains(&name) {
            problems.push(format!("`{name}`: registered twice"));
        }
        names.push(name);
    }
    for d in strategies {
        let declared = example_type(d.example);
        if declared.as_deref() != Some(d.name) {
            problems.push(format!(
                "`{}`: example declares type {declared:?}, not the descriptor's name",
                d.name
            ));
        }
        for failure in check_config_toml(&router_config(d.example)) {
            problems.push(format!("`{}`: {failure}", d.name));
        }
        out!("checked strategy {}", d.name)?;
    }
    // Scorers are checked inside the first strategy that accepts them: greedy takes only
    // stable scorers, stochastic takes any.
    let hosts: Vec<&str> = ["greedy", "stochastic"]
        .into_iter()
        .filter(|h| registry::strategy(h).is_some())
        .collect();
    if hosts.is_empty() && !scorers.is_empty() {
        problems.push(
            "scorers cannot be checked: no `greedy` or `stochastic` strategy is linked".into(),
        );
    }
    for d in scorers.iter().filter(|_| !hosts.is_empty()) {
        let configs: Vec<String> = hosts
            .iter()
            .map(|h| {
                router_config(&format!(
                    "type = \"{h}\"\n\n[strategy.scorer]\n{}",
                    d.example
                ))
            })
            .collect();
        let config = configs
            .iter()
            .find(|c| outbox_core::RouterConfig::from_toml(c).is_ok())
            .unwrap_or(&configs[0]);
        for failure in check_config_toml(config) {
            problems.push(format!("scorer `{}`: {failure}", d.name));
        }
        out!("checked scorer {}", d.name)?;
    }
    if problems.is_empty() {
        out!(
            "registry ok: {} strategies, {} scorers",
            strategies.len(),
            scorers.len()
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &problems {
            eprintln!("registry: {p}");
        }
        eprintln!("registry check failed: {} problem(s)", problems.len());
        Ok(ExitCode::FAILURE)
    }
}

fn example_type(example: &str) -> Option<String> {
    let table: toml::Table = toml::from_str(example).ok()?;
    table.get("type")?.as_str().map(str::to_string)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("    {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

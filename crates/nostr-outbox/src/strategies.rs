//! `outbox strategies`: what can be picked by name, with examples (each strategy's config
//! defaults unless it registered another), and a self-check of whatever is linked.

use std::process::ExitCode;

use nostr_outbox_core::registry;
use nostr_outbox_core::testkit::check_config_toml;

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

/// The budget written into example router configs.
const EXAMPLE_BUDGET: usize = 20;

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
            out!(
                "\n{}\n",
                indent(&show(d.example_router_toml(EXAMPLE_BUDGET)))
            )?;
        }
    }
    out!("\nscorers (pick with [strategy.scorer] type = \"...\" where a strategy takes one):")?;
    for d in &scorers {
        out!("  {:width$}  {}", d.name, d.summary)?;
        if args.examples {
            let table = d.example_table().and_then(|t| {
                let mut strategy = toml::Table::new();
                strategy.insert("scorer".into(), t.into());
                registry::router_toml(EXAMPLE_BUDGET, strategy)
            });
            // Only the scorer table: which strategy hosts it is the reader's choice.
            let text = show(table);
            let scorer = text
                .find("[strategy.scorer]")
                .map_or(&text[..], |i| &text[i..]);
            out!("\n{}\n", indent(scorer))?;
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
        match d.example_router_toml(EXAMPLE_BUDGET) {
            Ok(config) => {
                for failure in check_config_toml(&config) {
                    problems.push(format!("`{}`: {failure}", d.name));
                }
            }
            Err(e) => problems.push(format!("`{}`: example: {e}", d.name)),
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
        let scorer = match d.example_table() {
            Ok(table) => table,
            Err(e) => {
                problems.push(format!("scorer `{}`: example: {e}", d.name));
                continue;
            }
        };
        let configs: Vec<String> = hosts
            .iter()
            .filter_map(|h| {
                let mut strategy = toml::Table::new();
                strategy.insert("type".into(), (*h).into());
                strategy.insert("scorer".into(), scorer.clone().into());
                registry::router_toml(EXAMPLE_BUDGET, strategy).ok()
            })
            .collect();
        let Some(first) = configs.first() else {
            problems.push(format!("scorer `{}`: example does not serialise", d.name));
            continue;
        };
        let config = configs
            .iter()
            .find(|c| nostr_outbox_core::RouterConfig::from_toml(c).is_ok())
            .unwrap_or(first);
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

/// An example config, or why there is none.
fn show(example: Result<String, nostr_outbox_core::ConfigError>) -> String {
    example.unwrap_or_else(|e| format!("# no example: {e}"))
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

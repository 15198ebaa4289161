//! `outbox soak`: a feed left open. A continuing `outbox feed` runs as a child process against
//! local relays while the follows keep posting and relays blink, go down and restart and
//! follows move; what it printed is counted from outside (the work is in
//! `nostr_outbox_live::soak`).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use comfy_table::Table;

use nostr_outbox_live::soak::{
    run_soak, SoakConfig, SoakProgress, SoakReport, MAX_FOLLOWS, MAX_RELAYS,
};

use crate::table::{right, styled_table};
use crate::text::escape;

/// Most seeds of one run.
const MAX_SEEDS: u64 = 64;

/// Options of `outbox soak`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How long the follows post while the feed is open (at most 30 days). The churn repeats
    /// every 150 s: two relays go down for 20 s and 15 s, a reader relay restarts, a follow
    /// moves to a relay it never listed, and relays blink in between.
    #[arg(long, value_parser = crate::duration::parse, default_value = "150s")]
    duration: Duration,
    /// How long the feed stays open after the last note (at most 30 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "75s")]
    grace: Duration,
    /// Notes a second, all follows together.
    #[arg(long, default_value_t = 2.0)]
    rate: f64,
    /// Local relays the follows list (the first two are the reader's).
    #[arg(long, default_value_t = 8)]
    relays: usize,
    /// Follows.
    #[arg(long, default_value_t = 40)]
    follows: usize,
    /// The feed's window (its `--since`; at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "7d")]
    since: Duration,
    /// No churn: relays stay up and follows stay where they are.
    #[arg(long)]
    calm: bool,
    /// Network seeds: one number, or an inclusive range such as `1001-1004`.
    #[arg(long, default_value = "1")]
    seeds: String,
    /// The feed's socket budget (its `--max-sockets`).
    #[arg(long)]
    max_sockets: Option<u16>,
    /// The feed's socket profile (its `--profile`: `desktop` or `mobile`).
    #[arg(long)]
    profile: Option<String>,
    /// The feed's strategy (a registered name, see `outbox strategies`).
    #[arg(long, default_value = "recall")]
    strategy: String,
    /// The `outbox` executable run as the feed (default: this one), to set two builds side by
    /// side.
    #[arg(long)]
    program: Option<std::path::PathBuf>,
    /// The first local port to try for the relays (soaks run side by side need apart ones).
    #[arg(long, default_value_t = 21_000)]
    port: u16,
    /// The feed's log level (its `--log`), and a file for its whole log (one seed only).
    #[arg(long, default_value = "warn")]
    feed_log: String,
    /// Write the feed's whole stderr to this file (with one seed).
    #[arg(long)]
    feed_log_file: Option<std::path::PathBuf>,
    /// One JSON object per seed on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

fn seeds(text: &str) -> anyhow::Result<std::ops::RangeInclusive<u64>> {
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (a.trim().parse()?, b.trim().parse()?),
        None => {
            let s = text.trim().parse()?;
            (s, s)
        }
    };
    if a > b || b - a >= MAX_SEEDS {
        bail!("--seeds {text}: a seed or a range of at most {MAX_SEEDS}");
    }
    Ok(a..=b)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let limit = Duration::from_secs(30 * 86_400);
    if args.duration.is_zero() || args.duration > limit || args.grace > limit {
        bail!("--duration must be above zero, and it and --grace at most 30 days");
    }
    if !(2..=MAX_RELAYS).contains(&args.relays) {
        bail!("--relays {}: between 2 and {MAX_RELAYS}", args.relays);
    }
    if !(1..=MAX_FOLLOWS).contains(&args.follows) {
        bail!("--follows {}: between 1 and {MAX_FOLLOWS}", args.follows);
    }
    if !(args.rate.is_finite() && args.rate > 0.0 && args.rate <= 1_000.0) {
        bail!("--rate: above 0 and at most 1000");
    }
    if !args
        .strategy
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        bail!("--strategy {:?}: a registered name", escape(&args.strategy));
    }
    if let Some(p) = &args.profile {
        if p != "desktop" && p != "mobile" {
            bail!("--profile {:?}: desktop or mobile", escape(p));
        }
    }
    let seeds = seeds(&args.seeds).context("--seeds")?;
    let program = match args.program.clone() {
        Some(p) if p.is_file() => p,
        Some(p) => bail!("--program {}: not a file", escape(&p.display().to_string())),
        None => std::env::current_exe().context("finding the outbox executable")?,
    };
    let mut cfg = SoakConfig::new(program);
    cfg.relays = args.relays;
    cfg.follows = args.follows;
    cfg.publish_for = args.duration;
    cfg.grace = args.grace;
    cfg.rate = args.rate;
    cfg.since = args.since;
    cfg.churn = !args.calm;
    cfg.strategy = args.strategy.clone();
    cfg.port_hint = args.port;
    if !(args.feed_log.chars()).all(|c| c.is_ascii_alphanumeric() || "=,_:".contains(c)) {
        bail!("--feed-log {:?}: a log level", escape(&args.feed_log));
    }
    cfg.log = args.feed_log.clone();
    if args.feed_log_file.is_some() && seeds.start() != seeds.end() {
        bail!("--feed-log-file takes one seed");
    }
    cfg.log_file = args.feed_log_file.clone();
    if let Some(n) = args.max_sockets {
        cfg.feed_args
            .extend(["--max-sockets".into(), n.to_string()]);
    }
    if let Some(p) = &args.profile {
        cfg.feed_args.extend(["--profile".into(), p.clone()]);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut reports = Vec::new();
    for seed in seeds {
        cfg.seed = seed;
        eprintln!("seed {seed}: loading the relays…");
        let report = runtime
            .block_on(run_soak(&cfg, |p| match p {
                SoakProgress::Started { relays, history } => {
                    eprintln!("  {relays} relays up, {history} notes of history; the feed is open")
                }
                SoakProgress::Tick {
                    elapsed,
                    expected,
                    delivered,
                    rss_kib,
                } => eprintln!(
                    "  {:>6.0}s  {delivered}/{expected} notes printed, RSS {}",
                    elapsed.as_secs_f64(),
                    mib(rss_kib)
                ),
                SoakProgress::Churn(line) => eprintln!("  {line}"),
            }))
            .with_context(|| format!("seed {seed}"))?;
        if report.exit_code != Some(0) {
            eprintln!(
                "  the feed exited with {:?}; its last lines:",
                report.exit_code
            );
            for line in report.stderr_tail.iter().rev().take(20).rev() {
                eprintln!("  | {}", escape(line));
            }
        }
        if args.json {
            out!(
                "{}",
                crate::text::json_safe(&serde_json::to_string(&report)?)
            )?;
        }
        reports.push(report);
    }
    if !args.json {
        out!("{}", render(&reports))?;
        out!(
            "A continuing `outbox feed` ({}, since {}{}) as a child process; notes published at \
             {}/s for {}, then {} of grace. open = notes published while open and stored on a \
             relay their author listed, printed; moved = those of follows after they moved; \
             delay = from storing to printing; catch-up = from a relay's return to the last \
             note written to it late printed; RSS from a tenth into the run to its end.",
            escape(&args.strategy),
            humantime::format_duration(args.since),
            socket_note(&args),
            args.rate,
            humantime::format_duration(args.duration),
            humantime::format_duration(args.grace),
        )?;
        for r in &reports {
            for m in &r.missed {
                out!(
                    "seed {}: missed a note of follow {} stored at {:.1}s on ports {:?}",
                    r.seed,
                    m.follow,
                    m.at_secs,
                    m.on
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn socket_note(args: &Args) -> String {
    let mut s = String::new();
    if let Some(n) = args.max_sockets {
        s.push_str(&format!(", --max-sockets {n}"));
    }
    if let Some(p) = &args.profile {
        s.push_str(&format!(", --profile {}", escape(p)));
    }
    s
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(
        || "-".to_string(),
        |k| format!("{:.1} MiB", k as f64 / 1024.0),
    )
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.1}% ({a}/{b})", 100.0 * a as f64 / b as f64)
    }
}

/// One row per seed.
fn render(reports: &[SoakReport]) -> Table {
    let mut table = styled_table();
    table.set_header(vec![
        "seed",
        "window",
        "open",
        "moved",
        "twice",
        "delay p50/p99/max ms",
        "catch-up max ms",
        "RSS growth",
        "exit",
    ]);
    for r in reports {
        table.add_row(vec![
            right(r.seed.to_string()),
            right(pct(r.window_delivered, r.window)),
            right(pct(r.delivered, r.expected)),
            right(pct(r.moved_delivered, r.moved)),
            right(r.duplicates.to_string()),
            right(format!("{}/{}/{}", r.delay.p50, r.delay.p99, r.delay.max)),
            right(if r.catch_up.count == 0 {
                "-".into()
            } else {
                r.catch_up.max.to_string()
            }),
            right(
                r.rss_growth()
                    .map_or_else(|| "-".into(), |g| format!("{:+.1}%", 100.0 * g)),
            ),
            right(
                r.exit_code
                    .map_or_else(|| "signal".into(), |c| c.to_string()),
            ),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_one_or_a_bounded_range() {
        assert_eq!(seeds("3").unwrap(), 3..=3);
        assert_eq!(seeds("1001-1004").unwrap(), 1001..=1004);
        assert!(seeds("5-1").is_err());
        assert!(seeds("1-1000").is_err());
        assert!(seeds("x").is_err());
    }
}

//! `outbox load`: the runtime under load. For every relay count and follow count, a world is
//! loaded into that many local relays and `outbox feed --once` runs against it as a child
//! process, measured from outside (the work is in `nostr_outbox_live::load`).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use comfy_table::{Cell, Table};

use nostr_outbox_live::load::{
    run_point, LoadConfig, LoadPoint, LoadProgress, LoadResult, MAX_FOLLOWS, MAX_RELAYS,
};

use crate::table::{right, styled_table};
use crate::text::escape;

/// Most load points of one run (each generates and loads a world).
const MAX_POINTS: usize = 64;

/// Options of `outbox load`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Local relays, one load point per value (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "50,100,200")]
    relays: Vec<usize>,
    /// Follows, one load point per value (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "2500,10000")]
    follows: Vec<usize>,
    /// Longest run of one feed; it is killed after this and reported as timed out (at most
    /// 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "300s")]
    timeout: Duration,
    /// The window fetched (the feed's `--since`; at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "30d")]
    since: Duration,
    /// The strategy (a registered name, see `outbox strategies`).
    #[arg(long, default_value = "recall")]
    strategy: String,
    /// Routed connections [default: as many as there are relays].
    #[arg(long)]
    budget: Option<usize>,
    /// World seed and the feed's planning seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.relays.is_empty() || args.follows.is_empty() {
        bail!("--relays and --follows need at least one value each");
    }
    if let Some(&r) = args
        .relays
        .iter()
        .find(|&&r| !(2..=MAX_RELAYS).contains(&r))
    {
        bail!("--relays {r}: between 2 and {MAX_RELAYS}");
    }
    if let Some(&f) = args
        .follows
        .iter()
        .find(|&&f| !(1..=MAX_FOLLOWS).contains(&f))
    {
        bail!("--follows {f}: between 1 and {MAX_FOLLOWS}");
    }
    if args.relays.len() * args.follows.len() > MAX_POINTS {
        bail!("at most {MAX_POINTS} load points (relays × follows)");
    }
    if args.timeout.is_zero() {
        bail!("--timeout must not be zero");
    }
    let program = std::env::current_exe().context("finding the outbox executable")?;
    let mut cfg = LoadConfig::new(program);
    cfg.seed = args.seed;
    cfg.since = args.since;
    cfg.timeout = args.timeout;
    cfg.budget = args.budget;
    cfg.strategy = args.strategy.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut results = Vec::new();
    for &follows in &args.follows {
        for &relays in &args.relays {
            let point = LoadPoint { relays, follows };
            eprintln!("{relays} relays, {follows} follows: generating and loading…");
            let result = runtime
                .block_on(run_point(point, &cfg, |p| match p {
                    LoadProgress::Prepared {
                        relays,
                        notes,
                        copies,
                        took,
                        ..
                    } => eprintln!(
                        "  {notes} notes ({copies} copies) on {relays} relays in {:.1}s; \
                         running the feed…",
                        took.as_secs_f64()
                    ),
                }))
                .with_context(|| format!("{relays} relays, {follows} follows"))?;
            eprintln!("  {}", describe(&result));
            if result.measured.report.is_none() || result.measured.exit_code != Some(0) {
                for line in &result.measured.stderr_tail {
                    eprintln!("  | {}", escape(line));
                }
            }
            results.push(result);
        }
    }
    out!("{}", render(&results))?;
    out!(
        "`outbox feed --once` as a child process, {} with up to {} routed relays, {} of notes; \
         RSS = peak resident set (VmHWM), CPU = user + system, events/s = events received / \
         wall time, EOSE = the feed's time to full EOSE. The relays run in this process, on the \
         same {} cores (relays CPU = this process while the feed ran).",
        escape(&args.strategy),
        args.budget
            .map_or_else(|| "as many".to_string(), |b| b.to_string()),
        window(args.since),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    )?;
    let failed = results.iter().filter(|r| !complete(r)).count();
    if failed > 0 {
        eprintln!(
            "{failed} load point(s) did not finish with a summary, or the feed stopped at its \
             deadline before every relay answered (see above)"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The feed exited normally and printed its summary within the timeout, not stopped at its
/// own deadline.
fn complete(r: &LoadResult) -> bool {
    let m = &r.measured;
    !m.timed_out && m.exit_code == Some(0) && m.report.as_ref().is_some_and(|r| !r.deadline_reached)
}

/// The feed exited normally but stopped at its deadline before every relay answered.
fn stopped_at_deadline(r: &LoadResult) -> bool {
    let m = &r.measured;
    !m.timed_out && m.exit_code == Some(0) && m.report.as_ref().is_some_and(|r| r.deadline_reached)
}

fn describe(r: &LoadResult) -> String {
    let m = &r.measured;
    let end = if m.timed_out {
        "timed out".to_string()
    } else if stopped_at_deadline(r) {
        let answered = m.report.as_ref().map_or(0, |r| r.relays_answered);
        let asked = m.report.as_ref().map_or(0, |r| r.relays_asked);
        format!("stopped at the feed's deadline, {answered} of {asked} relays answered,")
    } else {
        match m.exit_code {
            Some(c) => format!("exit {c}"),
            None => "killed by a signal".to_string(),
        }
    };
    format!(
        "{end} after {:.1}s; peak RSS {}, CPU {}, {} events received, EOSE {}",
        m.wall.as_secs_f64(),
        mib(m.peak_rss_kib),
        secs(m.cpu()),
        m.report
            .as_ref()
            .map_or_else(|| "-".to_string(), |r| r.events_received.to_string()),
        secs(m.report.as_ref().and_then(|r| r.time_to_full_eose)),
    )
}

/// `30d` for whole days, else humantime's form.
fn window(d: Duration) -> String {
    let secs = d.as_secs();
    if secs > 0 && secs.is_multiple_of(86_400) && d.subsec_nanos() == 0 {
        format!("{}d", secs / 86_400)
    } else {
        humantime::format_duration(d).to_string()
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "-".to_string(), |k| format!("{:.1}", k as f64 / 1024.0))
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_string(), |d| format!("{:.2}", d.as_secs_f64()))
}

/// One row per load point.
fn render(results: &[LoadResult]) -> Table {
    let mut table = styled_table();
    table.set_header(vec![
        "relays",
        "follows",
        "notes",
        "asked",
        "answered",
        "REQs",
        "events rcvd",
        "peak RSS MiB",
        "CPU s",
        "relays CPU s",
        "wall s",
        "events/s",
        "full EOSE s",
        "end",
    ]);
    for r in results {
        let m = &r.measured;
        let report = m.report.as_ref();
        let count = |f: fn(&nostr_outbox_live::load::FeedReport) -> u64| {
            report.map_or_else(|| "-".to_string(), |r| f(r).to_string())
        };
        let end = if m.timed_out {
            "timeout".to_string()
        } else if complete(r) {
            "ok".to_string()
        } else if stopped_at_deadline(r) {
            "deadline".to_string()
        } else {
            m.exit_code
                .map_or_else(|| "signal".to_string(), |c| format!("exit {c}"))
        };
        table.add_row(vec![
            right(r.relays.to_string()),
            right(r.point.follows.to_string()),
            right(r.notes.to_string()),
            right(count(|r| r.relays_asked)),
            right(count(|r| r.relays_answered)),
            right(count(|r| r.round_trips)),
            right(count(|r| r.events_received)),
            right(mib(m.peak_rss_kib)),
            right(secs(m.cpu())),
            right(secs(r.relays_cpu)),
            right(format!("{:.2}", m.wall.as_secs_f64())),
            right(
                m.events_per_sec()
                    .map_or_else(|| "-".to_string(), |e| format!("{e:.0}")),
            ),
            right(secs(report.and_then(|r| r.time_to_full_eose))),
            Cell::new(end),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_outbox_live::load::{parse_summary, Measured};

    fn result(summary: &str) -> LoadResult {
        let json = format!(r#"{{"format":"outbox-feed-summary/1","summary":{summary}}}"#);
        LoadResult {
            point: LoadPoint {
                relays: 4,
                follows: 300,
            },
            relays: 4,
            lists: 300,
            notes: 100,
            copies: 200,
            budget: 4,
            prepare: Duration::from_secs(1),
            relays_cpu: None,
            measured: Measured {
                wall: Duration::from_secs(90),
                cpu_user: None,
                cpu_system: None,
                peak_rss_kib: None,
                samples: 3,
                exit_code: Some(0),
                timed_out: false,
                stdout_lines: 0,
                report: Some(parse_summary(json.as_bytes()).expect("a summary")),
                stderr_tail: Vec::new(),
            },
        }
    }

    #[test]
    fn a_feed_stopped_at_its_deadline_is_not_reported_ok() {
        let stopped = result(
            r#"{"events":0,"events_received":0,"round_trips":4,"relays_asked":4,
                "relays_answered":0,"relays_failed":0,"authors_covered":0,
                "time_to_first_event":null,"time_to_full_eose":null,"deadline_reached":true}"#,
        );
        assert!(!complete(&stopped));
        let table = render(std::slice::from_ref(&stopped)).to_string();
        assert!(table.contains("deadline"), "{table}");
        assert!(!table.contains(" ok "), "{table}");
        assert!(
            describe(&stopped).contains("deadline"),
            "{}",
            describe(&stopped)
        );

        let done = result(
            r#"{"events":9,"events_received":9,"round_trips":4,"relays_asked":4,
                "relays_answered":4,"relays_failed":0,"authors_covered":300,
                "time_to_first_event":null,"time_to_full_eose":null}"#,
        );
        assert!(complete(&done));
        assert!(render(&[done]).to_string().contains(" ok "));
    }
}

//! `outbox count`: how many events match a filter (NIP-45), asked of the relays a read of it
//! would ask — its authors' write relays, its `#p` people's read relays, hints, the reader's
//! relays. Relays hold overlapping sets, so each relay's count is shown and the largest named:
//! at least that many match. Counts are never added.

use std::process::ExitCode;

use tokio::task::JoinSet;

use super::req::{build, people, route, FilterArgs};
use super::{describe, describe_plan, on_runtime, runtime_config};
use crate::text::{escape, json_safe};

/// What the reader options do for `outbox count`.
const HELP: crate::reader::ReaderHelp = crate::reader::ReaderHelp {
    relays: "The reader's own relays (comma-separated or repeated): always asked to count \
        (unless the reader's relay list names read relays: those are asked instead), and \
        asked, with --indexers, for the relay lists of the people the filter names",
    npub: "The reader: its read relays (kind:10002) are asked to count in place of --relays, \
        and no relay its blocked list (kind:10006) names is asked",
    indexers: "Relays that collect relay lists (comma-separated or repeated), asked beside \
        --relays for the kind:10002 lists of the authors and tagged people the filter names",
    json: "Print each relay's count and the largest as JSON lines (the plan then goes to \
        stderr)",
};

/// Options of `outbox count`.
#[derive(Debug, clap::Args)]
#[command(mut_args(crate::reader::help(&HELP)))]
pub struct Args {
    #[command(flatten)]
    filter: FilterArgs,
    /// How long a relay known to count (its document lists NIP-45, or it counted before) has
    /// to answer; one not known to gets about a second past its connect time, and one known
    /// not to is not asked.
    #[arg(long, value_parser = crate::duration::parse, default_value = "15s")]
    timeout: std::time::Duration,
    #[command(flatten)]
    reader: crate::reader::ReaderArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // A count asks no `limit` of its own: a relay may cap the count at one.
    let built = build(&args.filter, None)?;
    on_runtime(async {
        let mut named = people(&built.filter);
        named.extend(built.event_authors.iter().copied());
        let known = [("a person the filter names", named.as_slice())];
        let config = nostr_outbox_runtime::RuntimeConfig {
            eose_timeout: args.timeout,
            ..runtime_config(false)
        };
        let reader = &mut args.reader.open(config, &known).await?;
        let plan = route(reader, built).await?;
        describe_plan("count", &plan, reader.json)?;
        // Each relay is asked what it is routed for, all at once.
        let mut asks = JoinSet::new();
        for target in &plan.targets {
            let (url, filters, client) = (
                target.url.clone(),
                target.filters.clone(),
                reader.client.clone(),
            );
            asks.spawn(async move {
                let counts =
                    nostr_outbox_runtime::count(std::slice::from_ref(&url), &filters, &client)
                        .await;
                let approximate = counts.approximate.contains(&url);
                let counted = counts.relays.into_values().next();
                (url, counted, approximate)
            });
        }
        let mut rows = Vec::new();
        while let Some(joined) = asks.join_next().await {
            if let Ok(row) = joined {
                rows.push(row);
            }
        }
        reader.keep_learned().await;
        // The largest count first; relays that did not count last.
        rows.sort_by(|a, b| {
            let n = |c: &Option<Result<u64, _>>| c.as_ref().and_then(|r| r.as_ref().ok()).copied();
            // On a tie an exact count comes first.
            n(&b.1)
                .cmp(&n(&a.1))
                .then(a.2.cmp(&b.2))
                .then(a.0.cmp(&b.0))
        });
        let mut largest: Option<u64> = None;
        // Whether the largest count is only an estimate (NIP-45 `approximate`).
        let mut largest_approximate = false;
        let mut lines = Vec::new();
        for (url, counted, approximate) in &rows {
            match counted {
                Some(Ok(n)) => {
                    // Rows come largest first: the first count is the largest.
                    if largest.is_none() {
                        largest = Some(*n);
                        largest_approximate = *approximate;
                    }
                    if reader.json {
                        let mut line = serde_json::json!({"relay": url, "count": n});
                        if *approximate {
                            line["approximate"] = true.into();
                        }
                        out!("{}", json_line(line))?;
                    } else if *approximate {
                        out!("{}  ~{n} (approximate)", escape(url))?;
                    } else {
                        out!("{}  {n}", escape(url))?;
                    }
                }
                Some(Err(why)) => {
                    if reader.json {
                        let line = serde_json::json!({"relay": url, "error": why.to_string()});
                        out!("{}", json_line(line))?;
                    } else {
                        lines.push(format!("  {}: {}", escape(url), escape(&why.to_string())));
                    }
                }
                None => lines.push(format!("  {}: not asked", escape(url))),
            }
        }
        let counted = rows
            .iter()
            .filter(|(_, c, _)| matches!(c, Some(Ok(_))))
            .count();
        match largest {
            Some(n) => {
                let summary = if largest_approximate {
                    format!(
                        "about {n} events match: the largest of {counted} relays' counts, an estimate by the relay that gave it (relays hold overlapping sets, so counts are not added)"
                    )
                } else {
                    format!(
                        "at least {n} events match: the largest of {counted} relays' counts (relays hold overlapping sets, so counts are not added)"
                    )
                };
                if reader.json {
                    let mut line = serde_json::json!({"largest": n, "counted": counted});
                    if largest_approximate {
                        line["approximate"] = true.into();
                    }
                    out!("{}", json_line(line))?;
                    describe(&[summary], true)?;
                } else {
                    out!("{summary}")?;
                }
            }
            None => lines.insert(0, "no relay counted".to_string()),
        }
        if counted < rows.len() && largest.is_some() {
            lines.insert(0, format!("{} relays did not count:", rows.len() - counted));
        }
        for line in &lines {
            eprintln!("{line}");
        }
        Ok(if largest.is_some() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}

/// One line of `--json` output: through `json_safe`, as every `--json` output is, so a relay's
/// `CLOSED` reason quoted in an error carries no raw C1 or bidirectional control.
fn json_line(value: serde_json::Value) -> String {
    json_safe(&value.to_string())
}

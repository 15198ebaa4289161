//! Ad-hoc routed reads: `outbox req` (any filter), `outbox count` (NIP-45 counts of one),
//! `outbox get` and `outbox thread` (pointers and threads with their hints), `outbox search`
//! (NIP-50). Each learns where the people it
//! names write and read (their kind:10002 lists, asked of the reader's relays and the
//! indexers), plans a route with `nostr_outbox_client::routes`, and reads it with the runtime's route
//! feed: one pass to EOSE, or kept open with `--stream` until Ctrl-C or SIGTERM.

pub mod count;
pub mod get;
pub mod req;
pub mod search;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr_outbox_client::routes::{FilterQuery, Route, RouteBudget, RouteContext, RoutePlan};
use nostr_outbox_runtime::{Client, RouteEvent, RuntimeConfig};

use crate::feed::drain::{stopped_status, Drain};
use crate::reader::Reader;
use crate::text::escape;

/// Events a read asks each relay for when the filter names no `limit`.
pub const DEFAULT_LIMIT: usize = 100;

/// The largest `limit` a read asks: what the route feed reads of one relay's stored events.
pub const MAX_LIMIT: usize = nostr_outbox_runtime::asks::route_feed::MAX_STORED_EVENTS;

/// The knobs of a read: one pass to EOSE unless it streams.
pub fn runtime_config(stream: bool) -> RuntimeConfig {
    RuntimeConfig {
        once: !stream,
        seed: rand::random(),
        ..RuntimeConfig::default()
    }
}

/// Runs `work` on a runtime of its own, ended without waiting for what a stop left behind.
pub fn on_runtime(
    work: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = rt.block_on(work);
    rt.shutdown_background();
    result
}

/// Plans `route` and checks it; a plan that breaks a route invariant is an error.
pub fn plan_checked<R: Route>(route: &R, ctx: &RouteContext<'_>) -> anyhow::Result<RoutePlan> {
    let (plan, violations) = route.plan_checked(ctx);
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        anyhow::bail!("the route is unsound: {}", list.join("; "));
    }
    Ok(plan)
}

/// The reader's relays (their read relays, else `--relays`) asked `filters`: for a read whose
/// route names no relay (an event known by its id alone).
pub fn on_reader_relays(
    reader: &Reader,
    filters: Vec<Filter>,
    ctx: &RouteContext<'_>,
) -> anyhow::Result<RoutePlan> {
    let mut query = FilterQuery::new(filters[0].clone(), &reader.relays);
    query.reader = reader.pubkey;
    let mut plan = plan_checked(&query, ctx)?;
    for target in &mut plan.targets {
        target.filters = filters.clone();
    }
    Ok(plan)
}

/// The route budget of a read (the routes' default: 16 relays in all).
pub fn budget() -> RouteBudget {
    RouteBudget::default()
}

/// Says which relays a read asks and why, and what each is asked; on stdout (before the
/// events), or on stderr with `--json` so stdout holds only events.
pub fn describe_plan(what: &str, plan: &RoutePlan, json: bool) -> std::io::Result<()> {
    let mut lines = vec![format!("{what}: {} relays", plan.targets.len())];
    for target in &plan.targets {
        let reasons: Vec<String> = target.reasons.iter().map(ToString::to_string).collect();
        lines.push(format!(
            "  {}  {}",
            escape(&target.url),
            escape(&reasons.join(", "))
        ));
        for filter in &target.filters {
            lines.push(format!(
                "    {}",
                escape(&serde_json::to_string(filter).unwrap_or_default())
            ));
        }
    }
    for reason in &plan.cut_off {
        lines.push(format!("  cut off by the budget: {reason}"));
    }
    for person in &plan.unknown {
        lines.push(format!("  no relay list known for {person}"));
    }
    describe(&lines, json)
}

/// Lines about what a read does: stdout in text mode, stderr with `--json`.
pub fn describe(lines: &[String], json: bool) -> std::io::Result<()> {
    for line in lines {
        if json {
            let _ = writeln!(std::io::stderr(), "{line}");
        } else {
            out!("{line}")?;
        }
    }
    Ok(())
}

/// Per relay of a pass: events it delivered first, whether it finished, why it failed.
#[derive(Default)]
struct Tally {
    events: usize,
    eose: bool,
    failure: Option<String>,
}

/// What one pass over a plan's relays did.
pub struct Pass {
    /// Events printed (each once, from the relay that delivered it first).
    pub events: usize,
    /// The first events, kept for the caller (at most the `keep` it asked).
    pub kept: Vec<Event>,
    /// Relays that sent EOSE.
    pub answered: usize,
    /// Set when a stop signal ended the read at once: the exit code to end with.
    pub stopped: Option<ExitCode>,
    /// Whether a stop signal or a closed stdout ended the read early (gracefully or at once).
    pub halted: bool,
}

impl Pass {
    /// How a read ends: as the stop signal says, else a failure when no relay answered
    /// (unless it `streamed`, when the pass ends only by a stop).
    pub fn exit(&self, streamed: bool) -> ExitCode {
        match self.stopped {
            Some(code) => code,
            None if self.answered > 0 || streamed => ExitCode::SUCCESS,
            None => ExitCode::FAILURE,
        }
    }
}

/// How a read shows one event.
pub enum Show {
    /// Printed as it is.
    Plain,
    /// Printed with a label saying what it is to the read (`Drain::print_labelled`).
    Labelled(&'static str),
    /// Not printed nor counted (seen before).
    Skip,
}

/// Reads `plan` through a route feed on `client`: prints each event as it comes (text, or JSON
/// with `json`), keeps the first `keep` for the caller, and ends at every relay's EOSE (or, on
/// a streaming client, at Ctrl-C, SIGTERM or a closed stdout). Then says on stderr how many
/// came and which relays did not answer, and why.
pub async fn read(
    plan: &RoutePlan,
    client: &Client,
    json: bool,
    keep: usize,
) -> anyhow::Result<Pass> {
    read_with(plan, client, json, keep, |_| Show::Plain).await
}

/// [`read`], with `show` saying for each event whether and how it is printed.
pub async fn read_with(
    plan: &RoutePlan,
    client: &Client,
    json: bool,
    keep: usize,
    mut show: impl FnMut(&Event) -> Show,
) -> anyhow::Result<Pass> {
    let (feed, mut events) = nostr_outbox_runtime::start_route(plan, client);
    let mut tally: BTreeMap<String, Tally> = plan
        .urls()
        .map(|u| (u.to_string(), Tally::default()))
        .collect();
    let mut kept = Vec::new();
    let mut drain = Drain::new()?;
    let shutdown = || feed.request_shutdown();
    while let Some(event) = drain.next(&mut events, shutdown).await {
        match event {
            RouteEvent::Note { event, relay } => {
                let label = match show(&event) {
                    Show::Skip => continue,
                    Show::Plain => None,
                    Show::Labelled(label) => Some(label),
                };
                tally.entry(relay.clone()).or_default().events += 1;
                drain
                    .print_labelled(&event, &relay, label, json, shutdown)
                    .await;
                if kept.len() < keep {
                    kept.push(*event);
                }
            }
            RouteEvent::Eose { relay, .. } => {
                let t = tally.entry(relay).or_default();
                t.eose = true;
                // Answered (again, after a new dial): an earlier failure is over.
                t.failure = None;
            }
            RouteEvent::Failed { relay, reason, .. } => {
                tally.entry(relay).or_default().failure = Some(reason);
            }
        }
    }
    let stopped = |signal: &'static str| {
        let _ = writeln!(
            std::io::stderr(),
            "stopped by {signal}; not waiting any longer"
        );
        ExitCode::from(stopped_status(signal))
    };
    let mut pass = Pass {
        events: tally.values().map(|t| t.events).sum(),
        kept,
        answered: tally.values().filter(|t| t.eose).count(),
        stopped: None,
        halted: drain.halted(),
    };
    if let Some(signal) = drain.forced() {
        pass.stopped = Some(stopped(signal));
        return Ok(pass);
    }
    if let Err(signal) = drain.unless_stopped(feed.wait()).await {
        pass.stopped = Some(stopped(signal));
        return Ok(pass);
    }
    if let Err(signal) = drain.finish().await {
        pass.stopped = Some(stopped(signal));
        return Ok(pass);
    }
    let mut err = std::io::stderr().lock();
    // Unanswered, or failed after answering (a streamed relay cut off for flooding).
    let failed: Vec<(&String, &Tally)> = tally
        .iter()
        .filter(|(_, t)| !t.eose || t.failure.is_some())
        .collect();
    let _ = writeln!(
        err,
        "{} {}; {} relays asked, {} answered",
        pass.events,
        if pass.events == 1 { "event" } else { "events" },
        tally.len(),
        pass.answered
    );
    for (relay, t) in failed {
        let why = t.failure.as_deref().unwrap_or("no answer");
        let _ = writeln!(err, "  {}: {}", escape(relay), escape(why));
    }
    Ok(pass)
}

//! How `outbox route` prints a plan: one line per relay with its reasons, then what the budget
//! cut off and who has no relays; or the whole plan as JSON. Text from files is escaped.

use nostr_outbox_client::routes::Candidates;
use nostr_outbox_client::{Reason, RouteBudget, RoutePlan, RouteViolation};
use nostr_outbox_core::DropReason;
use serde_json::json;

use super::input::Inputs;
use crate::text::escape;

/// The plan as text.
pub fn text(
    plan: &RoutePlan,
    candidates: &Candidates,
    budget: &RouteBudget,
    inputs: &Inputs,
) -> std::io::Result<()> {
    let considered: usize = candidates.groups.iter().map(|g| g.urls.len()).sum();
    out!(
        "{} route: {} relays (at most {}; {} candidates in {} groups)",
        plan.kind,
        plan.targets.len(),
        budget.max_relays,
        considered,
        candidates.groups.len()
    )?;
    let width = plan
        .targets
        .iter()
        .map(|t| escape(&t.url).chars().count())
        .max()
        .unwrap_or(0);
    for target in &plan.targets {
        let reasons: Vec<String> = target.reasons.iter().map(|r| r.to_string()).collect();
        out!(
            "  {:<width$}  quality {:.2}  {}",
            escape(&target.url),
            target.quality,
            escape(&reasons.join(", ")),
        )?;
    }
    if let Some(first) = plan.targets.first() {
        for filter in &first.filters {
            out!(
                "filter: {}",
                escape(&serde_json::to_string(filter).unwrap_or_default())
            )?;
        }
    }
    for reason in &plan.cut_off {
        out!("cut off by the budget: {}", escape(&reason.to_string()))?;
    }
    for reason in &plan.left_out {
        out!(
            "left out by {} 0: {}",
            cap_flag(reason),
            escape(&reason.to_string())
        )?;
    }
    for person in &plan.unknown {
        out!("no relays known for: {person}")?;
    }
    if candidates.dropped_hints > 0 {
        out!(
            "hints refused by the URL policy: {}",
            candidates.dropped_hints
        )?;
    }
    let report = inputs.directory.drop_report();
    eprintln!(
        "directory: {} people, {} list entries dropped, {} lists superseded, {} events not usable, {} lists over capacity",
        inputs.directory.len(),
        report.total_dropped(),
        report.superseded_lists,
        inputs.rejected_events,
        inputs.directory.lists_over_capacity(),
    );
    Ok(())
}

/// Why list entries were dropped, on stderr, one line per reason, with the option that would
/// keep loopback relays when those were dropped: a route over local relays that names none
/// says why.
pub fn dropped(inputs: &Inputs) {
    let report = inputs.directory.drop_report();
    let allow_loopback = inputs.directory.policy().allow_loopback;
    for (reason, count) in &report.by_reason {
        let hint = if *reason == DropReason::Localhost && !allow_loopback {
            " (use --allow-local)"
        } else {
            ""
        };
        eprintln!(
            "{count} {} dropped: {reason}{hint}",
            if *count == 1 { "entry" } else { "entries" }
        );
    }
}

/// The option whose cap of 0 leaves a group out.
fn cap_flag(reason: &Reason) -> &'static str {
    match reason {
        Reason::AuthorWrite(_) | Reason::AuthorRead(_) => "--per-author",
        Reason::TaggedRead(_) | Reason::DmInbox(_) => "--per-person",
        Reason::Hint => "--hints",
        Reason::ReaderRead | Reason::ReaderRelay => "a cap of",
    }
}

/// The plan, its candidates and any violations as one JSON object.
pub fn json(
    plan: &RoutePlan,
    candidates: &Candidates,
    violations: &[RouteViolation],
) -> std::io::Result<()> {
    let value = json!({
        "route": plan,
        "candidates": candidates,
        "violations": violations.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
    });
    out!(
        "{}",
        crate::text::json_safe(
            &serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?
        )
    )
}

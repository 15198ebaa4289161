//! The route invariants: one checker returning every violation, like [`nostr_outbox_core::check_plan`].

use std::collections::HashSet;
use std::fmt;

use super::{Candidates, Reason, RouteBudget, RoutePlan};

/// One broken route invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteViolation {
    /// More relays than the budget.
    OverBudget {
        /// Relays in the plan.
        targets: usize,
        /// The budget.
        max: usize,
    },
    /// The same relay twice.
    DuplicateTarget(String),
    /// A relay chosen for no reason.
    NoReason(String),
    /// A relay chosen for a reason whose candidates do not include it.
    NotACandidate {
        /// The relay.
        url: String,
        /// The reason it claims.
        reason: Reason,
    },
    /// A reason (a person, the hints) served by more relays than its cap.
    OverCap {
        /// The reason.
        reason: Reason,
        /// Relays serving it.
        count: usize,
        /// Its cap.
        cap: usize,
    },
    /// A reason with candidate relays that no relay serves, and not reported as cut off or
    /// left out: a tagged person or recipient the route silently fails to reach.
    Unreached(Reason),
    /// A reason reported as cut off although the budget was not used up or one of its
    /// relays was chosen anyway.
    FalseCutOff(Reason),
    /// A reason reported as left out although its cap is not 0 or it has no relays.
    FalseLeftOut(Reason),
    /// A read route's relay with no filter, or a publish route's relay with one.
    WrongFilters(String),
}

impl fmt::Display for RouteViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteViolation::OverBudget { targets, max } => {
                write!(f, "{targets} relays exceed the budget of {max}")
            }
            RouteViolation::DuplicateTarget(url) => write!(f, "{url} is chosen twice"),
            RouteViolation::NoReason(url) => write!(f, "{url} is chosen for no reason"),
            RouteViolation::NotACandidate { url, reason } => {
                write!(f, "{url} is chosen as {reason} but is not its candidate")
            }
            RouteViolation::OverCap { reason, count, cap } => {
                write!(f, "{reason} is served by {count} relays, cap is {cap}")
            }
            RouteViolation::Unreached(reason) => {
                write!(
                    f,
                    "{reason} has relays but none is chosen or reported cut off"
                )
            }
            RouteViolation::FalseCutOff(reason) => {
                write!(f, "{reason} is reported cut off but the budget allowed it")
            }
            RouteViolation::FalseLeftOut(reason) => {
                write!(f, "{reason} is reported left out but its cap allowed it")
            }
            RouteViolation::WrongFilters(url) => {
                write!(f, "{url} has filters that do not fit the route")
            }
        }
    }
}

/// Checks `plan` against the `candidates` it was selected from and the `budget`; empty means
/// the plan is sound. Determinism is a property of [`select`](super::select), tested there.
pub fn check_route(
    plan: &RoutePlan,
    candidates: &Candidates,
    budget: &RouteBudget,
) -> Vec<RouteViolation> {
    let mut violations = Vec::new();
    if plan.targets.len() > budget.max_relays {
        violations.push(RouteViolation::OverBudget {
            targets: plan.targets.len(),
            max: budget.max_relays,
        });
    }
    let mut seen = HashSet::new();
    for target in &plan.targets {
        if !seen.insert(target.url.as_str()) {
            violations.push(RouteViolation::DuplicateTarget(target.url.clone()));
        }
        if target.reasons.is_empty() {
            violations.push(RouteViolation::NoReason(target.url.clone()));
        }
        for reason in &target.reasons {
            if !candidates.offers(&target.url, reason) {
                violations.push(RouteViolation::NotACandidate {
                    url: target.url.clone(),
                    reason: *reason,
                });
            }
        }
        if target.filters.is_empty() == plan.kind.reads() {
            violations.push(RouteViolation::WrongFilters(target.url.clone()));
        }
    }
    let full = plan.targets.len() >= budget.max_relays;
    for group in &candidates.groups {
        let count = plan
            .targets
            .iter()
            .filter(|t| t.reasons.contains(&group.reason))
            .count();
        if count > group.cap {
            violations.push(RouteViolation::OverCap {
                reason: group.reason,
                count,
                cap: group.cap,
            });
        }
        let cut = plan.cut_off.contains(&group.reason);
        let reachable = plan.targets.iter().any(|t| group.urls.contains(&t.url));
        if cut && (!full || reachable) {
            violations.push(RouteViolation::FalseCutOff(group.reason));
        }
        let left_out = plan.left_out.contains(&group.reason);
        if left_out && (group.cap > 0 || group.urls.is_empty()) {
            violations.push(RouteViolation::FalseLeftOut(group.reason));
        }
        if count == 0 && !cut && !left_out && !group.urls.is_empty() {
            violations.push(RouteViolation::Unreached(group.reason));
        }
    }
    violations
}

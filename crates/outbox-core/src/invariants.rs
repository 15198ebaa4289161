//! The plan invariants, checked on every plan in tests and debug builds.
//!
//! One checker returns *every* violation, so a failing test shows the whole picture.

use std::fmt;

use crate::ids::{AuthorId, RelayId};
use crate::plan::Plan;
use crate::route_table::RouteTable;

/// The limits a plan was made under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Routed relays allowed (the reader's relays carrying only the residual do not count).
    pub max_connections: usize,
    /// Routed relays allowed per follow, if the strategy promises a cap.
    pub per_author_cap: Option<usize>,
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A follow appears in no filter: its notes would silently vanish from the feed.
    Uncovered(AuthorId),
    /// More routed relays than the budget.
    OverBudget {
        /// Routed relays in the plan.
        routed: usize,
        /// The budget.
        max: usize,
    },
    /// A follow is routed to more relays than the strategy's cap.
    OverAuthorCap {
        /// The follow.
        author: AuthorId,
        /// Routed relays naming it.
        count: usize,
        /// The cap.
        cap: usize,
    },
    /// A routed relay has an empty filter.
    EmptyFilter(RelayId),
    /// A filter names an author id that is not a follow.
    NotAFollow(AuthorId),
    /// A relay that is neither in the route table nor among the reader's relays.
    UnknownRelay(RelayId),
    /// A routed relay is asked about a follow who does not write there.
    NotAWriteRelay {
        /// The relay.
        relay: RelayId,
        /// The follow.
        author: AuthorId,
    },
    /// A residual carrier that is not one of the reader's relays.
    PoolNotReaderRelay(RelayId),
    /// The same relay appears twice among the routed relays.
    DuplicateRelay(RelayId),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Uncovered(a) => write!(f, "{a} is in no filter"),
            Violation::OverBudget { routed, max } => {
                write!(f, "{routed} routed relays exceed the budget of {max}")
            }
            Violation::OverAuthorCap { author, count, cap } => {
                write!(f, "{author} is routed to {count} relays, cap is {cap}")
            }
            Violation::EmptyFilter(r) => write!(f, "{r} has an empty filter"),
            Violation::NotAFollow(a) => write!(f, "{a} is not a follow"),
            Violation::UnknownRelay(r) => write!(f, "{r} is not in the route table"),
            Violation::NotAWriteRelay { relay, author } => {
                write!(
                    f,
                    "{relay} is asked about {author}, who does not write there"
                )
            }
            Violation::PoolNotReaderRelay(r) => {
                write!(f, "{r} carries the residual but is not a reader relay")
            }
            Violation::DuplicateRelay(r) => write!(f, "{r} is routed twice"),
        }
    }
}

/// Checks every invariant of `plan` against `table`; empty means the plan is sound.
///
/// A residual with no reader relay to carry it shows up as [`Violation::Uncovered`] for each
/// residual follow: the plan cannot ask anyone about them.
pub fn check_plan(plan: &Plan, table: &RouteTable, limits: Limits) -> Vec<Violation> {
    let mut violations = Vec::new();
    let follows = table.follow_count();
    let relays = table.relay_count();
    let mut routed_per_author = vec![0usize; follows];
    let mut in_filter = vec![false; follows];
    let mut seen_relays = vec![false; relays];

    let routed = plan.routed();
    if routed.len() > limits.max_connections {
        violations.push(Violation::OverBudget {
            routed: routed.len(),
            max: limits.max_connections,
        });
    }
    for a in routed {
        if a.relay.index() >= relays {
            violations.push(Violation::UnknownRelay(a.relay));
            continue;
        }
        if std::mem::replace(&mut seen_relays[a.relay.index()], true) {
            violations.push(Violation::DuplicateRelay(a.relay));
        }
        if a.authors.is_empty() {
            violations.push(Violation::EmptyFilter(a.relay));
        }
        for &author in &a.authors {
            if author.index() >= follows {
                violations.push(Violation::NotAFollow(author));
                continue;
            }
            if !table.writes_to(author, a.relay) {
                violations.push(Violation::NotAWriteRelay {
                    relay: a.relay,
                    author,
                });
            }
            routed_per_author[author.index()] += 1;
            in_filter[author.index()] = true;
        }
    }
    for &relay in plan.pool() {
        if relay.index() >= relays || !table.is_reader_relay(relay) {
            violations.push(Violation::PoolNotReaderRelay(relay));
        }
    }
    if !plan.pool().is_empty() {
        for &author in plan.residual() {
            if author.index() >= follows {
                violations.push(Violation::NotAFollow(author));
            } else {
                in_filter[author.index()] = true;
            }
        }
    }
    if let Some(cap) = limits.per_author_cap {
        for (i, &count) in routed_per_author.iter().enumerate() {
            if count > cap {
                violations.push(Violation::OverAuthorCap {
                    author: AuthorId(i as u32),
                    count,
                    cap,
                });
            }
        }
    }
    for (i, &covered) in in_filter.iter().enumerate() {
        if !covered {
            violations.push(Violation::Uncovered(AuthorId(i as u32)));
        }
    }
    violations
}

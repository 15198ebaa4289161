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
    /// Routed relays allowed beyond the pool: the reader's relays that carry the residual are
    /// connected anyway and do not count, whether or not they are routed to as well.
    pub max_connections: usize,
    /// How many of the reader's relays carry the residual (`None`: all of them); see
    /// [`RouteTable::pool`].
    pub pool: Option<usize>,
    /// Routed relays allowed per follow, if the strategy promises a cap.
    pub per_author_cap: Option<usize>,
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A follow appears in no filter: its notes would silently vanish from the feed.
    Uncovered(AuthorId),
    /// More routed relays beyond the reader's pool than the budget.
    OverBudget {
        /// Routed relays in the plan that are not in the pool.
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
    /// A routed relay is asked about a follow who neither declares it a write relay nor was
    /// hinted there ([`RouteTable::may_route`]).
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
                write!(
                    f,
                    "{routed} routed relays beyond the reader's pool exceed the budget of {max}"
                )
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
                    "{relay} is asked about {author}, who neither writes nor was hinted there"
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
    let counted = plan.routed_beyond_pool(table, limits.pool);
    if counted > limits.max_connections {
        violations.push(Violation::OverBudget {
            routed: counted,
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
            if !table.may_route(author, a.relay) {
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

#[cfg(test)]
mod tests {
    //! One deliberately broken plan per [`Violation`] kind: each must be reported, alone, so a
    //! check that is removed or weakened fails here. Kinds a selector can produce go through
    //! [`Router::try_plan_with`](crate::Router::try_plan_with) with a broken selector; the rest
    //! ([`Plan::from_selection`] normalises them away) are built raw.

    use std::mem::discriminant;

    use crate::router::PlanContext;

    use nostr::key::{Keys, PublicKey, SecretKey};
    use rand::RngCore;

    use super::*;
    use crate::route_table::{RawRelayList, RouteTableBuilder};
    use crate::selector::{Assignment, PlanInput, Selection, Selector};
    use crate::stats::DeliveryStats;
    use crate::url_policy::UrlPolicy;
    use crate::Router;

    fn key(n: u8) -> PublicKey {
        Keys::new(SecretKey::from_slice(&[n.max(1); 32]).expect("valid key")).public_key()
    }

    /// Follows 1..=3; 1 and 2 write to a and b, 3 has no list; reader relay home (if `reader`).
    fn table(reader: bool) -> RouteTable {
        let mut b = RouteTableBuilder::new(UrlPolicy::default()).follows([key(1), key(2), key(3)]);
        if reader {
            b = b.reader_relays(["wss://home.example"]);
        }
        for n in [1, 2] {
            b.add_list(RawRelayList {
                author: key(n),
                created_at: 1,
                tags: ["wss://a.example", "wss://b.example"]
                    .iter()
                    .map(|u| vec!["r".to_string(), u.to_string()])
                    .collect(),
            });
        }
        b.build()
    }

    fn ids(t: &RouteTable) -> (AuthorId, AuthorId, AuthorId, RelayId, RelayId, RelayId) {
        let a = |n| t.author_id(&key(n)).expect("follow");
        let r = |u| t.relay_id(u).expect("relay");
        (
            a(1),
            a(2),
            a(3),
            r("wss://a.example"),
            r("wss://b.example"),
            // Absent from a table without reader relays.
            t.relay_id("wss://home.example")
                .unwrap_or(RelayId(u32::MAX)),
        )
    }

    const LIMITS: Limits = Limits {
        max_connections: 2,
        pool: None,
        per_author_cap: Some(1),
    };

    /// A selector that returns one fixed selection, whatever it is asked.
    #[derive(Debug)]
    struct Fixed(Selection);

    impl Selector for Fixed {
        fn per_author_cap(&self) -> Option<usize> {
            LIMITS.per_author_cap
        }
        fn select(&mut self, _: &PlanInput<'_>, _: &mut dyn RngCore) -> Selection {
            self.0.clone()
        }
    }

    fn assign(relay: RelayId, authors: &[AuthorId]) -> Assignment {
        Assignment {
            relay,
            authors: authors.to_vec(),
        }
    }

    /// Plans `assignments` through a router and returns what the router rejected it for.
    fn through_router(table: &RouteTable, assignments: Vec<Assignment>) -> Vec<Violation> {
        let mut router =
            Router::with_selector("fixed", Box::new(Fixed(Selection { assignments })), 2);
        match router.try_plan_with(table, &DeliveryStats::new(), PlanContext::default()) {
            Ok(_) => Vec::new(),
            Err(broken) => broken.violations,
        }
    }

    fn assert_only(violations: &[Violation], expected: &Violation) {
        assert!(
            !violations.is_empty(),
            "expected {expected:?}, the plan was accepted"
        );
        assert!(
            violations
                .iter()
                .all(|v| discriminant(v) == discriminant(expected)),
            "expected only {expected:?}, got {violations:?}"
        );
        assert!(violations.contains(expected), "{violations:?}");
    }

    #[test]
    fn a_sound_plan_passes() {
        let t = table(true);
        let (f1, f2, _, a, _, _) = ids(&t);
        assert_eq!(through_router(&t, vec![assign(a, &[f1, f2])]), vec![]);
    }

    #[test]
    fn uncovered_when_nobody_carries_the_residual() {
        let t = table(false);
        let (f1, f2, f3, a, _, _) = ids(&t);
        let v = through_router(&t, vec![assign(a, &[f1, f2])]);
        assert_only(&v, &Violation::Uncovered(f3));
    }

    #[test]
    fn over_budget() {
        let t = table(true);
        let (f1, f2, _, a, b, _) = ids(&t);
        let mut router = Router::with_selector(
            "fixed",
            Box::new(Fixed(Selection {
                assignments: vec![assign(a, &[f1]), assign(b, &[f2])],
            })),
            1,
        );
        let v = router
            .try_plan_with(&t, &DeliveryStats::new(), PlanContext::default())
            .expect_err("two relays on a budget of one");
        assert_only(&v.violations, &Violation::OverBudget { routed: 2, max: 1 });
    }

    #[test]
    fn a_routed_relay_in_the_pool_costs_no_connection() {
        let b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1), key(2)])
            .reader_relays(["wss://home.example", "wss://away.example"]);
        let mut b = b;
        for (n, url) in [(1, "wss://home.example"), (2, "wss://a.example")] {
            b.add_list(RawRelayList {
                author: key(n),
                created_at: 1,
                tags: vec![vec!["r".to_string(), url.to_string()]],
            });
        }
        let t = b.build();
        let f1 = t.author_id(&key(1)).expect("follow");
        let f2 = t.author_id(&key(2)).expect("follow");
        let home = t.relay_id("wss://home.example").expect("relay");
        let a = t.relay_id("wss://a.example").expect("relay");
        let plan = Plan::from_selection(
            &t,
            "fixed",
            Selection {
                assignments: vec![assign(home, &[f1]), assign(a, &[f2])],
            },
        );
        let one = |pool| Limits {
            max_connections: 1,
            pool,
            per_author_cap: None,
        };
        assert_eq!(check_plan(&plan, &t, one(None)), vec![]);
        assert_eq!(check_plan(&plan, &t, one(Some(1))), vec![]);
        // With no routed connection to spare, only the pool is free.
        let none = Limits {
            max_connections: 0,
            ..one(None)
        };
        assert_only(
            &check_plan(&plan, &t, none),
            &Violation::OverBudget { routed: 1, max: 0 },
        );
    }

    #[test]
    fn a_reader_relay_beyond_the_pool_limit_counts() {
        let b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1)])
            .reader_relays(["wss://home.example", "wss://away.example"]);
        let mut b = b;
        b.add_list(RawRelayList {
            author: key(1),
            created_at: 1,
            tags: vec![vec!["r".to_string(), "wss://away.example".to_string()]],
        });
        let t = b.build();
        let f1 = t.author_id(&key(1)).expect("follow");
        let away = t.relay_id("wss://away.example").expect("relay");
        let plan = Plan::from_selection(
            &t,
            "fixed",
            Selection {
                assignments: vec![assign(away, &[f1])],
            },
        );
        let limits = |pool| Limits {
            max_connections: 0,
            pool,
            per_author_cap: None,
        };
        assert_eq!(check_plan(&plan, &t, limits(Some(2))), vec![]);
        assert_only(
            &check_plan(&plan, &t, limits(Some(1))),
            &Violation::OverBudget { routed: 1, max: 0 },
        );
    }

    #[test]
    fn over_author_cap() {
        let t = table(true);
        let (f1, f2, _, a, b, _) = ids(&t);
        let v = through_router(&t, vec![assign(a, &[f1, f2]), assign(b, &[f1])]);
        assert_only(
            &v,
            &Violation::OverAuthorCap {
                author: f1,
                count: 2,
                cap: 1,
            },
        );
    }

    #[test]
    fn not_a_follow() {
        let t = table(true);
        let (f1, f2, _, a, _, _) = ids(&t);
        let stranger = AuthorId(99);
        let v = through_router(&t, vec![assign(a, &[f1, f2, stranger])]);
        assert_only(&v, &Violation::NotAFollow(stranger));
    }

    #[test]
    fn unknown_relay() {
        let t = table(true);
        let (f1, f2, _, a, _, _) = ids(&t);
        let nowhere = RelayId(77);
        let v = through_router(&t, vec![assign(a, &[f1]), assign(nowhere, &[f2])]);
        // The follow routed only to a relay that does not exist is asked of nobody.
        assert!(v.contains(&Violation::UnknownRelay(nowhere)), "{v:?}");
        assert!(
            v.iter()
                .all(|x| matches!(x, Violation::UnknownRelay(_) | Violation::Uncovered(_))),
            "{v:?}"
        );
    }

    #[test]
    fn not_a_write_relay() {
        let t = table(true);
        let (f1, f2, f3, a, _, _) = ids(&t);
        let v = through_router(&t, vec![assign(a, &[f1, f2, f3])]);
        assert_only(
            &v,
            &Violation::NotAWriteRelay {
                relay: a,
                author: f3,
            },
        );
    }

    /// Follow 3 (no list) hinted at c.example, follow 1 at c.example too (beside its list).
    fn hinted_table() -> RouteTable {
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows([key(1), key(2), key(3)])
            .reader_relays(["wss://home.example"]);
        for n in [1, 2] {
            b.add_list(RawRelayList {
                author: key(n),
                created_at: 1,
                tags: vec![vec!["r".to_string(), "wss://a.example".to_string()]],
            });
        }
        b.hint(key(3), "wss://c.example", crate::HintSource::ContactList);
        b.hint(key(1), "wss://c.example/", crate::HintSource::SeenOn);
        b.build()
    }

    #[test]
    fn hinted_relays_may_be_routed() {
        let t = hinted_table();
        let (f1, f2, f3) = (
            t.author_id(&key(1)).unwrap(),
            t.author_id(&key(2)).unwrap(),
            t.author_id(&key(3)).unwrap(),
        );
        let (a, c) = (
            t.relay_id("wss://a.example").unwrap(),
            t.relay_id("wss://c.example").unwrap(),
        );
        let v = through_router(&t, vec![assign(a, &[f2]), assign(c, &[f1, f3])]);
        assert_eq!(v, vec![]);
    }

    #[test]
    fn a_relay_neither_declared_nor_hinted_is_refused_with_hints_about() {
        let t = hinted_table();
        let (f2, f3) = (t.author_id(&key(2)).unwrap(), t.author_id(&key(3)).unwrap());
        let (a, c) = (
            t.relay_id("wss://a.example").unwrap(),
            t.relay_id("wss://c.example").unwrap(),
        );
        // f2 declares a and was hinted nowhere; f3 was hinted at c only.
        let v = through_router(&t, vec![assign(c, &[f2]), assign(a, &[f3])]);
        assert!(
            v.iter()
                .all(|x| matches!(x, Violation::NotAWriteRelay { .. })),
            "{v:?}"
        );
        assert!(v.contains(&Violation::NotAWriteRelay {
            relay: c,
            author: f2
        }));
        assert!(v.contains(&Violation::NotAWriteRelay {
            relay: a,
            author: f3
        }));
    }

    #[test]
    fn empty_filter() {
        let t = table(true);
        let (f1, f2, f3, a, b, home) = ids(&t);
        let plan = Plan::raw(
            vec![assign(a, &[f1, f2]), assign(b, &[])],
            vec![f3],
            vec![home],
        );
        assert_only(&check_plan(&plan, &t, LIMITS), &Violation::EmptyFilter(b));
    }

    #[test]
    fn duplicate_relay() {
        let t = table(true);
        let (f1, f2, f3, a, _, home) = ids(&t);
        let plan = Plan::raw(
            vec![assign(a, &[f1]), assign(a, &[f2])],
            vec![f3],
            vec![home],
        );
        assert_only(
            &check_plan(&plan, &t, LIMITS),
            &Violation::DuplicateRelay(a),
        );
    }

    #[test]
    fn pool_not_reader_relay() {
        let t = table(true);
        let (f1, f2, f3, a, b, _) = ids(&t);
        let plan = Plan::raw(vec![assign(a, &[f1, f2])], vec![f3], vec![b]);
        assert_only(
            &check_plan(&plan, &t, LIMITS),
            &Violation::PoolNotReaderRelay(b),
        );
    }

    #[test]
    fn a_residual_without_a_pool_is_uncovered() {
        let t = table(true);
        let (f1, f2, f3, a, _, _) = ids(&t);
        let plan = Plan::raw(vec![assign(a, &[f1, f2])], vec![f3], vec![]);
        assert_only(&check_plan(&plan, &t, LIMITS), &Violation::Uncovered(f3));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "breaks 1 invariant")]
    fn plan_with_panics_on_a_broken_plan_in_debug_builds() {
        let t = table(false);
        let (f1, f2, _, a, _, _) = ids(&t);
        let mut router = Router::with_selector(
            "fixed",
            Box::new(Fixed(Selection {
                assignments: vec![assign(a, &[f1, f2])],
            })),
            2,
        );
        router.plan_with(&t, &DeliveryStats::new(), PlanContext::default());
    }
}

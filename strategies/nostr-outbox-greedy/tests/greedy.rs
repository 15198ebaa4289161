//! Greedy plans: residual, per-author cap, determinism, invariants over random tables.

use nostr_outbox_core::testkit::{
    check_strategy, random_table, random_worlds, test_key, WorldShape,
};
use nostr_outbox_core::{check_plan, AuthorId, RouteTable, Router, UrlPolicy};
use nostr_outbox_greedy::GreedyConfig;
use proptest::prelude::*;

use nostr_outbox_core::testkit::{relay_list as list, table_with_lists as table};

fn greedy(budget: usize) -> Router {
    Router::from_toml(&format!(
        "max_connections = {budget}\n[strategy]\ntype = \"greedy\"\n"
    ))
    .unwrap()
}

#[test]
fn residual_covers_follows_the_budget_leaves_out() {
    // 10 authors over 8 relays, each author on one or two relays nobody else uses much.
    let relays: Vec<String> = (0..8).map(|i| format!("wss://relay{i}.example")).collect();
    let lists = (0..10u64)
        .map(|a| {
            let first = &relays[(a % 8) as usize];
            let second = &relays[((a * 3 + 1) % 8) as usize];
            list(a, &[first, second])
        })
        .chain([list(10, &[])])
        .collect::<Vec<_>>();
    // Author 11 has no list at all.
    let t = table(12, lists);
    let mut router = greedy(4);
    let plan = router.plan(&t, 1);
    assert_eq!(plan.routed().len(), 4);
    assert!(
        !plan.residual().is_empty(),
        "the budget must leave someone out"
    );
    let home = t.relay_id("wss://home.example").unwrap();
    for a in t.authors() {
        assert!(!plan.asked(a).is_empty(), "{a} is in no filter");
    }
    for &a in plan.residual() {
        assert_eq!(plan.asked(a), vec![home]);
    }
    assert!(check_plan(&plan, &t, router.limits()).is_empty());
}

#[test]
fn empty_route_table_asks_reader_relays_about_everyone() {
    let t = RouteTable::without_lists(
        UrlPolicy::default(),
        (0..7).map(test_key),
        ["wss://home.example", "wss://home2.example"],
    );
    let plan = greedy(20).plan(&t, 0);
    assert!(plan.routed().is_empty());
    assert_eq!(plan.residual().len(), 7);
    let entries = plan.entries(&t);
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|e| e.authors.len() == 7));
}

#[test]
fn max_two_relays_per_author_stays_two_when_more_are_chosen() {
    // Author 0 writes to 4 relays; each relay is also the only relay of other authors, so all
    // four get chosen globally. Author 0 must still be asked of only 2.
    let mut lists = vec![list(
        0,
        &[
            "wss://a.example",
            "wss://b.example",
            "wss://c.example",
            "wss://d.example",
        ],
    )];
    for (i, r) in [
        "wss://a.example",
        "wss://b.example",
        "wss://c.example",
        "wss://d.example",
    ]
    .iter()
    .enumerate()
    {
        lists.push(list(1 + i as u64 * 2, &[r]));
        lists.push(list(2 + i as u64 * 2, &[r]));
    }
    let t = table(9, lists);
    let plan = greedy(20).plan(&t, 0);
    assert_eq!(plan.routed().len(), 4, "all four relays are needed");
    assert_eq!(plan.asked(AuthorId(0)).len(), 2);
    for a in t.authors() {
        assert!(plan.asked(a).len() <= 2);
    }
}

#[test]
fn same_seed_same_plan_and_ties_break_by_url() {
    let t = random_table(WorldShape::small(), 3);
    let a = greedy(5).plan(&t, 9);
    let b = greedy(5).plan(&t, 10);
    assert_eq!(a, b, "greedy with the coverage scorer uses no randomness");
    // Two relays with identical coverage: the smaller URL is chosen with budget 1.
    let t = table(
        2,
        vec![
            list(0, &["wss://zz.example", "wss://aa.example"]),
            list(1, &["wss://zz.example", "wss://aa.example"]),
        ],
    );
    let plan = greedy(1).plan(&t, 0);
    assert_eq!(t.url(plan.routed()[0].relay), "wss://aa.example");
}

#[test]
fn greedy_prefers_the_relay_covering_most() {
    let t = table(
        4,
        vec![
            list(0, &["wss://hub.example", "wss://x.example"]),
            list(1, &["wss://hub.example"]),
            list(2, &["wss://hub.example"]),
            list(3, &["wss://x.example"]),
        ],
    );
    let plan = greedy(1).plan(&t, 0);
    assert_eq!(t.url(plan.routed()[0].relay), "wss://hub.example");
    assert_eq!(plan.residual(), &[AuthorId(3)]);
}

#[test]
fn passes_the_conformance_suite() {
    let failures = check_strategy(&GreedyConfig::default());
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A scorer that redraws on every call, as `thompson` and `uniform` do.
#[derive(Debug)]
struct Redraw;

impl nostr_outbox_core::Scorer for Redraw {
    fn name(&self) -> &str {
        "redraw_probe"
    }
    fn score(
        &mut self,
        relay: nostr_outbox_core::RelayView<'_>,
        rng: &mut dyn nostr_outbox_core::RngCore,
    ) -> f64 {
        f64::from(rng.next_u32() % 100) * f64::from(relay.coverage)
    }
    fn supports_lazy_greedy(&self) -> bool {
        false
    }
}

#[derive(
    Debug, Default, nostr_outbox_core::serde::Serialize, nostr_outbox_core::serde::Deserialize,
)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
struct RedrawConfig {}

nostr_outbox_core::register_scorer! {
    name: "redraw_probe",
    summary: "a scorer that exists only in these tests",
    impl ScorerConfig for RedrawConfig {
        fn build(&self) -> Box<dyn nostr_outbox_core::Scorer> {
            Box::new(Redraw)
        }
    }
}

#[test]
fn an_unstable_scorer_is_rejected_naming_the_key_and_a_stable_alternative() {
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"greedy\"\n[strategy.scorer]\ntype = \"redraw_probe\"\n",
    )
    .unwrap_err();
    assert_eq!(err.issues.len(), 1, "{err}");
    assert_eq!(err.issues[0].key, "strategy.scorer");
    assert!(err.issues[0].message.contains("redraw_probe"), "{err}");
    assert!(err.issues[0].message.contains("fixed_thompson"), "{err}");
    // The stable default still passes.
    assert!(nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"greedy\"\n[strategy.scorer]\ntype = \"coverage\"\n"
    )
    .is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn greedy_plans_never_violate_invariants(
        (shape, seed) in random_worlds(),
        budget in 0usize..25,
        k in 1usize..4,
    ) {
        let t = random_table(shape, seed);
        let mut router = Router::from_toml(&format!(
            "max_connections = {budget}\n[strategy]\ntype = \"greedy\"\ncoverage_target = {k}\n"
        )).unwrap();
        let plan = router.plan(&t, seed);
        let violations = check_plan(&plan, &t, router.limits());
        prop_assert!(violations.is_empty(), "{:?}", violations);
    }
}

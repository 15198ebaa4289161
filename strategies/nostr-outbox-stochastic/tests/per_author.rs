//! Stochastic and filter-decomposition plans: per-author picks, the budget rule, config.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nostr_outbox_core::testkit::{
    check_config_toml, check_strategy, random_table, random_worlds, WorldShape,
};
use nostr_outbox_core::{
    check_plan, AuthorId, DeliveryStats, PlanInput, RelayView, RouteTable, Router, Scorer, Selector,
};
use nostr_outbox_kit::Rules;
use nostr_outbox_stochastic::{
    FilterDecomposition, FilterDecompositionConfig, Stochastic, StochasticConfig,
};
use proptest::prelude::*;
use rand::{RngCore, SeedableRng};

use nostr_outbox_core::testkit::{relay_list as list, table_with_lists as table};

fn router(budget: usize, strategy: &str) -> Router {
    Router::from_toml(&format!(
        "max_connections = {budget}\n[strategy]\n{strategy}"
    ))
    .unwrap()
}

fn urls(t: &RouteTable, plan: &nostr_outbox_core::Plan, author: u64) -> Vec<String> {
    let mut v: Vec<String> = plan
        .asked(AuthorId(author as u32))
        .into_iter()
        .filter(|r| !t.is_reader_relay(*r))
        .map(|r| t.url(r).to_string())
        .collect();
    v.sort();
    v
}

/// Author 0 lists d, c, b, a (reverse URL order); author 1 lists c, d.
fn dcba_table() -> RouteTable {
    table(
        2,
        vec![
            list(
                0,
                &[
                    "wss://d.example",
                    "wss://c.example",
                    "wss://b.example",
                    "wss://a.example",
                ],
            ),
            list(1, &["wss://c.example", "wss://d.example"]),
        ],
    )
}

#[test]
fn filter_decomposition_takes_the_first_n_in_list_order() {
    let t = dcba_table();
    let mut r = router(20, "type = \"filter_decomposition\"\nper_author = 2\n");
    let plan = r.plan(&t, 0);
    assert_eq!(urls(&t, &plan, 0), ["wss://c.example", "wss://d.example"]);
    assert_eq!(urls(&t, &plan, 1), ["wss://c.example", "wss://d.example"]);
    assert_eq!(plan, r.plan(&t, 99), "no randomness");
}

/// Scores relays by a fixed table of URLs, so a ranking can be asserted exactly.
#[derive(Debug)]
struct ByUrl(&'static [(&'static str, f64)]);

impl Scorer for ByUrl {
    fn name(&self) -> &str {
        "by_url"
    }
    fn score(&mut self, relay: RelayView<'_>, _rng: &mut dyn RngCore) -> f64 {
        self.0
            .iter()
            .find(|(u, _)| *u == relay.url)
            .map_or(0.0, |(_, s)| *s)
    }
}

#[test]
fn filter_decomposition_with_a_scorer_ranks_by_its_draws_instead_of_list_order() {
    let t = dcba_table();
    let scorer = ByUrl(&[
        ("wss://a.example", 4.0),
        ("wss://b.example", 3.0),
        ("wss://c.example", 2.0),
        ("wss://d.example", 1.0),
    ]);
    let mut fd = FilterDecomposition::new(2, Some(Box::new(scorer)));
    let stats = DeliveryStats::new();
    let input = PlanInput::new(&t, 20, &stats, 0);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let selection = fd.select(&input, &mut rng);
    let picked = |author: u32| {
        let mut v: Vec<&str> = selection
            .assignments
            .iter()
            .filter(|a| a.authors.contains(&AuthorId(author)))
            .map(|a| t.url(a.relay))
            .collect();
        v.sort();
        v
    };
    // List order would give c and d to author 0; the scorer prefers a and b. No popularity
    // weight: c (popularity 2) does not overtake b.
    assert_eq!(picked(0), ["wss://a.example", "wss://b.example"]);
    assert_eq!(picked(1), ["wss://c.example", "wss://d.example"]);
}

#[test]
fn filter_decomposition_scorer_is_config() {
    let toml = "max_connections = 8\n[strategy]\ntype = \"filter_decomposition\"\nper_author = 2\n[strategy.scorer]\ntype = \"uniform\"\n";
    let mut r = Router::from_toml(toml).unwrap();
    assert_eq!(r.strategy(), "filter_decomposition+uniform");
    let failures = check_config_toml(toml);
    assert!(failures.is_empty(), "{failures:#?}");
    // Seeded: the same seed repeats, and some seed departs from list order.
    let t = random_table(WorldShape::small(), 3);
    assert_eq!(r.plan(&t, 4), r.plan(&t, 4));
    let list_order = router(8, "type = \"filter_decomposition\"\nper_author = 2\n").plan(&t, 0);
    assert!(
        (0..10).any(|s| r.plan(&t, s).routed() != list_order.routed()),
        "a scorer should change the ranking"
    );
}

#[test]
fn over_budget_keeps_the_relays_serving_most_picks_and_refills_from_them() {
    // hub: picked by 0,1,2; side: picked by 0 and 3; lone: picked only by 4; zz: only by 5.
    let t = table(
        6,
        vec![
            list(0, &["wss://hub.example", "wss://side.example"]),
            list(1, &["wss://hub.example"]),
            list(2, &["wss://hub.example"]),
            list(3, &["wss://side.example"]),
            list(4, &["wss://lone.example", "wss://hub.example"]),
            list(5, &["wss://zz.example"]),
        ],
    );
    // per_author = 1: picks hub×3 (0,1,2), side×1 (3), lone×1 (4), zz×1 (5).
    let mut r = router(2, "type = \"filter_decomposition\"\nper_author = 1\n");
    let plan = r.plan(&t, 0);
    let routed: Vec<&str> = plan.routed().iter().map(|a| t.url(a.relay)).collect();
    // Budget 2: hub (3 picks) then the smallest URL among the 1-pick relays: lone.
    assert_eq!(routed, ["wss://hub.example", "wss://lone.example"]);
    // Author 3 lost `side` and writes nowhere else kept: residual. Author 5 too.
    assert_eq!(plan.residual(), &[AuthorId(3), AuthorId(5)]);
    assert!(check_plan(&plan, &t, r.limits()).is_empty());
    // Budget 1 keeps only hub; author 4's pick (lone) is dropped but author 4 writes to hub too,
    // so the refill routes it there instead of the residual.
    let plan = router(1, "type = \"filter_decomposition\"\nper_author = 1\n").plan(&t, 0);
    assert_eq!(urls(&t, &plan, 4), ["wss://hub.example"]);
    assert_eq!(plan.residual(), &[AuthorId(3), AuthorId(5)]);
}

#[test]
fn stochastic_prefers_popular_relays_but_not_always() {
    // Author 0 writes to a hub (popularity 20) and a niche relay (popularity 1).
    let mut lists = vec![list(0, &["wss://niche.example", "wss://hub.example"])];
    for a in 1..20 {
        lists.push(list(a, &["wss://hub.example"]));
    }
    let t = table(20, lists);
    let mut r = router(20, "type = \"stochastic\"\nper_author = 1\n");
    let mut hub = 0;
    for seed in 0..400 {
        if urls(&t, &r.plan(&t, seed), 0) == ["wss://hub.example"] {
            hub += 1;
        }
    }
    // P(w_hub·U1 > w_niche·U2) with w_hub = 1 + ln 20 ≈ 4.0, w_niche = 1: 1 − 1/(2·4.0) ≈ 0.875.
    assert!((320..=380).contains(&hub), "hub chosen {hub}/400");
}

#[test]
fn stochastic_is_seeded() {
    let t = random_table(WorldShape::small(), 5);
    let mut r = router(8, "type = \"stochastic\"\n");
    assert_eq!(r.plan(&t, 1), r.plan(&t, 1));
    let distinct = (0..10)
        .map(|s| r.plan(&t, s))
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] != w[1])
        .count();
    assert!(distinct > 0, "different seeds should differ somewhere");
}

/// A scorer that counts its calls.
#[derive(Debug)]
struct Counting(Arc<AtomicUsize>);

impl Scorer for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn score(&mut self, _relay: RelayView<'_>, rng: &mut dyn RngCore) -> f64 {
        self.0.fetch_add(1, Ordering::Relaxed);
        f64::from(rng.next_u32()) + 1.0
    }
}

/// One plan of `s` for `t` with 5 connections and no stats.
fn select_once(s: &mut Stochastic, t: &RouteTable) {
    let stats = DeliveryStats::new();
    let input = PlanInput::new(t, 5, &stats, 0);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    s.select(&input, &mut rng);
}

#[test]
fn stochastic_draws_once_per_relay_per_run() {
    let t = random_table(WorldShape::small(), 11);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut s = Stochastic::new(3, Some(Box::new(Counting(calls.clone()))));
    select_once(&mut s, &t);
    let used = t.relays().filter(|r| t.popularity(*r) > 0).count();
    assert_eq!(calls.load(Ordering::Relaxed), used);
}

#[test]
fn study_rules_draw_per_pair_and_lose_picks_the_cap_drops() {
    // A draw per (follow, relay): as many draws as write pairs, not relays.
    let t = random_table(WorldShape::small(), 11);
    let calls = Arc::new(AtomicUsize::new(0));
    let mut s =
        Stochastic::new(3, Some(Box::new(Counting(calls.clone())))).with_rules(Rules::Study);
    select_once(&mut s, &t);
    let pairs: usize = t.authors().map(|a| t.write_relays(a).len()).sum();
    assert_eq!(calls.load(Ordering::Relaxed), pairs);

    // Author 4 picks `lone` (per_author = 1, list order); budget 1 keeps only `hub`. A client
    // moves author 4 to `hub`, which it also writes to; the study's cap drops the pick.
    let t = table(
        5,
        vec![
            list(0, &["wss://hub.example"]),
            list(1, &["wss://hub.example"]),
            list(4, &["wss://lone.example", "wss://hub.example"]),
        ],
    );
    let plan = |rules: Rules| {
        let selector = Stochastic::new(1, Some(Box::new(Favour("lone")))).with_rules(rules);
        let mut r = Router::with_selector("stochastic", Box::new(selector), 1);
        let plan = r.plan(&t, 0);
        assert!(check_plan(&plan, &t, r.limits()).is_empty());
        plan
    };
    assert_eq!(urls(&t, &plan(Rules::Client), 4), ["wss://hub.example"]);
    let study = plan(Rules::Study);
    assert!(urls(&t, &study, 4).is_empty());
    assert_eq!(study.residual(), &[AuthorId(2), AuthorId(3), AuthorId(4)]);
}

/// A scorer that ranks the relay whose URL contains its text first.
#[derive(Debug)]
struct Favour(&'static str);

impl Scorer for Favour {
    fn name(&self) -> &str {
        "favour"
    }
    fn score(&mut self, relay: RelayView<'_>, _rng: &mut dyn RngCore) -> f64 {
        if relay.url.contains(self.0) {
            100.0
        } else {
            1.0
        }
    }
}

#[test]
fn config_errors_name_their_keys() {
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"stochastic\"\nper_author = 0\n",
    )
    .unwrap_err();
    assert_eq!(err.issues[0].key, "strategy.per_author");
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"filter_decomposition\"\nn = 2\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `n`"), "{err}");
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"nope\"\n",
    )
    .unwrap_err();
    assert!(err.issues[0].key.starts_with("strategy.scorer"), "{err}");
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"filter_decomposition\"\n[strategy.scorer]\ntype = \"nope\"\n",
    )
    .unwrap_err();
    assert!(err.issues[0].key.starts_with("strategy.scorer"), "{err}");
}

#[test]
fn both_pass_the_conformance_suite() {
    for config in [
        &StochasticConfig::default() as &dyn nostr_outbox_core::StrategyConfig,
        &FilterDecompositionConfig::default(),
    ] {
        let failures = check_strategy(config);
        assert!(failures.is_empty(), "{config:?}: {failures:#?}");
    }
    let failures = check_config_toml(
        "[strategy]\ntype = \"stochastic\"\nper_author = 1\n[strategy.scorer]\ntype = \"uniform\"\n",
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn per_author_plans_never_violate_invariants(
        (shape, seed) in random_worlds(),
        budget in 0usize..25,
        n in 1usize..5,
        kind in prop::sample::select(vec![
            "type = \"stochastic\"",
            "type = \"filter_decomposition\"",
            "type = \"filter_decomposition\"\nscorer = { type = \"uniform\" }",
        ]),
    ) {
        let t = random_table(shape, seed);
        let mut r = router(budget, &format!("per_author = {n}\n{kind}\n"));
        let plan = r.plan(&t, seed);
        let violations = check_plan(&plan, &t, r.limits());
        prop_assert!(violations.is_empty(), "{:?}", violations);
        prop_assert!(plan.routed().len() <= budget);
    }
}

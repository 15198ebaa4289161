//! Hysteresis over time: flapping, settled improvements, dead incumbents, in-place diffs, and
//! invariants at every tick of random list changes.

use std::collections::BTreeMap;
use std::time::Duration;

use nostr::key::PublicKey;
use nostr_outbox_client::{PlanDiff, Slots};
use nostr_outbox_core::testkit::{check_strategy, random_table, test_key, WorldShape};
use nostr_outbox_core::{
    check_plan, DeliveryStats, Plan, PlanInput, RawRelayList, RouteTable, RouteTableBuilder,
    RouterConfig, Selector, StrategyConfig, UrlPolicy,
};
use nostr_outbox_greedy::{Greedy, GreedyConfig};
use nostr_outbox_hysteresis::{Hysteresis, HysteresisConfig};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const HOME: &str = "wss://home.example";

/// A world of follows `0..follows` and their write relays, rebuilt into a table each tick.
#[derive(Clone, Debug)]
struct World {
    follows: Vec<PublicKey>,
    lists: BTreeMap<usize, Vec<String>>,
    reader: Vec<String>,
}

impl World {
    fn new(follows: u64) -> Self {
        Self {
            follows: (0..follows).map(test_key).collect(),
            lists: BTreeMap::new(),
            reader: vec![HOME.to_string()],
        }
    }

    /// Authors `who` write to `relay` (in addition to what they had).
    fn writes(&mut self, relay: &str, who: impl IntoIterator<Item = usize>) -> &mut Self {
        for a in who {
            let list = self.lists.entry(a).or_default();
            if !list.iter().any(|r| r == relay) {
                list.push(relay.to_string());
            }
        }
        self
    }

    /// A world of `follows` follows, each `(relay, authors)` writing there.
    fn writing(follows: u64, writes: &[(&str, std::ops::Range<usize>)]) -> Self {
        let mut w = Self::new(follows);
        for (relay, who) in writes {
            w.writes(relay, who.clone());
        }
        w
    }

    /// `relay` leaves every list.
    fn remove_relay(&mut self, relay: &str) -> &mut Self {
        for list in self.lists.values_mut() {
            list.retain(|r| r != relay);
        }
        self
    }

    fn table(&self) -> RouteTable {
        let mut b = RouteTableBuilder::new(UrlPolicy::default())
            .follows(self.follows.iter().copied())
            .reader_relays(&self.reader);
        for (&a, relays) in &self.lists {
            b.add_list(RawRelayList {
                author: self.follows[a],
                created_at: 1,
                tags: relays
                    .iter()
                    .map(|r| vec!["r".to_string(), r.clone()])
                    .collect(),
            });
        }
        b.build()
    }

    /// The world of a testkit random table.
    fn from_table(table: &RouteTable) -> Self {
        let mut lists = BTreeMap::new();
        for a in table.authors() {
            if table.has_list(a) {
                let urls = table
                    .write_relays(a)
                    .iter()
                    .map(|&r| table.url(r).to_string())
                    .collect();
                lists.insert(a.index(), urls);
            }
        }
        Self {
            follows: table.pubkeys().to_vec(),
            lists,
            reader: table
                .reader_relays()
                .iter()
                .map(|&r| table.url(r).to_string())
                .collect(),
        }
    }
}

fn hysteresis(coverage_target: usize, margin: f64, settle_secs: u64) -> Hysteresis {
    let inner = Greedy::new(coverage_target, Box::new(nostr_outbox_core::CoverageScorer));
    Hysteresis::new(Box::new(inner), margin, Duration::from_secs(settle_secs))
}

/// One planning tick: select, build the plan, check every invariant, apply it to the slots.
fn tick(
    selector: &mut dyn Selector,
    slots: &mut Slots,
    table: &RouteTable,
    budget: usize,
    now: u64,
) -> (Plan, PlanDiff) {
    let stats = DeliveryStats::new();
    let input = PlanInput::new(table, budget, &stats, now);
    let selection = selector.select(&input, &mut ChaCha8Rng::seed_from_u64(now));
    let plan = Plan::from_selection(table, "hysteresis+greedy", selection);
    let limits = nostr_outbox_core::Limits {
        max_connections: budget,
        pool: None,
        per_author_cap: selector.per_author_cap(),
    };
    let violations = check_plan(&plan, table, limits);
    assert!(violations.is_empty(), "at {now}: {violations:?}");
    let diff = slots.apply(&plan, table);
    (plan, diff)
}

fn routed_urls(plan: &Plan, table: &RouteTable) -> Vec<String> {
    plan.routed()
        .iter()
        .map(|a| table.url(a.relay).to_string())
        .collect()
}

#[test]
fn passes_the_conformance_suite() {
    let config = HysteresisConfig {
        margin: 1.25,
        settle: "30s".into(),
        inner: Box::new(GreedyConfig::default()),
    };
    let failures = check_strategy(&config);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_registered_example_wraps_greedy_and_is_conformant() {
    let d = nostr_outbox_core::registry::strategy("hysteresis").expect("registered");
    let table = d.example_table().expect("greedy is linked here");
    assert_eq!(table["inner"]["type"].as_str(), Some("greedy"));
    assert_eq!(table["settle"].as_str(), Some("30s"));
    let failures =
        nostr_outbox_core::testkit::check_config_toml(&d.example_router_toml(20).unwrap());
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn config_parses_and_validates_with_prefixed_keys() {
    let good = "max_connections = 8\n[strategy]\ntype = \"hysteresis\"\nmargin = 1.5\nsettle = \"45s\"\n[strategy.inner]\ntype = \"greedy\"\ncoverage_target = 3\n";
    let config = RouterConfig::from_toml(good).expect("valid config");
    assert_eq!(config.strategy.label(), "hysteresis+greedy");
    let selector = config.strategy.build();
    assert_eq!(selector.per_author_cap(), Some(3));

    let bad = "[strategy]\ntype = \"hysteresis\"\nmargin = 0.9\nsettle = \"soon\"\n[strategy.inner]\ntype = \"greedy\"\ncoverage_target = 0\n";
    let err = RouterConfig::from_toml(bad).unwrap_err();
    let keys: Vec<&str> = err.issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "strategy.margin",
            "strategy.settle",
            "strategy.inner.coverage_target"
        ],
        "{err}"
    );

    let missing_inner = "[strategy]\ntype = \"hysteresis\"\n";
    assert!(RouterConfig::from_toml(missing_inner).is_err());
}

#[test]
fn defaults_are_a_quarter_margin_and_thirty_seconds() {
    let config: HysteresisConfig =
        toml::from_str("inner = { type = \"greedy\" }").expect("defaults fill in");
    assert_eq!(config.margin, 1.25);
    assert_eq!(config.settle, "30s");
    assert!(config.validate().is_empty());
    let _ = config.build();
}

/// Authors 0..6 on A, 4..10 on B, and 0..3 on F only on even ticks.
fn flapping_world(flap_on: bool) -> World {
    let third = if flap_on { 0..3 } else { 0..0 };
    let (a, b) = ("wss://a.example", "wss://b.example");
    World::writing(10, &[(a, 0..6), (b, 4..10), ("wss://flap.example", third)])
}

#[test]
fn a_flapping_relay_is_closed_once_and_never_redialled() {
    let mut h = hysteresis(2, 1.25, 30);
    let mut plain = Greedy::new(2, Box::new(nostr_outbox_core::CoverageScorer));
    let (mut hs, mut ps) = (Slots::new(), Slots::new());
    let (mut h_dials, mut h_closes, mut p_dials) = (0, 0, 0);
    for t in 0..20u64 {
        let table = flapping_world(t % 2 == 0).table();
        let now = 1_000 + 5 * t;
        let (plan, diff) = tick(&mut h, &mut hs, &table, 3, now);
        let (_, pdiff) = tick(&mut plain, &mut ps, &table, 3, now);
        if t == 0 {
            assert!(routed_urls(&plan, &table).contains(&"wss://flap.example".to_string()));
            continue;
        }
        h_dials += diff.dial.len();
        h_closes += diff.close.len();
        p_dials += pdiff.dial.len();
        // The relay is dropped the first time it leaves the lists, not 30 s later.
        if t == 1 {
            assert_eq!(diff.close, ["wss://flap.example"]);
        }
    }
    assert_eq!(
        h_dials, 0,
        "flapping within the settle window must not redial"
    );
    assert_eq!(h_closes, 1);
    assert_eq!(p_dials, 9, "plain re-planning redials on every return");
}

#[test]
fn a_flapping_challenger_never_gets_in() {
    // The flapping relay is absent at the start, so it only ever appears as a challenger.
    let mut h = hysteresis(2, 1.0, 30);
    let mut slots = Slots::new();
    for t in 0..20u64 {
        let table = flapping_world(t % 2 == 1).table();
        // Budget 3: the flapping relay would fit into the free slot if it ever settled.
        let (_, diff) = tick(&mut h, &mut slots, &table, 3, 1_000 + 5 * t);
        if t > 0 {
            assert!(
                diff.dial.is_empty() && diff.close.is_empty(),
                "tick {t}: {diff:?}"
            );
        }
    }
}

/// A: 0..5, B: 5..8, C: 8..10 (budget 2 leaves C's authors in the residual).
fn improvement_world(improved: bool) -> World {
    let better = if improved { 5..10 } else { 5..5 };
    let (a, b, c) = ("wss://a.example", "wss://b.example", "wss://c.example");
    World::writing(
        10,
        &[
            (a, 0..5),
            (b, 5..8),
            (c, 8..10),
            ("wss://n.example", better),
        ],
    )
}

#[test]
fn a_permanent_improvement_is_applied_exactly_once_after_the_window() {
    let mut h = hysteresis(1, 1.25, 30);
    let mut slots = Slots::new();
    let mut dialled_at = Vec::new();
    let mut closed = Vec::new();
    for t in 0..30u64 {
        let now = 1_000 + 5 * t;
        // The new relay appears at t = 4 (now = 1020) and stays.
        let table = improvement_world(t >= 4).table();
        let (plan, diff) = tick(&mut h, &mut slots, &table, 2, now);
        if t == 0 {
            assert_eq!(diff.dial, ["wss://a.example", "wss://b.example", HOME]);
            continue;
        }
        for url in &diff.dial {
            dialled_at.push((url.clone(), now));
        }
        closed.extend(diff.close.clone());
        if now >= 1_050 {
            assert_eq!(
                routed_urls(&plan, &table),
                ["wss://a.example", "wss://n.example"]
            );
        }
    }
    // 5 challenger vs 3 incumbent clears 1.25; seen from 1020, settled at 1050.
    assert_eq!(dialled_at, [("wss://n.example".to_string(), 1_050)]);
    // B closes, and with everyone covered the reader relay carries no residual any more.
    assert_eq!(closed, ["wss://b.example", HOME]);
}

#[test]
fn the_longest_settle_window_never_settles_instead_of_wrapping_to_zero() {
    for settle in [
        "18446744073709551615s",
        "18446744073709551615s 1ns",
        "18446744073709551615s 999999999ns",
    ] {
        let toml = format!(
            "[strategy]\ntype = \"hysteresis\"\nsettle = \"{settle}\"\n[strategy.inner]\ntype = \"greedy\"\ncoverage_target = 1\n"
        );
        let config = RouterConfig::from_toml(&toml).unwrap_or_else(|e| panic!("{settle}: {e}"));
        let mut h = config.strategy.build();
        let mut slots = Slots::new();
        for t in 0..30u64 {
            let now = 1_000 + 5 * t;
            let table = improvement_world(t >= 4).table();
            let (plan, _) = tick(h.as_mut(), &mut slots, &table, 2, now);
            assert_eq!(
                routed_urls(&plan, &table),
                ["wss://a.example", "wss://b.example"],
                "{settle} at {now}"
            );
        }
    }
    // Built directly, too.
    let inner = Greedy::new(1, Box::new(nostr_outbox_core::CoverageScorer));
    let mut h = Hysteresis::new(Box::new(inner), 1.25, Duration::MAX);
    let mut slots = Slots::new();
    for t in 0..30u64 {
        let table = improvement_world(t >= 4).table();
        tick(&mut h, &mut slots, &table, 2, 1_000 + 5 * t);
    }
    assert!(h
        .incumbent()
        .iter()
        .all(|held| held.url != "wss://n.example"));
}

/// A: 0..5, B: 5..13 (8 follows); with the challenger, M: 5..14 (9 follows, < 1.25 × 8).
fn margin_world(challenger: bool) -> World {
    let third = if challenger { 5..14 } else { 5..5 };
    let (a, b) = ("wss://a.example", "wss://b.example");
    World::writing(20, &[(a, 0..5), (b, 5..13), ("wss://m.example", third)])
}

#[test]
fn an_improvement_below_the_margin_is_never_applied() {
    let mut h = hysteresis(1, 1.25, 0);
    let mut slots = Slots::new();
    for t in 0..10u64 {
        let table = margin_world(t >= 2).table();
        let (plan, diff) = tick(&mut h, &mut slots, &table, 2, 1_000 + 5 * t);
        assert_eq!(
            routed_urls(&plan, &table),
            ["wss://a.example", "wss://b.example"]
        );
        if t > 0 {
            assert!(diff.dial.is_empty() && diff.close.is_empty(), "{diff:?}");
        }
    }
    // The same world with a margin of 1: the challenger wins at once (no settle window).
    let mut h = hysteresis(1, 1.0, 0);
    let mut slots = Slots::new();
    tick(&mut h, &mut slots, &margin_world(false).table(), 2, 1_000);
    let table = margin_world(true).table();
    let (plan, diff) = tick(&mut h, &mut slots, &table, 2, 1_005);
    assert_eq!(
        routed_urls(&plan, &table),
        ["wss://a.example", "wss://m.example"]
    );
    assert_eq!((diff.dial.len(), diff.close.len()), (1, 1));
}

#[test]
fn an_interrupted_advantage_restarts_the_window() {
    let mut h = hysteresis(1, 1.25, 30);
    let mut slots = Slots::new();
    let mut dials = Vec::new();
    for t in 0..40u64 {
        let now = 1_000 + 5 * t;
        // Present from 1010 to 1030, gone at 1035, back from 1040 for good.
        let table = improvement_world((2..7).contains(&t) || t >= 8).table();
        let (_, diff) = tick(&mut h, &mut slots, &table, 2, now);
        if t > 0 {
            dials.extend(diff.dial.into_iter().map(|u| (u, now)));
        }
    }
    assert_eq!(dials, [("wss://n.example".to_string(), 1_070)]);
}

/// Hysteresis (one follow's coverage, 30 s to settle) that planned [`improvement_world`] once
/// with a budget of two, and its slots.
fn planned_once() -> (Hysteresis, Slots) {
    let mut h = hysteresis(1, 1.25, 30);
    let mut slots = Slots::new();
    let table = improvement_world(false).table();
    tick(&mut h, &mut slots, &table, 2, 1_000);
    (h, slots)
}

#[test]
fn a_dead_incumbent_is_replaced_immediately() {
    let (mut h, mut slots) = planned_once();
    // B leaves every list; its authors also write to D (and C's authors stay residual).
    let mut w = improvement_world(false);
    w.remove_relay("wss://b.example")
        .writes("wss://d.example", 5..8);
    let table = w.table();
    let (plan, diff) = tick(&mut h, &mut slots, &table, 2, 1_001);
    assert_eq!(diff.close, ["wss://b.example"]);
    assert_eq!(diff.dial, ["wss://d.example"]);
    assert_eq!(
        routed_urls(&plan, &table),
        ["wss://a.example", "wss://d.example"]
    );

    // Without an alternative relay the authors go to the residual in the same plan.
    let (mut h, mut slots) = planned_once();
    let mut w = improvement_world(false);
    w.remove_relay("wss://b.example");
    let table = w.table();
    let (plan, diff) = tick(&mut h, &mut slots, &table, 2, 1_001);
    assert_eq!(diff.close, ["wss://b.example"]);
    for a in 5..8 {
        let author = table.author_id(&test_key(a)).unwrap();
        assert!(plan.residual().contains(&author));
    }
}

#[test]
fn a_diff_touches_only_the_slots_whose_filters_changed() {
    let mut h = hysteresis(1, 1.25, 30);
    let mut slots = Slots::new();
    let mut w = World::new(6);
    w.writes("wss://a.example", 0..2)
        .writes("wss://b.example", 2..4)
        .writes("wss://c.example", 4..5);
    tick(&mut h, &mut slots, &w.table(), 3, 1_000);
    // Follow 5 (no list, residual) starts writing to A: A's filter and the residual change.
    w.writes("wss://a.example", [5]);
    let (_, diff) = tick(&mut h, &mut slots, &w.table(), 3, 1_001);
    assert!(diff.dial.is_empty() && diff.close.contains(&HOME.to_string()));
    assert_eq!(diff.replace, ["wss://a.example"]);
    assert_eq!(diff.unchanged, ["wss://b.example", "wss://c.example"]);
    assert_eq!(slots.get("wss://a.example").unwrap().generation, 2);
    assert_eq!(slots.get("wss://b.example").unwrap().generation, 1);
    assert_eq!(slots.get("wss://c.example").unwrap().generation, 1);
    // Follow 3 also lists C: it stays on B (incumbent), so nothing at all changes.
    w.writes("wss://c.example", [3]);
    let (_, diff) = tick(&mut h, &mut slots, &w.table(), 3, 1_002);
    assert!(diff.is_empty(), "{diff:?}");
}

#[test]
fn a_shrinking_budget_is_respected_at_once() {
    let mut h = hysteresis(2, 1.25, 30);
    let mut slots = Slots::new();
    let table = random_table(WorldShape::small(), 5);
    tick(&mut h, &mut slots, &table, 8, 1_000);
    let (plan, _) = tick(&mut h, &mut slots, &table, 3, 1_001);
    assert!(plan.routed().len() <= 3);
}

#[derive(Clone, Debug)]
enum Change {
    Add(usize, usize),
    Drop(usize, usize),
    ClearList(usize),
    KillRelay(usize),
    Budget(usize),
    Wait(u64),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (0usize..60, 0usize..30).prop_map(|(a, r)| Change::Add(a, r)),
        4 => (0usize..60, 0usize..5).prop_map(|(a, i)| Change::Drop(a, i)),
        1 => (0usize..60).prop_map(Change::ClearList),
        1 => (0usize..30).prop_map(Change::KillRelay),
        1 => (0usize..10).prop_map(Change::Budget),
        3 => (0u64..40).prop_map(Change::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn invariants_hold_at_every_tick_of_random_list_changes(
        seed in 0u64..1_000,
        budget in 0usize..10,
        target in 1usize..4,
        margin in 1.0f64..2.0,
        settle in 0u64..60,
        changes in proptest::collection::vec(proptest::collection::vec(change(), 1..4), 1..25),
    ) {
        let table = random_table(WorldShape::small(), seed);
        let mut world = World::from_table(&table);
        let mut h = hysteresis(target, margin, settle);
        let mut slots = Slots::new();
        let mut budget = budget;
        let mut now = 1_000u64;
        tick(&mut h, &mut slots, &table, budget, now);
        for step in changes {
            now += 1;
            for c in step {
                match c {
                    Change::Add(a, r) => {
                        let a = a % world.follows.len();
                        world.writes(&format!("wss://r{r}.relay.test"), [a]);
                    }
                    Change::Drop(a, i) => {
                        if let Some(list) = world.lists.get_mut(&(a % world.follows.len())) {
                            if !list.is_empty() {
                                let i = i % list.len();
                                list.remove(i);
                            }
                        }
                    }
                    Change::ClearList(a) => {
                        world.lists.remove(&(a % world.follows.len()));
                    }
                    Change::KillRelay(r) => {
                        world.remove_relay(&format!("wss://r{r}.relay.test"));
                    }
                    Change::Budget(b) => budget = b,
                    Change::Wait(s) => now += s,
                }
            }
            // `tick` asserts every invariant, including coverage, on every plan.
            let table = world.table();
            let (plan, _) = tick(&mut h, &mut slots, &table, budget, now);
            prop_assert!(plan.routed().len() <= budget);
        }
    }
}

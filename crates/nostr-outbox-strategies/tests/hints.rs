//! Relay hints in the route table: which strategies use them, and that the rest plan exactly as
//! on the same table without them.

use nostr_outbox_core::registry;
use nostr_outbox_core::testkit::{random_hinted_table, random_table, WorldShape};
use nostr_outbox_core::{check_plan, DeliveryStats, PlanContext, RelayStats, RouteTable, Router};

/// The strategies that route to hinted relays ([`nostr_outbox_core::hints`]).
const USE_HINTS: &[&str] = &["nostr_sdk", "recall"];

/// A plan as URLs and the keys asked there, comparable across two tables.
fn named(table: &RouteTable, plan: &nostr_outbox_core::Plan) -> Vec<(String, Vec<String>)> {
    plan.entries(table)
        .into_iter()
        .map(|e| {
            let mut keys: Vec<String> = e
                .authors
                .iter()
                .map(|&a| table.pubkey(a).to_hex())
                .collect();
            keys.sort();
            (table.url(e.relay).to_string(), keys)
        })
        .collect()
}

/// Stats where some relays look good and some bad, keyed by URL (so both tables read them alike).
fn stats(table: &RouteTable) -> DeliveryStats {
    let mut stats = DeliveryStats::new();
    for r in table.relays() {
        let (alpha, beta) = if r.0 % 2 == 0 { (8.0, 2.0) } else { (2.0, 6.0) };
        stats.set(
            table.url(r),
            RelayStats {
                alpha,
                beta,
                ..RelayStats::default()
            },
        );
    }
    stats
}

#[test]
fn strategies_that_ignore_hints_plan_as_without_them() {
    nostr_outbox_strategies::link();
    let mut used = Vec::new();
    for d in registry::strategies() {
        let toml = d.example_router_toml(6).unwrap();
        for seed in 0..6u64 {
            let plain = random_table(WorldShape::small(), seed);
            let hinted = random_hinted_table(WorldShape::small(), seed);
            assert!(hinted.hint_count() > 0);
            let known = stats(&plain);
            let ctx = PlanContext::at(1_000).seed(seed).window(86_400 * 365);
            let a = Router::from_toml(&toml)
                .unwrap()
                .plan_with(&plain, &known, ctx);
            let mut router = Router::from_toml(&toml).unwrap();
            let b = router.plan_with(&hinted, &known, ctx);
            assert!(check_plan(&b, &hinted, router.limits()).is_empty());
            let to_hints = b.routed().iter().any(|x| {
                x.authors
                    .iter()
                    .any(|&au| hinted.hint_relays(au).contains(&x.relay))
            });
            if to_hints && !used.contains(&d.name) {
                used.push(d.name);
            }
            if !USE_HINTS.contains(&d.name) {
                assert_eq!(
                    named(&plain, &a),
                    named(&hinted, &b),
                    "`{}` on world {seed} changed its plan for hints it does not use",
                    d.name
                );
            }
        }
    }
    assert_eq!(
        used, USE_HINTS,
        "the strategies that routed to a hinted relay"
    );
}

#[test]
fn hysteresis_keeps_what_its_inner_strategy_routes_to_hinted_relays() {
    nostr_outbox_strategies::link();
    let toml = "max_connections = 6\n[strategy]\ntype = \"hysteresis\"\n\
                [strategy.inner]\ntype = \"recall\"\n";
    let mut hinted_assignments = 0;
    for seed in 0..6u64 {
        let table = random_hinted_table(WorldShape::small(), seed);
        let known = stats(&table);
        let mut router = Router::from_toml(toml).unwrap();
        for session in 0..3u64 {
            let ctx = PlanContext::at(1_000 + session * 3_600).seed(seed);
            let plan = router.plan_with(&table, &known, ctx);
            assert!(check_plan(&plan, &table, router.limits()).is_empty());
            hinted_assignments += plan
                .routed()
                .iter()
                .map(|x| {
                    (x.authors.iter())
                        .filter(|&&au| table.hint_relays(au).contains(&x.relay))
                        .count()
                })
                .sum::<usize>();
        }
    }
    assert!(
        hinted_assignments > 0,
        "no follow was kept on a hinted relay"
    );
}

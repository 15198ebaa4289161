//! Thompson scorers and the `per_author` strategy: stability, seeds, laziness, config combinations.

use nostr_outbox_core::testkit::{
    check_config_toml, random_table, relay_list, table_builder, WorldShape,
};
use nostr_outbox_core::{
    DeliveryStats, PlanContext, PlanInput, RelayId, RelayStats, RelayView, RouteTable, Router,
    RouterConfig, Scorer,
};
use nostr_outbox_thompson::{FixedThompson, Thompson, ThompsonOptions};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

// Name the strategy crates so their registrations are linked into this test binary.
use nostr_outbox_greedy as _;
use nostr_outbox_stochastic as _;

fn view(t: &RouteTable, relay: RelayId, coverage: u32) -> RelayView<'_> {
    RelayView {
        relay,
        url: t.url(relay),
        popularity: t.popularity(relay),
        coverage,
    }
}

/// The small world of seed 4, with stats [`learned`] on it: what the fixed Thompson tests score.
fn learned_world() -> (RouteTable, DeliveryStats) {
    let t = random_table(WorldShape::small(), 4);
    let stats = learned(&t);
    (t, stats)
}

fn learned(t: &RouteTable) -> DeliveryStats {
    let mut stats = DeliveryStats::new();
    for (i, r) in t.relays().enumerate() {
        stats.set(
            t.url(r),
            RelayStats {
                alpha: 1.0 + (i % 7) as f64,
                beta: 1.0 + (i % 3) as f64,
                ..RelayStats::default()
            },
        );
    }
    stats
}

/// A planning input over `t` with `stats`, budget 5, at time 0.
fn input<'a>(t: &'a RouteTable, stats: &'a DeliveryStats) -> PlanInput<'a> {
    PlanInput::new(t, 5, stats, 0)
}

/// A default fixed-Thompson scorer and the seeded draws it takes.
fn fixed_thompson() -> (ChaCha8Rng, FixedThompson) {
    let rng = ChaCha8Rng::seed_from_u64(8);
    (rng, FixedThompson::new(ThompsonOptions::default()))
}

#[test]
fn fixed_thompson_supports_lazy_greedy_and_scales_with_coverage() {
    let (t, stats) = learned_world();
    let input = input(&t, &stats);
    let (mut rng, mut s) = fixed_thompson();
    assert!(s.supports_lazy_greedy());
    s.prepare(&input, &mut rng);
    for r in t.relays() {
        let first = s.score(view(&t, r, 1), &mut rng);
        for _ in 0..3 {
            assert_eq!(s.score(view(&t, r, 1), &mut rng), first);
        }
        let double = s.score(view(&t, r, 2), &mut rng);
        assert!((double - 2.0 * first).abs() < 1e-12, "monotone in coverage");
    }
    // A fresh Thompson scorer is not stable: repeated calls draw anew.
    let mut fresh = Thompson::new(ThompsonOptions::default());
    assert!(!fresh.supports_lazy_greedy());
    fresh.prepare(&input, &mut rng);
    let r = t.relays().next().unwrap();
    let draws: Vec<f64> = (0..5)
        .map(|_| fresh.score(view(&t, r, 1), &mut rng))
        .collect();
    assert!(draws.windows(2).any(|w| w[0] != w[1]), "{draws:?}");
}

#[test]
fn fixed_thompson_differs_across_seeds_and_repeats_for_a_seed() {
    let (t, stats) = learned_world();
    let input = input(&t, &stats);
    let run = |seed: u64| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut s = FixedThompson::new(ThompsonOptions::default());
        s.prepare(&input, &mut rng);
        t.relays()
            .map(|r| s.score(view(&t, r, 1), &mut rng))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn fixed_thompson_draws_lazily_and_caches_relays_first_seen_mid_run() {
    let (t, stats) = learned_world();
    let input = input(&t, &stats);
    let (mut rng, mut s) = fixed_thompson();
    s.prepare(&input, &mut rng);
    // Nothing drawn at prepare time.
    assert!(t.relays().all(|r| s.cached(r).is_none()));
    let a = t.relays().nth(3).unwrap();
    let score = s.score(view(&t, a, 1), &mut rng);
    assert_eq!(s.cached(a), Some(score));
    assert!(t
        .relays()
        .filter(|r| *r != a)
        .all(|r| s.cached(r).is_none()));
    // A relay id beyond the prepared table: drawn on first sight from the uniform prior, then
    // reused.
    let unseen = RelayId(t.relay_count() as u32 + 10);
    let v = RelayView {
        relay: unseen,
        url: "wss://new.example",
        popularity: 1,
        coverage: 1,
    };
    let first = s.score(v, &mut rng);
    assert_eq!(s.cached(unseen), Some(first));
    assert_eq!(s.score(v, &mut rng), first);
    // The next run forgets.
    s.prepare(&input, &mut rng);
    assert!(s.cached(a).is_none() && s.cached(unseen).is_none());
}

#[test]
fn options_popularity_weight_and_latency_discount() {
    let mut b = table_builder(3);
    for a in 0..3 {
        b.add_list(relay_list(a, &["wss://a.example"]));
    }
    let t = b.build();
    let relay = t.relay_id("wss://a.example").unwrap();
    let mut stats = DeliveryStats::new();
    stats.set(
        "wss://a.example",
        RelayStats {
            alpha: 3.0,
            beta: 2.0,
            latency_ms: Some(1000.0),
            ..RelayStats::default()
        },
    );
    let input = input(&t, &stats);
    let score = |options: ThompsonOptions| {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut s = FixedThompson::new(options);
        s.prepare(&input, &mut rng);
        s.score(view(&t, relay, 1), &mut rng)
    };
    let plain = score(ThompsonOptions {
        popularity_weight: false,
        latency_discount: false,
    });
    let slow = score(ThompsonOptions {
        popularity_weight: false,
        latency_discount: true,
    });
    let popular = score(ThompsonOptions {
        popularity_weight: true,
        latency_discount: false,
    });
    assert!(
        (slow - plain / 2.0).abs() < 1e-12,
        "1 / (1 + 1000/1000) = 1/2"
    );
    assert!((popular - plain * (1.0 + 3f64.ln())).abs() < 1e-12);
}

/// Every combination that makes sense, as TOML, each through the conformance suite.
#[test]
fn every_combination_is_config_and_conformant() {
    let combos = [
        ("greedy", "fixed_thompson", "greedy+fixed_thompson"),
        ("stochastic", "thompson", "stochastic+thompson"),
        ("stochastic", "fixed_thompson", "stochastic+fixed_thompson"),
        ("stochastic", "uniform", "stochastic"),
        ("per_author", "thompson", "per_author"),
        ("per_author", "fixed_thompson", "per_author+fixed_thompson"),
        ("per_author", "uniform", "per_author+uniform"),
        ("per_author", "coverage", "per_author+coverage"),
        (
            "filter_decomposition",
            "thompson",
            "filter_decomposition+thompson",
        ),
    ];
    for (strategy, scorer, name) in combos {
        let toml = format!(
            "max_connections = 6\n[strategy]\ntype = \"{strategy}\"\n[strategy.scorer]\ntype = \"{scorer}\"\n"
        );
        let router = Router::from_toml(&toml).unwrap_or_else(|e| panic!("{toml}: {e}"));
        assert_eq!(router.strategy(), name);
        let failures = check_config_toml(&toml);
        assert!(failures.is_empty(), "{strategy}+{scorer}: {failures:#?}");
    }
    // Greedy's lazy evaluation needs a stable score: a per-call draw is refused, naming the key
    // and the stable alternative.
    for scorer in ["thompson", "uniform"] {
        let err = RouterConfig::from_toml(&format!(
            "[strategy]\ntype = \"greedy\"\n[strategy.scorer]\ntype = \"{scorer}\"\n"
        ))
        .unwrap_err();
        assert_eq!(err.issues.len(), 1, "{err}");
        assert_eq!(err.issues[0].key, "strategy.scorer", "{err}");
        assert!(err.issues[0].message.contains("fixed_thompson"), "{err}");
    }
    // Options reach the scorer, and bad ones are named.
    let toml = "[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\nlatency_discount = false\npopularity_weight = true\n";
    assert!(RouterConfig::from_toml(toml).is_ok());
    let err = RouterConfig::from_toml(
        "[strategy]\ntype = \"greedy\"\n[strategy.scorer]\ntype = \"fixed_thompson\"\nlatency = 1\n",
    )
    .unwrap_err();
    assert!(err.issues[0].key.starts_with("strategy.scorer"), "{err}");
}

#[test]
fn cold_start_thompson_plans_exactly_like_stochastic() {
    let t = random_table(WorldShape::small(), 21);
    let plain = "max_connections = 8\n[strategy]\ntype = \"stochastic\"\n";
    let thompson = "max_connections = 8\n[strategy]\ntype = \"stochastic\"\n[strategy.scorer]\ntype = \"thompson\"\n";
    for seed in 0..5 {
        let a = Router::from_toml(plain).unwrap().plan(&t, seed);
        let b = Router::from_toml(thompson).unwrap().plan(&t, seed);
        assert_eq!(a.routed(), b.routed(), "seed {seed}");
    }
}

#[test]
fn per_author_respects_the_budget_and_a_large_budget_leaves_it_unbounded() {
    let t = random_table(WorldShape::small(), 2);
    let mut small =
        Router::from_toml("max_connections = 3\n[strategy]\ntype = \"per_author\"\n").unwrap();
    assert!(small.plan(&t, 1).routed().len() <= 3);
    let mut large = Router::from_toml(
        "max_connections = 100000\n[strategy]\ntype = \"per_author\"\nper_author = 2\n",
    )
    .unwrap();
    let plan = large.plan(&t, 1);
    for a in t.authors() {
        let want = t.write_relays(a).len().min(2);
        let routed = plan
            .asked(a)
            .iter()
            .filter(|r| !t.is_reader_relay(**r) || t.writes_to(a, **r))
            .count();
        if want > 0 {
            assert_eq!(routed, want, "{a}: every follow gets its own top 2");
        }
    }
}

/// `stochastic`, `per_author` and `filter_decomposition` are one selector: with the same
/// weighting and the same draws they must give the same plans.
#[test]
fn per_author_kinds_plan_alike_given_the_same_scores() {
    let t = random_table(WorldShape::small(), 13);
    let stats = learned(&t);
    let plan = |strategy: &str, seed: u64, stats: &DeliveryStats| {
        Router::from_toml(&format!("max_connections = 8\n[strategy]\n{strategy}"))
            .unwrap()
            .plan_with(&t, stats, PlanContext::at(0).seed(seed))
    };
    let fd = "type = \"filter_decomposition\"\n[strategy.scorer]\ntype = \"thompson\"\n";
    let per_author = "type = \"per_author\"\n";
    let weighted =
        "type = \"per_author\"\n[strategy.scorer]\ntype = \"thompson\"\npopularity_weight = true\n";
    let stochastic = "type = \"stochastic\"\n";
    for seed in 0..5 {
        // Learned stats: the same unweighted Thompson draws, whatever the strategy's name.
        assert_eq!(
            plan(fd, seed, &stats).routed(),
            plan(per_author, seed, &stats).routed(),
            "seed {seed}"
        );
        // Cold start: a Beta(1, 1) draw is the uniform draw, so the scorer's popularity weight
        // reproduces stochastic's built-in one.
        let cold = DeliveryStats::new();
        assert_eq!(
            plan(weighted, seed, &cold).routed(),
            plan(stochastic, seed, &cold).routed(),
            "seed {seed}"
        );
    }
}

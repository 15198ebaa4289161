//! The learning loop end to end: plan → observe what relays returned → `record_delivery` → plan.
//!
//! A small world where every follow writes to X, Y and three of eight other relays Z0..Z7:
//! X never returns events, Y always does, and each Z answers in a random 60% of sessions. Learning must move selection away from X
//! and toward Y, using only what the plan's own REQs returned (no oracle).

use nostr_outbox_core::stats::{AuthorRound, RelayRound, RoundReport};
use nostr_outbox_core::testkit::{relay_list, table_builder};
use nostr_outbox_core::{AuthorId, DeliveryStats, Plan, PlanContext, RouteTable, Router};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use nostr_outbox_strategies::link;

const FOLLOWS: u64 = 30;
const SESSIONS: usize = 8;
const TRIALS: u64 = 200;
const X: &str = "wss://x.example";
const Y: &str = "wss://y.example";
const ZS: [&str; 8] = [
    "wss://z0.example",
    "wss://z1.example",
    "wss://z2.example",
    "wss://z3.example",
    "wss://z4.example",
    "wss://z5.example",
    "wss://z6.example",
    "wss://z7.example",
];

fn world() -> RouteTable {
    let mut b = table_builder(FOLLOWS);
    for a in 0..FOLLOWS {
        let z = |k: u64| ZS[((a * 3 + k * (1 + a % 5)) % 8) as usize];
        let mut relays = [X, Y, z(0), z(1), z(2)];
        // Rotate list order so no relay is favoured by position (a repeated Z is dropped as a
        // duplicate by the route table).
        relays.rotate_left((a % 5) as usize);
        b.add_list(relay_list(a, &relays));
    }
    b.build()
}

/// Whether `relay` answers and returns events for an author it is asked about this session.
fn returns(url: &str, up_z: &[bool; 8]) -> Option<bool> {
    match url {
        X => Some(false),
        Y | "wss://home.example" => Some(true),
        z => ZS
            .iter()
            .position(|u| *u == z)
            .and_then(|i| up_z[i].then_some(true)),
    }
}

/// Feeds the stats exactly what a client sees after EOSE (see `nostr_outbox_core::stats`): a
/// delivering relay returns one note per asked follow, a silent one none, a down one no answer.
fn observe(plan: &Plan, t: &RouteTable, up_z: &[bool; 8], stats: &mut DeliveryStats, now: u64) {
    let relays = plan
        .entries(t)
        .into_iter()
        .map(|e| {
            let url = t.url(e.relay);
            let answer = returns(url, up_z);
            RelayRound::new(
                url.to_string(),
                answer.is_some(),
                e.authors
                    .iter()
                    .map(|&a| AuthorRound::counted(*t.pubkey(a), u32::from(answer == Some(true))))
                    .collect(),
            )
        })
        .collect();
    stats.record_round(&RoundReport { relays }, now);
}

/// Per session, the share of follows routed to X and to Y, averaged over trials.
fn run(strategy: &str) -> Vec<(f64, f64)> {
    link();
    let t = world();
    let x = t.relay_id(X).unwrap();
    let y = t.relay_id(Y).unwrap();
    let mut freq = vec![(0.0, 0.0); SESSIONS];
    for trial in 0..TRIALS {
        let mut router = Router::from_toml(strategy).unwrap();
        let mut stats = DeliveryStats::new();
        let mut world_rng = ChaCha8Rng::seed_from_u64(1000 + trial);
        for (s, f) in freq.iter_mut().enumerate() {
            stats.begin_session();
            let now = 1_700_000_000 + s as u64 * 3600;
            let plan = router.plan_with(
                &t,
                &stats,
                PlanContext::at(now).seed(trial * 100 + s as u64),
            );
            let share = |relay| {
                (0..FOLLOWS as u32)
                    .filter(|&a| plan.asked(AuthorId(a)).contains(&relay))
                    .count() as f64
                    / FOLLOWS as f64
            };
            f.0 += share(x) / TRIALS as f64;
            f.1 += share(y) / TRIALS as f64;
            let up_z = [0; 8].map(|_| world_rng.random_bool(0.6));
            observe(&plan, &t, &up_z, &mut stats, now);
        }
    }
    freq
}

fn print(label: &str, freq: &[(f64, f64)]) {
    for (s, (x, y)) in freq.iter().enumerate() {
        eprintln!(
            "{label} session {s}: X selected for {:5.1}% of follows, Y for {:5.1}%",
            x * 100.0,
            y * 100.0
        );
    }
}

#[test]
fn thompson_learns_to_avoid_x_and_prefer_y() {
    let learned = run(
        "max_connections = 20\n[strategy]\ntype = \"stochastic\"\nper_author = 2\n[strategy.scorer]\ntype = \"thompson\"\n",
    );
    let control = run("max_connections = 20\n[strategy]\ntype = \"stochastic\"\nper_author = 2\n");
    print("stochastic+thompson", &learned);
    print("stochastic (control)", &control);
    let (x0, y0) = learned[0];
    let (xn, yn) = learned[SESSIONS - 1];
    // Session 0 is the cold start: two picks out of five relays, X and Y slightly favoured by
    // popularity, so about half the follows use each.
    assert!(
        (0.35..0.65).contains(&x0) && (0.35..0.65).contains(&y0),
        "{x0} {y0}"
    );
    assert!(xn < x0 / 2.0, "X should fall: {x0} -> {xn}");
    assert!(yn > y0 + 0.3, "Y should rise: {y0} -> {yn}");
    // Without learning nothing moves.
    let (cx, cy) = control[SESSIONS - 1];
    assert!((cx - x0).abs() < 0.1 && (cy - y0).abs() < 0.1, "{cx} {cy}");
}

#[test]
fn fixed_thompson_inside_greedy_learns_too() {
    let learned = run(
        "max_connections = 1\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n[strategy.scorer]\ntype = \"fixed_thompson\"\n",
    );
    print("greedy+fixed_thompson (budget 1)", &learned);
    let (x0, _) = learned[0];
    let (xn, yn) = learned[SESSIONS - 1];
    assert!(xn < x0, "X should fall: {x0} -> {xn}");
    assert!(yn > 0.7, "Y should dominate: {yn}");
}

#[test]
fn filter_decomposition_with_thompson_learns_the_ranking() {
    let learned = run(
        "max_connections = 20\n[strategy]\ntype = \"filter_decomposition\"\nper_author = 2\n[strategy.scorer]\ntype = \"thompson\"\n",
    );
    let control =
        run("max_connections = 20\n[strategy]\ntype = \"filter_decomposition\"\nper_author = 2\n");
    print("filter_decomposition+thompson", &learned);
    print("filter_decomposition (control)", &control);
    let (x0, y0) = learned[0];
    let (xn, yn) = learned[SESSIONS - 1];
    assert!(xn < x0 / 2.0, "X should fall: {x0} -> {xn}");
    assert!(yn > y0 + 0.3, "Y should rise: {y0} -> {yn}");
    // List order never learns.
    assert_eq!(control[0], control[SESSIONS - 1]);
}

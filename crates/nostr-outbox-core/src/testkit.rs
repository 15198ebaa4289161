//! The conformance suite every registered strategy must pass, and helpers to build test worlds.
//!
//! Enabled by the `testkit` feature. A test that iterates every registered descriptor and calls
//! [`check_strategy`] puts each new strategy crate under the suite automatically.

use std::fmt;

use nostr::key::{Keys, PublicKey, SecretKey};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::RouterConfig;
use crate::hints::HintSource;
use crate::invariants::check_plan;
use crate::issue::ConfigIssue;
use crate::route_table::{RawRelayList, RouteTable, RouteTableBuilder};
use crate::router::{PlanContext, Router};
use crate::selector::StrategyConfig;
use crate::stats::DeliveryStats;
use crate::url_policy::UrlPolicy;

/// A deterministic public key for test number `n` (different `n`, different key).
pub fn test_key(n: u64) -> PublicKey {
    let mut rng = ChaCha8Rng::seed_from_u64(n ^ 0x6f75_7462_6f78);
    loop {
        let bytes: [u8; 32] = rng.random();
        if let Ok(sk) = SecretKey::from_slice(&bytes) {
            return Keys::new(sk).public_key();
        }
    }
}

/// A relay list by follow `test_key(author)` naming `relays`, without markers (read and write).
pub fn relay_list(author: u64, relays: &[&str]) -> RawRelayList {
    RawRelayList {
        author: test_key(author),
        created_at: 1,
        tags: relays
            .iter()
            .map(|r| vec!["r".to_string(), r.to_string()])
            .collect(),
    }
}

/// A route table builder following `test_key(0..follows)`, with the reader relay
/// `wss://home.example`: lists and hints are added to it, then it is built.
pub fn table_builder(follows: u64) -> RouteTableBuilder {
    RouteTableBuilder::new(UrlPolicy::default())
        .follows((0..follows).map(test_key))
        .reader_relays(["wss://home.example"])
}

/// A route table following `test_key(0..follows)`, with the reader relay `wss://home.example`
/// and `lists`.
pub fn table_with_lists(follows: u64, lists: impl IntoIterator<Item = RawRelayList>) -> RouteTable {
    let mut b = table_builder(follows);
    for list in lists {
        b.add_list(list);
    }
    b.build()
}

/// The shape of a random test world.
#[derive(Clone, Copy, Debug)]
pub struct WorldShape {
    /// Followed authors.
    pub follows: usize,
    /// Distinct relays that lists draw from.
    pub relays: usize,
    /// Share of follows that publish a list, in `[0, 1]`.
    pub list_share: f64,
    /// Most write relays in one list.
    pub max_write_relays: usize,
    /// The reader's own relays.
    pub reader_relays: usize,
}

impl WorldShape {
    /// A small world: 40 follows over 25 relays, a quarter without lists, two reader relays.
    pub fn small() -> Self {
        Self {
            follows: 40,
            relays: 25,
            list_share: 0.75,
            max_write_relays: 5,
            reader_relays: 2,
        }
    }
}

/// The worlds property tests plan over, with the seed of each: up to 80 follows over up to 40
/// relays, any share of them with lists of up to 6 write relays, one reader relay. The table is
/// [`random_table`] of the two.
pub fn random_worlds() -> impl proptest::strategy::Strategy<Value = (WorldShape, u64)> {
    use proptest::strategy::Strategy;
    (0u64..10_000, 1usize..80, 1usize..40, 0.0f64..1.0).prop_map(
        |(seed, follows, relays, list_share)| {
            let shape = WorldShape {
                follows,
                relays,
                list_share,
                max_write_relays: 6,
                reader_relays: 1,
            };
            (shape, seed)
        },
    )
}

/// A random route table of `shape`, deterministic for `seed`. Relay popularity is skewed
/// (low-numbered relays are picked far more often) as on the real network; some reader relays
/// also appear in lists.
pub fn random_table(shape: WorldShape, seed: u64) -> RouteTable {
    random_builder(shape, seed).0.build()
}

/// [`random_table`] with relay hints ([`crate::hints`]) as well: about half the follows, listed
/// or not, are hinted one to three relays, of every source, some of them relays no list names
/// (`wss://hint{i}.relay.test`) and some already declared. The declared lists are exactly
/// [`random_table`]'s for the same shape and seed.
pub fn random_hinted_table(shape: WorldShape, seed: u64) -> RouteTable {
    let (mut builder, follows) = random_builder(shape, seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0068_696e_7473);
    for pk in &follows {
        if !rng.random_bool(0.5) {
            continue;
        }
        for _ in 0..rng.random_range(1..=3) {
            let url = if rng.random_bool(0.5) {
                format!("wss://hint{}.relay.test", rng.random_range(0..6))
            } else {
                format!(
                    "wss://r{}.relay.test",
                    rng.random_range(0..shape.relays.max(1))
                )
            };
            let source = HintSource::ALL[rng.random_range(0..HintSource::ALL.len())];
            builder.hint(*pk, &url, source);
        }
    }
    builder.build()
}

fn random_builder(shape: WorldShape, seed: u64) -> (RouteTableBuilder, Vec<PublicKey>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let follows: Vec<PublicKey> = (0..shape.follows)
        .map(|i| test_key(seed.wrapping_mul(1_000_003).wrapping_add(i as u64)))
        .collect();
    let reader: Vec<String> = (0..shape.reader_relays)
        .map(|i| format!("wss://r{i}.relay.test"))
        .collect();
    let mut builder = RouteTableBuilder::new(UrlPolicy::default())
        .follows(follows.iter().copied())
        .reader_relays(&reader);
    for pk in &follows {
        if !rng.random_bool(shape.list_share.clamp(0.0, 1.0)) {
            continue;
        }
        let n = rng.random_range(0..=shape.max_write_relays);
        let tags = (0..n)
            .map(|_| {
                // Squaring a uniform draw skews choices toward low-numbered (hub) relays.
                let u: f64 = rng.random();
                let r = ((u * u) * shape.relays as f64) as usize;
                let marker = match rng.random_range(0..10) {
                    0 => Some("read"),
                    1 => Some("write"),
                    _ => None,
                };
                let mut tag = vec!["r".to_string(), format!("wss://r{r}.relay.test")];
                tag.extend(marker.map(str::to_string));
                tag
            })
            .collect();
        builder.add_list(RawRelayList {
            author: *pk,
            created_at: 1,
            tags,
        });
    }
    (builder, follows)
}

/// One way a strategy failed the suite.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The check that failed.
    pub check: String,
    /// What happened.
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.check, self.detail)
    }
}

/// Runs the conformance suite on a strategy config: plan invariants over random worlds and
/// budgets, a label that starts with the registered name, determinism for a seed, and no panic on degenerate inputs (no follows, no lists,
/// budget 0, one relay, no reader relays). Returns every failure; empty means conformant.
pub fn check_strategy(config: &dyn StrategyConfig) -> Vec<Failure> {
    let mut failures = Vec::new();
    let issues: Vec<ConfigIssue> = config.validate();
    if !issues.is_empty() {
        failures.push(Failure {
            check: "validate".into(),
            detail: format!("{issues:?}"),
        });
        return failures;
    }
    let mut fail = |check: &str, detail: String| {
        failures.push(Failure {
            check: check.to_string(),
            detail,
        })
    };

    // Invariants over random worlds and budgets, with a few learned-looking stats; the last
    // worlds also carry relay hints, which a plan may route to and nothing else.
    for world_seed in 0..16u64 {
        let mut shape = WorldShape::small();
        shape.follows = 10 + (world_seed as usize * 7) % 50;
        shape.relays = 3 + (world_seed as usize * 5) % 30;
        let table = if world_seed < 12 {
            random_table(shape, world_seed)
        } else {
            random_hinted_table(shape, world_seed)
        };
        let stats = skewed_stats(&table, world_seed);
        for budget in [0usize, 1, 3, 8, 40] {
            let mut router = Router::new(config, budget);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let plan =
                    router.plan_with(&table, &stats, PlanContext::at(1_000_000).seed(world_seed));
                check_plan(&plan, &table, router.limits())
            }));
            match outcome {
                Err(_) => fail(
                    "invariants",
                    format!("panicked on world {world_seed} budget {budget}"),
                ),
                Ok(v) if !v.is_empty() => fail(
                    "invariants",
                    format!("world {world_seed} budget {budget}: {v:?}"),
                ),
                Ok(_) => {}
            }
        }
    }

    // Named as registered: plans carry the label, which starts with the registered name.
    let label = config.label();
    let named = crate::registry::strategy(config.name()).is_some_and(|d| d.name == config.name());
    let prefixed = label == config.name()
        || label
            .strip_prefix(config.name())
            .is_some_and(|rest| rest.starts_with('+'));
    if !named || !prefixed {
        fail(
            "name",
            format!(
                "label `{label}` does not start with the registered name `{}`",
                config.name()
            ),
        );
    }

    // Determinism: two fresh routers, same seed, same input → same plan, hints or not.
    for table in [
        random_table(WorldShape::small(), 99),
        random_hinted_table(WorldShape::small(), 99),
    ] {
        let stats = skewed_stats(&table, 99);
        let a = Router::new(config, 6).plan_with(&table, &stats, PlanContext::at(5).seed(42));
        let b = Router::new(config, 6).plan_with(&table, &stats, PlanContext::at(5).seed(42));
        if a != b {
            fail(
                "determinism",
                "same seed and input gave different plans".into(),
            );
        }
    }

    // Degenerate inputs must not panic.
    let degenerate: Vec<(&str, RouteTable)> = vec![
        (
            "no follows",
            RouteTable::without_lists(UrlPolicy::default(), [], ["wss://home.test"]),
        ),
        (
            "no lists",
            RouteTable::without_lists(
                UrlPolicy::default(),
                (0..5).map(test_key),
                ["wss://home.test"],
            ),
        ),
        ("one relay", one_relay_table()),
        (
            "no reader relays",
            random_table(
                WorldShape {
                    reader_relays: 0,
                    ..WorldShape::small()
                },
                7,
            ),
        ),
    ];
    for (name, table) in degenerate {
        for budget in [0usize, 1, 20] {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut router = Router::new(config, budget);
                match router.try_plan_with(
                    &table,
                    &DeliveryStats::new(),
                    PlanContext::at(0).seed(1),
                ) {
                    Ok(plan) => check_plan(&plan, &table, router.limits()),
                    // With nobody to carry the residual, only its follows may be uncovered;
                    // the caller (the runtime) then finds other carriers.
                    Err(broken) if table.reader_relays().is_empty() => broken
                        .violations
                        .into_iter()
                        .filter(|v| !matches!(v, crate::Violation::Uncovered(_)))
                        .collect(),
                    Err(broken) => broken.violations,
                }
            }));
            match result {
                Err(_) => fail("degenerate", format!("{name}, budget {budget}: panicked")),
                Ok(v) if !v.is_empty() => {
                    fail("degenerate", format!("{name}, budget {budget}: {v:?}"))
                }
                Ok(_) => {}
            }
        }
    }
    failures
}

/// Parses a full router config and runs [`check_strategy`] on its strategy.
pub fn check_config_toml(text: &str) -> Vec<Failure> {
    match RouterConfig::from_toml(text) {
        Ok(config) => check_strategy(config.strategy.as_ref()),
        Err(err) => vec![Failure {
            check: "config".into(),
            detail: err.to_string(),
        }],
    }
}

fn one_relay_table() -> RouteTable {
    let follows: Vec<PublicKey> = (0..4).map(|i| test_key(500 + i)).collect();
    let mut b = RouteTableBuilder::new(UrlPolicy::default())
        .follows(follows.iter().copied())
        .reader_relays(["wss://home.test"]);
    for pk in &follows {
        b.add_list(RawRelayList {
            author: *pk,
            created_at: 1,
            tags: vec![vec!["r".into(), "wss://only.test".into()]],
        });
    }
    b.build()
}

/// Stats where a third of the relays look reliable, a third unreliable, the rest unknown.
fn skewed_stats(table: &RouteTable, seed: u64) -> DeliveryStats {
    let mut stats = DeliveryStats::new();
    for relay in table.relays() {
        let (alpha, beta) = match (relay.0 as u64 + seed) % 3 {
            0 => (9.0, 2.0),
            1 => (2.0, 9.0),
            _ => continue,
        };
        stats.set(
            table.url(relay),
            crate::stats::RelayStats {
                alpha,
                beta,
                latency_ms: Some(100.0 + relay.0 as f64),
                ..Default::default()
            },
        );
    }
    stats
}

/// Asserts every value of `stats` is usable: what planning may rely on after a load.
pub fn assert_sane(stats: &crate::DeliveryStats) {
    assert!(stats.decay.is_sane(), "{:?}", stats.decay);
    for (url, s) in stats.iter() {
        assert!(s.is_sane(), "{url:?}: {s:?}");
    }
    for (author, a) in stats.authors() {
        assert!(a.is_sane(), "{author}: {a:?}");
    }
}

/// Stands, at the start of a JSON string, for text a JSON value cannot hold (a number out of
/// range, a broken escape); [`raw_json`] puts it back raw.
pub const RAW: &str = "@raw:";

/// `text` (JSON) with every string `"@raw:…"` replaced by its raw contents: `"@raw:1e400"` is
/// `1e400`. For hostile files no JSON value can be.
pub fn raw_json(text: &str) -> String {
    let marker = format!("\"{RAW}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&marker) {
        out.push_str(&rest[..at]);
        let tail = &rest[at + marker.len()..];
        let end = tail.find('"').expect("a raw string ends");
        out.push_str(&tail[..end]);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

//! Hostile configs and stats values: arbitrary text, absurd numbers and durations, wrong types,
//! thousands of unknown keys. Parsing never panics, stays fast and reports a bounded number of
//! problems about a strategy table; stats are always sane after `sanitize`.

use nostr_outbox_core::testkit::assert_sane;
use std::time::{Duration, Instant};

use nostr_outbox_core::serde::{Deserialize, Serialize};
use nostr_outbox_core::stats::{AuthorStats, Decay, PairStats};
use nostr_outbox_core::{ConfigIssue, DeliveryStats, RelayStats, RouterConfig, Selector};
use proptest::prelude::*;

/// A strategy with one field of each kind a real one has: counts, shares, flags, a duration
/// written as text, and a nested table.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
struct HostileProbe {
    #[serde(default)]
    per_author: u32,
    #[serde(default)]
    share: f64,
    #[serde(default)]
    explore: bool,
    #[serde(default)]
    settle: Option<String>,
    #[serde(default)]
    inner: Option<Inner>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(crate = "nostr_outbox_core::serde", deny_unknown_fields)]
struct Inner {
    #[serde(default)]
    margin: f64,
}

/// The probe's own validation, as strategies validate: shares in [0, 1], a duration of whole
/// seconds below a day.
fn validate(probe: &HostileProbe) -> Vec<ConfigIssue> {
    let mut issues = Vec::new();
    if !(0.0..=1.0).contains(&probe.share) {
        issues.push(ConfigIssue::new("share", "must be in [0, 1]"));
    }
    if let Some(settle) = &probe.settle {
        let secs = settle.strip_suffix('s').and_then(|n| n.parse::<u64>().ok());
        if secs.is_none_or(|s| s >= 86_400) {
            issues.push(ConfigIssue::new(
                "settle",
                "must be whole seconds below a day",
            ));
        }
    }
    issues
}

nostr_outbox_core::register_strategy! {
    name: "hostile_probe",
    summary: "a strategy that exists only in the hostile-input tests",
    impl StrategyConfig for HostileProbe {
        fn validate(&self) -> Vec<ConfigIssue> {
            validate(self)
        }
        fn build(&self) -> Box<dyn Selector> {
            unimplemented!("never built in these tests")
        }
    }
}

/// Most problems reported about one strategy table: 20 named keys, one "and N more", and the
/// strategy's own validation.
const MAX_STRATEGY_ISSUES: usize = 20 + 1 + 2;

/// TOML values where a number, flag or text belongs.
fn hostile_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1".to_string()),
        Just("20".to_string()),
        Just(i64::MAX.to_string()),
        Just(i64::MIN.to_string()),
        Just("1e308".to_string()),
        Just("-1e308".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("nan".to_string()),
        Just("0.5".to_string()),
        Just("true".to_string()),
        Just("\"20\"".to_string()),
        Just("\"30s\"".to_string()),
        Just("\"99999999999999999999999999s\"".to_string()),
        Just("\"-5s\"".to_string()),
        Just("\"\\u001b[2J\\u202e\"".to_string()),
        Just("1979-05-27T07:32:00Z".to_string()),
        Just("[1, 2, 3]".to_string()),
        Just("[[[[[[[[[[]]]]]]]]]]".to_string()),
        Just("{ margin = 1.5 }".to_string()),
        Just("{ margin = \"x\", extra = 1 }".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| format!("{x:?}")),
    ]
}

/// Keys: the known ones, unknown ones, quoted ones with escapes and odd unicode.
fn hostile_key(known: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(known).prop_map(str::to_string),
        2 => "[a-z_]{1,12}",
        1 => Just("\"\\u001b]0;title\\u0007\"".to_string()),
        1 => Just("\"ke`y\"".to_string()),
        1 => Just("\"\u{202e}\u{fffd}\u{10ffff}\"".to_string()),
    ]
}

const TOP: &[&str] = &["max_connections", "pool", "url_policy", "strategy"];
const POLICY: &[&str] = &[
    "allow_loopback",
    "allow_private",
    "allow_ip_literals",
    "allow_onion",
    "max_url_len",
    "max_write_relays",
];
const PROBE: &[&str] = &["per_author", "share", "explore", "settle", "inner"];

/// `key = value` lines, keys unique (TOML refuses duplicates, which is tested elsewhere).
fn lines(
    known: &'static [&'static str],
    max: usize,
) -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((hostile_key(known), hostile_value()), 0..max).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        pairs
            .into_iter()
            .filter(|(k, _)| seen.insert(k.clone()))
            .collect()
    })
}

/// A config in the documented shape with hostile values, unknown keys by the thousand and
/// odd strategy types.
fn config_text() -> impl Strategy<Value = String> {
    let strategy_type = prop_oneof![
        6 => Just(Some("\"hostile_probe\"".to_string())),
        1 => Just(Some("\"no_such_strategy\"".to_string())),
        1 => Just(Some("5".to_string())),
        1 => Just(None),
    ];
    (
        lines(&TOP[..2], 4),
        prop::option::of(lines(POLICY, 8)),
        prop::option::of((strategy_type, lines(PROBE, 8), 0usize..3000)),
    )
        .prop_map(|(top, policy, strategy)| {
            let mut text = String::new();
            for (k, v) in top {
                // Tables come last; a top-level key after them would belong to the table.
                if k != "url_policy" && k != "strategy" {
                    text.push_str(&format!("{k} = {v}\n"));
                }
            }
            if let Some(policy) = policy {
                text.push_str("[url_policy]\n");
                for (k, v) in policy {
                    text.push_str(&format!("{k} = {v}\n"));
                }
            }
            if let Some((ty, fields, unknown)) = strategy {
                text.push_str("[strategy]\n");
                if let Some(ty) = ty {
                    text.push_str(&format!("type = {ty}\n"));
                }
                for (k, v) in fields {
                    if k != "type" {
                        text.push_str(&format!("{k} = {v}\n"));
                    }
                }
                for i in 0..unknown {
                    text.push_str(&format!("unknown_{i} = {i}\n"));
                }
            }
            text
        })
}

/// Parses and checks what every outcome must satisfy; returns the issues (empty if it parsed).
fn parse_checked(text: &str) -> Vec<ConfigIssue> {
    let started = Instant::now();
    let result = RouterConfig::from_toml(text);
    let took = started.elapsed();
    // Debug build, a shared machine: generous, but far below what probing every key costs.
    assert!(took < Duration::from_secs(3), "parsing took {took:?}");
    match result {
        Ok(config) => {
            assert!(config.pool.is_none_or(|p| p >= 1));
            Vec::new()
        }
        Err(err) => {
            assert!(
                !err.issues.is_empty(),
                "an error names at least one problem"
            );
            for issue in &err.issues {
                assert!(!issue.message.is_empty(), "{issue:?}");
            }
            let about_strategy = err
                .issues
                .iter()
                .filter(|i| i.key == "strategy" || i.key.starts_with("strategy."))
                .count();
            assert!(
                about_strategy <= MAX_STRATEGY_ISSUES,
                "{about_strategy} issues about the strategy table"
            );
            // Displaying the error must not panic either.
            assert!(!err.to_string().is_empty());
            err.issues
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        parse_checked(&text);
    }

    #[test]
    fn arbitrary_bytes_as_text_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        parse_checked(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn structured_configs_with_hostile_values_parse_or_name_their_problems(text in config_text()) {
        let issues = parse_checked(&text);
        let table: toml::Table = toml::from_str(&text).unwrap_or_default();
        for issue in &issues {
            let top = issue.key.split('.').next().unwrap_or_default();
            // An issue names a key the config holds, a missing `strategy`, or the document.
            prop_assert!(
                issue.key.is_empty() || table.contains_key(top) || top == "strategy",
                "{issue:?} names no key of\n{text}"
            );
        }
    }

    #[test]
    fn absurd_numbers_are_refused_or_kept_exactly(n in any::<i64>(), p in any::<i64>()) {
        let text = format!(
            "max_connections = {n}\npool = {p}\n[strategy]\ntype = \"hostile_probe\"\n"
        );
        let result = RouterConfig::from_toml(&text);
        match (n >= 0, p >= 1) {
            (true, true) => {
                let config = result.unwrap();
                prop_assert_eq!(config.max_connections as i64, n);
                prop_assert_eq!(config.pool.map(|p| p as i64), Some(p));
            }
            _ => {
                let keys: Vec<String> = result.unwrap_err().issues.into_iter().map(|i| i.key).collect();
                prop_assert_eq!(keys.contains(&"max_connections".to_string()), n < 0);
                prop_assert_eq!(keys.contains(&"pool".to_string()), p < 1);
            }
        }
    }
}

#[test]
fn thousands_of_unknown_keys_in_every_table_stay_fast_and_bounded() {
    let mut text = String::new();
    for i in 0..5_000 {
        text.push_str(&format!("top_{i} = {i}\n"));
    }
    text.push_str("[url_policy]\n");
    for i in 0..5_000 {
        text.push_str(&format!("policy_{i} = {i}\n"));
    }
    text.push_str("[strategy]\ntype = \"hostile_probe\"\nshare = 0.5\n");
    let unknown_only = {
        let mut t = text.clone();
        for i in 0..5_000 {
            t.push_str(&format!("k{i} = \"\\u001b[31m{i}\"\n"));
        }
        t
    };
    let issues = parse_checked(&unknown_only);
    let strategy: Vec<&ConfigIssue> = issues
        .iter()
        .filter(|i| i.key.starts_with("strategy"))
        .collect();
    assert_eq!(strategy.len(), 21, "{strategy:#?}");
    assert!(strategy[20].message.contains("4980 more bad keys"));
    assert!(issues.iter().any(|i| i.key.starts_with("url_policy")));

    // Bad values among thousands of unknown keys: probing is bounded, so not every problem is
    // named, but at least one is, quickly.
    let mut mixed = text;
    mixed.push_str("per_author = -3\nsettle = \"99999999999999999999999999s\"\n");
    mixed.push_str("inner = { margin = \"x\" }\n");
    for i in 0..5_000 {
        mixed.push_str(&format!("k{i} = {i}\n"));
    }
    let issues = parse_checked(&mixed);
    let named = issues
        .iter()
        .filter(|i| i.key.starts_with("strategy"))
        .count();
    assert!((1..=MAX_STRATEGY_ISSUES).contains(&named), "{issues:#?}");
}

#[test]
fn deeply_nested_values_are_refused_without_overflowing_the_stack() {
    for depth in [100, 1_000, 100_000] {
        let arrays = format!("x = {}{}\n", "[".repeat(depth), "]".repeat(depth));
        let tables = format!("x = {}{}\n", "{ a = ".repeat(depth), "}".repeat(depth));
        for text in [arrays, tables] {
            let full = format!("[strategy]\ntype = \"hostile_probe\"\n{text}");
            // On a thread with a small stack: a recursive parser without a depth limit
            // would overflow it.
            std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || {
                    parse_checked(&full);
                })
                .unwrap()
                .join()
                .expect("no stack overflow");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stats values.

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(0.0),
        Just(1.0),
        Just(1.0e6),
        Just(1.0e6 + 1.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(1.0e7),
        any::<f64>(),
        0.0..2.0e6,
    ]
}

fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()]
}

fn relay_stats() -> impl Strategy<Value = RelayStats> {
    (
        (any_f64(), any_f64(), prop::option::of(any_f64())),
        (any_u64(), any_u64(), any_u64(), any_u64()),
        (any_f64(), any_f64(), any_f64(), any_f64(), any_f64()),
    )
        .prop_map(
            |(
                (alpha, beta, latency_ms),
                (updated_at, session, asked, failures),
                (live_alpha, live_beta, kept_alpha, kept_beta, depth_secs),
            )| RelayStats {
                alpha,
                beta,
                latency_ms,
                updated_at,
                session,
                asked,
                failures,
                live_alpha,
                live_beta,
                kept_alpha,
                kept_beta,
                depth_secs,
            },
        )
}

fn author_stats() -> impl Strategy<Value = AuthorStats> {
    (
        any_f64(),
        any_u64(),
        (any_u64(), any_u64(), any_f64()),
        prop::collection::hash_map("\\PC{0,12}", (any_f64(), any_f64()), 0..4),
    )
        .prop_map(
            |(volume, updated_at, (first, last, probed_secs), relays)| AuthorStats {
                volume,
                updated_at,
                first,
                last,
                probed_secs,
                relays: relays
                    .into_iter()
                    .map(|(url, (hits, misses))| (url, PairStats { hits, misses }))
                    .collect(),
            },
        )
}

fn decay() -> impl Strategy<Value = Decay> {
    any_f64().prop_flat_map(|factor| {
        prop_oneof![
            Just(Decay::Hourly { factor }),
            Just(Decay::PerSession { factor })
        ]
    })
}

fn author_key(n: u8) -> nostr::key::PublicKey {
    let mut sk = [5u8; 32];
    sk[31] = n;
    nostr::key::Keys::new(nostr::key::SecretKey::from_slice(&sk).unwrap()).public_key()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn stats_stay_sane_whatever_is_set(
        decay in decay(),
        relays in prop::collection::vec(("\\PC{0,16}", relay_stats()), 0..6),
        authors in prop::collection::vec((0u8..4, author_stats()), 0..4),
        session in any_u64(),
        now in any_u64(),
        latency in any_f64(),
    ) {
        let mut stats = DeliveryStats::with_decay(decay);
        stats.set_session(session);
        for (url, s) in &relays {
            stats.set(url.clone(), *s);
        }
        for (n, a) in &authors {
            stats.set_author(author_key(*n), a.clone());
        }
        // `set` and `set_author` already refuse absurd values; only the decay may be off.
        prop_assert!(stats.sanitize() <= 1);
        assert_sane(&stats);
        prop_assert_eq!(stats.sanitize(), 0);

        // Reading, decaying and learning from sane stats keeps them sane, at any clock.
        stats.begin_session();
        for (url, _) in &relays {
            prop_assert!(stats.get_at(url, now).is_sane());
            stats.record_latency(url, latency, now);
        }
        assert_sane(&stats);
    }

    #[test]
    fn deserialised_stats_are_sane_after_sanitize(
        decay in decay(),
        relays in prop::collection::vec(("\\PC{0,16}", relay_stats()), 0..6),
    ) {
        // What a store might hand over: values straight from a file, not through `set`.
        let mut map = serde_json::Map::new();
        for (url, s) in &relays {
            map.insert(url.clone(), serde_json::to_value(s).unwrap());
        }
        let value = serde_json::json!({
            "relays": map,
            "decay": serde_json::to_value(decay).unwrap(),
        });
        // Non-finite floats serialise as null, which an f64 field refuses: an error, not a panic.
        if let Ok(mut stats) = serde_json::from_value::<DeliveryStats>(value) {
            stats.sanitize();
            assert_sane(&stats);
            prop_assert_eq!(stats.sanitize(), 0);
        }
    }
}

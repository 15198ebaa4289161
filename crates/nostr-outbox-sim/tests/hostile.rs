//! Hostile world files, plan files and strategy configs: arbitrary bytes, and valid files with
//! one part made hostile (huge counts, negative numbers, wrong types, deep nesting, escapes and
//! odd unicode, missing fields). Reading never panics, answers with a world or an error that
//! names what is wrong, and never allocates by a count it was told: a huge `sessions` is
//! refused, not allocated. What reads successfully is usable: it routes, plans and scores.

use nostr_outbox_core::testkit::{raw_json, RAW};
use std::time::{Duration, Instant};

use nostr_outbox_core::{PlanContext, RouterConfig, UrlPolicy};
use nostr_outbox_sim::{score, Asks, PlanFile, SimWorld, Window};
use nostr_outbox_world::{generate_with, World, WorldError, WorldModel, MAX_SESSIONS};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

/// A small valid world: a handful of follows, relays and events over two sessions.
fn tiny_world() -> World {
    let model = WorldModel {
        follows: 6,
        sessions: 2,
        hubs: 3,
        dead_hubs: 1,
        paid_hubs: 0,
        mid_relays_base: 2,
        follows_per_mid_relay: 3,
        history_days: 40,
        rate_cap_per_day: 0.5,
        reader_relays: 2,
        contact_hint_share: 0.5,
        pointer_hint_share: 0.5,
        seen_on_hint_share: 0.5,
        ..WorldModel::default()
    };
    generate_with(&model, "tiny", 3).expect("a valid model")
}

fn render(value: &Value) -> String {
    raw_json(&serde_json::to_string(value).unwrap())
}

fn raw(text: &str) -> Value {
    json!(format!("{RAW}{text}"))
}

/// Values a field may hold in a hostile file.
fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1)),
        Just(json!(u32::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(MAX_SESSIONS + 1)),
        Just(json!(300_000_000u64)),
        Just(json!(1.5)),
        Just(json!(1.0e300)),
        Just(raw("1e400")),
        Just(raw("-0")),
        Just(raw("123456789012345678901234567890")),
        Just(json!(null)),
        Just(json!(true)),
        Just(json!("")),
        Just(json!("wss://\u{1b}[2J\u{1b}]0;pwned\u{7}.example")),
        Just(json!(
            "wss://evil\u{202e}elpmaxe.com/\u{0}\u{fffd}\u{10ffff}"
        )),
        Just(json!("x".repeat(10_000))),
        Just(json!("f".repeat(64))),
        Just(json!([])),
        Just(json!([true, false, true])),
        Just(json!({})),
        Just(json!({"up": [true], "max_limit": 0})),
        Just(raw(&format!("{}{}", "[".repeat(200), "]".repeat(200)))),
        Just(raw(&format!(
            "{}1{}",
            "{\"a\":".repeat(200),
            "}".repeat(200)
        ))),
        "\\PC{0,20}".prop_map(Value::String),
        any::<i64>().prop_map(|n| json!(n)),
    ]
}

/// One change to a valid file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the value at the path picked by the choices.
    Replace(Vec<prop::sample::Index>, Value),
    /// Remove the field or element at the path.
    Remove(Vec<prop::sample::Index>),
    /// Add an unknown field next to the path's value, or an extra element.
    Insert(Vec<prop::sample::Index>, String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let path = prop::collection::vec(any::<prop::sample::Index>(), 1..6);
    prop_oneof![
        4 => (path.clone(), hostile_value()).prop_map(|(p, v)| Mutation::Replace(p, v)),
        2 => path.clone().prop_map(Mutation::Remove),
        1 => (path, "[a-z_]{1,8}", hostile_value()).prop_map(|(p, k, v)| Mutation::Insert(p, k, v)),
    ]
}

/// The container holding the value a path leads to, walking at most `path.len()` levels into
/// objects and arrays.
fn parent_of<'v>(
    value: &'v mut Value,
    path: &[prop::sample::Index],
) -> Option<(&'v mut Value, usize)> {
    let (last, walk) = path.split_last()?;
    let mut at = value;
    for step in walk {
        let len = match &*at {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => break,
        };
        if len == 0 {
            break;
        }
        let i = step.index(len);
        let child_is_container = match &*at {
            Value::Object(m) => m
                .values()
                .nth(i)
                .is_some_and(|c| c.is_object() || c.is_array()),
            Value::Array(a) => a[i].is_object() || a[i].is_array(),
            _ => false,
        };
        if !child_is_container {
            break;
        }
        at = match at {
            Value::Object(m) => m.values_mut().nth(i).unwrap(),
            Value::Array(a) => &mut a[i],
            _ => unreachable!(),
        };
    }
    let len = match &*at {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => return None,
    };
    (len > 0).then(|| (at, last.index(len)))
}

fn apply(value: &mut Value, m: &Mutation) {
    match m {
        Mutation::Replace(path, v) => {
            if let Some((parent, i)) = parent_of(value, path) {
                match parent {
                    Value::Object(map) => *map.values_mut().nth(i).unwrap() = v.clone(),
                    Value::Array(a) => a[i] = v.clone(),
                    _ => {}
                }
            }
        }
        Mutation::Remove(path) => {
            if let Some((parent, i)) = parent_of(value, path) {
                match parent {
                    Value::Object(map) => {
                        let key = map.keys().nth(i).unwrap().clone();
                        map.remove(&key);
                    }
                    Value::Array(a) => {
                        a.remove(i);
                    }
                    _ => {}
                }
            }
        }
        Mutation::Insert(path, key, v) => {
            if let Some((parent, _)) = parent_of(value, path) {
                match parent {
                    Value::Object(map) => {
                        map.insert(key.clone(), v.clone());
                    }
                    Value::Array(a) => a.push(v.clone()),
                    _ => {}
                }
            }
        }
    }
}

/// Reads `text` as a world and checks what every outcome must satisfy.
fn read_checked(text: &[u8]) -> Result<World, String> {
    let started = Instant::now();
    let result = World::read(text);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    match result {
        Ok(world) => {
            check_world(&world);
            Ok(world)
        }
        Err(err) => {
            let message = err.to_string();
            assert!(message.starts_with("world file"), "{message}");
            if let WorldError::Invalid { field, message } = &err {
                assert!(!field.is_empty() && !message.is_empty(), "{err:?}");
            }
            Err(message)
        }
    }
}

/// A world that read is consistent and usable: sizes within bounds, ids in range, a canonical
/// round trip, a route table, a plan and a score.
fn check_world(world: &World) {
    assert!(world.sessions <= MAX_SESSIONS);
    for r in world.relays() {
        if r.exists {
            assert_eq!(r.up.len(), world.sessions as usize, "{}", r.url);
        } else {
            assert!(r.up.is_empty());
        }
        assert_ne!(r.max_limit, Some(0));
    }
    for e in world.events() {
        assert!((e.author as usize) < world.follows.len());
        for &r in world.event_relays(e) {
            assert!((r as usize) < world.relays().len());
        }
    }
    let again = World::from_json(&world.to_json()).expect("a world read is a world written");
    assert_eq!(&again, world, "canonical round trip");

    let sim = SimWorld::new(world.clone());
    let mut router = nostr_outbox_core::Router::from_toml(
        "max_connections = 4\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n",
    )
    .unwrap();
    // A world whose reader has no relay leaves the residual to nobody: the plan says so (its
    // follows are uncovered), it never panics.
    let plan_on = |router: &mut nostr_outbox_core::Router,
                   table: &nostr_outbox_core::RouteTable| {
        let ctx = nostr_outbox_core::PlanContext::at(0).seed(1);
        match router.try_plan_with(table, &nostr_outbox_core::DeliveryStats::new(), ctx) {
            Ok(plan) => plan,
            Err(broken) if table.reader_relays().is_empty() => *broken.plan,
            Err(broken) => panic!("{broken}"),
        }
    };
    let plan = plan_on(&mut router, &sim.table);
    let asks = Asks::from_plan(&sim, &plan);
    // Whatever the hints say, a plan over them holds its invariants (but for the residual).
    let hinted = sim.hinted_table(&nostr_outbox_core::DeliveryStats::new());
    let mut recall = nostr_outbox_core::Router::from_toml(
        "max_connections = 4\n[strategy]\ntype = \"recall\"\n",
    )
    .unwrap();
    let over_hints = plan_on(&mut recall, &hinted);
    let broken: Vec<_> = nostr_outbox_core::check_plan(&over_hints, &hinted, recall.limits())
        .into_iter()
        .filter(|v| !matches!(v, nostr_outbox_core::Violation::Uncovered(_)))
        .collect();
    assert!(broken.is_empty(), "{broken:?}");
    for session in [0, world.sessions, u32::MAX] {
        let scored = score(&sim, &asks, session, &Window::ALL);
        for w in Window::ALL {
            if let Some(s) = scored.window(w) {
                if let Some(r) = s.declared() {
                    assert!((0.0..=1.0).contains(&r), "{r}");
                }
            }
        }
    }
}

/// `cases` random inputs, none of them persisted: a failure shows its input in the report.
fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_checked(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_prefix_never_panic(
        cut in any::<prop::sample::Index>(),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let text = tiny_world().to_json();
        let mut bytes = text.as_bytes()[..cut.index(text.len())].to_vec();
        bytes.extend(tail);
        prop_assert!(read_checked(&bytes).is_err() || bytes.len() >= text.len());
    }

    #[test]
    fn mutated_worlds_read_or_name_the_problem(mutations in prop::collection::vec(mutation(), 1..4)) {
        nostr_outbox_strategies::link();
        let world = tiny_world();
        let mut value: Value = serde_json::from_str(&world.to_json()).unwrap();
        for m in &mutations {
            apply(&mut value, m);
        }
        let _ = read_checked(render(&value).as_bytes());
    }
}

#[test]
fn the_mutations_reach_both_outcomes() {
    nostr_outbox_strategies::link();
    let world = tiny_world();
    let original: Value = serde_json::from_str(&world.to_json()).unwrap();
    let mut runner = TestRunner::deterministic();
    let (mut ok, mut err) = (0, 0);
    for _ in 0..150 {
        let m = proptest::strategy::ValueTree::current(&mutation().new_tree(&mut runner).unwrap());
        let mut value = original.clone();
        apply(&mut value, &m);
        match read_checked(render(&value).as_bytes()) {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
    }
    assert!(ok >= 15 && err >= 15, "{ok} read, {err} refused");
}

#[test]
fn the_tiny_world_is_small_and_valid() {
    assert!(!tiny_world().hints().is_empty(), "hints are fuzzed too");
    nostr_outbox_strategies::link();
    let world = tiny_world();
    let text = world.to_json();
    assert!(text.len() < 200_000, "{} bytes", text.len());
    assert!(!world.events().is_empty());
    read_checked(text.as_bytes()).unwrap();
}

#[test]
fn huge_counts_are_refused_before_anything_is_allocated() {
    let world = tiny_world();
    let mut value: Value = serde_json::from_str(&world.to_json()).unwrap();
    for sessions in [
        json!(MAX_SESSIONS + 1),
        json!(u32::MAX),
        json!(u64::MAX),
        raw("1e300"),
        raw("18446744073709551616"),
        json!(-1),
        json!("10000"),
    ] {
        value["sessions"] = sessions.clone();
        let started = Instant::now();
        let err = read_checked(render(&value).as_bytes()).expect_err("refused");
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(err.contains("sessions"), "{sessions}: {err}");
    }
    // An `up` array longer than any world may be, streamed: refused as it grows.
    let long = format!(
        r#"{{"format": "outbox-world/1", "now": 1, "relay_lists": [], "events": [],
            "reader": {{"pubkey": "{}", "follows": [], "relays": []}},
            "relays": {{"wss://a.example": {{"up": [{}true]}}}}, "sessions": 1}}"#,
        world.reader.to_hex(),
        "true,".repeat(MAX_SESSIONS as usize + 5)
    );
    let err = read_checked(long.as_bytes()).expect_err("refused");
    assert!(err.contains(&MAX_SESSIONS.to_string()), "{err}");
}

#[test]
fn deep_nesting_never_overflows_the_stack() {
    let world = tiny_world();
    let text = world.to_json();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    // Unknown fields are skipped without recursing (and so may nest deeply); a value that is
    // read is refused past the parser's depth limit.
    let cases = [
        (deep.clone(), true),
        (text.replacen('{', &format!("{{\"name\": {deep},"), 1), true),
        (
            text.replacen('{', &format!("{{\"relay_lists\": {deep},"), 1),
            true,
        ),
        (
            text.replacen('{', &format!("{{\"junk\": {deep},"), 1),
            false,
        ),
        (
            text.replacen('{', &format!("{{\"junk\": {deep_objects},"), 1),
            false,
        ),
    ];
    for (case, refused) in cases {
        // A small stack: a recursive parser without a depth limit would overflow it.
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                let read = read_checked(case.as_bytes());
                assert_eq!(read.is_err(), refused, "{:?}", read.err());
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
    }
}

// ---------------------------------------------------------------------------------------------
// Plan files.

fn valid_plan_file(world: &World) -> String {
    nostr_outbox_strategies::link();
    let sim = SimWorld::new(world.clone());
    let mut router = nostr_outbox_core::Router::from_toml(
        "max_connections = 4\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n",
    )
    .unwrap();
    let plan = router.plan(&sim.table, 1);
    PlanFile::from_plan(&plan, &sim.table, 0).to_json()
}

/// Reads a plan file; one that reads scores against the world without panicking.
fn plan_checked(text: &str, sim: &SimWorld) {
    match PlanFile::from_json(text) {
        Ok(file) => {
            assert_eq!(file.format, nostr_outbox_sim::PLAN_FORMAT);
            assert!(
                file.disclosure() >= file.relays.iter().filter(|r| !r.authors.is_empty()).count()
            );
            if let Ok(asks) = Asks::from_plan_file(sim, &file) {
                let _ = score(sim, &asks, file.session, &Window::ALL);
            }
        }
        Err(err) => assert!(err.to_string().starts_with("plan file"), "{err}"),
    }
}

proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn arbitrary_plan_files_never_panic(text in "\\PC{0,300}") {
        let sim = SimWorld::new(tiny_world());
        plan_checked(&text, &sim);
    }

    #[test]
    fn mutated_plan_files_read_or_name_the_problem(mutations in prop::collection::vec(mutation(), 1..4)) {
        let world = tiny_world();
        let mut value: Value = serde_json::from_str(&valid_plan_file(&world)).unwrap();
        for m in &mutations {
            apply(&mut value, m);
        }
        plan_checked(&render(&value), &SimWorld::new(world));
    }
}

// ---------------------------------------------------------------------------------------------
// Configs of the real strategies: absurd values must be refused, or plan and score.

/// TOML values where a strategy's number, share, flag or duration belongs.
fn hostile_toml_value() -> impl Strategy<Value = toml::Value> {
    use toml::Value as T;
    prop_oneof![
        Just(T::Integer(0)),
        Just(T::Integer(-1)),
        Just(T::Integer(1)),
        Just(T::Integer(64)),
        Just(T::Integer(65)),
        Just(T::Integer(i64::MAX)),
        Just(T::Integer(i64::MIN)),
        Just(T::Float(f64::NAN)),
        Just(T::Float(f64::INFINITY)),
        Just(T::Float(-0.5)),
        Just(T::Float(0.5)),
        Just(T::Float(1.0e308)),
        Just(T::Boolean(true)),
        Just(T::String("30s".into())),
        Just(T::String("0s".into())),
        Just(T::String("18446744073709551615s".into())),
        Just(T::String("99999999999999999999years".into())),
        Just(T::String("-5s".into())),
        Just(T::String("\u{1b}[2J\u{202e}".into())),
        Just(T::Array(vec![T::Integer(1)])),
        Just(T::Table(toml::Table::new())),
        any::<i64>().prop_map(T::Integer),
        (0.0f64..10.0).prop_map(T::Float),
    ]
}

fn strategy_names() -> Vec<&'static str> {
    nostr_outbox_strategies::link();
    nostr_outbox_core::registry::strategies()
        .iter()
        .map(|d| d.name)
        .collect()
}

/// Each registered strategy's example table with some values made hostile and unknown keys
/// added, as a whole config with a hostile budget.
fn strategy_config() -> impl Strategy<Value = String> {
    (
        prop::sample::select(strategy_names()),
        prop::collection::vec((any::<prop::sample::Index>(), hostile_toml_value()), 0..4),
        0usize..2000,
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(20),
            Just(1_000_000),
            Just(i64::MAX)
        ],
    )
        .prop_map(|(name, changes, unknown, budget)| {
            let descriptor = nostr_outbox_core::registry::strategy(name).unwrap();
            let mut table = descriptor.example_table().expect("examples are valid");
            let keys: Vec<String> = table.keys().filter(|k| *k != "type").cloned().collect();
            for (at, value) in changes {
                if !keys.is_empty() {
                    let key = &keys[at.index(keys.len())];
                    // Into a nested table (a scorer, an inner strategy) when there is one.
                    match table.get_mut(key) {
                        Some(toml::Value::Table(inner)) if !inner.is_empty() => {
                            let inner_keys: Vec<String> =
                                inner.keys().filter(|k| *k != "type").cloned().collect();
                            if let Some(k) = inner_keys.get(at.index(inner_keys.len().max(1))) {
                                inner.insert(k.clone(), value);
                            }
                        }
                        _ => {
                            table.insert(key.clone(), value);
                        }
                    }
                }
            }
            for i in 0..unknown {
                table.insert(format!("unknown_{i}"), toml::Value::Integer(i as i64));
            }
            let mut top = toml::Table::new();
            top.insert("max_connections".into(), toml::Value::Integer(budget));
            top.insert("strategy".into(), toml::Value::Table(table));
            toml::to_string(&top).unwrap()
        })
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn hostile_strategy_configs_are_refused_or_plan_validly(text in strategy_config()) {
        let started = Instant::now();
        let parsed = RouterConfig::from_toml(&text);
        prop_assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        match parsed {
            Err(err) => {
                prop_assert!(err.issues.len() <= 1 + 21 + 8, "{err}");
            }
            Ok(config) => {
                let sim = SimWorld::with_policy(tiny_world(), &UrlPolicy::default());
                let mut router = nostr_outbox_core::Router::from_config(&config);
                let mut stats = nostr_outbox_core::DeliveryStats::new();
                for session in 0..2u32 {
                    let plan = router
                        .try_plan_with(&sim.table, &stats, PlanContext::at(sim.world.now).seed(u64::from(session)))
                        .unwrap_or_else(|broken| panic!("a valid config planned badly: {broken}\n{text}"));
                    let asks = Asks::from_plan(&sim, &plan);
                    let observed = nostr_outbox_sim::observe(&sim, &asks, session, 0);
                    observed.record(&sim, &mut stats, sim.world.now);
                }
            }
        }
    }
}

//! `applesauce` and `welshman` against the plans the real npm packages make for the committed
//! world (`fixtures/`, written by `fixtures/gen.mjs`): relay → set of follows, exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use nostr_outbox_core::testkit::test_key;
use nostr_outbox_core::{
    check_plan, AuthorId, DeliveryStats, Limits, Plan, PlanInput, RawRelayList, RouteTable,
    RouteTableBuilder, RouterConfig, Selection, UrlPolicy,
};
use rand::RngCore;
use serde_json::Value;

/// relay URL (canonical) → follow labels.
type Routes = BTreeMap<String, BTreeSet<String>>;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

fn tags(v: &Value) -> Vec<Vec<String>> {
    v.as_array().expect("tags").iter().map(strings).collect()
}

/// The key standing for a fixture label: `authorNN` is follow NN, the reader is 1000.
fn key_of(label: &str) -> nostr::key::PublicKey {
    match label.strip_prefix("author") {
        Some(n) => test_key(n.parse().expect("authorNN")),
        None => test_key(1000),
    }
}

/// The world's route table with `follows` (labels, in this order) as the follows.
fn table(world: &Value, follows: &[String]) -> RouteTable {
    let reader = &world["reader"];
    let mut b = RouteTableBuilder::new(UrlPolicy::default())
        .follows(follows.iter().map(|l| key_of(l)))
        .reader_list(RawRelayList {
            author: key_of(reader["pubkey"].as_str().expect("reader pubkey")),
            created_at: 1,
            tags: tags(&reader["tags"]),
        });
    for (label, list) in world["lists"].as_object().expect("lists") {
        b.add_list(RawRelayList {
            author: key_of(label),
            created_at: 1,
            tags: tags(list),
        });
    }
    b.build()
}

fn canonical(url: &str) -> String {
    UrlPolicy::default()
        .canonicalize(url)
        .unwrap_or_else(|why| panic!("{url}: {why:?}"))
}

/// The `Math.random` a welshman fixture ran with, as an RNG whose `random::<f64>()` gives the
/// same numbers: held at 0.5, or the mulberry32 stream of a seed (its 32-bit outputs placed in
/// the top bits, so the f64 is exactly `output / 2^32`).
enum JsRandom {
    Half,
    Mulberry32(u32),
}

impl JsRandom {
    fn from_fixture(v: &Value) -> Self {
        if v.as_f64() == Some(0.5) {
            return JsRandom::Half;
        }
        let seed = v["mulberry32"]
            .as_u64()
            .expect("random: 0.5 or {mulberry32: seed}");
        JsRandom::Mulberry32(u32::try_from(seed).expect("a 32-bit seed"))
    }
}

impl RngCore for JsRandom {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        match self {
            JsRandom::Half => 1 << 63,
            JsRandom::Mulberry32(a) => {
                *a = a.wrapping_add(0x6d2b_79f5);
                let mut t = *a;
                t = (t ^ (t >> 15)).wrapping_mul(t | 1);
                t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
                u64::from(t ^ (t >> 14)) << 32
            }
        }
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// Runs `toml`'s strategy on `table` with `budget`, checks the plan's invariants and returns
/// its routes by URL and label.
fn run(
    toml: &str,
    table: &RouteTable,
    budget: usize,
    labels: &[String],
    rng: &mut JsRandom,
) -> Routes {
    // Names the crate so the linker keeps its registrations.
    std::hint::black_box(nostr_outbox_reference::DEFAULT_WELSHMAN_RELAYS_PER_CHUNK);
    let config = RouterConfig::from_toml(toml).expect("config");
    let mut selector = config.strategy.build();
    let stats = DeliveryStats::new();
    let input = PlanInput::new(table, budget, &stats, 0);
    let selection: Selection = selector.select(&input, rng);
    let plan = Plan::from_selection(table, &config.strategy.label(), selection);
    let limits = Limits {
        max_connections: budget,
        pool: None,
        per_author_cap: selector.per_author_cap(),
    };
    let violations = check_plan(&plan, table, limits);
    assert!(violations.is_empty(), "{toml}: {violations:?}");
    plan.routed()
        .iter()
        .map(|a| {
            let authors = a
                .authors
                .iter()
                .map(|&AuthorId(i)| labels[i as usize].clone())
                .collect();
            (table.url(a.relay).to_string(), authors)
        })
        .collect()
}

fn show(routes: &Routes) -> String {
    routes
        .iter()
        .map(|(r, a)| format!("{r} ({}): {a:?}", a.len()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn applesauce_matches_select_optimal_relays_exactly() {
    let world = fixture("world.json");
    let expected = fixture("applesauce.json");
    assert_eq!(expected["package"], "applesauce-core@6.2.0");
    let follows = strings(&world["follows"]);
    let t = table(&world, &follows);
    let cases = expected["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 4);
    for case in cases {
        let options = &case["options"];
        let budget = options["maxConnections"].as_u64().expect("maxConnections") as usize;
        let cap = options.get("maxRelaysPerUser").and_then(Value::as_u64);
        let toml = match cap {
            Some(n) => format!("[strategy]\ntype = \"applesauce\"\nmax_relays_per_user = {n}\n"),
            None => "[strategy]\ntype = \"applesauce\"\n".to_string(),
        };
        let want: Routes = case["plan"]
            .as_object()
            .expect("plan")
            .iter()
            .map(|(url, authors)| (canonical(url), strings(authors).into_iter().collect()))
            .collect();
        assert_eq!(want.len(), budget, "the fixture fills the budget");
        let got = run(&toml, &t, budget, &follows, &mut JsRandom::Half);
        assert!(
            got == want,
            "{options}\nrust:\n{}\nnpm:\n{}",
            show(&got),
            show(&want)
        );
    }
}

/// welshman's selections projected onto the plan model: each chunk's relay is asked about the
/// chunk's follows who write there. The `user` selection (the whole filter on the reader's
/// relays) is the core's residual, not part of the selection.
fn welshman_routes(case: &Value, t: &RouteTable, labels: &[String]) -> Routes {
    let mut routes = Routes::new();
    for s in case["selections"].as_array().expect("selections") {
        if s["rule"] != "authors" {
            continue;
        }
        for url in strings(&s["relays"]) {
            let url = canonical(&url);
            let Some(relay) = t.relay_id(&url) else {
                continue;
            };
            for label in strings(&s["authors"]) {
                let author =
                    AuthorId(labels.iter().position(|l| *l == label).expect("a follow") as u32);
                if t.writes_to(author, relay) {
                    routes.entry(url.clone()).or_default().insert(label);
                }
            }
        }
    }
    routes
}

#[test]
fn welshman_matches_get_filter_selections_exactly() {
    let world = fixture("world.json");
    let expected = fixture("welshman.json");
    assert_eq!(expected["package"], "@welshman/router@0.8.15");
    let cases = expected["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 9);
    for case in cases {
        let mut rng = JsRandom::from_fixture(&case["random"]);
        let order = strings(&case["follows"]);
        let t = table(&world, &order);
        let want = welshman_routes(case, &t, &order);
        assert!(!want.is_empty());
        // welshman has no connection budget: give every relay.
        let got = run(
            "[strategy]\ntype = \"welshman\"\n",
            &t,
            t.relay_count(),
            &order,
            &mut rng,
        );
        assert!(
            got == want,
            "{} follows, random {}\nrust:\n{}\nnpm:\n{}",
            order.len(),
            case["random"],
            show(&got),
            show(&want)
        );
    }
}

#[test]
fn welshman_drops_new_relays_once_the_budget_is_spent() {
    let world = fixture("world.json");
    let follows = strings(&world["follows"]);
    let t = table(&world, &follows);
    let toml = "[strategy]\ntype = \"welshman\"\n";
    let all = run(toml, &t, t.relay_count(), &follows, &mut JsRandom::Half);
    let two = run(toml, &t, 2, &follows, &mut JsRandom::Half);
    // The first chunk's two best relays are kept, with the writers they had unbounded.
    let expected = fixture("welshman.json");
    let first = &expected["cases"][0]["selections"][0];
    assert_eq!(first["rule"], "authors");
    let kept: BTreeSet<String> = strings(&first["relays"])[..2]
        .iter()
        .map(|u| canonical(u))
        .collect();
    assert_eq!(two.keys().cloned().collect::<BTreeSet<_>>(), kept);
    for (url, authors) in &two {
        assert_eq!(authors, &all[url], "{url}");
    }
}

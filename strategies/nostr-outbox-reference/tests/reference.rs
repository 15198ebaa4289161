//! The reference strategies: behaviour on hand-made tables and the conformance suite.

use nostr_outbox_core::testkit::{check_config_toml, relay_list, table_with_lists};
use nostr_outbox_core::{
    AuthorId, DeliveryStats, PlanInput, RngCore, RouteTable, Router, RouterConfig, Selector,
};

/// Names the crate so the linker keeps its registrations.
fn link() {
    std::hint::black_box(nostr_outbox_reference::DEFAULT_NDK_PER_AUTHOR);
}

fn table(lists: &[&[&str]]) -> RouteTable {
    let lists = lists
        .iter()
        .enumerate()
        .map(|(i, r)| relay_list(i as u64, r));
    table_with_lists(lists.len() as u64, lists)
}

fn urls(t: &RouteTable, plan: &nostr_outbox_core::Plan) -> Vec<(String, Vec<u32>)> {
    plan.routed()
        .iter()
        .map(|a| {
            (
                t.url(a.relay).to_string(),
                a.authors.iter().map(|x| x.0).collect(),
            )
        })
        .collect()
}

#[test]
fn direct_keeps_the_most_popular_relays_with_all_their_writers() {
    link();
    let t = table(&[
        &["wss://a.example", "wss://b.example", "wss://c.example"],
        &["wss://a.example", "wss://b.example"],
        &["wss://a.example", "wss://d.example"],
    ]);
    let mut r = Router::from_toml("max_connections = 2\n[strategy]\ntype = \"direct\"\n").unwrap();
    let plan = r.plan(&t, 1);
    assert_eq!(
        urls(&t, &plan),
        [
            ("wss://a.example".to_string(), vec![0, 1, 2]),
            ("wss://b.example".to_string(), vec![0, 1]),
        ]
    );
    assert!(plan.residual().is_empty());
    let mut unbounded =
        Router::from_toml("max_connections = 100\n[strategy]\ntype = \"direct\"\n").unwrap();
    assert_eq!(unbounded.plan(&t, 1).routed().len(), 4);
}

#[test]
fn ndk_prefers_chosen_relays_and_caps_per_author() {
    link();
    let t = table(&[
        &["wss://x.example", "wss://a.example", "wss://b.example"],
        &["wss://c.example", "wss://a.example", "wss://b.example"],
        &["wss://x.example", "wss://c.example"],
    ]);
    let mut r =
        Router::from_toml("max_connections = 20\n[strategy]\ntype = \"ndk_priority\"\n").unwrap();
    let plan = r.plan(&t, 1);
    // a and b are most popular (2 writers each, ties by URL): author 0 takes a, b; author 1
    // reuses a, b; author 2 has neither chosen, so it takes the most popular of its own.
    assert_eq!(
        urls(&t, &plan),
        [
            ("wss://a.example".to_string(), vec![0, 1]),
            ("wss://b.example".to_string(), vec![0, 1]),
            ("wss://c.example".to_string(), vec![2]),
            ("wss://x.example".to_string(), vec![2]),
        ]
    );
    for a in t.authors() {
        assert!(plan.asked(a).len() <= 2, "{a}");
    }
    let mut tight =
        Router::from_toml("max_connections = 2\n[strategy]\ntype = \"ndk_priority\"\n").unwrap();
    let plan = tight.plan(&t, 1);
    assert_eq!(plan.routed().len(), 2);
    assert_eq!(plan.residual(), &[AuthorId(2)]);
}

#[test]
fn all_pass_the_conformance_suite() {
    link();
    for toml in [
        "[strategy]\ntype = \"direct\"\n",
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 2\n",
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 1\n",
        "[strategy]\ntype = \"applesauce\"\n",
        "[strategy]\ntype = \"applesauce\"\nmax_relays_per_user = 1\n",
        "[strategy]\ntype = \"applesauce\"\nmax_relays_per_user = 3\n",
        "[strategy]\ntype = \"welshman\"\n",
        "[strategy]\ntype = \"welshman\"\nauthors_per_chunk = 2\nmax_chunks = 3\nrelays_per_chunk = 1\n",
    ] {
        let failures = check_config_toml(toml);
        assert!(failures.is_empty(), "{toml}: {failures:?}");
    }
}

/// Hands out the given uniform draws (as `random::<f64>()` reads them), then zeros.
struct Draws(Vec<f64>);

impl RngCore for Draws {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn next_u64(&mut self) -> u64 {
        let u = if self.0.is_empty() {
            0.0
        } else {
            self.0.remove(0)
        };
        ((u * (1u64 << 53) as f64) as u64) << 11
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        dst.fill(0);
    }
}

#[test]
fn welshman_damps_popularity_with_a_log() {
    link();
    // h has 4 writers, l one; one chunk, so the reader's relay joins at 0.2 (seen last).
    let h: &[&str] = &["wss://h.example"];
    let t = table(&[h, h, h, h, &["wss://l.example"]]);
    let config =
        RouterConfig::from_toml("[strategy]\ntype = \"welshman\"\nrelays_per_chunk = 1\n").unwrap();
    let mut selector = config.strategy.build();
    let stats = DeliveryStats::new();
    let input = PlanInput::new(&t, 10, &stats, 0);
    // Draws: one per relay for the filter (h, l, home), then the sort's first comparison
    // (l against h, l drawn first), then the rest. l goes first when 1 · u_l > (1 + ln 4) · u_h.
    let draws = |u_l: f64, u_h: f64| [vec![0.5; 3], vec![u_l, u_h], vec![0.5; 4]].concat();
    let pick = |draws: Vec<f64>, selector: &mut Box<dyn Selector>| {
        let s = selector.select(&input, &mut Draws(draws));
        s.assignments
            .iter()
            .map(|a| (t.url(a.relay).to_string(), a.authors.len()))
            .collect::<Vec<_>>()
    };
    // 0.62 > 2.386 · 0.2 = 0.477, though 4 · 0.2 = 0.8 would win unlogged.
    assert_eq!(
        pick(draws(0.62, 0.2), &mut selector),
        [("wss://l.example".to_string(), 1)]
    );
    assert_eq!(
        pick(draws(0.45, 0.2), &mut selector),
        [("wss://h.example".to_string(), 4)]
    );
}

#[test]
fn bad_settings_name_their_keys() {
    link();
    for (toml, key) in [
        (
            "[strategy]\ntype = \"applesauce\"\nmax_relays_per_user = 0\n",
            "strategy.max_relays_per_user",
        ),
        (
            "[strategy]\ntype = \"welshman\"\nauthors_per_chunk = 0\n",
            "strategy.authors_per_chunk",
        ),
        (
            "[strategy]\ntype = \"welshman\"\nmax_chunks = 100000\n",
            "strategy.max_chunks",
        ),
        (
            "[strategy]\ntype = \"welshman\"\nrelays_per_chunk = 0\n",
            "strategy.relays_per_chunk",
        ),
    ] {
        let err = RouterConfig::from_toml(toml).unwrap_err();
        assert_eq!(err.issues.len(), 1, "{toml}");
        assert_eq!(err.issues[0].key, key, "{toml}");
    }
}

#[test]
fn bad_per_author_names_the_key() {
    link();
    let err = nostr_outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 0\n",
    )
    .unwrap_err();
    assert_eq!(err.issues[0].key, "strategy.per_author");
}

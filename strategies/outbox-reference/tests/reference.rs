//! The reference strategies: behaviour on hand-made tables and the conformance suite.

use outbox_core::testkit::{check_config_toml, relay_list, table_with_lists};
use outbox_core::{AuthorId, RouteTable, Router};

/// Names the crate so the linker keeps its registrations.
fn link() {
    std::hint::black_box(outbox_reference::DEFAULT_NDK_PER_AUTHOR);
}

fn table(lists: &[&[&str]]) -> RouteTable {
    let lists = lists
        .iter()
        .enumerate()
        .map(|(i, r)| relay_list(i as u64, r));
    table_with_lists(lists.len() as u64, lists)
}

fn urls(t: &RouteTable, plan: &outbox_core::Plan) -> Vec<(String, Vec<u32>)> {
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
fn both_pass_the_conformance_suite() {
    link();
    for toml in [
        "[strategy]\ntype = \"direct\"\n",
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 2\n",
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 1\n",
    ] {
        let failures = check_config_toml(toml);
        assert!(failures.is_empty(), "{toml}: {failures:?}");
    }
}

#[test]
fn bad_per_author_names_the_key() {
    link();
    let err = outbox_core::RouterConfig::from_toml(
        "[strategy]\ntype = \"ndk_priority\"\nper_author = 0\n",
    )
    .unwrap_err();
    assert_eq!(err.issues[0].key, "strategy.per_author");
}

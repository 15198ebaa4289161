//! Planning time of greedy on a large synthetic graph: 3,000 follows over 2,000 relays, five
//! write relays each, popularity skewed toward a few hubs as on the real network.
//!
//! `cargo bench -p nostr-outbox-greedy`
// criterion's group macro defines an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion};
use nostr_outbox_core::testkit::test_key;
use nostr_outbox_core::{RawRelayList, RouteTable, RouteTableBuilder, Router, UrlPolicy};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

// Linked for its registration: the router finds greedy by name.
use nostr_outbox_greedy as _;

fn large_table(follows: usize, relays: usize, per_author: usize) -> RouteTable {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let keys: Vec<_> = (0..follows as u64).map(test_key).collect();
    let mut b = RouteTableBuilder::new(UrlPolicy::default())
        .follows(keys.iter().copied())
        .reader_relays(["wss://home.example"]);
    for pk in &keys {
        let mut chosen: Vec<usize> = Vec::with_capacity(per_author);
        while chosen.len() < per_author {
            let u: f64 = rng.random();
            let r = (u * u * u * relays as f64) as usize;
            if !chosen.contains(&r) {
                chosen.push(r);
            }
        }
        b.add_list(RawRelayList {
            author: *pk,
            created_at: 1,
            tags: chosen
                .iter()
                .map(|r| vec!["r".to_string(), format!("wss://relay{r}.example")])
                .collect(),
        });
    }
    b.build()
}

fn bench(c: &mut Criterion) {
    let table = large_table(3_000, 2_000, 5);
    assert!(table.relay_count() > 1_000, "the graph must be large");
    for budget in [20usize, 200] {
        let mut router = Router::from_toml(&format!(
            "max_connections = {budget}\n[strategy]\ntype = \"greedy\"\n"
        ))
        .unwrap();
        c.bench_function(&format!("greedy 3000x2000x5 budget {budget}"), |b| {
            b.iter(|| router.plan(&table, 0))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

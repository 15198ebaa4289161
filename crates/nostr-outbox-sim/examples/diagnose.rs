//! Where a strategy's 1-year recall comes from: base and fetched events by age bucket.
use nostr_outbox_core::Router;
use nostr_outbox_sim::{Asks, SimWorld};
use nostr_outbox_world::{generate, Profile};

fn main() {
    nostr_outbox_strategies::link();
    let strategy = std::env::args().nth(1).unwrap_or_else(|| "greedy".into());
    let sim = SimWorld::new(generate(Profile::Medium, 1));
    let mut router = Router::from_toml(&format!("[strategy]\ntype = \"{strategy}\"\n")).unwrap();
    let plan = router.plan(&sim.table, 1);
    let asks = Asks::from_plan(&sim, &plan);
    let w = &sim.world;
    let buckets = [30u64, 60, 120, 180, 270, 365];
    let mut base = [0u64; 6];
    let mut got = [0u64; 6];
    let mut asked_up = vec![Vec::new(); w.follows.len()];
    for e in &asks.entries {
        if let Some(r) = e.relay {
            if w.is_up(r, 0) {
                for &a in &e.authors {
                    asked_up[a as usize].push(r);
                }
            }
        }
    }
    for a in 0..w.follows.len() as u32 {
        let decl: Vec<u32> = sim
            .declared(a)
            .iter()
            .copied()
            .filter(|&r| w.is_up(r, 0))
            .collect();
        for e in w.author_events_since(a, w.now - 365 * 86400) {
            let on = w.event_relays(e);
            if !on.iter().any(|r| decl.contains(r)) {
                continue;
            }
            let age = (w.now - e.created_at) / 86400;
            let b = buckets.iter().position(|&x| age < x).unwrap_or(5);
            base[b] += 1;
            if on.iter().any(|r| asked_up[a as usize].contains(r)) {
                got[b] += 1;
            }
        }
    }
    for i in 0..6 {
        println!(
            "age < {:3}d: base {:6} fetched {:6} ({:.0}%)",
            buckets[i],
            base[i],
            got[i],
            100.0 * got[i] as f64 / base[i].max(1) as f64
        );
    }
    for e in &asks.entries {
        println!("{} {}", e.url, e.authors.len());
    }
}

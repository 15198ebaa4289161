//! The generated clock against the published measurements of the public network
//! (nostrability/outbox `OUTBOX-REPORT.md` §8.7): over the relays a client would query — those
//! the follows list — connect p50 605–911 ms, query p50 808 ms–1.3 s, and 1–3% of them timing
//! out (black holes: up in no sense, but accepting sockets).

use std::collections::BTreeSet;

use nostr_outbox_core::UrlPolicy;
use nostr_outbox_world::{generate, Profile, World};

/// The canonical relays the follows' lists name.
fn listed(world: &World) -> BTreeSet<String> {
    let table = world.route_table(&UrlPolicy {
        max_write_relays: 1_000,
        ..UrlPolicy::default()
    });
    table.relays().map(|r| table.url(r).to_string()).collect()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[test]
fn generated_timing_matches_the_published_network() {
    let (mut all_queried, mut all_timeouts) = (0usize, 0usize);
    for profile in [Profile::Small, Profile::Medium, Profile::Large] {
        for seed in [1, 2] {
            let world = generate(profile, seed);
            let (mut connects, mut queries) = (Vec::new(), Vec::new());
            let (mut queried, mut timeouts) = (0usize, 0usize);
            for url in listed(&world) {
                queried += 1;
                let Some(r) = world.relay_id(&url) else {
                    continue; // never existed: refused at once
                };
                let timing = world.timing(r);
                for s in 0..world.sessions {
                    if world.is_up(r, s) {
                        connects.push(timing.connect_ms(&url, s, 0));
                        queries.extend((0..4).map(|n| timing.query_ms(&url, s, n)));
                    } else if s == 0 && timing.hangs {
                        timeouts += 1;
                    }
                }
            }
            let (connect, query) = (median(connects), median(queries.clone()));
            let timed_out = timeouts as f64 / queried as f64;
            let slow =
                queries.iter().filter(|&&q| q > 5_000.0).count() as f64 / queries.len() as f64;
            eprintln!("{profile}/{seed}: connect p50 {connect:.0}, query p50 {query:.0}, >5 s {slow:.3}, timeouts {timed_out:.3} of {queried}");
            assert!(
                (605.0..=911.0).contains(&connect),
                "{profile}/{seed}: connect p50 {connect}"
            );
            assert!(
                (808.0..=1_300.0).contains(&query),
                "{profile}/{seed}: query p50 {query}"
            );
            all_queried += queried;
            all_timeouts += timeouts;
            assert!(
                (0.01..=0.08).contains(&slow),
                "{profile}/{seed}: {slow} of queries over 5 s"
            );
        }
    }
    // Pooled: a small world lists too few relays for its own share to mean much.
    let timed_out = all_timeouts as f64 / all_queried as f64;
    assert!(
        (0.01..=0.03).contains(&timed_out),
        "{timed_out} of queried relays time out"
    );
}

//! Prints world facts and the bench table for the default suite (a quick calibration aid).
//!
//! `cargo run --release -p nostr-outbox-sim --example calibrate [profiles...]`

use nostr_outbox_sim::{run_bench, BenchConfig, Window};
use nostr_outbox_world::{world_stats, Profile};

fn main() {
    nostr_outbox_strategies::link();
    let profiles: Vec<Profile> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mut cfg = BenchConfig::default();
    if let Ok(i) = std::env::var("INTERVAL") {
        cfg.session_interval_secs = i.parse().unwrap();
    }
    if !profiles.is_empty() {
        cfg.profiles = profiles;
    }
    for &p in &cfg.profiles {
        let w = nostr_outbox_world::generate(p, 1);
        println!("{:?}", world_stats(&w));
    }
    let started = std::time::Instant::now();
    let report = run_bench(&cfg, &nostr_outbox_sim::default_suite(), &|_| {});
    println!("bench took {:.2?}", started.elapsed());
    for s in &report.skipped {
        println!("skipped {}: {}", s.label, s.reason);
    }
    for row in &report.rows {
        let w = |w: Window| {
            row.window(w).map_or((0.0, 0.0, 0.0), |x| {
                (
                    x.first.mean * 100.0,
                    x.last.mean * 100.0,
                    x.total_last.mean * 100.0,
                )
            })
        };
        let (d7a, d7, _) = w(Window::D7);
        let (y1a, y1, y1t) = w(Window::Y1);
        let (_, y3, _) = w(Window::Y3);
        println!(
            "{:<24} 7d {:5.1}->{:5.1}  1yr {:5.1}->{:5.1} (total {:5.1})  3yr {:5.1}  conns {:5.1} discl {:7.1} orph {:5.1} load {:.2} plan {:8.0}us",
            row.label, d7a, d7, y1a, y1, y1t, y3, row.connections.mean, row.disclosure.mean, row.orphans.mean, row.load_concentration.mean, row.plan_us
        );
    }
}

//! How much of the gap to the learnable ceiling is the planner and how much is learning: a
//! strategy planned with stats filled from the world's truth (each relay's answer rate and how
//! far back it keeps notes, each (relay, author) pair's share of the notes within that reach,
//! each author's volume and note ages), as if it had learned everything learnable, beside the
//! same strategy after five sessions of learning and beside the ceiling.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example informed -- [config.toml] [profiles] [seeds]
//!     [window] [--relays] [--family decay] [--sessions 5]
//! cargo run --release -p nostr-outbox-sim --example informed -- [config.toml] --world FILE
//!     [--window 1yr] [--sessions N] [--relays]
//! ```
//!
//! `--world FILE` studies one `outbox-world/1` file instead of generated worlds, over every
//! session it describes (`--sessions` may ask for fewer); the window is then `--window`. Seeds
//! are `A-B` or a list.
//!
//! `--each-session` also prints the informed plan's recall in every session (the luck of the
//! session's relays, which no plan knows in advance, moves it too).
//!
//! `--relays` lists the learned strategy's last plan relay by relay: what the world holds there
//! and what was learned of it. `--truth PARTS` (comma-separated: `live`, `depth`, `pairs`,
//! `authors`, or of the authors' only `volume`, `ages`, `probed`) plans instead with what was learned, those parts replaced by the truth: which
//! learned fact costs most.

mod common;

use common::{fail, printable, Args};
use nostr_outbox_core::{AuthorStats, DeliveryStats, PairStats, RelayStats, Router};
use nostr_outbox_sim::{
    ceiling_asks, run_sessions, score, up_rates, Asks, LoopConfig, SimWorld, Window,
};

/// Pseudo-observations behind every informed belief.
const STRENGTH: f64 = 50.0;

fn truth(sim: &SimWorld) -> DeliveryStats {
    let w = &sim.world;
    let rates = up_rates(sim);
    let mut stats = DeliveryStats::new();
    let since = w.now.saturating_sub(Window::Y3.secs());
    let mut depth = vec![0u64; w.relays().len()];
    for (r, relay) in w.relays().iter().enumerate() {
        depth[r] = sim
            .relay_events(r as u32)
            .iter()
            .take_while(|(t, _)| *t >= since)
            .last()
            .map_or(0, |(t, _)| w.now.saturating_sub(*t));
        let p = rates[r];
        stats.set(
            relay.url.clone(),
            RelayStats {
                asked: 10,
                live_alpha: 1.0 + STRENGTH * p,
                live_beta: 1.0 + STRENGTH * (1.0 - p),
                depth_secs: depth[r] as f64,
                updated_at: w.now,
                ..RelayStats::default()
            },
        );
    }
    // Listed relays that are not in the world never answer.
    for r in sim.table.relays() {
        let url = sim.table.url(r);
        if w.relay_id(url).is_none() {
            let dead = RelayStats {
                asked: 10,
                live_beta: 1.0 + STRENGTH,
                updated_at: w.now,
                ..RelayStats::default()
            };
            stats.set(url.to_string(), dead);
        }
    }
    for a in 0..w.follows.len() as u32 {
        let events = w.author_events_since(a, since);
        let mut s = AuthorStats {
            volume: events.len() as f64,
            first: events.iter().map(|e| e.created_at).min().unwrap_or(0),
            last: events.iter().map(|e| e.created_at).max().unwrap_or(0),
            probed_secs: sim
                .declared(a)
                .iter()
                .map(|&r| depth[r as usize] as f64)
                .fold(0.0, f64::max),
            ..AuthorStats::default()
        };
        for &r in sim.declared(a) {
            let reach: Vec<_> = events
                .iter()
                .filter(|e| w.now.saturating_sub(e.created_at) <= depth[r as usize])
                .collect();
            if reach.is_empty() {
                continue;
            }
            let held = reach
                .iter()
                .filter(|e| w.event_relays(e).contains(&r))
                .count() as f64;
            let share = held / reach.len() as f64;
            s.relays.insert(
                w.relays()[r as usize].url.clone(),
                PairStats {
                    hits: STRENGTH * share,
                    misses: STRENGTH * (1.0 - share),
                },
            );
        }
        stats.set_author(w.follows[a as usize], s);
    }
    stats
}

/// `learned` with the `parts` named replaced by `truth` (see the module docs).
fn mix(learned: &DeliveryStats, truth: &DeliveryStats, parts: &str, now: u64) -> DeliveryStats {
    let mut out = learned.clone();
    for (url, t) in truth.iter() {
        let mut s = learned.get_at(url, now);
        if parts.contains("live") {
            (s.live_alpha, s.live_beta, s.asked) = (t.live_alpha, t.live_beta, s.asked.max(1));
        }
        if parts.contains("depth") {
            s.depth_secs = t.depth_secs;
        }
        s.updated_at = now;
        out.set(url.to_string(), s);
    }
    for (key, t) in truth.authors() {
        let mut a = learned.author(key).cloned().unwrap_or_default();
        if parts.contains("pairs") {
            a.relays = t.relays.clone();
        }
        let all = parts.contains("authors");
        if all || parts.contains("volume") {
            a.volume = t.volume;
        }
        if all || parts.contains("ages") {
            (a.first, a.last) = (t.first, t.last);
        }
        if all || parts.contains("probed") {
            a.probed_secs = t.probed_secs;
        }
        out.set_author(*key, a);
    }
    out
}

/// The learned plan's relays beside what the world holds on them.
fn list_relays(sim: &SimWorld, asks: &Asks, stats: &DeliveryStats, window: Window) {
    let rates = up_rates(sim);
    let ceiling = ceiling_asks(sim, &rates, 20, window);
    let since = sim.world.now.saturating_sub(window.secs());
    eprintln!("notes  lists asked   up  keeps(d) ceiling | asked  live  kept learned(d)  url");
    for e in &asks.entries {
        let l = stats.get(&e.url);
        let learned = format!(
            "| {:>5} {:>5.2} {:>5.2} {:>10.0}  {}",
            l.asked,
            l.live_mean(),
            l.completeness_mean(),
            l.depth_secs / 86_400.0,
            e.url
        );
        let Some(r) = e.relay else {
            eprintln!("{:>36} {}", "(not in the world)", printable(&learned));
            continue;
        };
        let held = sim
            .relay_events(r)
            .iter()
            .filter(|(t, i)| {
                *t >= since && sim.is_declared(sim.world.events()[*i as usize].author, r)
            })
            .count();
        let lists = (0..sim.world.follows.len() as u32)
            .filter(|&a| sim.is_declared(a, r))
            .count();
        let keeps = sim
            .relay_events(r)
            .last()
            .map_or(0, |(t, _)| sim.world.now.saturating_sub(*t) / 86_400);
        let in_ceiling = ceiling.entries.iter().any(|x| x.url == e.url);
        eprintln!(
            "{held:>5} {lists:>6} {:>5} {:>4.2} {keeps:>9} {in_ceiling:>7} {}",
            e.authors.len(),
            rates[r as usize],
            printable(&learned),
        );
    }
}

fn main() {
    nostr_outbox_strategies::link();
    let args = Args::parse(&["--truth", "--family", "--window"]);
    let relays = args.flag("--relays");
    let each_session = args.flag("--each-session");
    let parts = args.value("--truth").map(str::to_string);
    let toml = args.config();
    let worlds = args.config_worlds(("small,medium,large", "1,2,3,4"));
    let positional = |i: usize| args.positional.get(i).map(String::as_str);
    let window: Window = match (positional(3), args.value("--window")) {
        (Some(_), Some(_)) => fail("give the window once: positional or --window"),
        (Some(w), None) | (None, Some(w)) => w.parse().unwrap_or_else(|e| fail(e)),
        (None, None) => Window::Y1,
    };
    println!(
        "{:<12} {:>8} {:>9} {:>8} {:>14}",
        "world", "learned", "informed", "ceiling", "informed/ceil"
    );
    let mut sums = [0.0; 3];
    let mut n = 0.0;
    worlds.each(|label, sim| {
        let cfg = LoopConfig {
            sessions: worlds.sessions,
            ..LoopConfig::default()
        };
        let mut router = Router::from_toml(&toml).expect("config");
        let mut last_plan = None;
        let run = run_sessions(sim, &mut router, &cfg, |_, plan, _| {
            last_plan = Some(Asks::from_plan(sim, plan));
        });
        if let (true, Some(asks)) = (relays, &last_plan) {
            list_relays(sim, asks, &run.stats, window);
        }
        let learned = run
            .sessions
            .last()
            .and_then(|s| s.score.window(window))
            .map_or(0.0, |x| x.declared_recall);
        let stats = match &parts {
            Some(parts) => mix(&run.stats, &truth(sim), parts, sim.world.now),
            None => truth(sim),
        };
        let mut router = Router::from_toml(&toml).expect("config");
        let ceiling = ceiling_asks(sim, &up_rates(sim), 20, window);
        let (mut informed, mut ceil) = (0.0, 0.0);
        let mut per_session = Vec::new();
        for s in 0..cfg.sessions {
            let plan = router.plan_with(
                &sim.table,
                &stats,
                nostr_outbox_core::PlanContext::at(sim.world.now)
                    .seed(cfg.seed_for(s))
                    .window(window.secs()),
            );
            let asks = Asks::from_plan(sim, &plan);
            let recall = score(sim, &asks, s, &[window]).windows[0].declared_recall;
            per_session.push(format!("{:.1}", recall * 100.0));
            informed += recall;
            ceil += score(sim, &ceiling, s, &[window]).windows[0].declared_recall;
        }
        informed /= f64::from(cfg.sessions);
        ceil /= f64::from(cfg.sessions);
        println!(
            "{:<12} {:>8.1} {:>9.1} {:>8.1} {:>14.2}",
            label,
            learned * 100.0,
            informed * 100.0,
            ceil * 100.0,
            informed / ceil
        );
        if each_session {
            println!("{:<12} informed by session: {}", "", per_session.join(" "));
        }
        sums[0] += learned;
        sums[1] += informed;
        sums[2] += ceil;
        n += 1.0;
    });
    println!(
        "{:<12} {:>8.1} {:>9.1} {:>8.1} {:>14.2}",
        "mean",
        sums[0] / n * 100.0,
        sums[1] / n * 100.0,
        sums[2] / n * 100.0,
        sums[1] / sums[2]
    );
}

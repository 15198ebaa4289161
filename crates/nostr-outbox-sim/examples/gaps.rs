//! Why a learned plan misses what the learnable ceiling fetches. Each note of the last year
//! that the ceiling's plan fetched in the last session and the strategy's did not is put in the
//! first class that explains it:
//!
//! - `unassigned`: a relay serving the note was in the strategy's plan and answered, but the
//!   note's author was not asked of it (the per-author cap or the disclosure budget);
//! - `down`: the strategy asked the author of a relay serving the note, which did not answer;
//! - `passed over`: a relay serving it had been asked in an earlier session (something was
//!   learned of it), but the plan left it out;
//! - `never asked`: no relay serving it had been asked before (exploration).
//!
//! `--window 7d` (or `3yr`) studies that window instead, with the plan made for it.
//!
//! The missed notes are also split by what was learned of their author (nothing; asked, but no
//! notes came back; some notes), the never-asked ones by how many follows list the ceiling's
//! relay that served them, and the passed-over ones counted apart when their relays never
//! answered when asked. `-v` lists each world's largest misses.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example gaps -- [config.toml] [profiles] [seeds]
//!     [--family decay] [--sessions 5] [--window 7d] [-v]
//! cargo run --release -p nostr-outbox-sim --example gaps -- [config.toml] --world FILE [--sessions N]
//! ```
//!
//! `--world FILE` studies one `outbox-world/1` file instead of generated worlds, over every
//! session it describes (`--sessions` may ask for fewer). Seeds are `A-B` or a list.

mod common;

use std::collections::{HashMap, HashSet};

use common::Args;
use nostr_outbox_core::{DeliveryStats, Router};
use nostr_outbox_sim::{
    ceiling_asks, fetch, run_sessions_with, up_rates, Asks, LoopConfig, SimWorld, Window,
};

const CLASSES: [&str; 4] = ["unassigned", "down", "passed over", "never asked"];

/// The most follows listing a relay in each popularity bucket but the last (16+).
const BUCKET_TOPS: [u32; 3] = [1, 3, 15];

fn bucket(popularity: u32) -> usize {
    BUCKET_TOPS
        .iter()
        .position(|&top| popularity <= top)
        .unwrap_or(BUCKET_TOPS.len())
}

/// Counts over one world or many.
#[derive(Default)]
struct Tally {
    learned: u64,
    ceiling: u64,
    /// Fetched by the strategy, not by the ceiling.
    gained: u64,
    /// Missed notes per class of [`CLASSES`].
    missed: [u64; 4],
    /// Missed notes whose author was: never learned of, learned silent, learned with notes.
    by_author: [u64; 3],
    /// Never-asked misses per popularity bucket of the ceiling's relay.
    by_popularity: [u64; 4],
    /// Passed-over misses whose relays asked before never answered once.
    passed_over_unanswered: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.learned += o.learned;
        self.ceiling += o.ceiling;
        self.gained += o.gained;
        self.passed_over_unanswered += o.passed_over_unanswered;
        for i in 0..4 {
            self.missed[i] += o.missed[i];
            self.by_popularity[i] += o.by_popularity[i];
        }
        for i in 0..3 {
            self.by_author[i] += o.by_author[i];
        }
    }

    fn shares(&self) -> [f64; 4] {
        let all = self.missed.iter().sum::<u64>().max(1) as f64;
        self.missed.map(|c| 100.0 * c as f64 / all)
    }
}

/// Per follow, the relays `asks` asks it of.
fn relays_of(asks: &Asks, follows: usize) -> Vec<Vec<u32>> {
    let mut of = vec![Vec::new(); follows];
    for e in &asks.entries {
        if let Some(r) = e.relay {
            for &a in &e.authors {
                of[a as usize].push(r);
            }
        }
    }
    of
}

fn main() {
    nostr_outbox_strategies::link();
    let args = Args::parse(&["--family", "--window"]);
    let verbose = args.flag("-v");
    let window = args
        .parsed::<Window>("--window")
        .unwrap_or_else(|e| common::fail(e))
        .unwrap_or(Window::Y1);
    let toml = args.config();
    let worlds = args.config_worlds(("small,medium,large", "1,2,3"));
    println!(
        "{:<22} {:>7} {:>7} {:>6} | {:>10} {:>6} {:>11} {:>11}",
        "world", "learned", "ceiling", "gained", CLASSES[0], CLASSES[1], CLASSES[2], CLASSES[3]
    );
    let mut total = Tally::default();
    worlds.each(|label, sim| {
        let tally = world_gaps(sim, &toml, worlds.sessions, window, verbose);
        let s = tally.shares();
        println!(
            "{:<22} {:>7} {:>7} {:>6} | {:>9.1}% {:>5.1}% {:>10.1}% {:>10.1}%",
            label, tally.learned, tally.ceiling, tally.gained, s[0], s[1], s[2], s[3]
        );
        total.add(&tally);
    });
    let s = total.shares();
    println!(
        "{:<22} {:>7} {:>7} {:>6} | {:>9.1}% {:>5.1}% {:>10.1}% {:>10.1}%",
        "all", total.learned, total.ceiling, total.gained, s[0], s[1], s[2], s[3]
    );
    println!(
        "missed notes by what was learned of their author: nothing {}, no notes {}, some notes {}",
        total.by_author[0], total.by_author[1], total.by_author[2]
    );
    println!(
        "passed-over misses whose relays never answered when asked: {}",
        total.passed_over_unanswered
    );
    println!(
        "never-asked misses by the follows listing the ceiling's relay: 1: {}, 2-3: {}, 4-15: {}, 16+: {}",
        total.by_popularity[0], total.by_popularity[1], total.by_popularity[2], total.by_popularity[3]
    );
}

/// Runs the strategy's `sessions` on `sim` and sorts its last session's misses.
fn world_gaps(sim: &SimWorld, toml: &str, sessions: u32, window: Window, verbose: bool) -> Tally {
    let cfg = LoopConfig {
        sessions,
        ..LoopConfig::default()
    };
    let last = cfg.sessions - 1;
    let mut router = Router::from_toml(toml).expect("config");
    let mut asked_before: HashSet<u32> = HashSet::new();
    let mut last_asks = None;
    let run = run_sessions_with(sim, &mut router, &cfg, |v| {
        if v.session < last {
            let asks = Asks::from_table_plan(sim, v.table, v.plan);
            asked_before.extend(asks.entries.iter().filter_map(|e| e.relay));
        } else {
            let plan = (v.window_plans.iter())
                .find(|(w, _)| *w == window)
                .map_or(v.plan, |(_, p)| *p);
            last_asks = Some(Asks::from_table_plan(sim, v.table, plan));
        }
    });
    let learned = last_asks.expect("a last session");
    let ceiling = ceiling_asks(sim, &up_rates(sim), 20, window);
    let w = &sim.world;
    let since = w.now.saturating_sub(window.secs());
    let got = fetch(sim, &learned, last, since, false).delivered;
    let best = fetch(sim, &ceiling, last, since, false).delivered;
    let asked_of = relays_of(&learned, w.follows.len());
    let ceiling_of = relays_of(&ceiling, w.follows.len());
    let planned: HashSet<u32> = learned.entries.iter().filter_map(|e| e.relay).collect();
    let popularity = |r: u32| {
        let url = &w.relays()[r as usize].url;
        sim.table
            .relay_id(url)
            .map_or(0, |id| sim.table.popularity(id))
    };
    let mut tally = Tally::default();
    // Never-asked misses per (ceiling relay, author), for `-v`.
    let mut unasked: HashMap<(u32, u32), u64> = HashMap::new();
    // Passed-over misses per (relay asked before, author), for `-v`.
    let mut passed: HashMap<(u32, u32), u64> = HashMap::new();
    for (i, e) in w.events().iter().enumerate() {
        if e.created_at < since {
            continue;
        }
        tally.learned += u64::from(got[i]);
        tally.ceiling += u64::from(best[i]);
        tally.gained += u64::from(got[i] && !best[i]);
        if !best[i] || got[i] {
            continue;
        }
        let serving = w.event_relays(e);
        let author = e.author as usize;
        let class = if serving
            .iter()
            .any(|&r| planned.contains(&r) && w.is_up(r, last))
        {
            0
        } else if serving.iter().any(|r| asked_of[author].contains(r)) {
            1
        } else if serving.iter().any(|r| asked_before.contains(r)) {
            2
        } else {
            3
        };
        tally.missed[class] += 1;
        if class == 2 {
            let answered = |r: &u32| {
                asked_before.contains(r)
                    && run.stats.get(&w.relays()[*r as usize].url).live_alpha > 1.0
            };
            tally.passed_over_unanswered += u64::from(!serving.iter().any(answered));
            if let Some(&r) = serving.iter().find(|r| asked_before.contains(r)) {
                *passed.entry((r, e.author)).or_default() += 1;
            }
        }
        tally.by_author[match run.stats.author(&w.follows[author]) {
            None => 0,
            Some(s) if s.volume <= 0.0 => 1,
            Some(_) => 2,
        }] += 1;
        if class == 3 {
            if let Some(&r) = serving.iter().find(|r| ceiling_of[author].contains(r)) {
                tally.by_popularity[bucket(popularity(r))] += 1;
                *unasked.entry((r, e.author)).or_default() += 1;
            }
        }
    }
    if verbose {
        let name = common::printable(&w.name);
        eprintln!("{name}: never asked");
        list_misses(sim, &run.stats, &unasked, &popularity);
        eprintln!("{name}: passed over");
        list_misses(sim, &run.stats, &passed, &popularity);
    }
    tally
}

/// The largest never-asked misses: whose notes, on which relay, and what was learned of them.
fn list_misses(
    sim: &SimWorld,
    stats: &DeliveryStats,
    unasked: &HashMap<(u32, u32), u64>,
    popularity: &impl Fn(u32) -> u32,
) {
    let w = &sim.world;
    let mut rows: Vec<_> = unasked.iter().collect();
    rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let days = |t: u64| w.now.saturating_sub(t) as f64 / 86_400.0;
    for (&(r, a), n) in rows.iter().take(8) {
        let learned = match stats.author(&w.follows[a as usize]) {
            None => "nothing".to_string(),
            Some(s) if s.volume <= 0.0 => "no notes".to_string(),
            Some(s) => format!(
                "volume {:.0}, ages {:.0}-{:.0} d, from relays reaching {:.0} d",
                s.volume,
                days(s.last),
                days(s.first),
                s.probed_secs / 86_400.0
            ),
        };
        let url = &w.relays()[r as usize].url;
        let relay = stats.get(url);
        let pair = stats
            .author(&w.follows[a as usize])
            .and_then(|s| s.relays.get(url))
            .map_or("none".to_string(), |p| {
                format!("{:.1}/{:.1}", p.hits, p.misses)
            });
        eprintln!(
            "  {n:>5} notes of follow {a} ({} listed) on {url} (in {} lists); learned: {learned}; relay asked {}, live {:.2}, kept {:.2}, depth {:.0} d, pair {pair}",
            sim.declared(a).len(),
            popularity(r),
            relay.asked,
            relay.live_mean(),
            relay.completeness_mean(),
            relay.depth_secs / 86_400.0
        );
    }
}

//! Why a learned plan misses what the learnable ceiling fetches: each 1-year note the ceiling's
//! plan fetched in the last session and the strategy's did not, put in the first class that
//! explains it.
//!
//! - `unassigned`: a relay serving the note was in the strategy's plan and answered, but the
//!   note's author was not asked of it (the per-author cap or the disclosure budget);
//! - `passed over`: a relay serving it had been asked in an earlier session (so something was
//!   learned of it), but the plan left it out;
//! - `never asked`: no relay serving it had been asked before (exploration);
//! - `down`: the strategy asked the author of a serving relay that was down this session.
//!
//! ```text
//! cargo run --release -p outbox-sim --example gaps -- [config.toml] [profiles] [seeds]
//!     [--family decay]
//! ```

use std::collections::HashSet;

use outbox_core::Router;
use outbox_sim::{
    ceiling_asks, fetch, generate_in, run_sessions, up_rates, Asks, Family, LoopConfig, Profile,
    SimWorld, Window,
};

fn list<T: std::str::FromStr>(arg: Option<&String>, default: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    arg.map_or(default, String::as_str)
        .split(',')
        .map(|x| x.parse().expect("list item"))
        .collect()
}

const CLASSES: [&str; 4] = ["unassigned", "down", "passed over", "never asked"];

fn main() {
    outbox_strategies::link();
    let all: Vec<String> = std::env::args().skip(1).collect();
    let verbose = all.iter().any(|a| a == "-v");
    let family_at = all.iter().position(|a| a == "--family");
    let family: Family = family_at
        .and_then(|i| all.get(i + 1))
        .map_or(Family::Default, |f| f.parse().expect("family"));
    let args: Vec<String> = all
        .iter()
        .enumerate()
        .filter(|&(i, a)| a != "-v" && Some(i) != family_at && Some(i) != family_at.map(|t| t + 1))
        .map(|(_, a)| a.clone())
        .collect();
    let toml = args
        .first()
        .map(|p| std::fs::read_to_string(p).expect("config"))
        .unwrap_or_else(|| "[strategy]\ntype = \"recall\"\n".into());
    let profiles: Vec<Profile> = list(args.get(1), "small,medium,large");
    let seeds: Vec<u64> = list(args.get(2), "1,2,3");
    let window = Window::Y1;
    println!(
        "{:<22} {:>7} {:>7} {:>7} | {:>10} {:>6} {:>11} {:>11}",
        "world", "learned", "ceiling", "gained", CLASSES[0], CLASSES[1], CLASSES[2], CLASSES[3]
    );
    let mut totals = [0u64; 7];
    let mut unasked = [0u64; 4];
    let mut by_state = [0u64; 3];
    let mut unasked_relays: [HashSet<u32>; 4] = Default::default();
    for &p in &profiles {
        for &seed in &seeds {
            let sim = SimWorld::new(generate_in(family, p, seed));
            let cfg = LoopConfig::default();
            let last = cfg.sessions - 1;
            let mut router = Router::from_toml(&toml).expect("config");
            let mut asked_before: HashSet<u32> = HashSet::new();
            let mut last_asks = None;
            let run = run_sessions(&sim, &mut router, &cfg, |s, plan, _| {
                let asks = Asks::from_plan(&sim, plan);
                if s < last {
                    asked_before.extend(asks.entries.iter().filter_map(|e| e.relay));
                } else {
                    last_asks = Some(asks);
                }
            });
            let learned = last_asks.expect("a last session");
            let ceiling = ceiling_asks(&sim, &up_rates(&sim), 20, window);
            let since = sim.world.now - window.secs();
            let got = fetch(&sim, &learned, last, since, false).delivered;
            let best = fetch(&sim, &ceiling, last, since, false).delivered;
            // Per follow, the relays the strategy asked it of.
            let mut asked_of = vec![Vec::new(); sim.world.follows.len()];
            let mut planned = HashSet::new();
            for e in &learned.entries {
                if let Some(r) = e.relay {
                    planned.insert(r);
                    for &a in &e.authors {
                        asked_of[a as usize].push(r);
                    }
                }
            }
            let mut ceiling_of = vec![Vec::new(); sim.world.follows.len()];
            for e in &ceiling.entries {
                if let Some(r) = e.relay {
                    for &a in &e.authors {
                        ceiling_of[a as usize].push(r);
                    }
                }
            }
            let w = &sim.world;
            let mut counts = [0u64; 7];
            let mut missed_on = std::collections::HashMap::new();
            for (i, e) in w.events().iter().enumerate() {
                if e.created_at < since {
                    continue;
                }
                counts[4] += u64::from(got[i]);
                counts[5] += u64::from(best[i]);
                if got[i] && !best[i] {
                    counts[6] += 1;
                }
                if !best[i] || got[i] {
                    continue;
                }
                let serving = w.event_relays(e);
                let up = |r: u32| w.is_up(r, last);
                let class = if serving.iter().any(|&r| planned.contains(&r) && up(r)) {
                    0
                } else if serving
                    .iter()
                    .any(|r| asked_of[e.author as usize].contains(r))
                {
                    1
                } else if serving.iter().any(|r| asked_before.contains(r)) {
                    2
                } else {
                    3
                };
                counts[class] += 1;
                let state = match run.stats.author(&w.follows[e.author as usize]) {
                    None => 0,
                    Some(s) if s.volume <= 0.0 => 1,
                    Some(_) => 2,
                };
                by_state[state] += 1;
                if class == 3 {
                    if let Some(&r) = serving
                        .iter()
                        .find(|r| ceiling_of[e.author as usize].contains(r))
                    {
                        let url = &w.relays()[r as usize].url;
                        let pop = sim
                            .table
                            .relay_id(url)
                            .map_or(0, |id| sim.table.popularity(id));
                        let b = match pop {
                            0..=1 => 0,
                            2..=3 => 1,
                            4..=15 => 2,
                            _ => 3,
                        };
                        unasked[b] += 1;
                        unasked_relays[b].insert(r);
                        *missed_on.entry((r, e.author)).or_insert(0u64) += 1;
                    }
                }
            }
            if verbose {
                let mut rows: Vec<_> = missed_on.iter().collect();
                rows.sort_by(|a, b| b.1.cmp(a.1));
                for (&(r, a), n) in rows.iter().take(8) {
                    let url = &w.relays()[r as usize].url;
                    let pop = sim
                        .table
                        .relay_id(url)
                        .map_or(0, |id| sim.table.popularity(id));
                    let st = run.stats.author(&w.follows[a as usize]);
                    let age = |t: u64| (w.now.saturating_sub(t)) as f64 / 86_400.0;
                    let listed = sim.declared(a).len();
                    eprintln!(
                        "  {n:>5} notes of follow {a} ({listed} listed) on {url} (in {pop} lists): learned {}",
                        st.map_or("nothing".into(), |s| format!(
                            "volume {:.0}, ages {:.0}-{:.0} d, probed {:.0} d, pairs {}",
                            s.volume,
                            age(s.last),
                            age(s.first),
                            s.probed_secs / 86_400.0,
                            s.relays.len()
                        ))
                    );
                }
            }
            let missed: u64 = counts[..4].iter().sum::<u64>().max(1);
            let pct = |c: u64| 100.0 * c as f64 / missed as f64;
            println!(
                "{:<22} {:>7} {:>7} {:>7} | {:>9.1}% {:>5.1}% {:>10.1}% {:>10.1}%",
                w.name,
                counts[4],
                counts[5],
                counts[6],
                pct(counts[0]),
                pct(counts[1]),
                pct(counts[2]),
                pct(counts[3])
            );
            for (t, c) in totals.iter_mut().zip(counts) {
                *t += c;
            }
        }
    }
    println!(
        "never asked, by the popularity of the ceiling's relay (1, 2-3, 4-15, 16+): notes {unasked:?}, relays {:?}",
        unasked_relays.iter().map(HashSet::len).collect::<Vec<_>>()
    );
    println!("missed notes by what was learned of their author (nothing, no notes, some notes): {by_state:?}");
    let missed: u64 = totals[..4].iter().sum::<u64>().max(1);
    println!(
        "{:<22} {:>7} {:>7} {:>7} | {}",
        "total",
        totals[4],
        totals[5],
        totals[6],
        (0..4)
            .map(|c| format!(
                "{}: {:.1}%",
                CLASSES[c],
                100.0 * totals[c] as f64 / missed as f64
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

//! Writes a small `outbox-world/1` file where the most listed relays forget: eight relays, all
//! up in every session; 60 follows listing 2–4 of them; two hubs listed by most follows that keep
//! only the last 30 days of notes; a year of notes at a heavy-tailed rate per follow (a few
//! follows post several times a day, most a few times a month or less); every note on all of its
//! author's listed relays (the hubs only within their 30 days), bar about 2% of writes lost; the
//! reader's own relays are the two hubs; 5 sessions. The same seed always writes the same file.
//!
//! ```text
//! cargo run --release -p nostr-outbox-sim --example pruned_hubs -- [--seed 1] [--out FILE]
//! ```
//!
//! Without `--out` the world goes to standard output; the summary (notes, listings per relay,
//! notes each relay holds) goes to standard error. `examples/worlds/pruned-hubs.json` is the
//! world of seed 1. Score a router on it with
//! `outbox bench --world examples/worlds/pruned-hubs.json --config recall.toml --budget 4`.

mod common;

use common::{fail, Args};
use nostr::key::{Keys, PublicKey, SecretKey};
use nostr_outbox_world::generate::GENERATED_NOW;
use nostr_outbox_world::world::{PartEvent, WorldParts};
use nostr_outbox_world::{World, WorldRelayList};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

const DAY: u64 = 86_400;
const FOLLOWS: usize = 60;
const SESSIONS: u32 = 5;
/// The relays and how strongly follows lean to list each (the first two are the hubs).
const RELAYS: [(&str, f64); 8] = [
    ("wss://hub-one.example", 12.0),
    ("wss://hub-two.example", 9.0),
    ("wss://relay-c.example", 1.6),
    ("wss://relay-d.example", 1.3),
    ("wss://relay-e.example", 1.1),
    ("wss://relay-f.example", 0.9),
    ("wss://relay-g.example", 0.7),
    ("wss://relay-h.example", 0.5),
];
/// The hubs keep this much history.
const HUB_KEEPS: u64 = 30 * DAY;
/// How far back notes go.
const HISTORY: u64 = 365 * DAY;
/// The share of writes a relay lost.
const LOST_WRITES: f64 = 0.02;
/// Notes per day: a log-normal rate with this median and spread, cut at `MAX_RATE`.
const MEDIAN_RATE: f64 = 0.06;
const RATE_SIGMA: f64 = 1.7;
const MAX_RATE: f64 = 6.0;

fn key(rng: &mut ChaCha8Rng) -> PublicKey {
    loop {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        if let Ok(secret) = SecretKey::from_slice(&bytes) {
            return Keys::new(secret).public_key();
        }
    }
}

/// `n` distinct relay indices drawn by weight, without replacement.
fn pick(rng: &mut ChaCha8Rng, n: usize) -> Vec<usize> {
    let mut chosen = Vec::with_capacity(n);
    while chosen.len() < n {
        let total: f64 = (0..RELAYS.len())
            .filter(|i| !chosen.contains(i))
            .map(|i| RELAYS[i].1)
            .sum();
        let mut x = rng.random::<f64>() * total;
        for i in (0..RELAYS.len()).filter(|i| !chosen.contains(i)) {
            x -= RELAYS[i].1;
            if x <= 0.0 {
                chosen.push(i);
                break;
            }
        }
        if x > 0.0 {
            // Rounding left nothing picked: take the last relay not chosen yet.
            let last = (0..RELAYS.len()).rev().find(|i| !chosen.contains(i));
            chosen.extend(last);
        }
    }
    chosen
}

fn build(seed: u64) -> World {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7072_756e_6564);
    let now = GENERATED_NOW;
    let reader = key(&mut rng);
    let follows: Vec<PublicKey> = (0..FOLLOWS).map(|_| key(&mut rng)).collect();
    let rate = LogNormal::new(MEDIAN_RATE.ln(), RATE_SIGMA).expect("valid log-normal");
    let mut relay_lists = Vec::with_capacity(FOLLOWS);
    let mut events = Vec::new();
    let mut listed = [0usize; RELAYS.len()];
    for (a, author) in follows.iter().enumerate() {
        let n = rng.random_range(2..=4);
        let writes = pick(&mut rng, n);
        for &r in &writes {
            listed[r] += 1;
        }
        relay_lists.push(WorldRelayList {
            author: *author,
            created_at: now - rng.random_range(DAY..200 * DAY),
            tags: writes
                .iter()
                .map(|&r| vec!["r".to_string(), RELAYS[r].0.to_string()])
                .collect(),
        });
        let per_day = rate.sample(&mut rng).min(MAX_RATE);
        let notes = (per_day * (HISTORY / DAY) as f64).round().max(1.0) as usize;
        for _ in 0..notes {
            let age = rng.random_range(0..HISTORY);
            let mut id = [0u8; 32];
            rng.fill_bytes(&mut id);
            let on = writes
                .iter()
                .filter(|&&r| r >= 2 || age < HUB_KEEPS)
                .filter(|_| !rng.random_bool(LOST_WRITES))
                .map(|&r| RELAYS[r].0.to_string())
                .collect();
            events.push(PartEvent {
                id,
                author: a as u32,
                created_at: now - age,
                kind: 1,
                on,
            });
        }
    }
    // The reader's relays: the two most listed, as a typical client's defaults are.
    let mut by_listings: Vec<usize> = (0..RELAYS.len()).collect();
    by_listings.sort_by_key(|&r| (std::cmp::Reverse(listed[r]), r));
    let reader_relays = by_listings[..2]
        .iter()
        .map(|&r| RELAYS[r].0.to_string())
        .collect();
    World::from_parts(WorldParts {
        name: format!("pruned-hubs/seed-{seed}"),
        now,
        sessions: SESSIONS,
        reader: Some(reader),
        follows,
        reader_relays,
        relay_lists,
        relays: RELAYS
            .iter()
            .map(|(url, _)| (url.to_string(), vec![true; SESSIONS as usize]))
            .collect(),
        events,
    })
    .unwrap_or_else(|e| fail(e))
}

fn main() {
    let args = Args::parse(&["--seed", "--out"]);
    let seed = args
        .parsed::<u64>("--seed")
        .unwrap_or_else(|e| fail(e))
        .unwrap_or(1);
    let world = build(seed);
    let written = match args.value("--out") {
        Some(path) => world.write_path(std::path::Path::new(path)),
        None => world.write(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    written.unwrap_or_else(|e| fail(e));
    let since = world.now - HUB_KEEPS;
    eprintln!(
        "{}: {} follows, {} notes ({} in the last 30 days)",
        world.name,
        world.follows.len(),
        world.events().len(),
        world
            .events()
            .iter()
            .filter(|e| e.created_at >= since)
            .count()
    );
    for (id, relay) in world.relays().iter().enumerate() {
        let lists = world
            .relay_lists
            .iter()
            .filter(|l| l.tags.iter().any(|t| t.get(1) == Some(&relay.url)))
            .count();
        let holds = world
            .events()
            .iter()
            .filter(|e| world.event_relays(e).contains(&(id as u32)))
            .count();
        eprintln!(
            "  {:<24} listed by {lists:>2} follows, holds {holds:>5} notes",
            relay.url
        );
    }
}

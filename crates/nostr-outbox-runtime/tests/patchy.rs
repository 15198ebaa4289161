//! Notes that miss some of a follow's relays, through the real runtime: eight local relays, 40
//! follows listing one to four of them, each note silently absent from some relays its author
//! lists, some only on the relay most follows list. At the default 20 connections (room for
//! every relay) `recall` fetches at least what `greedy` fetches, in a first run and in a second
//! run that keeps what the first learned.

use std::sync::Arc;

use nostr::key::Keys;
use nostr::types::Timestamp;
use nostr_outbox_client::MemoryStore;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::RuntimeConfig;

const RELAYS: usize = 8;
const FOLLOWS: u32 = 40;
const NOTES_PER_FOLLOW: u64 = 3;

/// The relays, the reader's relay (holding nothing), the follows, their lists and how many
/// notes the relays hold.
struct Patchy {
    relays: Vec<RealRelay>,
    reader: RealRelay,
    follows: Vec<Keys>,
    lists: Vec<nostr::event::Event>,
    notes: usize,
}

async fn patchy_world(now: u64) -> Patchy {
    let mut relays = Vec::new();
    for _ in 0..RELAYS {
        relays.push(RealRelay::start().await);
    }
    let reader = RealRelay::start().await;
    let follows: Vec<Keys> = (1..=FOLLOWS).map(key).collect();
    // One to four relays each, spread so that some relays are listed far more than others.
    let lists_of: Vec<Vec<usize>> = (0..follows.len())
        .map(|i| {
            let count = 1 + (i * 7 + i / 3) % 4;
            let mut listed: Vec<usize> =
                (0..count).map(|k| (i + k * (1 + i % 3)) % RELAYS).collect();
            listed.sort_unstable();
            listed.dedup();
            listed
        })
        .collect();
    let mut listings = [0usize; RELAYS];
    for &r in lists_of.iter().flatten() {
        listings[r] += 1;
    }
    let (mut lists, mut notes) = (Vec::new(), 0);
    for (i, (f, listed)) in follows.iter().zip(&lists_of).enumerate() {
        let entries: Vec<(&str, Option<&str>)> = listed
            .iter()
            .map(|&r| (relays[r].url.as_str(), None))
            .collect();
        lists.push(relay_list(f, now - 1_000, &entries));
        let most_listed = listed
            .iter()
            .copied()
            .max_by_key(|&r| (listings[r], RELAYS - r));
        for n in 0..NOTES_PER_FOLLOW {
            let held = note(f, now - 600 - n * 3_600, &format!("note {i}.{n}"));
            // A write that timed out or was pruned: each note misses one of its author's
            // relays in turn (where it lists more than one), so no relay holds them all; and
            // the newest note of a follow listing three or more reached only the relay most
            // follows list, the one a plan that knows nothing is likeliest to let go.
            let missing = (listed.len() > 1).then(|| listed[(i + n as usize) % listed.len()]);
            let only = (listed.len() >= 3 && n == 0)
                .then_some(most_listed)
                .flatten();
            let holds = |r: usize| only.map_or(Some(r) != missing, |o| o == r);
            for &r in listed.iter().filter(|&&r| holds(r)) {
                relays[r].store(&held).await;
            }
            notes += 1;
        }
    }
    Patchy {
        relays,
        reader,
        follows,
        lists,
        notes,
    }
}

/// Notes of the week `strategy` fetches at 20 connections: a first run, then a second on the
/// stats the first saved.
async fn runs(world: &Patchy, strategy: &str, now: u64) -> [usize; 2] {
    let store = Arc::new(MemoryStore::new());
    let mut got = [0; 2];
    for run in &mut got {
        let toml = format!("max_connections = 20\n[strategy]\ntype = \"{strategy}\"\n");
        let mut input = local_input(
            router(&toml),
            world.follows.iter().map(|k| k.public_key()).collect(),
            [world.reader.url.as_str()],
        );
        input.store = store.clone();
        for l in &world.lists {
            input.add_relay_list_event(l);
        }
        let config = RuntimeConfig {
            discover_lists: false,
            since: Some(Timestamp::from(now - 7 * DAY)),
            ..RuntimeConfig::fast_for_tests()
        };
        let (_, collected) = start_once(input, config).await;
        *run = collected.notes.len();
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_fetches_what_greedy_fetches_where_notes_miss_some_relays() {
    let now = now();
    let world = patchy_world(now).await;
    let recall = runs(&world, "recall", now).await;
    let greedy = runs(&world, "greedy", now).await;
    println!(
        "of {} notes on {} relays: recall {recall:?}, greedy {greedy:?}",
        world.notes,
        world.relays.len()
    );
    for (run, (r, g)) in recall.iter().zip(&greedy).enumerate() {
        assert!(r >= g, "run {}: recall {r}, greedy {g}", run + 1);
    }
}

//! A nostr-sdk `Client` with this crate's gossip engine reads a feed from real local relays:
//! the notes arrive, the relays it asks stay within the budget, and what it learned is kept.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{EventId, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::RelayUrl;
use nostr_outbox_fleet::{keys, note, now, relay_list, RealRelay, DAY};
use nostr_outbox_gossip::OutboxGossip;
use nostr_sdk::prelude::{Client, RelayStatus};

/// Routed relays allowed: half the eight write relays the lists declare.
const BUDGET: usize = 4;

fn config(budget: usize) -> String {
    format!(
        "max_connections = {budget}\n[url_policy]\nallow_loopback = true\n\
         [strategy]\ntype = \"greedy\"\n"
    )
}

/// Eight write relays: two shared by three follows each, and one of each follow's own. The two
/// shared relays cover everyone; all eight are declared, and nostr-sdk's own engine (three
/// write relays per author) would ask every one.
const LISTS: [[usize; 2]; 6] = [[0, 2], [1, 3], [0, 4], [1, 5], [0, 6], [1, 7]];

struct Setup {
    reader: RealRelay,
    writers: Vec<RealRelay>,
    follows: Vec<PublicKey>,
    notes: BTreeSet<EventId>,
}

async fn setup() -> Setup {
    let reader = RealRelay::start().await;
    let mut writers = Vec::new();
    for _ in 0..8 {
        writers.push(RealRelay::start().await);
    }
    let t = now();
    let mut follows = Vec::new();
    let mut notes = BTreeSet::new();
    for (i, relays) in LISTS.iter().enumerate() {
        let author = keys(10 + i as u8);
        follows.push(author.public_key());
        let entries: Vec<(&str, Option<&str>)> = relays
            .iter()
            .map(|&r| (writers[r].url.as_str(), Some("write")))
            .collect();
        // The lists live on the reader's relay, where nostr-sdk looks them up.
        reader.store(&relay_list(&author, t - DAY, &entries)).await;
        for n in 0..3u64 {
            let event = note(&author, t - 60 * (n + 1), &format!("note {n} of {i}"));
            for &r in relays {
                writers[r].store(&event).await;
            }
            notes.insert(event.id);
        }
    }
    Setup {
        reader,
        writers,
        follows,
        notes,
    }
}

/// Reads the follows' notes once; returns their ids.
async fn read_feed(client: &Client, follows: &[PublicKey]) -> BTreeSet<EventId> {
    let filter = Filter::new()
        .authors(follows.iter().copied())
        .kind(Kind::TextNote);
    let events = client
        .fetch_events(filter)
        .timeout(Duration::from_secs(10))
        .await
        .expect("fetched");
    events.into_iter().map(|e| e.id).collect()
}

async fn connected(client: &Client) -> HashSet<RelayUrl> {
    client
        .relays()
        .all()
        .await
        .into_iter()
        .filter(|(_, relay)| relay.status() == RelayStatus::Connected)
        .map(|(url, _)| url)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostr_sdk_reads_the_feed_within_the_budget_and_keeps_what_it_learned() {
    let s = setup().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let gossip = Arc::new(
        OutboxGossip::from_toml(&config(BUDGET))
            .unwrap()
            .reader_relays([s.reader.url.as_str()])
            .json_store(&path)
            .open()
            .await
            .unwrap(),
    );
    let client = common::client(gossip.clone(), common::quick_config(), &s.reader.url).await;

    let got = read_feed(&client, &s.follows).await;
    let missing: Vec<_> = s.notes.difference(&got).collect();
    assert!(
        missing.is_empty(),
        "notes missing from the feed: {missing:?}"
    );

    // Counted on the relays' side: which write relays were asked for notes.
    let asked: Vec<&RealRelay> = s
        .writers
        .iter()
        .filter(|r| r.counter.feed_reqs() > 0)
        .collect();
    assert!(
        asked.len() <= BUDGET,
        "{} write relays asked, budget {BUDGET}",
        asked.len()
    );
    let plan = gossip.plan_summary().expect("a plan");
    assert_eq!(plan.residual, 0, "{plan:?}");
    assert!(plan.routed.len() <= BUDGET, "{plan:?}");
    for relay in &asked {
        assert!(
            plan.routed.contains(&relay.url),
            "{} is not in {plan:?}",
            relay.url
        );
    }

    // Learn from the round and keep it; a second engine opened from the file knows it.
    let reached = connected(&client).await;
    assert!(gossip.end_round(Some(&reached)), "nothing learned");
    gossip.save().await.unwrap();
    client.shutdown().await;
    assert!(path.exists(), "no stats file written");

    let again = OutboxGossip::from_toml(&config(BUDGET))
        .unwrap()
        .json_store(&path)
        .open()
        .await
        .unwrap();
    let stats = again.stats();
    for relay in &asked {
        let learned = stats.get(&relay.url);
        assert!(learned.asked > 0, "{} not learned: {learned:?}", relay.url);
        assert!(learned.live_mean() > 0.5, "{}: {learned:?}", relay.url);
    }
    let pairs: usize = stats.authors().map(|(_, a)| a.relays.len()).sum();
    assert!(pairs > 0, "no per-follow delivery learned");
    for relay in s.writers.iter().filter(|r| r.counter.feed_reqs() == 0) {
        assert_eq!(
            stats.get(&relay.url).asked,
            0,
            "{} was never asked",
            relay.url
        );
    }
    s.reader.shutdown();
}

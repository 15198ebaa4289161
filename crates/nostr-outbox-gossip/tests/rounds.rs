//! Rounds end without the caller: the engine learns from a read when nostr-sdk starts the next
//! one, when a round goes idle, and at `save`; with `manual_rounds` only `end_round` ends one.
//! Driven as nostr-sdk drives the engine, then with a real nostr-sdk `Client` on local relays.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{EventBuilder, FinalizeEvent, Kind};
use nostr::filter::Filter;
use nostr::key::{Keys, PublicKey};
use nostr::types::RelayUrl;
use nostr_gossip::{BestRelaySelection, GossipAllowedRelays, GossipListKind, NostrGossip};
use nostr_outbox_fleet::{keys, note, now, relay_list, RealRelay, DAY};
use nostr_outbox_gossip::{OutboxGossip, OutboxGossipBuilder};

const FOLLOWS: usize = 12;

fn config() -> &'static str {
    "max_connections = 4\n[strategy]\ntype = \"greedy\"\n"
}

/// Follow `i` writes to two of six relays.
fn relays_of(i: usize) -> Vec<String> {
    (0..2)
        .map(|k| format!("wss://r{}.example.com", (i + k * 3) % 6))
        .collect()
}

struct Follows {
    keys: Vec<Keys>,
    public: Vec<PublicKey>,
}

fn follows() -> Follows {
    let keys: Vec<Keys> = (0..FOLLOWS).map(|_| Keys::generate()).collect();
    let public = keys.iter().map(Keys::public_key).collect();
    Follows { keys, public }
}

async fn open(builder: OutboxGossipBuilder, f: &Follows) -> OutboxGossip {
    let gossip = builder
        .reader_relays(["wss://home.example.com"])
        .open()
        .await
        .unwrap();
    for (i, k) in f.keys.iter().enumerate() {
        gossip
            .process(&common::list(k, &relays_of(i)), None)
            .await
            .unwrap();
    }
    gossip
}

/// What nostr-sdk does for a feed read: the status of every author's list, then each author's
/// write relays. Returns per relay the authors it was asked about.
async fn begin_read(gossip: &OutboxGossip, f: &Follows) -> Vec<(RelayUrl, Vec<usize>)> {
    let allowed = GossipAllowedRelays::default();
    for pk in &f.public {
        gossip.status(pk, GossipListKind::Nip65).await.unwrap();
    }
    let mut asked: Vec<(RelayUrl, Vec<usize>)> = Vec::new();
    for (i, pk) in f.public.iter().enumerate() {
        let write = BestRelaySelection::Write { limit: 3 };
        for url in gossip.get_best_relays(pk, write, allowed).await.unwrap() {
            match asked.iter_mut().find(|(u, _)| *u == url) {
                Some((_, authors)) => authors.push(i),
                None => asked.push((url, vec![i])),
            }
        }
    }
    asked
}

/// The relays answer: each sends a note of every author it was asked about and writes for.
async fn answer(gossip: &OutboxGossip, f: &Follows, asked: &[(RelayUrl, Vec<usize>)]) {
    for (url, authors) in asked {
        for &i in authors {
            let holds = relays_of(i)
                .iter()
                .any(|r| r.trim_end_matches('/') == url.as_str().trim_end_matches('/'));
            if holds {
                let note = EventBuilder::new(Kind::TextNote, "gm")
                    .finalize(&f.keys[i])
                    .unwrap();
                gossip.process(&note, Some(url)).await.unwrap();
            }
        }
    }
}

/// Relays with anything learned.
fn learned(gossip: &OutboxGossip) -> usize {
    let stats = gossip.stats();
    (0..6)
        .filter(|r| stats.get(&format!("wss://r{r}.example.com")).asked > 0)
        .count()
}

#[tokio::test]
async fn the_next_read_ends_the_round_before_it_is_planned() {
    let f = follows();
    let gossip = open(OutboxGossip::from_toml(config()).unwrap(), &f).await;
    let asked = begin_read(&gossip, &f).await;
    answer(&gossip, &f, &asked).await;
    assert_eq!(learned(&gossip), 0, "the read is still open");
    let first = gossip.plan_summary().expect("a plan");

    // The next read begins: nostr-sdk asks the first author's status.
    gossip
        .status(&f.public[0], GossipListKind::Nip65)
        .await
        .unwrap();
    let got = learned(&gossip);
    assert!(got > 0 && got <= first.routed.len(), "{got} relays learned");
    let stats = gossip.stats();
    for url in &first.routed {
        assert!(stats.get(url).live_mean() > 0.5, "{url} answered");
    }
    // Nothing is left to end: the round was learned once.
    assert!(!gossip.end_round(None));
}

#[tokio::test]
async fn an_idle_round_ends_by_itself() {
    let f = follows();
    let idle = Duration::from_millis(500);
    let builder = OutboxGossip::from_toml(config()).unwrap().round_idle(idle);
    let gossip = open(builder, &f).await;
    let asked = begin_read(&gossip, &f).await;
    // The round's last activity comes after this instant.
    let started = std::time::Instant::now();
    answer(&gossip, &f, &asked).await;
    let early = learned(&gossip);
    // Only a check made within the idle time says anything: a busy machine may be slower.
    if started.elapsed() < idle {
        assert_eq!(early, 0, "not idle yet");
    }
    tokio::time::sleep(idle + Duration::from_millis(100)).await;
    assert!(learned(&gossip) > 0, "the idle round was not learned");
}

#[tokio::test]
async fn save_keeps_the_open_round() {
    let f = follows();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let builder = OutboxGossip::from_toml(config()).unwrap().json_store(&path);
    let gossip = open(builder, &f).await;
    let asked = begin_read(&gossip, &f).await;
    answer(&gossip, &f, &asked).await;
    gossip.save().await.unwrap();
    let again = OutboxGossip::from_toml(config())
        .unwrap()
        .json_store(&path)
        .open()
        .await
        .unwrap();
    assert!(learned(&again) > 0, "the saved stats hold nothing learned");
}

#[tokio::test]
async fn manual_rounds_end_only_when_told() {
    let f = follows();
    let builder = OutboxGossip::from_toml(config())
        .unwrap()
        .round_idle(Duration::from_millis(10))
        .manual_rounds();
    let gossip = open(builder, &f).await;
    let asked = begin_read(&gossip, &f).await;
    answer(&gossip, &f, &asked).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    begin_read(&gossip, &f).await;
    assert_eq!(learned(&gossip), 0, "a manual round ended by itself");
    assert!(gossip.end_round(None));
    assert!(learned(&gossip) > 0);
}

/// A real nostr-sdk `Client` reads the feed twice; the caller never calls `end_round`. The
/// first read is learned when the second begins, the second at `save`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nostr_sdk_client_teaches_the_engine_without_end_round() {
    let reader = RealRelay::start().await;
    let mut writers = Vec::new();
    for _ in 0..4 {
        writers.push(RealRelay::start().await);
    }
    let t = now();
    let mut authors = Vec::new();
    for i in 0..4usize {
        let author = keys(40 + i as u8);
        authors.push(author.public_key());
        let mine = [i, (i + 1) % 4];
        let entries: Vec<(&str, Option<&str>)> = mine
            .iter()
            .map(|&r| (writers[r].url.as_str(), Some("write")))
            .collect();
        reader.store(&relay_list(&author, t - DAY, &entries)).await;
        let event = note(&author, t - 60, &format!("note of {i}"));
        for &r in &mine {
            writers[r].store(&event).await;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let toml = "max_connections = 4\n[url_policy]\nallow_loopback = true\n\
                [strategy]\ntype = \"greedy\"\n";
    let gossip = Arc::new(
        OutboxGossip::from_toml(toml)
            .unwrap()
            .reader_relays([reader.url.as_str()])
            .json_store(&path)
            .open()
            .await
            .unwrap(),
    );
    let client = common::client(gossip.clone(), common::quick_config(), &reader.url).await;
    let filter = Filter::new()
        .authors(authors.iter().copied())
        .kind(Kind::TextNote);
    let read = |filter: Filter| {
        let client = &client;
        async move {
            client
                .fetch_events(filter)
                .timeout(Duration::from_secs(10))
                .await
                .expect("fetched")
                .len()
        }
    };

    assert_eq!(read(filter.clone()).await, 4, "first read");
    let routed: HashSet<String> = gossip
        .plan_summary()
        .expect("a plan")
        .routed
        .into_iter()
        .collect();
    assert!(!routed.is_empty());
    let asked_before: u64 = routed.iter().map(|u| gossip.stats().get(u).asked).sum();
    assert_eq!(asked_before, 0, "learned before the next read began");

    assert_eq!(read(filter).await, 4, "second read");
    let stats = gossip.stats();
    for url in &routed {
        let s = stats.get(url);
        assert!(s.asked > 0 && s.live_mean() > 0.5, "{url}: {s:?}");
    }
    let after_first: u64 = routed.iter().map(|u| stats.get(u).asked).sum();

    gossip.save().await.unwrap();
    client.shutdown().await;
    let again = OutboxGossip::from_toml(toml)
        .unwrap()
        .json_store(&path)
        .open()
        .await
        .unwrap();
    let saved: u64 = routed.iter().map(|u| again.stats().get(u).asked).sum();
    assert!(
        saved > after_first,
        "the second read was not saved: {saved} asks after {after_first}"
    );
    reader.shutdown();
}

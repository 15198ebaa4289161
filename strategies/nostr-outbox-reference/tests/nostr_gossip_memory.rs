//! `nostr_sdk` against the real `nostr-gossip-memory` 0.45.1 engine, fed the committed world
//! (`fixtures/world.json`): per follow, the relays nostr-sdk's feed read asks (its `Write`,
//! `Hints` and `MostReceived` answers with the client's default limits) and the relays the
//! strategy gives the follow, cold and after some relays delivered notes.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::Keys;
use nostr::nips::nip65::{self, RelayMetadata};
use nostr::types::{RelayUrl, Timestamp};
use nostr_gossip::{BestRelaySelection, GossipAllowedRelays, NostrGossip};
use nostr_gossip_memory::prelude::NostrGossipMemory;
use nostr_outbox_core::stats::{AuthorRound, RelayRound};
use nostr_outbox_core::{
    DeliveryStats, PlanInput, RawRelayList, RoundReport, RouteTable, RouteTableBuilder, UrlPolicy,
};
use nostr_outbox_reference::{
    NostrSdk, NostrSdkConfig, DEFAULT_NOSTR_SDK_HINTS, DEFAULT_NOSTR_SDK_MOST_RECEIVED,
    DEFAULT_NOSTR_SDK_WRITE,
};
use serde_json::Value;

/// The list entries the engine keeps per author (its `MAX_NIP65_SIZE`).
const NOSTR_GOSSIP_MEMORY_ENTRIES: usize = 7;

/// Follow label → the relays asked about it (canonical URLs).
type Asked = BTreeMap<String, BTreeSet<String>>;

struct World {
    labels: Vec<String>,
    keys: Vec<Keys>,
    lists: Vec<Event>,
}

fn world() -> World {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/world.json");
    let text = std::fs::read_to_string(&path).expect("world.json");
    let world: Value = serde_json::from_str(&text).expect("json");
    let labels: Vec<String> = world["follows"]
        .as_array()
        .expect("follows")
        .iter()
        .map(|l| l.as_str().expect("label").to_string())
        .collect();
    let keys: Vec<Keys> = labels.iter().map(|_| Keys::generate()).collect();
    let mut lists = Vec::new();
    for (label, key) in labels.iter().zip(&keys) {
        let Some(list) = world["lists"].get(label) else {
            continue;
        };
        let tags = list.as_array().expect("tags").iter().map(|t| {
            let parts: Vec<String> = t
                .as_array()
                .expect("tag")
                .iter()
                .map(|p| p.as_str().expect("string").to_string())
                .collect();
            Tag::parse(parts).expect("tag")
        });
        let event = EventBuilder::new(Kind::RelayList, "")
            .tags(tags)
            .custom_created_at(Timestamp::from(1_700_000_000))
            .finalize(key)
            .expect("signed");
        lists.push(event);
    }
    World {
        labels,
        keys,
        lists,
    }
}

fn table(world: &World) -> RouteTable {
    let mut b = RouteTableBuilder::new(UrlPolicy::default())
        .follows(world.keys.iter().map(Keys::public_key))
        .reader_relays(["wss://home.example.com"]);
    for event in &world.lists {
        b.add_list(RawRelayList::try_from(event).expect("a list"));
    }
    b.build()
}

fn canonical(url: &RelayUrl) -> String {
    UrlPolicy::default()
        .canonicalize(url.as_str())
        .unwrap_or_else(|why| panic!("{url}: {why:?}"))
}

/// What nostr-sdk's client asks about each follow: the union of the engine's answers.
async fn engine_asks(engine: &NostrGossipMemory, world: &World) -> Asked {
    let allowed = GossipAllowedRelays::default();
    let selections = [
        BestRelaySelection::Write {
            limit: DEFAULT_NOSTR_SDK_WRITE as u8,
        },
        BestRelaySelection::Hints {
            limit: DEFAULT_NOSTR_SDK_HINTS as u8,
        },
        BestRelaySelection::MostReceived {
            limit: DEFAULT_NOSTR_SDK_MOST_RECEIVED as u8,
        },
    ];
    let mut asked = Asked::new();
    for (label, key) in world.labels.iter().zip(&world.keys) {
        let mut relays: HashSet<RelayUrl> = HashSet::new();
        for selection in selections {
            let pk = key.public_key();
            relays.extend(
                engine
                    .get_best_relays(&pk, selection, allowed)
                    .await
                    .unwrap(),
            );
        }
        asked.insert(label.clone(), relays.iter().map(canonical).collect());
    }
    asked
}

/// What the strategy gives each follow, before any budget.
fn strategy_asks(world: &World, table: &RouteTable, stats: &DeliveryStats) -> Asked {
    std::hint::black_box(DEFAULT_NOSTR_SDK_WRITE);
    let config = NostrSdkConfig::default();
    let selector = NostrSdk::new(&config);
    let input = PlanInput::new(table, usize::MAX, stats, 1_700_000_100);
    let mut asked = Asked::new();
    for (label, key) in world.labels.iter().zip(&world.keys) {
        let author = table.author_id(&key.public_key()).expect("a follow");
        let relays = selector.author_relays(&input, author);
        asked.insert(
            label.clone(),
            relays.iter().map(|&r| table.url(r).to_string()).collect(),
        );
    }
    asked
}

fn differences(engine: &Asked, strategy: &Asked) -> Vec<String> {
    engine
        .iter()
        .filter(|(label, relays)| strategy.get(*label) != Some(relays))
        .map(|(label, relays)| {
            format!(
                "{label}: engine {relays:?}, strategy {:?}",
                strategy.get(label)
            )
        })
        .collect()
}

/// The engine, with every relay list of `world` processed.
async fn engine_of(world: &World) -> NostrGossipMemory {
    let engine = NostrGossipMemory::unbounded();
    for event in &world.lists {
        engine.process(event, None).await.unwrap();
    }
    engine
}

#[tokio::test]
async fn cold_the_strategy_asks_what_the_engine_answers() {
    let world = world();
    let engine = engine_of(&world).await;
    let t = table(&world);
    let got = strategy_asks(&world, &t, &DeliveryStats::new());
    let want = engine_asks(&engine, &world).await;
    let asked: usize = want.values().map(BTreeSet::len).sum();
    assert!(asked > 100, "the world routes most follows ({asked} pairs)");
    let diff = differences(&want, &got);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

#[tokio::test]
async fn after_delivery_both_rank_the_relays_that_delivered_first() {
    let world = world();
    let engine = engine_of(&world).await;
    let t = table(&world);
    let mut stats = DeliveryStats::new();
    let now = 1_700_000_100;
    // Every follow with four or more write relays among the first seven entries of its list
    // (what the engine keeps): the last of them delivered a few notes, the follow's other
    // write relays were asked and sent none.
    let mut moved = 0;
    let mut report = RoundReport::default();
    for (key, event) in world.keys.iter().filter_map(|k| {
        let event = world.lists.iter().find(|e| e.pubkey == k.public_key())?;
        Some((k, event))
    }) {
        let author = t.author_id(&key.public_key()).expect("a follow");
        let kept: Vec<String> = nip65::extract_relay_list(event)
            .take(NOSTR_GOSSIP_MEMORY_ENTRIES)
            .filter(|(_, marker)| *marker != Some(RelayMetadata::Read))
            .map(|(url, _)| canonical(&url))
            .collect();
        if kept.len() <= DEFAULT_NOSTR_SDK_WRITE {
            continue;
        }
        let last = t
            .relay_id(kept.last().expect("kept"))
            .expect("in the table");
        moved += 1;
        let notes = 3;
        for n in 0..notes {
            let note = EventBuilder::new(Kind::TextNote, format!("note {n}"))
                .custom_created_at(Timestamp::from(now - 60 * (n + 1)))
                .finalize(key)
                .unwrap();
            let url = RelayUrl::parse(t.url(last)).unwrap();
            engine.process(&note, Some(&url)).await.unwrap();
        }
        for &relay in t.write_relays(author) {
            let events = if relay == last { notes as u32 } else { 0 };
            report.relays.push(RelayRound {
                url: t.url(relay).to_string(),
                answered: true,
                authors: vec![AuthorRound::counted(key.public_key(), events)],
                compare_only: false,
            });
        }
    }
    assert!(
        moved >= 10,
        "the world has follows with long lists ({moved})"
    );
    // One round per relay URL, its authors together.
    let mut merged: BTreeMap<String, RelayRound> = BTreeMap::new();
    for r in report.relays {
        merged
            .entry(r.url.clone())
            .and_modify(|m| m.authors.extend(r.authors.iter().copied()))
            .or_insert(r);
    }
    let report = RoundReport {
        relays: merged.into_values().collect(),
    };
    stats.record_round(&report, now);
    let got = strategy_asks(&world, &t, &stats);
    let want = engine_asks(&engine, &world).await;
    let diff = differences(&want, &got);
    assert!(diff.is_empty(), "{}", diff.join("\n"));
}

//! The engine driven as nostr-sdk drives it (status, lists processed, best relays per author,
//! notes with the relay they came from), without a network: answers stay within the budget,
//! every selection stays inside the plan, and learning survives the SQLite store.

mod common;

use std::collections::HashSet;

use nostr::event::{EventBuilder, FinalizeEvent, Kind};
use nostr::key::{Keys, PublicKey};
use nostr::types::RelayUrl;
use nostr_gossip::{BestRelaySelection, GossipAllowedRelays, GossipListKind, NostrGossip};
use nostr_outbox_gossip::OutboxGossip;

const BUDGET: usize = 5;
const FOLLOWS: usize = 40;

fn config() -> String {
    format!("max_connections = {BUDGET}\n[strategy]\ntype = \"recall\"\n")
}

/// Follow `i` writes to three of twenty relays.
fn relays_of(i: usize) -> Vec<String> {
    (0..3)
        .map(|k| format!("wss://r{}.example.com", (i * 7 + k * 3) % 20))
        .collect()
}

const WRITE: BestRelaySelection = BestRelaySelection::Write { limit: 3 };

/// What nostr-sdk's feed read would ask: per author, `Write`, `Hints` and `MostReceived`.
async fn feed_read(gossip: &OutboxGossip, follows: &[PublicKey]) -> HashSet<RelayUrl> {
    let allowed = GossipAllowedRelays::default();
    let mut all = HashSet::new();
    for selection in [
        WRITE,
        BestRelaySelection::Hints { limit: 1 },
        BestRelaySelection::MostReceived { limit: 1 },
    ] {
        for pk in follows {
            all.extend(
                gossip
                    .get_best_relays(pk, selection, allowed)
                    .await
                    .unwrap(),
            );
        }
    }
    all
}

#[tokio::test]
async fn a_feed_read_stays_within_the_budget_and_learning_survives_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.sqlite");
    let gossip = OutboxGossip::from_toml(&config())
        .unwrap()
        .reader_relays(["wss://home.example.com"])
        .sqlite_store(&path)
        .open()
        .await
        .unwrap();
    let keys: Vec<Keys> = (0..FOLLOWS).map(|_| Keys::generate()).collect();
    let follows: Vec<PublicKey> = keys.iter().map(Keys::public_key).collect();
    let declared: HashSet<String> = (0..FOLLOWS).flat_map(relays_of).collect();
    assert!(declared.len() > BUDGET);
    // nostr-sdk asks the status of every author of the filter, fetches the lists, notes the
    // attempt, then asks for relays.
    for pk in &follows {
        assert!(gossip
            .status(pk, GossipListKind::Nip65)
            .await
            .unwrap()
            .is_missing());
    }
    for (i, k) in keys.iter().enumerate() {
        gossip
            .process(&common::list(k, &relays_of(i)), None)
            .await
            .unwrap();
        gossip
            .update_fetch_attempt(&k.public_key(), GossipListKind::Nip65)
            .await
            .unwrap();
    }
    for pk in &follows {
        assert!(gossip
            .status(pk, GossipListKind::Nip65)
            .await
            .unwrap()
            .is_updated());
    }

    let asked = feed_read(&gossip, &follows).await;
    let plan = gossip.plan_summary().expect("a plan");
    assert_eq!(plan.keys, FOLLOWS);
    let routed: HashSet<&str> = plan.routed.iter().map(String::as_str).collect();
    let carriers: HashSet<&str> = plan.carriers.iter().map(String::as_str).collect();
    // The reader's relays carry the residual anyway: only routed relays beyond them count.
    assert!(routed.difference(&carriers).count() <= BUDGET, "{plan:?}");
    for url in &asked {
        let url = url.as_str().trim_end_matches('/');
        assert!(
            routed.contains(url) || carriers.contains(url),
            "{url} is outside the plan {plan:?}"
        );
    }
    let opened = asked
        .iter()
        .filter(|u| !carriers.contains(u.as_str().trim_end_matches('/')))
        .count();
    assert!(
        opened <= BUDGET,
        "{opened} routed relays asked, budget {BUDGET}"
    );

    // Notes arrive from the routed relays; one relay sends nothing and is not reached.
    let mut reached = HashSet::new();
    let silent = plan.routed.last().cloned().expect("a routed relay");
    for url in plan.routed.iter().filter(|u| **u != silent) {
        let relay = RelayUrl::parse(url).unwrap();
        reached.insert(relay.clone());
        for (i, k) in keys.iter().enumerate() {
            if relays_of(i).contains(url) {
                let note = EventBuilder::new(Kind::TextNote, "gm").finalize(k).unwrap();
                gossip.process(&note, Some(&relay)).await.unwrap();
            }
        }
    }
    assert!(gossip.end_round(Some(&reached)));
    gossip.save().await.unwrap();

    let again = OutboxGossip::from_toml(&config())
        .unwrap()
        .sqlite_store(&path)
        .open()
        .await
        .unwrap();
    let stats = again.stats();
    for url in &plan.routed {
        let s = stats.get(url);
        assert!(s.asked > 0, "{url}: {s:?}");
        if *url == silent {
            assert!(s.live_mean() < 0.5, "{url} never answered: {s:?}");
        } else {
            assert!(s.live_mean() > 0.5, "{url} answered: {s:?}");
        }
    }
    // The kept lists come back too: the reopened engine plans routed before any fetch.
    for pk in &follows {
        assert!(again
            .status(pk, GossipListKind::Nip65)
            .await
            .unwrap()
            .is_outdated());
    }
    let answer = again
        .get_best_relays(&follows[0], WRITE, GossipAllowedRelays::default())
        .await
        .unwrap();
    assert!(!answer.is_empty());
    let plan = again.plan_summary().expect("a plan");
    let beyond_carriers = plan
        .routed
        .iter()
        .filter(|url| !plan.carriers.contains(url))
        .count();
    assert!(
        !plan.routed.is_empty() && beyond_carriers <= BUDGET,
        "{plan:?}"
    );
}

#[tokio::test]
async fn each_installation_draws_its_own_base_seed_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");
    let open = |path: std::path::PathBuf| async move {
        OutboxGossip::from_toml(&config())
            .unwrap()
            .json_store(path)
            .open()
            .await
            .unwrap()
    };
    let first = open(path.clone()).await;
    first.save().await.unwrap();
    let again = open(path).await;
    assert_eq!(again.base_seed(), first.base_seed(), "kept by the store");
    let elsewhere = open(dir.path().join("other.json")).await;
    assert_ne!(
        elsewhere.base_seed(),
        first.base_seed(),
        "drawn, not 0 for everyone"
    );
    let given = OutboxGossip::from_toml(&config())
        .unwrap()
        .seed(7)
        .open()
        .await
        .unwrap();
    assert_eq!(given.base_seed(), 7);
}

/// A kept relay list dated in the future, whatever store kept it, is not loaded: the author's
/// list counts as missing and is fetched, instead of the one ahead outranking it for good.
#[tokio::test]
async fn a_kept_list_dated_in_the_future_is_not_loaded() {
    use nostr_outbox_client::{MemoryStore, StateStore};
    let now = nostr::types::Timestamp::now().as_secs();
    let ahead = Keys::generate().public_key();
    let fine = Keys::generate().public_key();
    let store = std::sync::Arc::new(MemoryStore::new());
    let kept = |author: PublicKey, created_at: u64| nostr_outbox_core::RawRelayList {
        author,
        created_at,
        tags: vec![vec!["r".into(), "wss://w.example.com".into()]],
    };
    store
        .save_lists(&[kept(ahead, 1 << 62), kept(fine, now - 100)])
        .await
        .unwrap();
    let gossip = OutboxGossip::from_toml(&config())
        .unwrap()
        .store(store)
        .open()
        .await
        .unwrap();
    let status = gossip.status(&ahead, GossipListKind::Nip65).await.unwrap();
    assert!(status.is_missing(), "{status:?}");
    let status = gossip.status(&fine, GossipListKind::Nip65).await.unwrap();
    assert!(status.is_outdated(), "{status:?}");
}

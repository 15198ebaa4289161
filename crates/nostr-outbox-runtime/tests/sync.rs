//! Relay-list discovery by set reconciliation (NIP-77): a second run against an unchanged relay
//! moves a small share of the bytes a lookup moves, fetches exactly what changed, and a relay
//! that does not reconcile is asked with a lookup instead.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    lookup, sync, Client, FeedSummary, LookupOutcome, RuntimeConfig, SyncOutcome,
};

const CONFIG: &str = "max_connections = 50\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

/// Follows with a relay list each on one local relay; the filter that discovers them.
async fn lists_world(n: u32) -> (RealRelay, Vec<nostr::key::Keys>, Filter) {
    let relay = RealRelay::start().await;
    let follows: Vec<_> = (0..n).map(|i| key(1_000 + i)).collect();
    for (i, f) in follows.iter().enumerate() {
        let write = format!("wss://write-{i}.example");
        let read = format!("wss://read-{i}.example");
        let list = relay_list(
            f,
            now() - 10_000,
            &[(&write, Some("write")), (&read, Some("read"))],
        );
        relay.store(&list).await;
    }
    let filter = Filter::new()
        .kind(Kind::RelayList)
        .authors(follows.iter().map(|k| k.public_key()));
    (relay, follows, filter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_world_syncs_in_a_fifth_of_the_bytes_and_a_change_is_fetched_alone() {
    let (relay, follows, filter) = lists_world(300).await;
    let gauge = Gauge::default();
    let url = proxy(&relay.url, gauge.clone()).await;
    let client = Client::new(RuntimeConfig::fast_for_tests());

    let first = lookup(std::slice::from_ref(&url), &filter, &client).await;
    assert_eq!(first.relays[&url], LookupOutcome::Answered);
    assert_eq!(first.events.len(), 300);
    let looked_up = gauge.bytes.swap(0, Ordering::SeqCst);

    let second = sync(std::slice::from_ref(&url), &filter, &first.events, &client).await;
    let synced = gauge.bytes.swap(0, Ordering::SeqCst);
    assert_eq!(
        second.relays[&url],
        SyncOutcome::Reconciled {
            missing: 0,
            rounds: 1
        },
        "{second:?}"
    );
    assert!(second.fetched.is_empty());
    eprintln!("300 relay lists: a lookup moved {looked_up} bytes, reconciling {synced}");
    assert!(
        synced * 5 <= looked_up,
        "reconciling moved {synced} bytes, the lookup {looked_up}"
    );

    // One follow moves: only the new list comes.
    let moved = relay_list(&follows[7], now() - 100, &[("wss://new.example", None)]);
    relay.store(&moved).await;
    let third = sync(std::slice::from_ref(&url), &filter, &first.events, &client).await;
    let ids: Vec<_> = third.fetched.iter().map(|e| e.id).collect();
    assert_eq!(ids, [moved.id], "{:?}", third.relays);
    assert!(matches!(
        third.relays[&url],
        SyncOutcome::Reconciled { missing: 1, .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_does_not_reconcile_is_asked_with_a_lookup() {
    let f = key(7);
    let list = relay_list(&f, now() - 100, &[("wss://w.example", Some("write"))]);
    // Answers REQs (after two rate-limited refusals) and ignores NEG-OPEN.
    let plain = FaultServer::start(Fault::RateLimited, vec![list.clone()]).await;
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let filter = Filter::new().kind(Kind::RelayList).author(f.public_key());
    let synced = tokio::time::timeout(
        Duration::from_secs(30),
        sync(std::slice::from_ref(&plain.url), &filter, &[], &client),
    )
    .await
    .expect("a sync ends within its timeouts");
    let ids: Vec<_> = synced.fetched.iter().map(|e| e.id).collect();
    assert_eq!(ids, [list.id]);
    match &synced.relays[&plain.url] {
        SyncOutcome::FellBack { why, lookup } => {
            assert!(why.contains("NEG-MSG"), "{why}");
            assert_eq!(*lookup, LookupOutcome::Answered);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(synced.reconciled(), 0);
}

/// One `--once` feed whose lists are discovered on `indexer` (the reader relay holds none),
/// starting from `kept`.
async fn feed_once(
    reader: &RealRelay,
    indexer: &str,
    follows: &[nostr::key::Keys],
    kept: Vec<nostr_outbox_core::RawRelayList>,
    sync_lists: bool,
) -> FeedSummary {
    let follows = follows.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(router(CONFIG), follows, [&reader.url]);
    input.relay_lists = kept;
    let config = RuntimeConfig {
        once: true,
        discover_lists: true,
        sync_lists,
        indexers: vec![indexer.to_string()],
        ..RuntimeConfig::fast_for_tests()
    };
    start_once(input, config).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_feed_discovers_unchanged_lists_in_a_fifth_of_the_bytes() {
    let [reader, indexer] = RealRelay::several().await;
    let follows: Vec<_> = (0..200).map(|i| key(5_000 + i)).collect();
    for f in &follows {
        let list = relay_list(f, now() - 10_000, &[(&reader.url, Some("write"))]);
        indexer.store(&list).await;
    }
    let gauge = Gauge::default();
    let url = proxy(&indexer.url, gauge.clone()).await;

    let first = feed_once(&reader, &url, &follows, Vec::new(), true).await;
    let paged = gauge.bytes.swap(0, Ordering::SeqCst);
    assert_eq!(first.relay_lists, 200, "{first:#?}");
    assert_eq!(first.lists_reconciled, 0, "nothing kept: paged");
    let second = feed_once(&reader, &url, &follows, first.lists.clone(), true).await;
    let reconciled = gauge.bytes.swap(0, Ordering::SeqCst);
    assert_eq!(second.relay_lists, 200);
    // The indexer reconciled; the reader's relay too (it holds none of the lists).
    assert_eq!(second.lists_reconciled, 2, "{second:#?}");
    let (mut a, mut b) = (first.lists.clone(), second.lists.clone());
    a.sort_by_key(|l| l.author);
    b.sort_by_key(|l| l.author);
    assert_eq!(a, b, "the same lists kept");
    eprintln!(
        "200 relay lists: the first run's discovery moved {paged} bytes, the second's {reconciled}"
    );
    assert!(
        reconciled * 5 <= paged,
        "reconciling moved {reconciled} bytes, paging {paged}"
    );
    // Without reconciliation the second run pages every list again.
    let again = feed_once(&reader, &url, &follows, first.lists.clone(), false).await;
    let repaged = gauge.bytes.swap(0, Ordering::SeqCst);
    assert_eq!(again.relay_lists, 200);
    assert!(repaged * 4 >= paged * 3, "{repaged} vs {paged}");

    // A follow that moved since is found by the next run.
    let moved = relay_list(
        &follows[3],
        now() - 50,
        &[("wss://moved.example", Some("write"))],
    );
    indexer.store(&moved).await;
    let third = feed_once(&reader, &url, &follows, second.lists.clone(), true).await;
    let list = third
        .lists
        .iter()
        .find(|l| l.author == follows[3].public_key())
        .expect("kept");
    assert_eq!(list.created_at, moved.created_at.as_secs());
}

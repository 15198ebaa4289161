//! NIP-66 monitor reports on real local relays: a fresh report for a live relay and a stale
//! one for a dead relay make the first plan prefer the live one; a report never overrides the
//! reader's own evidence.

use std::sync::Arc;
use std::time::Duration;

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::Keys;
use nostr_outbox_client::MemoryStore;
use nostr_outbox_core::stats::{RelayRound, RoundReport};
use nostr_outbox_core::DeliveryStats;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{start, Client, FeedSummary, RuntimeConfig};

/// Recall by posterior means (no draws), one routed connection.
const CONFIG: &str = "max_connections = 1\n[strategy]\ntype = \"recall\"\nexplore = false\n";

fn report(monitor: &Keys, relay: &str, last_seen: u64) -> nostr::event::Event {
    EventBuilder::new(Kind::RelayDiscovery, "")
        .tags([
            Tag::parse(["d", relay]).unwrap(),
            Tag::parse(["n", "clearnet"]).unwrap(),
            Tag::parse(["rtt-open", "40"]).unwrap(),
        ])
        .custom_created_at(nostr::types::Timestamp::from_secs(last_seen))
        .finalize(monitor)
        .unwrap()
}

/// Follow A lists the live and the dead relay, follow B only the dead one: by coverage alone
/// the one connection goes to the dead relay. Runs a `--once` feed and returns its summary.
async fn run(
    live: &RealRelay,
    dead: &str,
    home: &RealRelay,
    monitors: Vec<String>,
    stats: DeliveryStats,
) -> FeedSummary {
    let (a, b) = (keys(1), keys(2));
    live.store(&note(&a, now() - 60, "from a")).await;
    let lists = vec![
        raw(&relay_list(
            &a,
            now() - DAY,
            &[(&live.url, None), (dead, None)],
        )),
        raw(&relay_list(&b, now() - DAY, &[(dead, None)])),
    ];
    let store = Arc::new(MemoryStore::new());
    store.save(&stats).unwrap();
    let mut input = local_input(
        router(CONFIG),
        vec![a.public_key(), b.public_key()],
        [home.url.clone()],
    );
    input.relay_lists = lists;
    input.store = store;
    input.monitor_relays = monitors;
    let config = RuntimeConfig {
        since: Some(nostr::types::Timestamp::from_secs(now() - 7 * DAY)),
        ..given_lists(true)
    };
    let (handle, rx) = start(input, &Client::new(config)).await;
    let collected = drain(rx);
    run_once(handle, &collected, Duration::from_secs(20)).await
}

/// Whether the feed ever dialled `url` (a failed attempt is the only trace a dead relay
/// leaves).
fn dialled(summary: &FeedSummary, url: &str) -> bool {
    summary.relays.get(url).is_some_and(|r| r.failures > 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_report_for_the_live_relay_and_a_stale_one_for_the_dead_relay_steer_the_first_plan()
{
    let [live, home, monitor] = RealRelay::several().await;
    let dead = dead_url().await;
    let monitor_keys = keys(9);
    monitor
        .store(&report(
            &monitor_keys,
            &format!("{}/", live.url),
            now() - 600,
        ))
        .await;
    monitor
        .store(&report(&monitor_keys, &dead, now() - 60 * DAY))
        .await;

    // Without monitor data the first plan dials the dead relay (it covers both follows).
    let cold = run(&live, &dead, &home, Vec::new(), DeliveryStats::new()).await;
    assert!(dialled(&cold, &dead), "{:?}", cold.relays);

    let warm = run(
        &live,
        &dead,
        &home,
        vec![monitor.url.clone()],
        DeliveryStats::new(),
    )
    .await;
    assert!(!dialled(&warm, &dead), "{:?}", warm.relays);
    assert!(
        warm.relays.get(&live.url).is_some_and(|r| r.answered),
        "{:?}",
        warm.relays
    );
    // The prior is learned over: the stats now hold the reader's own evidence.
    assert!(warm.stats.get(&live.url).asked > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_never_overrides_the_readers_own_evidence() {
    let [live, home, monitor] = RealRelay::several().await;
    let dead = dead_url().await;
    let monitor_keys = keys(9);
    // The monitor has it backwards: the dead relay seen just now, the live one long gone.
    monitor
        .store(&report(&monitor_keys, &dead, now() - 60))
        .await;
    monitor
        .store(&report(&monitor_keys, &live.url, now() - 90 * DAY))
        .await;
    // The reader saw the dead relay fail and the live one answer, many times.
    let mut stats = DeliveryStats::new();
    for _ in 0..6 {
        let round = RoundReport {
            relays: vec![
                RelayRound::new(dead.clone(), false, Vec::new()),
                RelayRound::new(live.url.clone(), true, Vec::new()),
            ],
        };
        stats.record_round(&round, now() - 120);
    }
    let summary = run(&live, &dead, &home, vec![monitor.url.clone()], stats).await;
    assert!(!dialled(&summary, &dead), "{:?}", summary.relays);
    assert!(
        summary.relays.get(&live.url).is_some_and(|r| r.answered),
        "{:?}",
        summary.relays
    );
}

/// A report saying `relay` requires payment (`R payment`).
fn paid_report(monitor: &Keys, relay: &str, last_seen: u64) -> nostr::event::Event {
    EventBuilder::new(Kind::RelayDiscovery, "")
        .tags([
            Tag::parse(["d", relay]).unwrap(),
            Tag::parse(["R", "payment"]).unwrap(),
        ])
        .custom_created_at(nostr::types::Timestamp::from_secs(last_seen))
        .finalize(monitor)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_a_monitor_says_requires_payment_is_left_out_unless_paid_for() {
    let [paid, home, monitor] = RealRelay::several().await;
    let a = keys(1);
    let n = note(&a, now() - 60, "behind a paywall");
    paid.store(&n).await;
    home.store(&n).await;
    monitor
        .store(&paid_report(&keys(9), &paid.url, now() - 600))
        .await;
    let feed = |paid_relays: Vec<String>| {
        let mut input = local_input(router(CONFIG), vec![a.public_key()], [home.url.clone()]);
        input.relay_lists = vec![raw(&relay_list(&a, now() - DAY, &[(&paid.url, None)]))];
        input.monitor_relays = vec![monitor.url.clone()];
        let config = RuntimeConfig {
            since: Some(nostr::types::Timestamp::from_secs(now() - 7 * DAY)),
            paid_relays,
            ..given_lists(true)
        };
        (input, config)
    };
    let (input, config) = feed(Vec::new());
    let (handle, rx) = start(input, &Client::new(config)).await;
    let unpaid = run_once(handle, &drain(rx), Duration::from_secs(20)).await;
    assert!(
        !unpaid.relays.contains_key(&paid.url),
        "asked a relay that requires payment: {:?}",
        unpaid.relays
    );
    assert_eq!(unpaid.events, 1, "the residual still finds the note");
    let kept = unpaid.penalties.get(&paid.url).expect("remembered");
    assert!(kept.last_reason.contains("requires payment"), "{kept:?}");

    let (input, config) = feed(vec![paid.url.clone()]);
    let (handle, rx) = start(input, &Client::new(config)).await;
    let paying = run_once(handle, &drain(rx), Duration::from_secs(20)).await;
    assert!(paying.relays[&paid.url].answered, "{:?}", paying.relays);
}

//! Route feeds (`start_route`): only what was asked and signed reaches the channel, each note
//! once, a relay that never finishes is reported, a lost socket is dialled again, and stopping
//! ends every subscription.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::Keys;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{start_route, Client, RouteEvent, RuntimeConfig};
use tokio::sync::mpsc;

/// A note by `author` tagging `whom`, `age` seconds old.
fn mention(author: &Keys, whom: &Keys, age: u64, text: &str) -> Event {
    let p = Tag::parse(["p", whom.public_key().to_hex().as_str()]).unwrap();
    EventBuilder::new(Kind::TextNote, text)
        .tags([p])
        .custom_created_at(nostr::types::Timestamp::from(now() - age))
        .finalize(author)
        .unwrap()
}

/// Everything a channel delivers until it closes or `limit` passes.
async fn collect(mut rx: mpsc::Receiver<RouteEvent>, limit: Duration) -> Vec<RouteEvent> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        out.push(event);
    }
    out
}

/// Notes by content, failures by relay, relays that sent EOSE.
fn sort(events: &[RouteEvent]) -> (Vec<String>, BTreeMap<String, String>, Vec<String>) {
    let mut notes = Vec::new();
    let mut failed = BTreeMap::new();
    let mut eose = Vec::new();
    for e in events {
        match e {
            RouteEvent::Note { event, .. } => notes.push(event.content.clone()),
            RouteEvent::Failed { relay, reason, .. } => {
                failed.insert(relay.clone(), reason.clone());
            }
            RouteEvent::Eose { relay, .. } => eose.push(relay.clone()),
        }
    }
    notes.sort();
    (notes, failed, eose)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_asked_and_signed_events_arrive_once_and_stragglers_are_reported() {
    let (reader, friend) = (keys(1), keys(2));
    let good = mention(&friend, &reader, 60, "for the reader");
    let [real, twin] = RealRelay::several().await;
    real.store(&good).await;
    twin.store(&good).await;
    real.store(&note(&friend, now() - 30, "not a mention"))
        .await;
    // A relay that sends what nobody asked for and never finishes, and one whose only
    // mention carries a forged signature.
    let unasked =
        FaultServer::start(Fault::NeverEose, vec![note(&friend, now() - 10, "unasked")]).await;
    let forger =
        FaultServer::start(Fault::Garbage, vec![mention(&friend, &reader, 20, "real")]).await;
    let client = Client::new(RuntimeConfig {
        once: true,
        ..RuntimeConfig::fast_for_tests()
    });
    let urls = [&real.url, &twin.url, &unasked.url, &forger.url].map(String::as_str);
    let (feed, rx) = start_route(&inbox_plan(&reader, &urls), &client);
    let events = collect(rx, Duration::from_secs(10)).await;
    feed.wait().await;
    let (notes, failed, mut eose) = sort(&events);
    assert_eq!(notes, vec!["for the reader".to_string()], "{events:?}");
    eose.sort();
    let mut want = vec![real.url.clone(), twin.url.clone()];
    want.sort();
    assert_eq!(eose, want);
    assert_eq!(
        failed.keys().cloned().collect::<Vec<_>>(),
        {
            let mut f = vec![unasked.url.clone(), forger.url.clone()];
            f.sort();
            f
        },
        "{failed:?}"
    );
    assert!(failed.values().all(|r| r.contains("no EOSE")), "{failed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_socket_is_dialled_again_and_stop_ends_the_feed() {
    let (reader, friend) = (keys(3), keys(4));
    let dropper = FaultServer::start(
        Fault::DropMidStream,
        vec![mention(&friend, &reader, 60, "once only")],
    )
    .await;
    // After its answer, floods the subscription with notes nobody asked for.
    let flood = FaultServer::start(
        Fault::Flood,
        vec![
            mention(&friend, &reader, 50, "flood's answer"),
            note(&friend, now() - 5, "flood"),
        ],
    )
    .await;
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let (feed, rx) = start_route(&inbox_plan(&reader, &[&dropper.url, &flood.url]), &client);
    let collector = tokio::spawn(collect(rx, Duration::from_secs(20)));
    assert!(
        wait_until(Duration::from_secs(15), || dropper
            .connections
            .load(Ordering::SeqCst)
            >= 3)
        .await,
        "a lost socket is dialled again"
    );
    tokio::time::timeout(Duration::from_secs(5), feed.shutdown())
        .await
        .expect("stopping ends every subscription");
    let events = tokio::time::timeout(Duration::from_secs(5), collector)
        .await
        .expect("the channel closes once the feed stopped")
        .unwrap();
    let (notes, _, _) = sort(&events);
    assert_eq!(notes, vec!["flood's answer", "once only"], "{notes:?}");
}

//! One set of sockets for everything: a feed, an inbox route feed and lookups running
//! together on one client hold at most the budget's sockets at once, counted where the relays
//! accept them.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    fetch_events, start, start_route, Client, Places, RouteEvent, RuntimeConfig, SocketBudget,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_inbox_and_lookups_together_stay_within_the_socket_budget() {
    const MAX_SOCKETS: usize = 4;
    const RESERVE: usize = 1;
    let gauge = Gauge::default();
    let mut relays = Vec::new();
    let mut urls = Vec::new();
    for _ in 0..8 {
        let relay = RealRelay::start().await;
        urls.push(proxy(&relay.url, gauge.clone()).await);
        relays.push(relay);
    }
    let now = now();
    let reader = keys(100);
    // Twelve follows, each writing to relay 1 or 2 and to one of relays 3 to 7: the two
    // routed places the budget leaves the feed (four sockets, one kept for short work, one for
    // the reader's relay) cover everyone.
    let follows: Vec<_> = (1..=12).map(keys).collect();
    let mut lists = Vec::new();
    for (i, f) in follows.iter().enumerate() {
        let (x, y) = (1 + i % 2, 3 + i % 5);
        lists.push(relay_list(
            f,
            now - 100,
            &[(&urls[x], None), (&urls[y], None)],
        ));
        let n = note(f, now - 60 - i as u64, &format!("note {i}"));
        relays[x].store(&n).await;
        relays[y].store(&n).await;
        // Everyone also has their list on every relay: the lookups below find them.
        for r in &relays {
            r.store(&lists[i]).await;
        }
    }
    // A mention of the reader on the reader's relay and on another.
    let p = Tag::parse(["p", reader.public_key().to_hex().as_str()]).unwrap();
    let mention = EventBuilder::new(Kind::TextNote, "hello reader")
        .tags([p])
        .custom_created_at(Timestamp::from(now - 30))
        .finalize(&follows[0])
        .unwrap();
    relays[0].store(&mention).await;
    relays[5].store(&mention).await;

    let client = Client::with(
        RuntimeConfig {
            since: Some(Timestamp::from(now - 7 * DAY)),
            ..given_lists(true)
        },
        SocketBudget {
            max_sockets: Some(MAX_SOCKETS),
            reserve: RESERVE,
            idle: Duration::from_millis(200),
        },
        None,
    );
    let toml = "max_connections = 20\n[strategy]\ntype = \"greedy\"\n";
    let mut input = local_input(
        router(toml),
        follows.iter().map(|k| k.public_key()).collect(),
        [&urls[0]],
    );
    for l in &lists {
        assert!(input.add_relay_list_event(l));
    }

    let (handle, rx) = start(input, &client).await;
    let collected = drain(rx);
    let inbox = inbox_plan(&reader, &[&urls[0], &urls[5]]);
    let (route, mut route_rx) = start_route(&inbox, &client);
    let lists_filter = Filter::new()
        .authors(follows.iter().map(|k| k.public_key()))
        .kind(Kind::RelayList);
    let lookup = fetch_events(&urls, &lists_filter, &client);
    let (found, summary) = tokio::join!(
        lookup,
        run_once(handle, &collected, Duration::from_secs(30))
    );
    let mut mentions = 0;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(10), route_rx.recv()).await
    {
        if let RouteEvent::Note { event, .. } = event {
            assert_eq!(event.id, mention.id);
            mentions += 1;
        }
    }
    // Sharing, not serialising: two lookups of one relay at once use one socket.
    let joins = client.sockets().stats().joins;
    let (one, two) = tokio::join!(
        fetch_events(&urls[..1], &lists_filter, &client),
        fetch_events(&urls[..1], &lists_filter, &client)
    );
    assert_eq!((one.len(), two.len()), (follows.len(), follows.len()));
    assert!(
        client.sockets().stats().joins > joins,
        "{:?}",
        client.sockets().stats()
    );
    route.shutdown().await;

    assert_eq!(found.len(), follows.len(), "the lookup found every list");
    assert_eq!(mentions, 1, "the inbox delivered the mention once");
    let notes = collected.lock().unwrap().notes.len();
    assert_eq!(
        notes,
        follows.len(),
        "the feed delivered every note: {summary:?}"
    );
    let peak = gauge.peak.load(Ordering::SeqCst);
    assert!(
        peak <= MAX_SOCKETS,
        "{peak} sockets open at once on the relays' side, over the budget of {MAX_SOCKETS}"
    );
    assert!(summary.sockets.peak <= MAX_SOCKETS, "{:?}", summary.sockets);
    assert!(
        matches!(summary.places, Places::Shared { places, .. } if places == MAX_SOCKETS - RESERVE),
        "the places are time-shared: {:?}",
        summary.places
    );
    assert!(gauge.accepted.load(Ordering::SeqCst) >= relays.len());
}

//! A client's own subscriptions on a running feed: routed by what the filter names, run on the
//! feed's sockets, live until closed.

use std::time::Duration;

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::Reason;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{Client, RouteEvent, RuntimeConfig};
use tokio::sync::mpsc;

/// The next note a subscription delivers, within a few seconds.
async fn next_note(rx: &mut mpsc::Receiver<RouteEvent>) -> nostr::event::Event {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(RouteEvent::Note { event, .. })) => return *event,
            Ok(Some(_)) => continue,
            other => panic!("no note: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_routed_by_what_they_name_and_share_the_feed_s_sockets() {
    let [reader, a, carol_inbox] = RealRelay::several().await;
    let now = now();
    let (alice, carol, stranger) = (keys(1), keys(2), keys(3));
    world_events(&a, &alice, now).await;
    let reaction = EventBuilder::new(Kind::Reaction, "+")
        .custom_created_at(Timestamp::from(now - 50))
        .finalize(&alice)
        .unwrap();
    a.store(&reaction).await;
    let p = Tag::parse(["p", carol.public_key().to_hex().as_str()]).unwrap();
    let mention = EventBuilder::new(Kind::TextNote, "hi carol")
        .tags([p])
        .custom_created_at(Timestamp::from(now - 40))
        .finalize(&stranger)
        .unwrap();
    carol_inbox.store(&mention).await;

    let mut input = local_input(
        router("max_connections = 4\n[strategy]\ntype = \"greedy\"\n"),
        vec![alice.public_key(), carol.public_key()],
        [&reader.url],
    );
    assert!(input.add_relay_list_event(&relay_list(&alice, now, &[(&a.url, None)])));
    // Carol lists only a read relay: the feed asks the reader's relay for her notes.
    assert!(input.add_relay_list_event(&relay_list(
        &carol,
        now,
        &[(&carol_inbox.url, Some("read"))]
    )));
    let config = RuntimeConfig {
        discover_lists: false,
        since: Some(Timestamp::from(now - 3600)),
        ..RuntimeConfig::fast_for_tests()
    };
    let client = Client::new(config);
    let sockets = client.sockets().clone();
    let (handle, _out) = start_settled(input, &client).await;
    let before = sockets.stats();

    // Alice's reactions: asked of her write relay, which the feed already holds.
    let mut sub = handle
        .subscribe(
            Filter::new()
                .author(alice.public_key())
                .kind(Kind::Reaction),
        )
        .await
        .expect("routed");
    let on_a = sub.plan.target(&a.url).expect("her write relay");
    assert_eq!(on_a.reasons, [Reason::AuthorWrite(alice.public_key())]);
    assert_eq!(next_note(&mut sub.events).await.id, reaction.id);
    // Her relay and the reader's relay (asked by every subscription) are the feed's sockets:
    // nothing was dialled for it.
    assert_eq!(sub.plan.targets.len(), 2, "{:?}", sub.plan);
    let after = sockets.stats();
    assert_eq!(after.dials, before.dials, "{after:?}");
    assert_eq!(after.joins, before.joins + 2, "{after:?}");

    // Live: a reaction published after the subscription opened arrives too.
    let later = EventBuilder::new(Kind::Reaction, "🤙")
        .custom_created_at(Timestamp::from(now - 10))
        .finalize(&alice)
        .unwrap();
    // Published by someone else's client (sockets of its own).
    let publish = nostr_outbox_runtime::PublishConfig::fast_for_tests();
    let other = Client::new(RuntimeConfig::fast_for_tests());
    nostr_outbox_runtime::publish(&later, std::slice::from_ref(&a.url), &other, &publish).await;
    assert_eq!(next_note(&mut sub.events).await.id, later.id);
    sub.feed.shutdown().await;

    // Mentions of Carol: asked of her read relay.
    let mut inbox = handle
        .subscribe(Filter::new().pubkey(carol.public_key()))
        .await
        .expect("routed");
    assert!(
        inbox.plan.target(&carol_inbox.url).is_some(),
        "{:?}",
        inbox.plan
    );
    assert_eq!(next_note(&mut inbox.events).await.id, mention.id);
    inbox.feed.shutdown().await;

    let summary = handle.shutdown().await;
    assert_eq!(summary.relays_failed, 0, "{summary:?}");
    // Carol's read relay was dialled for her mentions, in the feed's own budget.
    assert_eq!(
        sockets.stats().dials,
        before.dials + 1,
        "{:?}",
        sockets.stats()
    );
}

/// Alice's own note on her relay, so the feed has something to deliver.
async fn world_events(relay: &RealRelay, alice: &nostr::key::Keys, now: u64) {
    relay.store(&note(alice, now - 60, "alice writes")).await;
}

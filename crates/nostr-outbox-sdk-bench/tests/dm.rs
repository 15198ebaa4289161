//! A direct message the router wraps (NIP-17) is read by another client: nostr-sdk's `Client`
//! fetches the recipient's gift wraps from its relay and rust-nostr's NIP-59 opens them, with
//! the recipient's key only.

use std::time::Duration;

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::Keys;
use nostr::nips::nip59;
use nostr_outbox_fleet::RealRelay;
use nostr_outbox_runtime::{wrap_dm, Signer};
use nostr_sdk::prelude::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostr_sdk_reads_a_message_the_router_wrapped() {
    let (sender, recipient, stranger) = (Keys::generate(), Keys::generate(), Keys::generate());
    let relay = RealRelay::start().await;
    let text = "the meeting moved to Thursday";
    let outgoing = wrap_dm(
        &Signer::from(sender.clone()),
        &[recipient.public_key()],
        text,
    )
    .await
    .expect("wrapped");
    for (_, wrap) in &outgoing.wraps {
        relay.store(wrap).await;
    }

    let client = Client::builder().build();
    client.add_relay(relay.url.as_str()).await.expect("added");
    client.connect().and_wait(Duration::from_secs(5)).await;
    let wraps = client
        .fetch_events(
            Filter::new()
                .kind(Kind::GiftWrap)
                .pubkey(recipient.public_key()),
        )
        .timeout(Duration::from_secs(10))
        .await
        .expect("fetched");
    client.shutdown().await;
    assert_eq!(wraps.len(), 1, "one wrap is addressed to the recipient");
    let wrap = wraps.iter().next().expect("one");

    let opened = nip59::extract_rumor(&recipient, wrap).expect("the recipient opens it");
    assert_eq!(opened.sender, sender.public_key());
    assert_eq!(opened.rumor.kind, Kind::PrivateDirectMessage);
    assert_eq!(opened.rumor.content, text);
    assert_eq!(opened.rumor.id, Some(outgoing.rumor), "the same message");
    assert!(
        nip59::extract_rumor(&stranger, wrap).is_err(),
        "no one else opens it"
    );
}

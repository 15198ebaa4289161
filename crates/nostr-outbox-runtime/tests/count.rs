//! Counts (NIP-45) through the one exchange: each relay's count kept apart and the largest
//! named, and a relay that refuses or never answers said so.

use std::time::Duration;

use nostr::filter::Filter;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{count, Client, LookupOutcome, Refusal, RuntimeConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_are_kept_per_relay_and_the_largest_named() {
    let (a, b) = (keys(1), keys(2));
    let [one, two] = RealRelay::several().await;
    let t = now() - 1_000;
    for i in 0..3 {
        one.store(&note(&a, t + i, &format!("a{i}"))).await;
    }
    // The second relay holds one of the same notes and one of another author's.
    two.store(&note(&a, t, "a0")).await;
    two.store(&note(&b, t, "b0")).await;
    let silent = FaultServer::start(Fault::NeverEose, Vec::new()).await;
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let relays = vec![one.url.clone(), two.url.clone(), silent.url.clone()];
    let filter = Filter::new().author(a.public_key());
    let counts = tokio::time::timeout(
        Duration::from_secs(30),
        count(&relays, std::slice::from_ref(&filter), &client),
    )
    .await
    .expect("a count ends within its timeouts");
    assert_eq!(counts.relays[&one.url], Ok(3), "{counts:?}");
    assert_eq!(counts.relays[&two.url], Ok(1), "{counts:?}");
    assert!(
        matches!(&counts.relays[&silent.url], Err(LookupOutcome::Unanswered(why)) if why.contains("COUNT")),
        "{counts:?}"
    );
    assert_eq!(counts.largest(), Some(3), "the largest, never a sum");
    assert_eq!(counts.counted(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_count_says_why() {
    let private = FaultServer::refusing("auth-required: members only").await;
    let no_counts = FaultServer::refusing("unsupported: no counts").await;
    let relays = vec![private.url.clone(), no_counts.url.clone()];
    let filter = Filter::new().author(keys(3).public_key());
    let anonymous = Client::new(RuntimeConfig::fast_for_tests());
    let refused = count(&relays, std::slice::from_ref(&filter), &anonymous).await;
    match &refused.relays[&private.url] {
        Err(LookupOutcome::Refused { refusal, message }) => {
            assert_eq!(*refusal, Refusal::SignIn);
            assert!(message.contains("no key"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(
            &refused.relays[&no_counts.url],
            Err(LookupOutcome::Refused {
                refusal: Refusal::Unsupported,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(refused.largest(), None);
}

//! What a relay speaks decides what is asked of it and how long its silence is waited on: a
//! relay whose document does not list NIP-45 or NIP-77 is not asked at all, one whose document
//! says nothing gets about a second and is then remembered as not speaking it, and one that
//! speaks it is asked as before.

use std::time::Duration;

use nostr::filter::Filter;
use nostr::key::Keys;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::connection::extensions::Outcome;
use nostr_outbox_runtime::{
    count, sync, Client, Counts, Extension, LookupOutcome, RuntimeConfig, SyncOutcome,
};

/// A long answer timeout: an ask that waited it out would outlast the test's bound.
const FULL: Duration = Duration::from_secs(120);
/// What the test gives each step: far below [`FULL`], far above the short wait.
const BOUND: Duration = Duration::from_secs(60);

/// A client that reads relay documents and would wait [`FULL`] on an answer it expects.
fn patient() -> Client {
    let mut config = RuntimeConfig {
        eose_timeout: FULL,
        ..RuntimeConfig::fast_for_tests()
    };
    config.limits.nip11.enabled = true;
    Client::new(config)
}

fn filter(author: &Keys) -> Filter {
    Filter::new().author(author.public_key())
}

/// Counts `author`'s notes on `relays`, which must end within [`BOUND`] (`what` says why).
async fn count_within(relays: &[String], author: &Keys, client: &Client, what: &str) -> Counts {
    tokio::time::timeout(BOUND, count(relays, &[filter(author)], client))
        .await
        .expect(what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_document_leaves_an_extension_out_is_not_asked_it() {
    let a = keys(1);
    let held = vec![note(&a, now() - 100, "a0")];
    let relay = PlainRelay::documented(held.clone(), Some(&[1, 11])).await;
    let client = patient();
    let relays = vec![relay.url.clone()];
    let why = "no wait on a relay that does not count";
    let counted = count_within(&relays, &a, &client, why).await;
    assert!(
        matches!(&counted.relays[&relay.url], Err(LookupOutcome::Unsupported(why)) if why.contains("NIP-45")),
        "{counted:?}"
    );
    let synced = tokio::time::timeout(BOUND, sync(&relays, &filter(&a), &[], &client))
        .await
        .expect("no wait on a relay that does not reconcile");
    match &synced.relays[&relay.url] {
        SyncOutcome::FellBack { why, lookup } => {
            assert!(why.contains("NIP-77"), "{why}");
            assert_eq!(*lookup, LookupOutcome::Answered);
        }
        other => panic!("{other:?}"),
    }
    // Its notes came by the plain lookup instead.
    assert_eq!(synced.fetched.len(), 1);
    assert_eq!(relay.ignored(), 0, "neither COUNT nor NEG-OPEN was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_is_waited_on_briefly_once_then_remembered() {
    let a = keys(2);
    let relay = PlainRelay::documented(vec![note(&a, now() - 100, "a0")], None).await;
    let client = patient();
    let relays = vec![relay.url.clone()];
    let why = "a relay with no document is waited on briefly";
    let first = count_within(&relays, &a, &client, why).await;
    assert!(
        matches!(&first.relays[&relay.url], Err(LookupOutcome::Unanswered(_))),
        "{first:?}"
    );
    assert_eq!(relay.ignored(), 1, "asked once");
    let learned = client.extensions().learned();
    assert_eq!(
        learned
            .get(&relay.url, Extension::Count, now())
            .map(|s| s.outcome),
        Some(Outcome::Ignored)
    );
    let second = count(&relays, &[filter(&a)], &client).await;
    assert!(
        matches!(&second.relays[&relay.url], Err(LookupOutcome::Unsupported(why)) if why.contains("last asked")),
        "{second:?}"
    );
    assert_eq!(relay.ignored(), 1, "not asked again");

    // What was learned goes with the store to the next run's client.
    let next = patient();
    next.extensions().restore(&learned);
    let synced = sync(&relays, &filter(&a), &[], &next).await;
    assert!(
        matches!(&synced.relays[&relay.url], SyncOutcome::FellBack { .. }),
        "{synced:?}"
    );
    let after_sync = relay.ignored();
    assert_eq!(after_sync, 2, "NEG-OPEN asked once, briefly");
    let third = count(&relays, &[filter(&a)], &next).await;
    assert!(matches!(
        &third.relays[&relay.url],
        Err(LookupOutcome::Unsupported(_))
    ));
    assert_eq!(relay.ignored(), after_sync);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_speaks_an_extension_is_believed() {
    let a = keys(3);
    let relay = RealRelay::start().await;
    relay.store(&note(&a, now() - 100, "a0")).await;
    relay.store(&note(&a, now() - 50, "a1")).await;
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let relays = vec![relay.url.clone()];
    let counted = count(&relays, &[filter(&a)], &client).await;
    assert_eq!(counted.relays[&relay.url], Ok(2), "{counted:?}");
    assert_eq!(
        client
            .extensions()
            .learned()
            .get(&relay.url, Extension::Count, now())
            .map(|s| s.outcome),
        Some(Outcome::Answered)
    );
    let synced = sync(&relays, &filter(&a), &[], &client).await;
    assert!(
        matches!(
            &synced.relays[&relay.url],
            SyncOutcome::Reconciled { missing: 2, .. }
        ),
        "{synced:?}"
    );
}

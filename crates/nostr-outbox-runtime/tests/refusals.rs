//! Refusals on every path: `rate-limited:` is waited out and asked again by lookups and route
//! feeds as by the feed's slots; a lookup says what each relay did; and a relay that needs
//! sign-in or payment, or keeps asking to slow down, is set aside as such, never learned as
//! down.

use std::time::Duration;

use nostr::filter::Filter;
use nostr_outbox_client::routes::RoutePlan;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    lookup, start_route, Client, LookupOutcome, Refusal, RouteEvent, RuntimeConfig,
};

/// Everything a route feed delivers until its channel closes (bounded).
async fn route_events(plan: &RoutePlan, client: &Client) -> Vec<RouteEvent> {
    let (feed, mut rx) = start_route(plan, client);
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        out.push(event);
    }
    feed.shutdown().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_waits_out_a_rate_limit_and_asks_again() {
    let f = keys(1);
    let n = note(&f, now() - 100, "behind a rate limit");
    let limited = FaultServer::start(Fault::RateLimited, vec![n.clone()]).await;
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let filter = Filter::new().author(f.public_key());
    let found = tokio::time::timeout(
        Duration::from_secs(20),
        lookup(std::slice::from_ref(&limited.url), &filter, &client),
    )
    .await
    .expect("the lookup ends within its timeouts");
    let ids: Vec<_> = found.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, [n.id], "{:?}", found.relays);
    assert_eq!(found.relays[&limited.url], LookupOutcome::Answered);
    assert_eq!(
        limited
            .connections
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "asked again on the same socket"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_feed_waits_out_a_rate_limit_and_asks_again() {
    let f = keys(2);
    let n = note(&f, now() - 100, "behind a rate limit");
    let limited = FaultServer::start(Fault::RateLimited, vec![n.clone()]).await;
    let asked = Filter::new().author(f.public_key());
    let plan = plan_over(vec![reader_target(&limited.url, asked)]);
    let client = Client::new(RuntimeConfig {
        once: true,
        ..RuntimeConfig::fast_for_tests()
    });
    let events = route_events(&plan, &client).await;
    let notes: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            RouteEvent::Note { event, .. } => Some(event.id),
            _ => None,
        })
        .collect();
    assert_eq!(notes, [n.id], "{events:?}");
    assert!(
        events.iter().any(|e| matches!(e, RouteEvent::Eose { .. })),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RouteEvent::Failed { .. })),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_feed_says_what_a_refusal_was() {
    let members = FaultServer::refusing("auth-required: members only").await;
    let dead = dead_url().await;
    let asked = Filter::new().author(keys(2).public_key());
    let target = |url: &str| reader_target(url, asked.clone());
    let plan = plan_over(vec![target(&members.url), target(&dead)]);
    let client = Client::new(RuntimeConfig {
        once: true,
        ..RuntimeConfig::fast_for_tests()
    });
    let events = route_events(&plan, &client).await;
    let refusal = |url: &str| {
        events.iter().find_map(|e| match e {
            RouteEvent::Failed { relay, refusal, .. } if relay == url => Some(*refusal),
            _ => None,
        })
    };
    assert_eq!(
        refusal(&members.url),
        Some(Some(Refusal::SignIn)),
        "{events:?}"
    );
    assert_eq!(
        refusal(&dead),
        Some(None),
        "a dead relay refused nothing: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_says_why_each_relay_gave_nothing() {
    let members = FaultServer::refusing("auth-required: members only").await;
    let spaced = FaultServer::refusing("  auth-required: with leading spaces").await;
    let blocked = FaultServer::refusing("blocked: not you").await;
    let dead = dead_url().await;
    let relays = vec![
        members.url.clone(),
        spaced.url.clone(),
        blocked.url.clone(),
        dead.clone(),
    ];
    let client = Client::new(RuntimeConfig::fast_for_tests());
    let filter = Filter::new().author(keys(3).public_key());
    let found = tokio::time::timeout(Duration::from_secs(20), lookup(&relays, &filter, &client))
        .await
        .expect("the lookup ends within its timeouts");
    assert!(found.events.is_empty());
    assert_eq!(found.answered(), 0, "{:?}", found.relays);
    for url in [&members.url, &spaced.url] {
        match &found.relays[url] {
            LookupOutcome::Refused {
                refusal: Refusal::SignIn,
                message,
            } => assert!(message.contains("no key"), "{message}"),
            other => panic!("{url}: {other:?}"),
        }
    }
    assert!(matches!(
        &found.relays[&blocked.url],
        LookupOutcome::Refused {
            refusal: Refusal::Blocked,
            ..
        }
    ));
    assert!(matches!(
        &found.relays[&dead],
        LookupOutcome::Unreachable(_)
    ));
    assert!(found.relays[&members.url]
        .to_string()
        .starts_with("relay refused: auth-required: members only"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_kept_as_such_and_never_learned_as_down() {
    let reader = RealRelay::start().await;
    let sign_in = FaultServer::refusing("auth-required: members only").await;
    let payment = FaultServer::refusing("payment-required: 5000 sats a year").await;
    let slow = FaultServer::refusing("rate-limited: slow down").await;
    let now = now();
    let f = keys(4);
    let n = note(&f, now - 100, "on the reader's relay");
    reader.store(&n).await;
    let mut input = local_input(
        router("max_connections = 4\n[strategy]\ntype = \"greedy\"\ncoverage_target = 3\n"),
        vec![f.public_key()],
        [&reader.url],
    );
    let listed = [
        (sign_in.url.as_str(), None),
        (payment.url.as_str(), None),
        (slow.url.as_str(), None),
    ];
    assert!(input.add_relay_list_event(&relay_list(&f, now, &listed)));
    let (summary, out) = start_once(input, given_lists(true)).await;
    assert!(
        out.notes.contains_key(&n.id),
        "the residual carried the note: {summary:#?}"
    );
    for url in [&sign_in.url, &payment.url, &slow.url] {
        assert!(summary.penalised.contains(url), "{url}: {summary:#?}");
        let live = summary.stats.get(url);
        assert!(
            live.live_mean() >= 0.5,
            "{url} refused, it is not down: liveness {} (Beta {}, {})",
            live.live_mean(),
            live.live_alpha,
            live.live_beta
        );
    }
    let entry = |url: &str| summary.penalties.get(url).cloned().unwrap_or_default();
    assert!(entry(&sign_in.url).needs_sign_in, "{summary:#?}");
    assert!(entry(&payment.url).needs_payment, "{summary:#?}");
    assert!(entry(&slow.url).rate_limited, "{summary:#?}");
    // The relay that answered is learned as live.
    assert!(summary.stats.get(&reader.url).live_mean() > 0.5);
}

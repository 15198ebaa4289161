//! Publishing against real local relays and the harness's scripted servers: every target gets the
//! event, a definitive refusal is reported and not retried, a rate limit is retried, a dead
//! relay is a connect failure, and a relay requiring NIP-42 accepts once signed in.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::event::Event;
use nostr::filter::Filter;
use nostr_outbox_runtime::{
    fetch_events, publish, Client, PublishConfig, PublishOutcome, PublishReport, RuntimeConfig,
    SocketBudget,
};
use nostr_relay_builder::prelude as rb;

use nostr_outbox_fleet::{
    dead_url, keys, note, now, slow_oks, BlackHole, Fault, FaultServer, Gauge, RealRelay,
};

/// A harness server answering the EVENTs it receives with `script` (the last answer repeats)
/// and counting them.
async fn scripted(script: &'static [(bool, &'static str)]) -> FaultServer {
    FaultServer::start(Fault::Oks(script), Vec::new()).await
}

/// A client of its own with the test timeouts, the desktop socket budget and no signer.
fn client() -> Client {
    Client::new(RuntimeConfig::fast_for_tests())
}

/// `event` published to `targets` by `client` with the test publishing config.
async fn publish_fast(event: &Event, targets: &[String], client: &Client) -> PublishReport {
    publish(event, targets, client, &PublishConfig::fast_for_tests()).await
}

/// [`event`] published to `server` alone by [`client`] with the test publishing config.
async fn publish_once_to(server: &FaultServer) -> PublishReport {
    publish_fast(&event(), std::slice::from_ref(&server.url), &client()).await
}

fn event() -> Event {
    note(&keys(1), now() - 10, "published")
}

async fn stored(url: &str, event: &Event) -> bool {
    let client = Client::new(RuntimeConfig {
        once: true,
        ..RuntimeConfig::fast_for_tests()
    });
    let found = fetch_events(&[url.to_string()], &Filter::new().id(event.id), &client).await;
    found.iter().any(|e| e.id == event.id)
}

#[tokio::test]
async fn a_published_event_reaches_every_target() {
    let relays = [
        RealRelay::start().await,
        RealRelay::start().await,
        RealRelay::start().await,
    ];
    let targets: Vec<String> = relays.iter().map(|r| r.url.clone()).collect();
    let event = event();
    let report = publish_fast(&event, &targets, &client()).await;
    assert_eq!(report.relays.len(), 3, "{report:?}");
    for (r, url) in report.relays.iter().zip(&targets) {
        assert_eq!(&r.url, url);
        assert_eq!(r.outcome, PublishOutcome::Accepted, "{r:?}");
        assert_eq!(r.attempts, 1);
    }
    assert_eq!(report.successes(), 3);
    for url in &targets {
        assert!(stored(url, &event).await, "{url} does not have the event");
    }
}

#[tokio::test]
async fn a_blocked_event_is_reported_and_not_retried() {
    let server = scripted(&[(false, "blocked: you are banned")]).await;
    let report = publish_once_to(&server).await;
    let r = &report.relays[0];
    assert_eq!(r.outcome, PublishOutcome::Blocked, "{r:?}");
    assert_eq!(r.message, "blocked: you are banned");
    assert_eq!(r.attempts, 1);
    assert_eq!(server.events(), 1);
    assert_eq!(report.successes(), 0);
}

#[tokio::test]
async fn a_rate_limited_event_is_sent_again_by_the_next_attempt() {
    let server = scripted(&[(false, "rate-limited: slow down"), (true, "")]).await;
    let report = publish_once_to(&server).await;
    let r = &report.relays[0];
    assert_eq!(r.outcome, PublishOutcome::Accepted, "{r:?}");
    // Retried by publishing alone: two attempts, the event sent once on each.
    assert_eq!(r.attempts, 2);
    assert_eq!(server.events(), 2);
}

#[tokio::test]
async fn a_relay_that_keeps_rate_limiting_receives_the_event_once_per_attempt() {
    let server = scripted(&[(false, "rate-limited: slow down")]).await;
    let cfg = PublishConfig::fast_for_tests();
    let report = publish(&event(), std::slice::from_ref(&server.url), &client(), &cfg).await;
    let r = &report.relays[0];
    assert_eq!(r.outcome, PublishOutcome::RateLimited, "{r:?}");
    assert_eq!(r.attempts, cfg.max_attempts, "{r:?}");
    // Counted where it arrives: never more EVENTs than the retry policy's attempts.
    assert_eq!(server.events(), cfg.max_attempts as usize);
}

#[tokio::test]
async fn a_duplicate_counts_as_success() {
    let server = scripted(&[(true, "duplicate: already have it")]).await;
    let report = publish_once_to(&server).await;
    assert_eq!(report.relays[0].outcome, PublishOutcome::Duplicate);
    assert_eq!(report.successes(), 1);
}

#[tokio::test]
async fn a_dead_relay_is_a_connect_failure_after_every_attempt() {
    let url = dead_url().await;
    let cfg = PublishConfig::fast_for_tests();
    let report = publish(&event(), std::slice::from_ref(&url), &client(), &cfg).await;
    let r = &report.relays[0];
    assert_eq!(r.outcome, PublishOutcome::ConnectFailed, "{r:?}");
    assert_eq!(r.attempts, cfg.max_attempts);
}

#[tokio::test]
async fn a_relay_requiring_sign_in_accepts_with_a_key() {
    let relay = RealRelay::start_with(|b| {
        b.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Write,
        })
    })
    .await;
    let event = event();
    let targets = [relay.url.clone()];
    let anonymous = publish_fast(&event, &targets, &client()).await;
    assert_eq!(
        anonymous.relays[0].outcome,
        PublishOutcome::AuthRequired,
        "{anonymous:?}"
    );
    let signer = Client::with(
        RuntimeConfig::fast_for_tests(),
        SocketBudget::default(),
        Some(keys(1).into()),
    );
    let signed = publish_fast(&event, &targets, &signer).await;
    assert_eq!(
        signed.relays[0].outcome,
        PublishOutcome::Accepted,
        "{signed:?}"
    );
    assert!(stored(&relay.url, &event).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_open_at_once_are_capped() {
    // The client's socket budget is the one cap on the connections a publish holds.
    let client = client();
    let cap = client
        .sockets()
        .budget()
        .max_sockets
        .expect("a bounded budget");
    // From an EVENT to its OK, the publisher holds that relay's socket.
    let waiting = Gauge::default();
    let mut targets = Vec::new();
    for _ in 0..cap + 8 {
        targets.push(slow_oks(Duration::from_millis(150), waiting.clone()).await);
    }
    let report = publish_fast(&event(), &targets, &client).await;
    assert_eq!(report.successes(), targets.len(), "{report:?}");
    let peak = waiting.peak.load(Ordering::SeqCst);
    assert!(peak <= cap, "{peak} sockets at once");
    assert!(peak > 1, "relays were not asked concurrently");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebroadcast_sends_only_to_the_targets_that_lack_the_event() {
    let [has, lacks] = RealRelay::several().await;
    let event = note(&keys(1), now() - 30, "say it again");
    has.store(&event).await;
    let (client, cfg) = (client(), PublishConfig::fast_for_tests());
    let targets = [has.url.clone(), lacks.url.clone()];
    let report = nostr_outbox_runtime::rebroadcast(&event, &targets, &client, &cfg).await;
    let outcomes: Vec<_> = report
        .relays
        .iter()
        .map(|r| (r.url.as_str(), r.outcome, r.attempts))
        .collect();
    assert_eq!(
        outcomes,
        [
            (has.url.as_str(), PublishOutcome::Duplicate, 0),
            (lacks.url.as_str(), PublishOutcome::Accepted, 1),
        ]
    );
    let filter = Filter::new().id(event.id);
    let found = fetch_events(std::slice::from_ref(&lacks.url), &filter, &client).await;
    assert_eq!(found.len(), 1, "the relay that lacked it has it now");
    // One socket per relay served both the question and the EVENT.
    assert_eq!(client.sockets().stats().dials, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebroadcast_to_black_holes_ends_by_the_publish_deadline() {
    let mut holes = Vec::new();
    for _ in 0..3 {
        holes.push(BlackHole::start().await);
    }
    let targets: Vec<String> = holes.iter().map(|h| h.url.clone()).collect();
    let mut cfg = PublishConfig::fast_for_tests();
    // The runtime's own timeouts would wait an hour; the publish deadline is what bounds it.
    let client = Client::new(RuntimeConfig {
        connect_timeout: std::time::Duration::from_secs(3600),
        eose_timeout: std::time::Duration::from_secs(3600),
        ..RuntimeConfig::fast_for_tests()
    });
    cfg.deadline = std::time::Duration::from_secs(1);
    let event = note(&keys(1), now() - 30, "into the void");
    // A bound on a hang, far above what a loaded machine needs and far below the hour.
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        nostr_outbox_runtime::rebroadcast(&event, &targets, &client, &cfg),
    )
    .await
    .expect("the rebroadcast outlived its deadline");
    assert_eq!(report.relays.len(), 3);
    assert_eq!(report.successes(), 0, "{report:?}");
}

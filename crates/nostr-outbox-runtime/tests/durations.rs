//! Every configured duration at its largest (`Duration::MAX`, "never"): feeds, lookups, route
//! feeds and publishing still do their work and end, and nothing panics anywhere, in any
//! task. Local relays on 127.0.0.1.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use nostr::event::{EventBuilder, EventId, FinalizeEvent, Kind, Tag};
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    fetch_events, publish, start, start_route, Backoff, Client, FeedInput, PenaltyPolicy,
    PublishConfig, PublishOutcome, RouteEvent, RuntimeConfig, SocketBudget,
};

const CONFIG: &str = "max_connections = 4\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

/// Far more than anything here needs, loaded machine or not: a guard against hanging, not a
/// timing check.
const HUNG: Duration = Duration::from_secs(60);

/// Whether anything in this test binary panicked, in any thread or task (tasks' panics are
/// caught by tokio and would otherwise go unseen).
fn panicked() -> bool {
    static PANICKED: AtomicBool = AtomicBool::new(false);
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            previous(info);
        }));
    });
    PANICKED.load(Ordering::SeqCst)
}

/// A config with every duration at `Duration::MAX`: timeouts, graces, the deadline, the EOSE
/// race, backoff, set-asides and relay documents' lifetimes (the sockets' idle time is
/// [`client`]'s).
fn longest(once: bool) -> RuntimeConfig {
    let max = Duration::MAX;
    let mut cfg = RuntimeConfig::fast_for_tests();
    cfg.once = once;
    cfg.connect_timeout = max;
    cfg.eose_timeout = max;
    cfg.future_tolerance = max;
    cfg.deadline = Some(max);
    cfg.eose_race = Some(max);
    cfg.lookup_grace = max;
    cfg.stats_flush_interval = max;
    cfg.shutdown_grace = max;
    cfg.backoff = Backoff {
        initial: max,
        max,
        factor: 2.0,
    };
    cfg.penalty = PenaltyPolicy {
        initial: max,
        duration: max,
        ..PenaltyPolicy::default()
    };
    cfg.limits.nip11.timeout = max;
    cfg.limits.nip11.wait = max;
    cfg.limits.nip11.ttl = max;
    cfg.limits.nip11.failure_ttl = max;
    cfg
}

/// A client with `cfg`'s knobs whose sockets' idle time is `Duration::MAX` too.
fn client(cfg: RuntimeConfig) -> Client {
    let budget = SocketBudget {
        idle: Duration::MAX,
        ..SocketBudget::desktop()
    };
    Client::with(cfg, budget, None)
}

/// [`client`] of a [`longest`] feed over the last week that re-plans `replan_debounce` after a
/// list arrives.
fn week_feed(once: bool, replan_debounce: Duration) -> Client {
    let mut cfg = longest(once);
    cfg.since = Some(Timestamp::from(now() - 7 * DAY));
    cfg.replan_debounce = replan_debounce;
    client(cfg)
}

/// A reader relay and a routed one: one follow without a list writes to the reader's relay,
/// one lists the routed relay. The input of a feed over them, and every note's id.
async fn two_relays() -> (RealRelay, RealRelay, FeedInput, BTreeSet<EventId>) {
    let [reader, routed] = RealRelay::several().await;
    let now = now();
    let (home, away) = (keys(1), keys(2));
    reader
        .store(&relay_list(&away, now - 50, &[(&routed.url, None)]))
        .await;
    let mut ids = BTreeSet::new();
    for n in 0..3 {
        let at_home = note(&home, now - 100 - n, &format!("home {n}"));
        let routed_note = note(&away, now - 100 - n, &format!("away {n}"));
        reader.store(&at_home).await;
        routed.store(&routed_note).await;
        ids.extend([at_home.id, routed_note.id]);
    }
    let input = local_input(
        router(CONFIG),
        vec![home.public_key(), away.public_key()],
        [&reader.url],
    );
    (reader, routed, input, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_feed_with_every_duration_at_its_largest_fetches_everything() {
    panicked();
    let (_reader, _routed, input, ids) = two_relays().await;
    // A `--once` run waits for its re-plans: this one stays short, so the run can end.
    let feed = week_feed(true, Duration::from_millis(50));
    let (handle, rx) = start(input, &feed).await;
    let collected = drain(rx);
    let summary = run_once(handle, &collected, HUNG).await;
    let got: BTreeSet<EventId> = collected.lock().unwrap().notes.keys().copied().collect();
    assert_eq!(got, ids, "{summary:?}");
    assert_eq!(summary.events, ids.len() as u64);
    assert!(!panicked(), "something panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_feed_with_every_duration_at_its_largest_delivers_and_stops() {
    panicked();
    let (_reader, _routed, input, ids) = two_relays().await;
    // A list arriving never re-plans: the reader's relay is asked about everyone.
    let (handle, rx) = start(input, &week_feed(false, Duration::MAX)).await;
    let collected = drain(rx);
    let home = ids.len() / 2;
    assert!(
        wait_for(&collected, HUNG, |c| c.notes.len() >= home
            && c.statuses.iter().any(|s| matches!(
                s,
                nostr_outbox_runtime::Status::Eose { .. }
            )))
        .await,
        "the reader's relay answers"
    );
    let summary = tokio::time::timeout(HUNG, handle.shutdown())
        .await
        .expect("the feed stops");
    assert!(summary.events >= home as u64, "{summary:?}");
    assert!(!panicked(), "something panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_route_feeds_and_publishing_with_every_duration_at_its_largest() {
    panicked();
    let [a, b] = RealRelay::several().await;
    let (author, reader) = (keys(3), keys(4));
    let list = relay_list(&author, now() - 50, &[(&a.url, None)]);
    a.store(&list).await;
    b.store(&list).await;

    // A lookup: the second relay to answer gets the (endless) lookup grace.
    let cfg = client(longest(true));
    let urls = [a.url.clone(), b.url.clone()];
    let filter = Filter::new()
        .author(author.public_key())
        .kind(Kind::RelayList);
    let found = tokio::time::timeout(HUNG, fetch_events(&urls, &filter, &cfg))
        .await
        .expect("the lookup ends");
    assert_eq!(
        found.iter().map(|e| e.id).collect::<Vec<_>>(),
        [list.id],
        "the lookup finds the list"
    );

    // A route feed.
    let p = Tag::parse(["p", reader.public_key().to_hex().as_str()]).unwrap();
    let mention = EventBuilder::new(Kind::TextNote, "hi")
        .tags([p])
        .custom_created_at(Timestamp::from(now() - 30))
        .finalize(&author)
        .unwrap();
    a.store(&mention).await;
    let plan = inbox_plan(&reader, &[&a.url]);
    let (feed, mut rx) = start_route(&plan, &cfg);
    let mut notes = Vec::new();
    let mut eose = false;
    while let Ok(Some(event)) = tokio::time::timeout(HUNG, rx.recv()).await {
        match event {
            RouteEvent::Note { event, .. } => notes.push(event.id),
            RouteEvent::Eose { .. } => eose = true,
            RouteEvent::Failed { relay, reason, .. } => panic!("{relay} failed: {reason}"),
        }
    }
    tokio::time::timeout(HUNG, feed.wait())
        .await
        .expect("the route feed ends");
    assert!(eose, "the route feed's relay answers");
    assert_eq!(notes, [mention.id]);

    // Publishing.
    let event = note(&author, now() - 5, "published");
    let publisher = client(longest(true));
    let publish_cfg = PublishConfig {
        ok_timeout: Duration::MAX,
        deadline: Duration::MAX,
        ..PublishConfig::default()
    };
    let report = tokio::time::timeout(
        HUNG,
        publish(
            &event,
            std::slice::from_ref(&b.url),
            &publisher,
            &publish_cfg,
        ),
    )
    .await
    .expect("the publish ends");
    assert_eq!(report.relays.len(), 1, "{report:?}");
    assert_eq!(
        report.relays[0].outcome,
        PublishOutcome::Accepted,
        "{report:?}"
    );
    assert!(!panicked(), "something panicked");
}

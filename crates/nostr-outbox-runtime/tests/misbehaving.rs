//! Relays that send valid events we should not take: notes dated in the future, and floods of
//! events nobody asked for. Neither reaches the feed or the learning, and both count against
//! the relay.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{Failure, FeedHandle, FeedInput, FrameDrop, RuntimeConfig, Status};

/// How long a misbehaving relay may take to be set aside.
const SET_ASIDE_WITHIN: Duration = Duration::from_secs(10);

/// Starts a continuing feed of `input` (no list discovery) and waits, within
/// [`SET_ASIDE_WITHIN`], until `relay` is set aside as misbehaving: the feed, its output,
/// whether it was set aside, and how long the wait took.
async fn until_set_aside(
    input: FeedInput,
    relay: &str,
) -> (FeedHandle, Arc<Mutex<Collected>>, bool, Duration) {
    let config = RuntimeConfig {
        discover_lists: false,
        ..RuntimeConfig::fast_for_tests()
    };
    let started = Instant::now();
    let (handle, out) = start_drained(input, config).await;
    let set_aside = wait_for(&out, SET_ASIDE_WITHIN, |c| {
        c.statuses.iter().any(|s| {
            matches!(s, Status::Penalised { relay: r, reason, .. }
                if r == relay && reason.contains("misbehaving"))
        })
    })
    .await;
    (handle, out, set_aside, started.elapsed())
}

const CONFIG: &str = "max_connections = 10\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_dated_events_are_dropped_and_count_against_the_relay() {
    let [reader, liar] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=2).map(keys).collect();
    let mut world = World::default();
    // On the reader's relay: a good note, one a minute ahead (within the tolerance, clocks
    // drift) and one a day ahead.
    let good = note(&f[0], now - 100, "good");
    let skewed = note(&f[0], now + 60, "a minute ahead");
    let future = note(&f[0], now + DAY, "tomorrow");
    for n in [&good, &skewed, &future] {
        world.put(n.clone(), &[&reader]).await;
    }
    // A relay that serves nothing but future-dated notes besides one good one: too many bad
    // frames on every connection, so it is set aside and its author is served by the residual.
    let honest = note(&f[1], now - 200, "f1 honest");
    world.put(honest.clone(), &[&liar, &reader]).await;
    let lies: Vec<_> = (0..5)
        .map(|i| note(&f[1], now + DAY + i, &format!("lie {i}")))
        .collect();
    for n in &lies {
        world.put(n.clone(), &[&liar]).await;
    }
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(router(CONFIG), follows, [&reader.url]);
    assert!(input.add_relay_list_event(&relay_list(&f[1], now, &[(&liar.url, None)])));
    let (summary, out) = start_once(input, given_lists(true)).await;

    let collected = out;
    let got: Vec<&str> = collected
        .notes
        .values()
        .map(|(e, _)| e.content.as_str())
        .collect();
    assert!(collected.notes.contains_key(&good.id), "{got:?}");
    assert!(collected.notes.contains_key(&skewed.id), "{got:?}");
    assert!(collected.notes.contains_key(&honest.id), "{got:?}");
    assert!(!collected.notes.contains_key(&future.id), "{got:?}");
    assert!(lies.iter().all(|n| !collected.notes.contains_key(&n.id)));
    // The reader's one (on each of its two generations) and four from the liar per
    // connection (the fourth bad frame ends it).
    let future_drops = summary.dropped.get(&FrameDrop::FutureDated).copied();
    assert!(future_drops >= Some(2 + 4), "{:?}", summary.dropped);
    // Not counted as returned: the reader's relay was asked twice (f0 alone, then f0 and f1
    // once the liar was set aside) and made us take the good note and the skewed one, then
    // those and the honest one: five, the future-dated note never.
    assert_eq!(summary.plans, 2, "{summary:#?}");
    assert_eq!(summary.relays[&reader.url].received, 5, "{summary:#?}");
    assert_eq!(summary.relays[&reader.url].failures, 0, "{summary:#?}");
    // Counted against the liar like any bad frame: set aside.
    assert_eq!(summary.penalised, vec![liar.url.clone()], "{summary:#?}");
    assert!(collected.statuses.iter().any(|s| matches!(
        s,
        Status::Failed { relay, reason: Failure::BadFrames(_), .. } if relay == &liar.url
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_relay_is_set_aside_while_good_notes_arrive() {
    let [reader, good] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=2).map(keys).collect();
    let stranger = keys(99);
    let flooded_note = note(&f[0], now - 100, "f0 on the flooder");
    // Valid, signed, and by nobody we follow: outside every filter we send.
    let junk: Vec<_> = (0..4)
        .map(|i| note(&stranger, now - 10 - i, &format!("junk {i}")))
        .collect();
    let mut events = vec![flooded_note.clone()];
    events.extend(junk.iter().cloned());
    let flooder = FaultServer::start(Fault::Flood, events).await;

    let mut world = World::default();
    world.put(flooded_note.clone(), &[&reader]).await;
    let f1_note = note(&f[1], now - 50, "f1 on the good relay");
    world.put(f1_note.clone(), &[&good]).await;
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(router(CONFIG), follows, [&reader.url]);
    assert!(input.add_relay_list_event(&relay_list(&f[0], now, &[(&flooder.url, None)])));
    assert!(input.add_relay_list_event(&relay_list(&f[1], now, &[(&good.url, None)])));
    // A continuing feed: the flood lands on a subscription kept open for live notes.
    // Three strikes of a thousand-odd events each; far below the flood's 300,000 frames.
    let (handle, out, set_aside, took) = until_set_aside(input, &flooder.url).await;
    let bound = SET_ASIDE_WITHIN;
    let notes_arrived = wait_for(&out, Duration::from_secs(5), |c| {
        c.notes.contains_key(&flooded_note.id) && c.notes.contains_key(&f1_note.id)
    })
    .await;
    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");

    assert!(
        set_aside,
        "the flooder was not set aside within {bound:?}: {summary:#?}"
    );
    assert!(took < bound, "{took:?}");
    assert!(notes_arrived, "{summary:#?}");
    let connections = flooder.connections.load(Ordering::SeqCst);
    assert!((1..=3).contains(&connections), "{connections} connections");
    let collected = out.lock().unwrap();
    assert!(junk.iter().all(|n| !collected.notes.contains_key(&n.id)));
    let strikes = collected
        .statuses
        .iter()
        .filter(|s| matches!(s, Status::Failed { relay, .. } if relay == &flooder.url))
        .count();
    assert_eq!(strikes, 3, "{:?}", summary.penalties);
    // Each connection stopped the flood soon after the bound, not after the whole flood.
    let unrequested = summary
        .dropped
        .get(&FrameDrop::Unrequested)
        .copied()
        .unwrap_or(0);
    assert!(unrequested <= 3 * 5_000, "{unrequested}");
    assert!(summary.penalised.contains(&flooder.url));
    assert!(!summary.penalised.contains(&good.url));
    assert!(!summary.penalised.contains(&reader.url));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_replaying_its_notes_after_eose_is_cut_off_and_set_aside() {
    let reader = RealRelay::start().await;
    let now = now();
    let f = keys(1);
    let notes: Vec<_> = (0..3)
        .map(|i| note(&f, now - 100 - i, &format!("note {i}")))
        .collect();
    let replayer = FaultServer::start(Fault::Replay, notes.clone()).await;
    let mut world = World::default();
    for n in &notes {
        world.put(n.clone(), &[&reader]).await;
    }
    let mut input = local_input(router(CONFIG), vec![f.public_key()], [&reader.url]);
    assert!(input.add_relay_list_event(&relay_list(&f, now, &[(&replayer.url, None)])));
    // A continuing feed: the replays land on the first page, kept open for live notes.
    let (handle, out, set_aside, took) = until_set_aside(input, &replayer.url).await;
    let bound = SET_ASIDE_WITHIN;
    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");

    assert!(set_aside, "the replayer was not set aside: {summary:#?}");
    assert!(took < bound, "{took:?}");
    let connections = replayer.connections.load(Ordering::SeqCst);
    assert!((1..=3).contains(&connections), "{connections} connections");
    let collected = out.lock().unwrap();
    assert!(notes.iter().all(|n| collected.notes.contains_key(&n.id)));
    let strikes = collected
        .statuses
        .iter()
        .filter(|s| {
            matches!(s, Status::Failed { relay, reason: Failure::Flooded(_), .. }
            if relay == &replayer.url)
        })
        .count();
    assert_eq!(strikes, 3, "{:?}", summary.penalties);
    assert!(summary
        .penalties
        .get(&replayer.url)
        .is_some_and(|e| e.misbehaved));
    println!("replaying relay set aside after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_duplicates_is_cut_off_and_counts_against_the_relay() {
    let reader = RealRelay::start().await;
    let now = now();
    let f = keys(1);
    let n = note(&f, now - 100, "once is enough");
    let duplicator = FaultServer::start(Fault::Duplicates, vec![n.clone()]).await;
    let mut world = World::default();
    world.put(n.clone(), &[&reader]).await;
    let mut input = local_input(router(CONFIG), vec![f.public_key()], [&reader.url]);
    assert!(input.add_relay_list_event(&relay_list(&f, now, &[(&duplicator.url, None)])));
    let config = RuntimeConfig {
        // Time enough to read every copy: only the duplicate bound ends the page early.
        eose_timeout: Duration::from_secs(60),
        ..given_lists(true)
    };
    let started = Instant::now();
    let (summary, out) = start_once(input, config).await;
    let took = started.elapsed();

    assert_eq!(
        summary.penalised,
        vec![duplicator.url.clone()],
        "{summary:#?}"
    );
    assert!(summary
        .penalties
        .get(&duplicator.url)
        .is_some_and(|e| e.misbehaved && e.last_reason.contains("misbehaving")));
    // Each connection stopped at the bound (1,000 beyond the page's 500), not after 100,000.
    let received = summary.relays[&duplicator.url].received;
    assert!(received <= 3, "{received}");
    let collected = out;
    assert!(collected.notes.contains_key(&n.id));
    assert!(took < Duration::from_secs(8), "{took:?}");
    println!("a page of {DUPLICATES} duplicates: the run took {took:?}");
}

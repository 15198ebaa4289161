//! Relays that never answer cannot keep a run going: black holes (a listener that accepts a
//! socket and never reads or writes) and silent WebSockets. A `--once` run never dials again a
//! relay it set aside, ends at its deadline naming what is still pending, and its lookups end
//! once the good answers are in. A relay document's redirect is not followed anywhere.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::filter::Filter;
use nostr::key::Keys;
use nostr::types::Timestamp;
use nostr_outbox_client::{MemoryStore, StatsStore};
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    fetch_events, Client, FeedInput, Nip11Cache, Nip11Config, PenaltyPolicy, RuntimeConfig,
    SocketBudget, Sockets,
};

const CONFIG: &str = "max_connections = 50\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

const HOLES: usize = 200;

/// 200 follows, each listing one black hole as its only write relay; every note is on the
/// reader's relay (the residual finds it once the black holes are set aside).
async fn black_hole_world(reader: &RealRelay) -> (Vec<BlackHole>, FeedInput, Vec<Event>) {
    let now = now();
    let mut holes = Vec::new();
    for _ in 0..HOLES {
        holes.push(BlackHole::start().await);
    }
    let f: Vec<Keys> = (1..=HOLES as u8).map(keys).collect();
    let mut notes = Vec::new();
    let mut world = World::default();
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now - 100 - i as u64, &format!("note {i}"));
        world.put(n.clone(), &[reader]).await;
        notes.push(n);
    }
    let follows = f.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(router(CONFIG), follows, [&reader.url]);
    for (k, hole) in f.iter().zip(&holes) {
        assert!(input.add_relay_list_event(&relay_list(k, now, &[(&hole.url, None)])));
    }
    (holes, input, notes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_run_never_dials_again_a_relay_it_set_aside() {
    let reader = RealRelay::start().await;
    let (holes, input, notes) = black_hole_world(&reader).await;
    // One failed connect sets a relay aside, for a second: far shorter than the run, so a run
    // that planned from the penalty box alone would dial the first ones again.
    let config = RuntimeConfig {
        connect_timeout: Duration::from_millis(300),
        penalty: PenaltyPolicy {
            strikes: 1,
            initial: Duration::from_secs(1),
            ..PenaltyPolicy::default()
        },
        deadline: Some(Duration::from_secs(15)),
        // A slot's own retry waits far longer than the coordinator takes to close a slot it
        // set aside: what is tested is the plan never asking again, not a race with the retry
        // (a loaded machine can take longer than the tests' usual 20 ms backoff to re-plan).
        backoff: nostr_outbox_runtime::Backoff {
            initial: Duration::from_secs(5),
            max: Duration::from_secs(5),
            factor: 1.0,
        },
        ..given_lists(true)
    };
    let started = Instant::now();
    let (summary, out) = start_once(input, config).await;
    let took = started.elapsed();

    let twice: Vec<(&str, usize)> = holes
        .iter()
        .map(|h| (h.url.as_str(), h.accepts.load(Ordering::SeqCst)))
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(
        twice.is_empty(),
        "dialled again after a set-aside: {twice:?}"
    );
    let dialled = holes
        .iter()
        .filter(|h| h.accepts.load(Ordering::SeqCst) == 1)
        .count();
    assert_eq!(dialled, HOLES, "every black hole is tried once");
    assert_eq!(summary.penalised.len(), HOLES, "{:?}", summary.penalised);
    assert!(!summary.deadline_reached, "{took:?}");
    assert!(summary.pending.is_empty(), "{:?}", summary.pending);
    let collected = out;
    let missing = notes
        .iter()
        .filter(|n| !collected.notes.contains_key(&n.id))
        .count();
    assert_eq!(missing, 0, "every note comes from the reader's relay");
    println!("{HOLES} black holes, each dialled once: the run took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_run_ends_at_its_deadline_and_names_what_is_pending() {
    let reader = RealRelay::start().await;
    let (holes, mut input, notes) = black_hole_world(&reader).await;
    let store = Arc::new(MemoryStore::new());
    input.store = store.clone();
    // Timeouts far longer than the deadline: only the deadline can end this run early.
    let deadline = Duration::from_secs(2);
    let config = RuntimeConfig {
        connect_timeout: Duration::from_secs(60),
        eose_timeout: Duration::from_secs(60),
        deadline: Some(deadline),
        ..given_lists(true)
    };
    let started = Instant::now();
    let client = Client::new(config);
    let (summary, out) = start_once_on(input, &client).await;
    let took = started.elapsed();

    // The deadline, then at most the slots' shutdown (twice the grace).
    let bound = deadline + client.config().shutdown_grace * 2 + Duration::from_millis(500);
    assert!(took >= deadline && took < bound, "{took:?}");
    assert!(summary.deadline_reached);
    // Pending: the black holes of the first plan, still connecting. Nothing else.
    let holes_urls: Vec<&str> = holes.iter().map(|h| h.url.as_str()).collect();
    assert!(!summary.pending.is_empty());
    assert!(
        summary
            .pending
            .iter()
            .all(|p| holes_urls.contains(&p.as_str())),
        "{:?}",
        summary.pending
    );
    assert!(!summary.pending.contains(&reader.url));
    // What the run had is kept: the reader's answer learned and saved.
    assert!(summary.relays_answered >= 1, "{summary:#?}");
    assert!(summary.stats_error.is_none());
    let saved = StatsStore::load(store.as_ref()).await.expect("saved").stats;
    assert_eq!(saved.session(), 1, "the run was counted and saved");
    assert!(saved.get(&reader.url).latency_ms.is_some());
    // Notes of follows the first plan left to the residual arrived.
    let collected = out;
    assert!(notes.iter().any(|n| collected.notes.contains_key(&n.id)));
    println!(
        "deadline {deadline:?}: ended after {took:?}, {} relays pending",
        summary.pending.len()
    );
}

/// A signed kind:3 follow list.
fn follow_list(author: &Keys, created_at: u64) -> Event {
    let tag = Tag::parse(["p".to_string(), keys(7).public_key().to_hex()]).unwrap();
    EventBuilder::new(Kind::ContactList, "")
        .tags([tag])
        .custom_created_at(Timestamp::from(created_at))
        .finalize(author)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_ends_once_the_good_answers_are_in() {
    let good = RealRelay::start().await;
    let hole = BlackHole::start().await;
    let silent = FaultServer::start(Fault::NeverEose, Vec::new()).await;
    let reader = keys(1);
    let list = follow_list(&reader, now() - 10);
    good.store(&list).await;
    let config = RuntimeConfig {
        connect_timeout: Duration::from_secs(10),
        eose_timeout: Duration::from_secs(10),
        ..RuntimeConfig::fast_for_tests()
    };
    let filter = Filter::new()
        .author(reader.public_key())
        .kind(Kind::ContactList);
    let relays = [hole.url.clone(), good.url.clone(), silent.url.clone()];
    let started = Instant::now();
    let found = fetch_events(&relays, &filter, &Client::new(config)).await;
    let took = started.elapsed();

    assert_eq!(found.iter().map(|e| e.id).collect::<Vec<_>>(), [list.id]);
    assert!(hole.accepts.load(Ordering::SeqCst) >= 1);
    // The grace after the good answer, far from either timeout.
    assert!(took < Duration::from_secs(3), "{took:?}");
    println!("lookup with a black hole and a silent relay: {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_runs_list_lookup_does_not_wait_for_a_silent_indexer() {
    let reader = RealRelay::start().await;
    let hole = BlackHole::start().await;
    let now = now();
    let f: Vec<Keys> = (1..=3).map(keys).collect();
    let mut world = World::default();
    let mut notes = Vec::new();
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now - 100 - i as u64, &format!("note {i}"));
        world.put(n.clone(), &[&reader]).await;
        notes.push(n);
        reader
            .store(&relay_list(k, now, &[(&reader.url, None)]))
            .await;
    }
    let follows = f.iter().map(|k| k.public_key()).collect();
    let input = local_input(router(CONFIG), follows, [&reader.url]);
    let config = RuntimeConfig {
        once: true,
        discover_lists: true,
        indexers: vec![hole.url.clone()],
        connect_timeout: Duration::from_secs(5),
        ..RuntimeConfig::fast_for_tests()
    };
    let started = Instant::now();
    let (summary, out) = start_once(input, config).await;
    let took = started.elapsed();

    assert_eq!(summary.relay_lists, 3, "{summary:#?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(!summary.deadline_reached);
    let collected = out;
    assert!(notes.iter().all(|n| collected.notes.contains_key(&n.id)));
    println!("list lookup with a black-holed indexer: the run took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_document_redirect_is_not_followed() {
    // Anything that reaches the observer was sent where the relay pointed.
    let redirect = Redirect::start().await;
    let cfg = Nip11Config {
        enabled: true,
        timeout: Duration::from_secs(2),
        ..Nip11Config::default()
    };
    let cache = Nip11Cache::new();
    assert_eq!(
        cache
            .limits(
                &redirect.url,
                &cfg,
                &Sockets::new(SocketBudget::unbounded())
            )
            .await,
        None
    );
    // A followed redirect would have reached the observer, which counts before it answers,
    // before the lookup returned: nothing to wait for.
    assert_eq!(redirect.followed(), 0, "the redirect was followed");
}

/// A `once` run over a reader relay and follows who each list one relay: `holes` of them a
/// black hole, the rest writing to the reader's relay. What each hole saw, the run's summary
/// and what it delivered.
async fn one_run_with_holes(
    schedule: nostr_outbox_runtime::Schedule,
    holes: usize,
) -> (Vec<usize>, nostr_outbox_runtime::FeedSummary, usize) {
    let reader = RealRelay::start().await;
    let now = now();
    let mut input_holes = Vec::new();
    for _ in 0..holes {
        input_holes.push(BlackHole::start().await);
    }
    let follows: Vec<Keys> = (1..=holes as u8 + 2).map(keys).collect();
    for (i, f) in follows.iter().enumerate() {
        reader.store(&note(f, now - 100 - i as u64, "a note")).await;
    }
    let mut input = local_input(
        router(CONFIG),
        follows.iter().map(|k| k.public_key()).collect(),
        [&reader.url],
    );
    for (i, f) in follows.iter().enumerate() {
        let relay = input_holes
            .get(i)
            .map_or(reader.url.as_str(), |h| h.url.as_str());
        assert!(input.add_relay_list_event(&relay_list(f, now, &[(relay, None)])));
    }
    // The default penalty policy: three strikes before a set-aside the box keeps. A slot's
    // own retry waits far longer than the coordinator takes to close a slot it set aside, so
    // what is counted is the plan's dials, not a race with the retry on a loaded machine.
    let config = RuntimeConfig {
        deadline: Some(Duration::from_secs(60)),
        backoff: nostr_outbox_runtime::Backoff {
            initial: Duration::from_secs(2),
            max: Duration::from_secs(2),
            factor: 1.0,
        },
        schedule,
        ..given_lists(true)
    };
    let (handle, rx) = nostr_outbox_runtime::start(input, &Client::new(config)).await;
    let out = drain(rx);
    let summary = run_once(handle, &out, Duration::from_secs(90)).await;
    let notes = out.lock().unwrap().notes.len();
    let seen = input_holes
        .iter()
        .map(|h| h.accepts.load(Ordering::SeqCst))
        .collect();
    (seen, summary, notes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_accepts_no_socket_costs_one_connect_timeout() {
    let (seen, summary, notes) =
        one_run_with_holes(nostr_outbox_runtime::Schedule::default(), 3).await;
    assert_eq!(seen, [1, 1, 1], "each black hole dialled once: {summary:?}");
    assert!(!summary.deadline_reached, "{summary:?}");
    assert_eq!(notes, 5, "the reader's relay carried the holes' follows");
    // Off, as before: every attempt the penalty policy allows.
    let patient = nostr_outbox_runtime::Schedule {
        aside_on_connect_timeout: false,
        ..nostr_outbox_runtime::Schedule::default()
    };
    let (seen, summary, notes) = one_run_with_holes(patient, 1).await;
    assert_eq!(
        seen,
        [3],
        "three attempts before the set-aside: {summary:?}"
    );
    assert_eq!(notes, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replan_does_not_wait_for_a_silent_relay() {
    // One follow writes to a black hole, the other to a relay that accepts a socket and never
    // answers; the reader's relay holds both follows' notes. The black hole is set aside at
    // its connect timeout and its follow moves to the reader's relay at once; the silent relay
    // keeps the run going until its deadline, long before its EOSE timeout.
    let reader = RealRelay::start().await;
    let hole = BlackHole::start().await;
    let silent = FaultServer::start(Fault::NeverEose, Vec::new()).await;
    let now = now();
    let follows: Vec<Keys> = (1..=2).map(keys).collect();
    let moved = note(&follows[0], now - 100, "from the black hole's follow");
    reader.store(&moved).await;
    let mut input = local_input(
        router(CONFIG),
        follows.iter().map(|k| k.public_key()).collect(),
        [&reader.url],
    );
    assert!(input.add_relay_list_event(&relay_list(&follows[0], now, &[(&hole.url, None)])));
    assert!(input.add_relay_list_event(&relay_list(&follows[1], now, &[(&silent.url, None)])));
    let run = |early_waves: bool| {
        let config = RuntimeConfig {
            // Far longer than the deadline: only an early wave moves the follow in time.
            eose_timeout: Duration::from_secs(120),
            deadline: Some(Duration::from_secs(6)),
            schedule: nostr_outbox_runtime::Schedule {
                early_waves,
                ..nostr_outbox_runtime::Schedule::default()
            },
            ..given_lists(true)
        };
        Client::new(config)
    };
    let (handle, rx) = nostr_outbox_runtime::start(input, &run(true)).await;
    let out = drain(rx);
    let summary = run_once(handle, &out, Duration::from_secs(60)).await;
    assert!(
        out.lock().unwrap().notes.contains_key(&moved.id),
        "the re-plan went out without waiting for the silent relay: {summary:?}"
    );
    assert!(summary.pending.contains(&silent.url), "{summary:?}");
}

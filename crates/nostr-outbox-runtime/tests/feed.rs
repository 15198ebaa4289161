//! `--once` feeds against real relays on 127.0.0.1: exactly what the plan predicts, and live
//! discovery of relay lists starting from the residual.

use std::collections::BTreeSet;
use std::time::Duration;

use nostr::event::EventId;
use nostr::types::Timestamp;
use nostr_outbox_core::{DeliveryStats, PlanContext};
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{RuntimeConfig, Status};

const CONFIG: &str = "max_connections = 2\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_fetches_exactly_what_the_plan_predicts() {
    let [reader, a, b, c] = RealRelay::several().await;
    let now = now();
    let since = now - 7 * DAY;
    let f: Vec<_> = (1..=7).map(keys).collect();
    let lists = vec![
        relay_list(&f[0], now - 50, &[(&a.url, None), (&b.url, Some("write"))]),
        relay_list(&f[1], now - 50, &[(&a.url, None)]),
        relay_list(&f[2], now - 50, &[(&b.url, None), (&c.url, None)]),
        relay_list(&f[3], now - 50, &[(&c.url, None)]),
        // f[4]: no list, writes to the reader's relay.
        relay_list(&f[5], now - 50, &[(&a.url, None), (&c.url, None)]),
        // A read-only list: no write relay, so residual.
        relay_list(&f[6], now - 50, &[(&b.url, Some("read"))]),
    ];
    let mut world = World::default();
    for (i, k) in f.iter().enumerate() {
        let t = now - (i as u64 + 1) * 3600;
        match i {
            0 => {
                world.put(note(k, t, "f0 on a+b"), &[&a, &b]).await;
                world.put(note(k, t - 1, "f0 only on b"), &[&b]).await;
            }
            1 => world.put(note(k, t, "f1 on a"), &[&a]).await,
            2 => {
                world.put(note(k, t, "f2 on b"), &[&b]).await;
                world.put(note(k, t - 1, "f2 only on c"), &[&c]).await;
            }
            3 => world.put(note(k, t, "f3 on c"), &[&c]).await,
            4 => world.put(note(k, t, "f4 on reader"), &[&reader]).await,
            5 => {
                world.put(note(k, t, "f5 on a"), &[&a]).await;
                world
                    .put(note(k, now - 30 * DAY, "f5 too old"), &[&a])
                    .await;
            }
            6 => {
                world.put(note(k, t, "f6 on reader"), &[&reader]).await;
                world
                    .put(note(k, t - 1, "f6 on b, never asked"), &[&b])
                    .await;
            }
            _ => unreachable!(),
        }
    }
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let raw_lists: Vec<_> = lists.iter().map(raw).collect();

    // The prediction: the same plan the runtime will make (same table, stats, seed).
    let table = table(&follows, &[&reader.url], &raw_lists);
    let plan =
        router(CONFIG).plan_with(&table, &DeliveryStats::new(), PlanContext::at(now).seed(0));
    let predicted = world.predict(&plan, &table, since);
    assert!(predicted.len() >= 5, "a meaningful world: {predicted:?}");
    assert!(
        predicted.len() < world.notes.len() - 1,
        "the plan must leave some notes out, or exactness proves nothing"
    );

    let mut input = local_input(router(CONFIG), follows.clone(), [&reader.url]);
    for l in &lists {
        assert!(input.add_relay_list_event(l));
    }
    let config = RuntimeConfig {
        since: Some(Timestamp::from(since)),
        ..given_lists(true)
    };
    let (summary, out) = start_once(input, config).await;

    let fetched: BTreeSet<EventId> = out.notes.keys().copied().collect();
    assert_eq!(fetched, predicted, "fetched exactly the predicted notes");
    assert_eq!(summary.events as usize, predicted.len());
    assert_eq!(summary.authors_covered, follows.len());
    assert_eq!(summary.relays_asked, plan.connections(&table));
    assert_eq!(summary.relays_answered, summary.relays_asked);
    assert_eq!(summary.relays_failed, 0);
    assert!(summary.penalised.is_empty());
    assert!(summary.time_to_first_event.unwrap() <= summary.time_to_full_eose.unwrap());
    // One feed REQ per asked relay, one connection each; relays outside the plan untouched.
    for r in [&reader, &a, &b, &c] {
        let asked = summary.relays.contains_key(&r.url);
        assert_eq!(r.counter.feed_reqs(), usize::from(asked), "{}", r.url);
        assert_eq!(r.counter.connections(), usize::from(asked), "{}", r.url);
    }
    // Delivery was learned for every relay that answered.
    for url in summary.relays.keys() {
        assert!(summary.stats.get(url).asked >= 1, "{url} not recorded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_req_goes_out_before_lists_then_discovery_replans() {
    let [reader, a, b] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=4).map(keys).collect();
    let lists = [
        relay_list(&f[0], now - 10, &[(&a.url, None)]),
        relay_list(&f[1], now - 10, &[(&a.url, None), (&b.url, None)]),
        relay_list(&f[2], now - 10, &[(&b.url, None)]),
    ];
    for l in &lists {
        reader.store(l).await;
    }
    // An older list of f[0] on the reader's relay loses to the newer one.
    reader
        .store(&relay_list(&f[0], now - 1000, &[(&b.url, None)]))
        .await;
    let mut world = World::default();
    world.put(note(&f[0], now - 100, "f0 on a"), &[&a]).await;
    world
        .put(note(&f[1], now - 100, "f1 on a, b"), &[&a, &b])
        .await;
    world.put(note(&f[2], now - 100, "f2 on b"), &[&b]).await;
    world
        .put(note(&f[3], now - 100, "f3 on reader"), &[&reader])
        .await;
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();

    let input = local_input(router(CONFIG), follows.clone(), [&reader.url]);
    let config = RuntimeConfig {
        once: true,
        discover_lists: true,
        ..RuntimeConfig::fast_for_tests()
    };
    let (summary, out) = start_once(input, config).await;
    let collected = out;

    // The first plan knew no list and asked the reader's relay about everyone.
    match &collected.statuses[0] {
        Status::Planned {
            plan: 1,
            relay_lists: 0,
            connections: 1,
            ..
        } => {}
        other => panic!("first status should be the list-less plan, got {other:?}"),
    }
    let first_lists_eose = collected
        .statuses
        .iter()
        .position(|s| matches!(s, Status::ListsEose { .. }))
        .expect("lists were looked up");
    assert!(first_lists_eose > 0);
    let last_plan = collected
        .statuses
        .iter()
        .rev()
        .find_map(|s| match s {
            Status::Planned { relay_lists, .. } => Some(*relay_lists),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_plan, 3, "the final plan used every discovered list");
    assert_eq!(summary.relay_lists, 3);
    assert!(summary.plans >= 2);

    // Whatever the final plan predicts was fetched (the first, list-less REQ may add more).
    let lists_raw: Vec<_> = lists.iter().map(raw).collect();
    let table = table(&follows, &[&reader.url], &lists_raw);
    let plan =
        router(CONFIG).plan_with(&table, &DeliveryStats::new(), PlanContext::at(now).seed(0));
    let predicted = world.predict(&plan, &table, 0);
    let fetched: BTreeSet<EventId> = collected.notes.keys().copied().collect();
    assert!(
        predicted.is_subset(&fetched),
        "missing {:?}",
        predicted.difference(&fetched).collect::<Vec<_>>()
    );
    assert_eq!(summary.authors_covered, follows.len());
    // Routed relays got their filter only after the lists arrived.
    assert_eq!(
        a.counter.feed_reqs() + b.counter.feed_reqs(),
        plan.routed().len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_replanned_away_while_answering_counts_as_answered_when_it_answers() {
    let reader = RealRelay::start().await;
    let now = now();
    let f = keys(7);
    // The kept list routes f to a slow relay; the reader's relay holds a newer list naming a
    // fast one, found while the slow one is still answering.
    let slow = FaultServer::start(Fault::Late(1_500), vec![note(&f, now - 100, "slow")]).await;
    let fast = RealRelay::start().await;
    fast.store(&note(&f, now - 50, "fast")).await;
    reader
        .store(&relay_list(&f, now - 10, &[(&fast.url, None)]))
        .await;
    let kept = relay_list(&f, now - 1_000, &[(&slow.url, None)]);
    let mut input = local_input(router(CONFIG), vec![f.public_key()], [&reader.url]);
    input.relay_lists = vec![raw(&kept)];
    let config = RuntimeConfig {
        once: true,
        discover_lists: true,
        // Slow, not failing: its answer comes well within the EOSE timeout.
        eose_timeout: Duration::from_secs(10),
        ..RuntimeConfig::fast_for_tests()
    };
    let (summary, _) = start_once(input, config).await;
    assert!(summary.penalised.is_empty(), "{summary:#?}");
    // Every relay asked sent its EOSE: none failed, whichever order the answers came in.
    assert_eq!(summary.relays_failed, 0, "{summary:#?}");
    assert_eq!(
        summary.relays_answered, summary.relays_asked,
        "{summary:#?}"
    );
}

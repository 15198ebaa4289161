//! A live feed: a changed relay list replaces one relay's filter in place (REQ again on the same
//! socket) and leaves every other socket alone; learned stats (relay priors and per-author data)
//! persist and change the next plan.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nostr_outbox_core::ConfigIssue;
use nostr_outbox_core::{DeliveryStats, PlanInput, RelayView, Scorer, ScorerConfig};
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{Client, Status};
use nostr_outbox_stats::FileStore;
use serde::{Deserialize, Serialize};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_list_replaces_one_filter_in_place_and_touches_nothing_else() {
    let [reader, a, b, c] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=4).map(keys).collect();
    let lists = [
        relay_list(&f[0], now - 100, &[(&a.url, None)]),
        relay_list(&f[1], now - 100, &[(&a.url, None), (&b.url, None)]),
        relay_list(&f[2], now - 100, &[(&b.url, None), (&c.url, None)]),
        relay_list(&f[3], now - 100, &[(&c.url, None)]),
    ];
    let mut world = World::default();
    world.put(note(&f[0], now - 50, "f0 on a"), &[&a]).await;
    let only_on_b = note(&f[0], now - 60, "f0 only on b");
    world.put(only_on_b.clone(), &[&b]).await;
    world
        .put(note(&f[2], now - 50, "f2 on b, c"), &[&b, &c])
        .await;
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();

    // Every author gets all of its relays (target 2, budget 3): no residual.
    let toml = "max_connections = 3\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n";
    let mut input = local_input(router(toml), follows, [&reader.url]);
    for l in &lists {
        input.add_relay_list_event(l);
    }
    let config = given_lists(false);
    let (handle, out) = start_settled(input, &Client::new(config)).await;
    assert!(!out.lock().unwrap().notes.contains_key(&only_on_b.id));
    let before: HashMap<String, (usize, usize)> = [&reader, &a, &b, &c]
        .iter()
        .map(|r| {
            (
                r.url.clone(),
                (r.counter.feed_reqs(), r.counter.connections()),
            )
        })
        .collect();
    assert_eq!(before[&reader.url], (0, 0), "no residual, reader not asked");
    for r in [&a, &b, &c] {
        assert_eq!(before[&r.url], (1, 1), "{}", r.url);
    }

    // f0 now also writes to b: only b's filter changes.
    handle.add_relay_lists(vec![raw(&relay_list(
        &f[0],
        now - 10,
        &[(&a.url, None), (&b.url, None)],
    ))]);
    assert!(
        wait_for_note(&out, &only_on_b.id).await,
        "the replaced filter on b fetched f0's note"
    );
    let planned: Vec<Status> = out
        .lock()
        .unwrap()
        .statuses
        .iter()
        .filter(|s| matches!(s, Status::Planned { plan: 2, .. }))
        .cloned()
        .collect();
    assert!(
        matches!(
            planned.as_slice(),
            [Status::Planned {
                dial: 0,
                replace: 1,
                close: 0,
                unchanged: 2,
                ..
            }]
        ),
        "{planned:?}"
    );
    // b answered the replaced REQ: it arrived, and anything sent before it did too.
    assert!(
        wait_for(&out, Duration::from_secs(10), |c| c.statuses.iter().any(
            |s| matches!(
                s,
                Status::Eose { relay, generation: 2, .. } if relay == &b.url
            )
        ))
        .await,
        "b's generation 2 reached EOSE"
    );
    assert_eq!(b.counter.feed_reqs(), 2, "b: one more REQ");
    assert_eq!(b.counter.connections(), 1, "b: on the same socket");
    for r in [&a, &c, &reader] {
        assert_eq!(
            (r.counter.feed_reqs(), r.counter.connections()),
            before[&r.url],
            "{} was touched",
            r.url
        );
    }
    // The replaced REQ names the new author.
    let reqs = b.counter.reqs();
    assert_eq!(reqs.last().unwrap().authors.len(), 3);
    assert_eq!(reqs[0].peer, reqs.last().unwrap().peer);
    let eoses: Vec<u64> = out
        .lock()
        .unwrap()
        .statuses
        .iter()
        .filter_map(|s| match s {
            Status::Eose {
                relay, generation, ..
            } if relay == &b.url => Some(*generation),
            _ => None,
        })
        .collect();
    assert!(eoses.contains(&2), "generation 2 reached EOSE: {eoses:?}");

    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");
    assert_eq!(summary.plans, 2);
    assert_eq!(summary.relays_answered, 3);
}

/// Scores a relay by the follows it would serve times its learned delivery mean and its learned
/// completeness (both learned from the run report): a deterministic stand-in for a learning
/// strategy, registered from this test.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeanScorerConfig {}

#[typetag::serde(name = "test_delivery_mean")]
impl ScorerConfig for MeanScorerConfig {
    fn validate(&self) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn build(&self) -> Box<dyn Scorer> {
        Box::new(MeanScorer::default())
    }
}

#[derive(Debug, Default)]
struct MeanScorer {
    means: HashMap<String, f64>,
}

impl Scorer for MeanScorer {
    fn name(&self) -> &str {
        "test_delivery_mean"
    }

    fn prepare(&mut self, input: &PlanInput<'_>, _rng: &mut dyn rand::RngCore) {
        self.means = input
            .table
            .relays()
            .map(|r| {
                let url = input.table.url(r).to_string();
                let stats = input.stats.get_at(&url, input.now);
                let mean = stats.mean() * stats.kept_mean();
                (url, mean)
            })
            .collect();
    }

    fn score(&mut self, relay: RelayView<'_>, _rng: &mut dyn rand::RngCore) -> f64 {
        f64::from(relay.coverage) * self.means.get(relay.url).copied().unwrap_or(0.5)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_learned_in_a_once_run_are_on_disk_and_change_the_next_plan() {
    let reader = RealRelay::start().await;
    let x = RealRelay::start().await; // listed by everyone, holds one note of f[0] only
    let [y, z] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=5).map(keys).collect();
    let mut lists = Vec::new();
    for k in &f[..4] {
        lists.push(relay_list(
            k,
            now - 100,
            &[(&x.url, None), (&y.url, None), (&z.url, None)],
        ));
    }
    // One more author only on x makes x the first pick while nothing is known.
    lists.push(relay_list(&f[4], now - 100, &[(&x.url, None)]));
    // Three notes per author on y and z; x kept only the oldest of f[0] (it lost the later
    // writes: its history reaches back as far as the others', so it is judged on all three).
    let mut world = World::default();
    for (i, k) in f[..4].iter().enumerate() {
        for n in 0..3u64 {
            let kept = if i == 0 && n == 2 {
                vec![&x, &y, &z]
            } else {
                vec![&y, &z]
            };
            world
                .put(note(k, now - 50 - n, &format!("on y and z {n}")), &kept)
                .await;
        }
    }
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let toml = "max_connections = 2\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n\
                [strategy.scorer]\ntype = \"test_delivery_mean\"\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stats.json");

    let run = |lists: Vec<nostr::event::Event>| {
        let follows = follows.clone();
        let reader_url = reader.url.clone();
        let path = path.clone();
        async move {
            let mut input = local_input(router(toml), follows, [reader_url]);
            input.store = Arc::new(FileStore::new(path));
            for l in &lists {
                input.add_relay_list_event(l);
            }
            let config = given_lists(true);
            let (handle, out) = start_drained(input, config).await;
            run_once(handle, &out, Duration::from_secs(10)).await
        }
    };

    let first = run(lists.clone()).await;
    let asked_first: Vec<&String> = first.relays.keys().collect();
    assert!(first.relays.contains_key(&x.url), "{asked_first:?}");
    assert!(path.exists(), "stats saved at the end of the run");
    let on_disk = FileStore::new(&path).load().unwrap().stats;
    let xs = on_disk.get(&x.url);
    assert!(
        xs.beta > xs.alpha,
        "x delivered nothing it was expected to: {xs:?}"
    );
    let other = if first.relays.contains_key(&y.url) {
        &y
    } else {
        &z
    };
    let os = on_disk.get(&other.url);
    assert!(
        os.alpha > os.beta,
        "{} delivered everything: {os:?}",
        other.url
    );
    // Learned through the run report: both answered; x returned 1 of the 12 notes the other
    // relay returned for the same authors, so its event-weighted completeness is low.
    assert_eq!((xs.live_alpha, xs.live_beta), (2.0, 1.0), "{xs:?}");
    assert_eq!((os.live_alpha, os.live_beta), (2.0, 1.0), "{os:?}");
    assert!(
        (xs.kept_alpha - (1.0 + 1.0 / 12.0)).abs() < 1e-9,
        "distinct events counted: {xs:?}"
    );
    assert_eq!(os.kept_alpha, 2.0, "{os:?}");
    // Per author: the volume is the most notes any relay returned; per pair the share of it.
    let f0 = f[0].public_key();
    assert_eq!(on_disk.author(&f0).map(|a| a.volume), Some(3.0));
    let x_f0 = on_disk.pair(&f0, &x.url);
    assert!((x_f0.hits - 1.0 / 3.0).abs() < 1e-9, "{x_f0:?}");
    assert_eq!(on_disk.pair(&f[1].public_key(), &x.url).misses, 1.0);
    assert_eq!(on_disk.pair(&f0, &other.url).hits, 1.0);

    let second = run(lists).await;
    assert!(
        !second.relays.contains_key(&x.url),
        "learned stats moved the plan off x: {:?}",
        second.relays.keys().collect::<Vec<_>>()
    );
    assert!(second.relays.contains_key(&y.url) && second.relays.contains_key(&z.url));
    assert_eq!(second.authors_covered, follows.len());
    // The second run's stats build on the first's.
    let after = FileStore::new(&path).load().unwrap().stats;
    assert!(after.get(&other.url).asked > os.asked);
    let _ = DeliveryStats::new();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_added_by_a_replan_is_compared_with_the_relays_that_answered_before() {
    let [reader, deep, shallow] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=2).map(keys).collect();
    // Ten notes of f[0] on deep; shallow kept only the oldest (it lost the later writes).
    let mut world = World::default();
    for n in 0..10u64 {
        let on: Vec<&RealRelay> = if n == 9 {
            vec![&deep, &shallow]
        } else {
            vec![&deep]
        };
        world
            .put(note(&f[0], now - 50 - n, &format!("f0 {n}")), &on)
            .await;
    }
    world
        .put(note(&f[1], now - 50, "f1 on deep"), &[&deep])
        .await;
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let toml = "max_connections = 3\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n";
    let mut input = local_input(router(toml), follows, [&reader.url]);
    input.add_relay_list_event(&relay_list(&f[0], now - 100, &[(&deep.url, None)]));
    input.add_relay_list_event(&relay_list(&f[1], now - 100, &[(&deep.url, None)]));
    let config = given_lists(false);
    let (handle, out) = start_settled(input, &Client::new(config)).await;

    // f0 now also writes to shallow: the re-plan dials it and leaves deep's filter alone, so
    // the round that learns from shallow holds shallow only.
    handle.add_relay_lists(vec![raw(&relay_list(
        &f[0],
        now - 10,
        &[(&deep.url, None), (&shallow.url, None)],
    ))]);
    assert!(
        wait_for(&out, Duration::from_secs(10), |c| c.statuses.iter().any(
            |s| matches!(s, Status::Eose { relay, .. } if relay == &shallow.url)
        ))
        .await,
        "shallow was asked and answered"
    );
    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");
    assert_eq!(summary.plans, 2);
    assert_eq!(
        deep.counter.feed_reqs(),
        1,
        "deep's filter was not replaced"
    );
    let s = summary.stats.get(&shallow.url);
    let d = summary.stats.get(&deep.url);
    // Shallow returned 1 of the 10 notes deep answered for f0: compared with deep, not alone.
    assert!(s.kept_mean() < 0.5, "{s:?}");
    assert!((s.kept_alpha - 1.1).abs() < 1e-9, "{s:?}");
    // Deep was learned from once, in the first round.
    assert_eq!((d.live_alpha, d.kept_alpha), (2.0, 2.0), "{d:?}");
    assert!(summary.stats.pair(&f[0].public_key(), &shallow.url).mean() < 0.5);
}

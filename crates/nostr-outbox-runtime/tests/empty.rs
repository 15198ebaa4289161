//! Empty answers: a relay that answers and keeps none of its follows' notes (an indexer listed
//! as a write relay) is left out once the plan settled, and its follows are asked elsewhere in
//! the same run.

use nostr_outbox_fleet::*;
use nostr_outbox_runtime::RuntimeConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_of_a_relay_that_answered_empty_are_asked_elsewhere_in_the_same_run() {
    let reader = RealRelay::start().await;
    // Listed by every follow, keeps nothing: set cover asks it about all of them.
    let indexer = RealRelay::start().await;
    // Listed by the first follow only, and holds its note.
    let own = RealRelay::start().await;
    let now = now();
    let f: Vec<_> = (1..=12).map(keys).collect();
    let mut world = World::default();
    let first = note(&f[0], now - 100, "on its own relay");
    world.put(first.clone(), &[&own]).await;
    // The second follow lists no relay that holds its note: the reader's relay has it.
    let second = note(&f[1], now - 200, "on the reader's relay");
    world.put(second.clone(), &[&reader]).await;

    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let config_toml = "max_connections = 10\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";
    let mut input = local_input(router(config_toml), follows.clone(), [&reader.url]);
    for (i, k) in f.iter().enumerate() {
        let relays: Vec<(&str, Option<&str>)> = if i == 0 {
            vec![(&indexer.url, None), (&own.url, None)]
        } else {
            vec![(&indexer.url, None)]
        };
        assert!(input.add_relay_list_event(&relay_list(k, now, &relays)));
    }
    let config = RuntimeConfig {
        discover_lists: false,
        ..RuntimeConfig::fast_for_tests()
    };
    let (summary, collected) = start_once(input, config).await;

    // Both notes arrived in this run: one from the follow's own relay, one through the
    // residual, neither of which the first plan asked about them.
    for (note, from) in [(&first, &own.url), (&second, &reader.url)] {
        let got = collected.notes.get(&note.id).map(|(_, relay)| relay);
        assert_eq!(got, Some(from), "{summary:#?}");
    }
    assert!(summary.relays[&indexer.url].empty, "{summary:#?}");
    for relay in [&reader.url, &own.url] {
        assert!(!summary.relays[relay].empty, "{relay}: {summary:#?}");
    }
    // What the indexer answered is still learned: it answered.
    let s = summary.stats.get(&indexer.url);
    assert!(s.asked >= 1 && s.failures == 0, "{s:?}");
    assert_eq!(
        summary.penalised.len(),
        0,
        "an empty answer is not a failure"
    );
}

//! Faults: a relay down at start, one that drops the connection mid-stream, one that never sends
//! EOSE, one that answers CLOSED auth-required (the real relay with NIP-42 on), one that sends
//! garbage. The feed completes within its timeouts, every follow stays covered through the
//! residual, and every failing relay is set aside.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{FrameDrop, RuntimeConfig, Status};
use nostr_relay_builder::prelude as rb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_relays_are_set_aside_and_their_authors_stay_covered() {
    let [reader, good] = RealRelay::several().await;
    let auth = RealRelay::start_with(|b| {
        b.nip42(rb::RelayBuilderNip42 {
            mode: rb::RelayBuilderNip42Mode::Read,
        })
    })
    .await;
    let now = now();
    let f: Vec<_> = (1..=6).map(keys).collect();
    let down = dead_url().await;
    let notes: Vec<_> = f
        .iter()
        .enumerate()
        .map(|(i, k)| note(k, now - 100 - i as u64, &format!("note {i}")))
        .collect();
    let never_eose = FaultServer::start(Fault::NeverEose, vec![notes[2].clone()]).await;
    let dropper = FaultServer::start(Fault::DropMidStream, vec![notes[3].clone()]).await;
    let garbage = FaultServer::start(Fault::Garbage, vec![notes[5].clone()]).await;
    let lists = [
        relay_list(&f[0], now, &[(&good.url, None)]),
        relay_list(&f[1], now, &[(&down, None)]),
        relay_list(&f[2], now, &[(&never_eose.url, None)]),
        relay_list(&f[3], now, &[(&dropper.url, None)]),
        relay_list(&f[4], now, &[(&auth.url, None)]),
        relay_list(&f[5], now, &[(&garbage.url, None)]),
    ];
    // Every note also lives on the reader's relay: the residual can fetch them all.
    let mut world = World::default();
    world.put(notes[0].clone(), &[&good, &reader]).await;
    for n in &notes[1..] {
        world.put(n.clone(), &[&reader, &auth]).await;
    }
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();

    let config_toml = "max_connections = 10\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";
    let mut input = local_input(router(config_toml), follows.clone(), [&reader.url]);
    for l in &lists {
        assert!(input.add_relay_list_event(l));
    }
    let config = RuntimeConfig {
        eose_timeout: Duration::from_millis(400),
        ..given_lists(true)
    };
    // Worst case: three EOSE timeouts plus backoffs on the slowest relay, then one more round
    // on the reader's relay. Anything near the bound means something hung.
    let bound = Duration::from_secs(8);
    let started = Instant::now();
    let (handle, out) = start_drained(input, config).await;
    let summary = run_once(handle, &out, bound).await;
    let took = started.elapsed();

    let expected_penalised: BTreeSet<String> = [
        down.clone(),
        never_eose.url.clone(),
        dropper.url.clone(),
        auth.url.clone(),
        garbage.url.clone(),
    ]
    .into_iter()
    .collect();
    let penalised: BTreeSet<String> = summary.penalised.iter().cloned().collect();
    assert_eq!(penalised, expected_penalised, "{summary:#?}");
    assert!(!penalised.contains(&good.url));
    assert_eq!(summary.authors_covered, follows.len(), "{summary:#?}");

    let collected = out.lock().unwrap();
    let fetched: BTreeSet<_> = collected.notes.keys().copied().collect();
    let all: BTreeSet<_> = notes.iter().map(|n| n.id).collect();
    assert_eq!(
        fetched, all,
        "every follow's note arrived through the residual"
    );
    // The forged event was dropped, never delivered.
    assert!(collected
        .notes
        .values()
        .all(|(e, _)| e.content != "forged" && e.verify().is_ok()));
    for reason in [
        FrameDrop::Unparseable,
        FrameDrop::TooLarge,
        FrameDrop::BadSignature,
    ] {
        assert!(
            summary.dropped.get(&reason).copied().unwrap_or(0) > 0,
            "no {reason:?} drop recorded: {:?}",
            summary.dropped
        );
    }
    assert!(collected.statuses.iter().any(|s| matches!(
        s,
        Status::Refused { relay, reason } if relay == &auth.url && reason.starts_with("auth-required:")
    )));
    // Set aside after three strikes, not retried forever.
    for server in [&never_eose, &dropper, &garbage] {
        let n = server.connections.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=3).contains(&n), "{}: {n} connections", server.url);
    }
    // A definitive refusal is not retried.
    let refusals = collected
        .statuses
        .iter()
        .filter(|s| matches!(s, Status::Refused { relay, .. } if relay == &auth.url))
        .count();
    assert_eq!(refusals, 1);

    // Failures were learned once per relay and run, however many attempts failed: through
    // the run report, not also when each failure arrived. The relay that needs sign-in is up:
    // it is kept as such, never learned as down.
    let s = summary.stats.get(&auth.url);
    assert_eq!((s.failures, s.live_beta), (0, 1.0), "{s:?}");
    assert!(summary
        .penalties
        .get(&auth.url)
        .is_some_and(|e| e.needs_sign_in));
    for url in expected_penalised.iter().filter(|u| **u != auth.url) {
        let s = summary.stats.get(url);
        assert_eq!((s.asked, s.failures), (1, 1), "{url}: {s:?}");
        assert_eq!((s.alpha, s.beta), (1.0, 2.0), "{url}: {s:?}");
        assert_eq!((s.live_alpha, s.live_beta), (1.0, 2.0), "{url}: {s:?}");
    }
    // The relays that answered were learned as answered.
    for url in [&good.url, &reader.url] {
        let s = summary.stats.get(url);
        assert!(s.failures == 0 && s.live_alpha > 1.0, "{url}: {s:?}");
    }
    assert!(summary
        .penalties
        .get(&down)
        .is_some_and(|e| e.until.is_some()));
    assert!(took < bound, "took {took:?}");
    eprintln!(
        "faults run: {took:?}, {} events, {} relays asked, {} answered, {} set aside",
        summary.events,
        summary.relays_asked,
        summary.relays_answered,
        summary.penalised.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn penalised_relays_from_the_last_run_are_left_out_of_the_plan() {
    let [reader, good] = RealRelay::several().await;
    let now = now();
    let f = [keys(1), keys(2)];
    world_note(&reader, &good, &f, now).await;
    let lists = [
        relay_list(&f[0], now, &[(&good.url, None)]),
        relay_list(&f[1], now, &[(&good.url, None)]),
    ];
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let config_toml = "max_connections = 5\n[strategy]\ntype = \"greedy\"\n";
    let mut input = local_input(router(config_toml), follows.clone(), [&reader.url]);
    for l in &lists {
        input.add_relay_list_event(l);
    }
    let policy = nostr_outbox_runtime::PenaltyPolicy::default();
    input
        .penalties
        .penalise(&good.url, "auth-required: earlier", now, &policy);
    let (summary, _) = start_once(input, given_lists(true)).await;
    assert_eq!(
        good.counter.connections(),
        0,
        "a set-aside relay is not dialled"
    );
    assert_eq!(
        summary.authors_covered, 2,
        "its authors went to the residual"
    );
    assert_eq!(summary.events, 2);
}

async fn world_note(reader: &RealRelay, good: &RealRelay, f: &[nostr::key::Keys], now: u64) {
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now - 10 - i as u64, "hello");
        good.store(&n).await;
        reader.store(&n).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_lost_after_answering_is_learned_once_as_answered_and_once_as_down() {
    let [reader, a, b] = RealRelay::several().await;
    let now = now();
    let f = [keys(1), keys(2)];
    let lists = [
        relay_list(&f[0], now - 10, &[(&a.url, None)]),
        relay_list(&f[1], now - 10, &[(&b.url, None)]),
    ];
    let mut world = World::default();
    world
        .put(note(&f[0], now - 5, "on a"), &[&a, &reader])
        .await;
    world
        .put(note(&f[1], now - 5, "on b"), &[&b, &reader])
        .await;
    let follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(
        router("max_connections = 5\n[strategy]\ntype = \"greedy\"\n"),
        follows,
        [&reader.url],
    );
    for l in &lists {
        assert!(input.add_relay_list_event(l));
    }
    let config = given_lists(false);
    let (handle, out) = start_drained(input, config).await;
    let settled = |c: &Collected| {
        c.statuses
            .iter()
            .filter(|s| matches!(s, Status::Settled))
            .count()
    };
    assert!(wait_for(&out, Duration::from_secs(5), |c| settled(c) == 1).await);
    // b goes away for good: the slot fails, retries, and b is set aside after three strikes.
    b.shutdown();
    let b_url = b.url.clone();
    assert!(
        wait_for(&out, Duration::from_secs(10), |c| c.statuses.iter().any(
            |s| matches!(s, Status::Penalised { relay, .. } if relay == &b_url)
        ))
        .await,
        "b set aside"
    );
    let strikes = out
        .lock()
        .unwrap()
        .statuses
        .iter()
        .filter(|s| matches!(s, Status::Failed { relay, .. } if relay == &b_url))
        .count();
    assert!(strikes >= 2, "several failed attempts: {strikes}");
    // f[1] moves to the reader's relay; once that answered the round with b down is learned.
    assert!(
        wait_for(&out, Duration::from_secs(5), |c| answered_after_set_aside(
            c, &b_url
        ))
        .await,
        "f[1] re-planned onto the reader's relay, which answered"
    );
    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");
    let s = summary.stats.get(&b.url);
    // One answered run (everything asked for), then one failed run — not one per attempt.
    assert_eq!((s.asked, s.failures), (2, 1), "{s:?}");
    // Hourly decay may shave a hair off when the rounds straddle a second.
    assert!(
        (s.live_alpha - 2.0).abs() < 1e-3 && (s.live_beta - 2.0).abs() < 1e-3,
        "{s:?}"
    );
    assert!(
        (s.alpha - 2.0).abs() < 1e-3 && (s.beta - 2.0).abs() < 1e-3,
        "{s:?}"
    );
    let a_stats = summary.stats.get(&a.url);
    assert_eq!((a_stats.asked, a_stats.failures), (1, 0), "{a_stats:?}");
}

/// Whether some relay sent EOSE after `relay` was set aside (the re-plan was answered).
fn answered_after_set_aside(c: &Collected, relay: &str) -> bool {
    let penalised_at = c
        .statuses
        .iter()
        .position(|s| matches!(s, Status::Penalised { relay: r, .. } if r == relay));
    penalised_at.is_some_and(|at| {
        c.statuses[at..]
            .iter()
            .any(|s| matches!(s, Status::Eose { .. }))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_relay_is_asked_again_after_a_wait_not_set_aside() {
    let reader = RealRelay::start().await;
    let now = now();
    let f = keys(1);
    let n = note(&f, now - 100, "behind a rate limit");
    // Only the rate-limited relay has the note: the residual cannot stand in.
    let limited = FaultServer::start(Fault::RateLimited, vec![n.clone()]).await;
    let mut input = local_input(
        router("max_connections = 2\n[strategy]\ntype = \"greedy\"\n"),
        vec![f.public_key()],
        [&reader.url],
    );
    assert!(input.add_relay_list_event(&relay_list(&f, now, &[(&limited.url, None)])));
    let (summary, out) = start_once(input, given_lists(true)).await;
    let notes: Vec<_> = out.notes.keys().copied().collect();
    assert_eq!(notes, [n.id], "{summary:#?}");
    assert!(summary.penalised.is_empty(), "{:?}", summary.penalised);
    let outcome = &summary.relays[&limited.url];
    assert_eq!(
        outcome.failures, 0,
        "a rate limit is not a failure: {outcome:?}"
    );
    assert_eq!(
        limited
            .connections
            .load(std::sync::atomic::Ordering::SeqCst),
        1,
        "asked again on the same socket"
    );
}

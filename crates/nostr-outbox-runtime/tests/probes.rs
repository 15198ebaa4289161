//! Probes after the fetch, against real local relays: a relay the plan left out is asked a short
//! question once the run's own sockets are closed, what it returned is learned and the notes no
//! relay delivered are passed on to the feed once each (`FeedEvent::Found`), the config's
//! `probe_connections` bounds how many relays are probed, and the client's socket budget (not
//! the routed budget) how many probe sockets are open at once.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr::key::Keys;
use nostr::types::Timestamp;
use nostr_outbox_client::MemoryStore;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    start, Client, FeedInput, FeedSummary, RuntimeConfig, SocketBudget, Status,
};
use nostr_relay_builder::prelude as rb;

/// `recall` learns from delivery, so it is probed for; one routed relay leaves the follows'
/// own relays out of the plan.
fn config(max_connections: usize, probes: Option<usize>) -> String {
    let probes = probes.map_or_else(String::new, |n| format!("probe_connections = {n}\n"));
    format!("max_connections = {max_connections}\n{probes}[strategy]\ntype = \"recall\"\n")
}

fn runtime(now: u64, once: bool) -> RuntimeConfig {
    RuntimeConfig {
        since: Some(Timestamp::from(now - 30 * DAY)),
        clock: Some(now),
        ..given_lists(once)
    }
}

/// A world where the budget leaves a follow's own relays out: follows 2..=4 list the hub, follow
/// 1 lists only `own` and `own2`, which hold its notes and nobody else's. The reader's relay
/// holds nothing of follow 1.
struct Scene {
    reader: RealRelay,
    hub: RealRelay,
    own: RealRelay,
    own2: RealRelay,
    lonely: Keys,
    follows: Vec<nostr::key::PublicKey>,
    lists: Vec<Event>,
    /// Follow 1's notes, on `own` and `own2`.
    lonely_notes: Vec<Event>,
    now: u64,
}

impl Scene {
    async fn new() -> Self {
        let [reader, hub, own, own2] = RealRelay::several().await;
        let now = now();
        let lonely = keys(1);
        let others = [keys(2), keys(3), keys(4)];
        let mut world = World::default();
        let mut lonely_notes = Vec::new();
        for i in 0..5u64 {
            let n = note(&lonely, now - DAY - i * 3_600, &format!("lonely {i}"));
            world.put(n.clone(), &[&own, &own2]).await;
            lonely_notes.push(n);
        }
        for (k, author) in others.iter().enumerate() {
            for i in 0..3u64 {
                let text = format!("hub {k} {i}");
                world
                    .put(note(author, now - 2 * DAY - i * 60, &text), &[&hub])
                    .await;
            }
        }
        let mut lists = vec![relay_list(
            &lonely,
            now - 10,
            &[(&own.url, None), (&own2.url, None)],
        )];
        for author in &others {
            lists.push(relay_list(author, now - 10, &[(&hub.url, None)]));
        }
        let mut follows = vec![lonely.public_key()];
        follows.extend(others.iter().map(|k| k.public_key()));
        Self {
            reader,
            hub,
            own,
            own2,
            lonely,
            follows,
            lists,
            lonely_notes,
            now,
        }
    }

    fn input(&self, toml: &str) -> FeedInput {
        let mut input = local_input(router(toml), self.follows.clone(), [&self.reader.url]);
        for l in &self.lists {
            assert!(input.add_relay_list_event(l));
        }
        input
    }

    fn lonely_ids(&self) -> BTreeSet<EventId> {
        self.lonely_notes.iter().map(|e| e.id).collect()
    }

    /// A one-shot run with one connection and `probes` probe connections, which asks the hub and
    /// the reader, never the follow's own relays.
    async fn run_once(&self, probes: Option<usize>) -> (FeedSummary, Collected) {
        let (summary, out) =
            start_once(self.input(&config(1, probes)), runtime(self.now, true)).await;
        self.assert_plan_left_out_own(&summary);
        (summary, out)
    }

    /// The run asked the hub and the reader, never the follow's own relays.
    fn assert_plan_left_out_own(&self, summary: &FeedSummary) {
        let asked: BTreeSet<&str> = summary
            .relays
            .iter()
            .filter(|(_, r)| r.reqs > 0)
            .map(|(u, _)| u.as_str())
            .collect();
        assert_eq!(
            asked,
            [self.hub.url.as_str(), self.reader.url.as_str()]
                .into_iter()
                .collect(),
            "{summary:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follows_own_relays_left_out_of_the_plan_are_probed_after_a_once_run() {
    let scene = Scene::new().await;
    let (summary, out) = scene.run_once(Some(20)).await;

    // Both of the follow's relays were probed, each about that follow alone, and each relay's
    // own copy of the notes came back (nothing de-duplicated across relays).
    let probes = &summary.probes;
    assert_eq!(probes.probed(), 2, "{probes:#?}");
    assert_eq!(probes.answered(), 2, "{probes:#?}");
    assert_eq!(probes.events(), 10, "{probes:#?}");
    for url in [&scene.own.url, &scene.own2.url] {
        let p = &probes.relays[url.as_str()];
        assert_eq!((p.authors, p.answered, p.events), (1, true, 5), "{p:?}");
        assert!(p.failure.is_none());
        // One probe REQ, one filter for the one follow.
        let reqs = if url == &scene.own.url {
            scene.own.counter.reqs()
        } else {
            scene.own2.counter.reqs()
        };
        assert_eq!(reqs.len(), 1, "{reqs:?}");
        assert_eq!(
            (reqs[0].authors.len(), reqs[0].kinds.as_slice()),
            (1, &[1u16][..])
        );
    }
    assert!(!summary.relays.contains_key(scene.own.url.as_str()));
    assert_eq!(summary.relays_asked, 2);

    // Learned: both relays answered (liveness), and the follow's notes were seen there.
    let stats = &summary.stats;
    for url in [&scene.own.url, &scene.own2.url] {
        let s = stats.get(url);
        assert_eq!((s.asked, s.failures), (1, 0), "{url}: {s:?}");
        assert!(s.live_mean() > 0.5, "{s:?}");
    }
    let a = stats
        .author(&scene.lonely.public_key())
        .expect("the follow's notes were seen");
    assert_eq!(a.volume, 5.0, "{a:?}");
    let (newest, oldest) = (scene.now - DAY, scene.now - DAY - 4 * 3_600);
    assert_eq!((a.first, a.last), (oldest, newest), "{a:?}");
    assert!(a.relays.iter().any(|(u, _)| u == scene.own.url.as_str()));

    // The plan's fetch carried the hub's notes; the follow's notes, which only the probes
    // reached, came after it as found, once each though both relays returned them.
    let c = &out;
    assert_eq!(c.notes.len(), 9, "the hub's notes");
    let delivered: BTreeSet<EventId> = c.notes.keys().copied().collect();
    assert!(delivered.is_disjoint(&scene.lonely_ids()));
    let found: BTreeSet<EventId> = c.found.keys().copied().collect();
    assert_eq!(found, scene.lonely_ids());
    for (_, relay) in c.found.values() {
        assert!(
            relay == &scene.own.url || relay == &scene.own2.url,
            "{relay}"
        );
    }
    assert_eq!(probes.found(), 5, "{probes:#?}");
    assert!(c.statuses.contains(&Status::Probed {
        relays: 2,
        answered: 2,
        events: 10,
        found: 5,
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_connections_zero_probes_nothing() {
    let scene = Scene::new().await;
    let (summary, out) = scene.run_once(Some(0)).await;
    assert_eq!(summary.probes.probed(), 0, "{:#?}", summary.probes);
    assert!(scene.own.counter.reqs().is_empty());
    assert!(scene.own2.counter.reqs().is_empty());
    assert_eq!(summary.stats.get(&scene.own.url).asked, 0);
    assert!(summary
        .stats
        .author(&scene.lonely.public_key())
        .is_none_or(|a| a.volume == 0.0));
    let c = &out;
    assert!(!c
        .statuses
        .iter()
        .any(|s| matches!(s, Status::Probed { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuing_feed_probes_after_it_settles() {
    let scene = Scene::new().await;
    let (handle, rx) = start(
        scene.input(&config(1, Some(20))),
        &Client::new(runtime(scene.now, false)),
    )
    .await;
    let out = drain(rx);
    assert!(
        wait_for(&out, Duration::from_secs(20), |c| c
            .statuses
            .iter()
            .any(|s| matches!(s, Status::Probed { .. })))
        .await,
        "the feed probes after it settles"
    );
    let summary = tokio::time::timeout(Duration::from_secs(20), handle.shutdown())
        .await
        .expect("the feed ends");
    assert_eq!(summary.probes.probed(), 2, "{:#?}", summary.probes);
    assert_eq!(summary.probes.answered(), 2);
    assert_eq!(summary.stats.get(&scene.own.url).asked, 1);
    let a = summary.stats.author(&scene.lonely.public_key()).unwrap();
    assert_eq!(a.volume, 5.0, "{a:?}");
    let c = out.lock().unwrap();
    let delivered: BTreeSet<EventId> = c.notes.keys().copied().collect();
    assert!(delivered.is_disjoint(&scene.lonely_ids()));
    // Passed on before the probes' status: what they found reached a feed that keeps running.
    let found: BTreeSet<EventId> = c.found.keys().copied().collect();
    assert_eq!(found, scene.lonely_ids());
}

/// Counts the REQs a relay is answering at the moment: each is held for `hold` before the
/// relay queries its database and answers, so REQs that overlap in time are seen together.
/// A REQ counts from its arrival until its answer is on its way, and the client sends the next
/// probe's REQ only after a probe socket closed, so no overlap is seen that did not happen.
/// Until `together` REQs have been open at once, each also waits for that (at most
/// `patience`), so a client that opens that many at once is seen doing it however slowly the
/// machine dials.
#[derive(Clone, Debug)]
struct Gauge {
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    reached: Arc<AtomicBool>,
    all_in: Arc<tokio::sync::Notify>,
    together: usize,
    patience: Duration,
    hold: Duration,
}

impl Gauge {
    fn new(hold: Duration, together: usize, patience: Duration) -> Self {
        Self {
            now: Arc::default(),
            peak: Arc::default(),
            reached: Arc::default(),
            all_in: Arc::default(),
            together,
            patience,
            hold,
        }
    }

    /// Until `together` REQs have been open at once, or `patience` has passed.
    async fn wait_for_the_others(&self) {
        let all_in = async {
            loop {
                // Registered before the count is read, so a notice in between is not lost.
                let notice = self.all_in.notified();
                if self.reached.load(Ordering::SeqCst) {
                    return;
                }
                notice.await;
            }
        };
        let _ = tokio::time::timeout(self.patience, all_in).await;
    }
}

impl rb::QueryPolicy for Gauge {
    fn admit_query<'a>(
        &'a self,
        _query: &'a rb::Filter,
        _addr: &'a SocketAddr,
    ) -> rb::BoxedFuture<'a, rb::PolicyResult> {
        Box::pin(async move {
            let open = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(open, Ordering::SeqCst);
            if open >= self.together {
                self.reached.store(true, Ordering::SeqCst);
                self.all_in.notify_waiters();
            }
            self.wait_for_the_others().await;
            tokio::time::sleep(self.hold).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            rb::PolicyResult::Accept
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_sockets_open_beyond_the_routed_budget_and_never_beyond_the_socket_budget() {
    // Sixty-four follows each list the hub and a relay of their own; a budget of two plans
    // the hub and at most one of them, so 63 or more are probed: more than the client's
    // sixteen sockets hold together, and far more than the routed budget.
    const BUDGET: usize = 2;
    const OWN: usize = 64;
    const SOCKETS: usize = 16;
    const { assert!(OWN > SOCKETS + 1 && SOCKETS > BUDGET + 1) };
    // The first REQs wait for the one that makes the routed budget too few; a client that
    // keeps to the budget never sends it, and its REQs go on after the patience.
    let gauge = Gauge::new(
        Duration::from_millis(250),
        BUDGET + 1,
        Duration::from_secs(3),
    );
    let [reader, hub] = RealRelay::several().await;
    let mut own = Vec::new();
    for _ in 0..OWN {
        let g = gauge.clone();
        own.push(RealRelay::start_with(move |b| b.query_policy(g.clone())).await);
    }
    let now = now();
    let mut lists = Vec::new();
    let mut follows = Vec::new();
    for (i, relay) in own.iter().enumerate() {
        let author = keys(10 + i as u8);
        let n = note(&author, now - DAY, &format!("own {i}"));
        relay.store(&n).await;
        hub.store(&n).await;
        lists.push(relay_list(
            &author,
            now - 10,
            &[(&hub.url, None), (&relay.url, None)],
        ));
        follows.push(author.public_key());
    }
    let toml = config(BUDGET, Some(OWN + 6));
    let mut input = local_input(router(&toml), follows, [&reader.url]);
    for l in &lists {
        assert!(input.add_relay_list_event(l));
    }
    // Answers held for the others must not time out.
    let cfg = RuntimeConfig {
        eose_timeout: Duration::from_secs(10),
        ..runtime(now, true)
    };
    let budget = SocketBudget {
        max_sockets: Some(SOCKETS),
        ..SocketBudget::desktop()
    };
    let (summary, _) = start_once_on(input, &Client::with(cfg, budget, None)).await;
    let probed = summary.probes.probed();
    assert!(probed > SOCKETS, "{:#?}", summary.probes);
    assert_eq!(summary.probes.answered(), probed, "{:#?}", summary.probes);
    // Every probed relay was dialled once: the probes ran, waiting for places of the budget.
    let probed_relays = own
        .iter()
        .filter(|r| summary.probes.relays.contains_key(r.url.as_str()));
    for relay in probed_relays {
        assert_eq!(relay.counter.connections(), 1, "{}", relay.url);
    }
    // The first REQs waited for one beyond the routed budget, and each is held a quarter
    // second: REQs from more sockets than the routed budget overlap, never more than the
    // client's sockets.
    let peak = gauge.peak.load(Ordering::SeqCst);
    assert!(
        (BUDGET + 1..=SOCKETS).contains(&peak),
        "{peak} probe REQs at once with a routed budget of {BUDGET} and {SOCKETS} sockets"
    );
}

/// A feed of `lonely` and `others` routed by `lists` under [`config`]`(1, Some(20))`: one
/// connection, the hub's, so the lonely follow's relays are probed.
fn one_connection(
    lonely: &Keys,
    others: &[Keys],
    lists: &[Event],
    reader: &RealRelay,
) -> FeedInput {
    let follows = std::iter::once(lonely)
        .chain(others)
        .map(|k| k.public_key())
        .collect();
    let mut input = local_input(router(&config(1, Some(20))), follows, [&reader.url]);
    for l in lists {
        assert!(input.add_relay_list_event(l));
    }
    input
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probed_relay_that_never_answers_is_learned_as_failed_within_the_timeouts() {
    let [reader, hub] = RealRelay::several().await;
    let now = now();
    let lonely = keys(1);
    let stuck = FaultServer::start(Fault::NeverEose, vec![note(&lonely, now - DAY, "stuck")]).await;
    let others = [keys(2), keys(3)];
    let mut lists = vec![relay_list(&lonely, now - 10, &[(&stuck.url, None)])];
    for author in &others {
        hub.store(&note(author, now - DAY, "hub")).await;
        lists.push(relay_list(author, now - 10, &[(&hub.url, None)]));
    }
    let input = one_connection(&lonely, &others, &lists, &reader);
    let started = std::time::Instant::now();
    let (summary, out) = start_once(input, runtime(now, true)).await;
    let cfg = RuntimeConfig::fast_for_tests();
    assert!(
        started.elapsed() < cfg.connect_timeout + cfg.eose_timeout + Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let p = &summary.probes.relays[stuck.url.as_str()];
    assert!(!p.answered, "{p:?}");
    assert!(
        p.failure.as_deref().is_some_and(|f| f.contains("EOSE")),
        "{p:?}"
    );
    let s = summary.stats.get(&stuck.url);
    assert_eq!((s.asked, s.failures), (1, 1), "{s:?}");
    assert!(s.live_mean() < 0.5, "{s:?}");
    // What it sent before failing is neither learned nor delivered.
    assert!(summary
        .stats
        .author(&lonely.public_key())
        .is_none_or(|a| a.volume == 0.0));
    assert!(out
        .notes
        .values()
        .all(|(e, _)| e.pubkey != lonely.public_key()));
}

/// A list names more relays than the policy keeps (12): the one past the cap is not among the
/// follow's relays, and a relay of the list being set aside does not make room for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_aside_relay_does_not_bring_a_list_entry_past_the_cap_into_the_probes() {
    let [reader, hub, beyond] = RealRelay::several().await;
    let now = now();
    let lonely = keys(1);
    let aside = dead_url().await;
    let mut entries = vec![aside.clone()];
    for _ in 0..11 {
        entries.push(dead_url().await);
    }
    entries.push(beyond.url.clone());
    let tags: Vec<(&str, Option<&str>)> = entries.iter().map(|u| (u.as_str(), None)).collect();
    beyond
        .store(&note(&lonely, now - DAY, "past the cap"))
        .await;
    let others = [keys(2), keys(3)];
    let mut lists = vec![relay_list(&lonely, now - 10, &tags)];
    for author in &others {
        lists.push(relay_list(author, now - 10, &[(&hub.url, None)]));
    }
    let mut input = one_connection(&lonely, &others, &lists, &reader);
    let cfg = runtime(now, true);
    input.penalties.penalise(
        &aside,
        "blocked: set aside by the last run",
        now,
        &cfg.penalty,
    );
    let (summary, _) = start_once(input, cfg).await;
    // The eleven other relays of the list were probed (they refuse: nothing listens), the
    // set-aside one and the one past the cap never.
    let probed: BTreeSet<&str> = summary.probes.relays.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = entries[1..12].iter().map(String::as_str).collect();
    assert_eq!(probed, expected, "{:#?}", summary.probes);
    assert!(beyond.counter.reqs().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_slow_to_accept_gets_a_patient_probe_after_a_short_one_failed() {
    // Follow 1 lists only a relay that takes 1.5 s to accept: more than a probe waits (0.3 s)
    // and less than the connect timeout (8 s). Three others list the hub, which the budget
    // of one picks.
    let [reader, hub, own] = RealRelay::several().await;
    let slow = slow_to_accept(&own.url, Duration::from_millis(1_500)).await;
    let now = now();
    let lonely = keys(1);
    for i in 0..3u64 {
        own.store(&note(&lonely, now - DAY - i * 60, &format!("slow {i}")))
            .await;
    }
    let mut lists = vec![relay_list(&lonely, now - 10, &[(&slow, None)])];
    let mut follows = vec![lonely.public_key()];
    for k in 2..=4u8 {
        let author = keys(k);
        hub.store(&note(&author, now - 2 * DAY, "hub")).await;
        lists.push(relay_list(&author, now - 10, &[(&hub.url, None)]));
        follows.push(author.public_key());
    }
    let store = Arc::new(MemoryStore::new());
    let run = || {
        let mut input = local_input(router(&config(1, Some(20))), follows.clone(), [&reader.url]);
        input.store = store.clone();
        for l in &lists {
            assert!(input.add_relay_list_event(l));
        }
        let mut cfg = runtime(now, true);
        cfg.connect_timeout = Duration::from_secs(8);
        cfg.schedule.probe_connect_timeout = Duration::from_millis(300);
        start_once(input, cfg)
    };
    let (first, _) = run().await;
    let p = &first.probes.relays[slow.as_str()];
    assert!(!p.answered && p.failure.is_some(), "a short probe: {p:?}");
    assert_eq!(
        first.stats.get(&slow).failures,
        1,
        "{:?}",
        first.stats.get(&slow)
    );

    // The next run starts from what the first learned: the relay failed once, so its probe
    // waits the whole connect timeout, and it answers.
    let (second, _) = run().await;
    let p = &second.probes.relays[slow.as_str()];
    assert!(p.answered && p.failure.is_none(), "a patient probe: {p:?}");
    assert_eq!(p.events, 3, "{p:?}");
}

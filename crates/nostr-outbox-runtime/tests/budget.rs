//! Budgets that cannot stall: a one-shot feed with fewer socket places than relays takes
//! turns (a relay that has answered gives its place to one waiting), fetches what an
//! unbounded run fetches, and never holds more connections than the budget on the relays'
//! side — NIP-11 requests included. A continuing feed with no place left beside the reader's
//! relays routes nothing and lets them carry everyone.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::event::Event;
use nostr::key::Keys;
use nostr::types::Timestamp;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    start, Client, FeedSummary, LimitsConfig, Places, RuntimeConfig, SocketBudget,
};

/// Relays besides the reader's: each follow writes to one of them only, so a run that never
/// reaches one of them misses its writers.
const WRITE_RELAYS: usize = 6;
const FOLLOWS: u8 = 18;

/// Reader relays and write relays, and where each follow writes.
struct Fleet {
    relays: Vec<RealRelay>,
    /// A proxy in front of each relay, counting connections: the URLs every run uses (the
    /// same in every run, so plans that break ties by URL are the same too).
    urls: Vec<String>,
    gauge: Gauge,
    readers: usize,
    /// Per follow, the write relays its list names (indices past the readers).
    writes: Vec<Vec<usize>>,
}

impl Fleet {
    /// Each follow writes to one relay only and every note is stored there.
    async fn start(readers: usize) -> Self {
        let writes = (0..usize::from(FOLLOWS))
            .map(|i| vec![readers + i % WRITE_RELAYS])
            .collect();
        let fleet = Self::empty(readers, WRITE_RELAYS, writes).await;
        let now = now();
        for i in 0..FOLLOWS {
            let author = keys(i + 1);
            let relay = &fleet.relays[fleet.writes[usize::from(i)][0]];
            for n in 0..2u64 {
                relay
                    .store(&note(&author, now - 100 - n, &format!("note {i}.{n}")))
                    .await;
            }
        }
        fleet
    }

    /// A world drawn from `seed`: 1 to 3 reader relays, 3 to 7 write relays, each follow
    /// listing 1 to 3 of them, each of its notes on some of those only (as when a write
    /// failed), now and then on a reader relay too.
    async fn random(seed: u64) -> Self {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let readers = rng.random_range(1..=3);
        let write_relays = rng.random_range(3..=7);
        let writes: Vec<Vec<usize>> = (0..FOLLOWS)
            .map(|_| {
                let mut listed: Vec<usize> = (0..rng.random_range(1..=3))
                    .map(|_| readers + rng.random_range(0..write_relays))
                    .collect();
                listed.sort_unstable();
                listed.dedup();
                listed
            })
            .collect();
        let fleet = Self::empty(readers, write_relays, writes).await;
        let now = now();
        for i in 0..FOLLOWS {
            let author = keys(i + 1);
            let listed = &fleet.writes[usize::from(i)];
            for n in 0..2u64 {
                let event = note(&author, now - 100 - n, &format!("note {i}.{n}"));
                let mut held = listed.iter().filter(|_| rng.random_bool(0.6)).peekable();
                if held.peek().is_none() {
                    fleet.relays[listed[0]].store(&event).await;
                }
                for &r in held {
                    fleet.relays[r].store(&event).await;
                }
                if rng.random_bool(0.2) {
                    fleet.relays[rng.random_range(0..readers)]
                        .store(&event)
                        .await;
                }
            }
        }
        fleet
    }

    async fn empty(readers: usize, write_relays: usize, writes: Vec<Vec<usize>>) -> Self {
        let gauge = Gauge::default();
        let (mut relays, mut urls) = (Vec::new(), Vec::new());
        for _ in 0..readers + write_relays {
            let relay = RealRelay::start().await;
            urls.push(proxy(&relay.url, gauge.clone()).await);
            relays.push(relay);
        }
        Self {
            relays,
            urls,
            gauge,
            readers,
            writes,
        }
    }

    /// Stores every note on the reader's relays too (as if the follows also wrote there).
    async fn copy_to_readers(&self) {
        let now = now();
        for i in 0..FOLLOWS {
            let author = keys(i + 1);
            for relay in &self.relays[..self.readers] {
                for n in 0..2u64 {
                    relay
                        .store(&note(&author, now - 100 - n, &format!("note {i}.{n}")))
                        .await;
                }
            }
        }
    }

    /// One `--once` run through proxies counting connections in a gauge of its own: what it
    /// delivered, its summary and the most connections open at once on the relays' side.
    async fn run(&self, budget: SocketBudget, nip11: bool) -> (usize, FeedSummary, usize) {
        self.feed(budget, nip11, true).await
    }

    /// A run, one-shot or continuing; a continuing one is stopped once every note arrived
    /// (or after a generous wait).
    async fn feed(
        &self,
        budget: SocketBudget,
        nip11: bool,
        once: bool,
    ) -> (usize, FeedSummary, usize) {
        // The last run's connections closed, the peak counts this run's only.
        let gauge = &self.gauge;
        wait_for_value(&gauge.open, 0).await;
        gauge.peak.store(0, Ordering::SeqCst);
        let urls = &self.urls;
        let now = now();
        let follows: Vec<_> = (1..=FOLLOWS).map(keys).collect();
        let mut limits = LimitsConfig::fast_for_tests();
        limits.nip11.enabled = nip11;
        let config = RuntimeConfig {
            once,
            discover_lists: false,
            since: Some(Timestamp::from(now - 7 * DAY)),
            deadline: Some(Duration::from_secs(60)),
            limits,
            ..RuntimeConfig::fast_for_tests()
        };
        let toml = "max_connections = 20\n[strategy]\ntype = \"greedy\"\n";
        let mut input = local_input(
            router(toml),
            follows.iter().map(|k| k.public_key()).collect(),
            &urls[..self.readers],
        );
        for (f, listed) in follows.iter().zip(&self.writes) {
            let listed: Vec<(&str, Option<&str>)> =
                listed.iter().map(|&r| (urls[r].as_str(), None)).collect();
            assert!(input.add_relay_list_event(&relay_list(f, now - 1000, &listed)));
        }
        let (handle, rx) = start(input, &Client::with(config, budget, None)).await;
        let collected = drain(rx);
        let summary = if once {
            run_once(handle, &collected, Duration::from_secs(120)).await
        } else {
            let all = 2 * usize::from(FOLLOWS);
            wait_for(&collected, Duration::from_secs(60), |c| {
                c.notes.len() >= all
            })
            .await;
            handle.shutdown().await
        };
        let notes = collected.lock().unwrap().notes.len();
        (notes, summary, gauge.peak.load(Ordering::SeqCst))
    }
}

/// Waits (boundedly) until `count` is `value`.
async fn wait_for_value(count: &std::sync::atomic::AtomicUsize, value: usize) {
    for _ in 0..500 {
        if count.load(Ordering::SeqCst) == value {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A budget as `outbox feed --max-sockets N` makes it: the desktop profile's reserve, at most
/// half the sockets.
fn budget(max: usize) -> SocketBudget {
    let desktop = SocketBudget::desktop();
    SocketBudget {
        max_sockets: Some(max),
        reserve: desktop.reserve.min(max / 2).max(1),
        idle: Duration::from_millis(200),
    }
}

async fn fits_in(max_sockets: usize, readers: usize) {
    let fleet = Fleet::start(readers).await;
    let (everything, unbounded, _) = fleet.run(SocketBudget::unbounded(), false).await;
    assert_eq!(
        everything,
        2 * usize::from(FOLLOWS),
        "the unbounded run fetches every note: {unbounded:?}"
    );
    let (notes, summary, peak) = fleet.run(budget(max_sockets), true).await;
    assert!(
        !summary.deadline_reached && summary.pending.is_empty(),
        "the run ended because every relay answered, not at its deadline: {summary:?}"
    );
    assert!(
        notes * 100 >= everything * 95,
        "{notes} of the unbounded run's {everything} notes with {max_sockets} sockets: {summary:?}"
    );
    assert!(
        peak <= max_sockets,
        "{peak} connections at once on the relays' side (NIP-11 included), over {max_sockets}"
    );
    assert!(
        matches!(summary.places, Places::Shared { .. }),
        "the summary says the places were time-shared: {:?}",
        summary.places
    );
}

/// One more socket never fetches fewer notes: from a budget that leaves the routed relays no
/// place beside the reader's to one with a place for every relay, each run fetches what the
/// unbounded one does, on worlds with one, two and three reader relays and on worlds drawn
/// at random (notes on only some of their author's relays).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_sockets_never_fetch_fewer_notes() {
    let mut fleets = Vec::new();
    for readers in 1..=3 {
        fleets.push((
            format!("{readers} reader relays"),
            Fleet::start(readers).await,
        ));
    }
    for seed in 1..=4 {
        fleets.push((format!("world {seed}"), Fleet::random(seed).await));
    }
    for (name, fleet) in fleets {
        let (everything, _, _) = fleet.run(SocketBudget::unbounded(), false).await;
        let mut fetched = Vec::new();
        for max in 2..=fleet.relays.len() + 3 {
            let (notes, summary, _) = fleet.run(budget(max), false).await;
            assert!(
                !summary.deadline_reached,
                "{name}, {max} sockets: {summary:?}"
            );
            fetched.push((max, notes));
        }
        assert!(
            fetched.iter().all(|(_, n)| *n == everything),
            "{name}, notes by socket budget: {fetched:?}, unbounded {everything}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sockets_and_two_reader_relays_take_turns_and_fetch_everything() {
    fits_in(4, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sockets_and_one_reader_relay_take_turns_and_fetch_everything() {
    fits_in(2, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socket_still_finishes() {
    fits_in(1, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuing_feed_with_no_place_beside_the_reader_relays_takes_turns() {
    let fleet = Fleet::start(2).await;
    fleet.copy_to_readers().await;
    let (notes, summary, peak) = fleet.feed(budget(4), false, false).await;
    assert_eq!(
        notes,
        2 * usize::from(FOLLOWS),
        "every note, the reader's relays and the routed ones sharing the places: {summary:?}"
    );
    assert!(
        matches!(summary.places, Places::Turns { places: 2, .. }),
        "the places are taken in turns, not routed away: {:?}",
        summary.places
    );
    assert!(
        summary.places.bound().is_some(),
        "the summary states the bound"
    );
    assert!(peak <= 4, "{peak} connections at once, over 4");
}

/// Where the relays time-share one place, relays that accept a socket and never answer cannot
/// hold it: each gives its place up once its dial is past the schedule's bound (its follows
/// asked elsewhere), so the run ends long before their connect timeout with every note, and
/// the reader's relay is never kept waiting behind them.
/// Stores two notes of `author` on `on` and returns its relay list naming only `listed`.
async fn two_notes_listing(
    author: &Keys,
    on: &RealRelay,
    listed: &str,
    label: &str,
    now: u64,
) -> Event {
    for n in 0..2u64 {
        on.store(&note(author, now - 100 - n, &format!("{label}.{n}")))
            .await;
    }
    relay_list(author, now - 1000, &[(listed, None)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_never_connects_gives_its_place_up_to_those_waiting() {
    const HOLES: u8 = 3;
    let reader = RealRelay::start().await;
    let mut writers = Vec::new();
    for _ in 0..4 {
        writers.push(RealRelay::start().await);
    }
    let mut holes = Vec::new();
    for _ in 0..HOLES {
        holes.push(BlackHole::start().await);
    }
    let now = now();
    let mut follows = Vec::new();
    let mut lists = Vec::new();
    for i in 0..FOLLOWS {
        let author = keys(i + 1);
        let relay = &writers[usize::from(i) % writers.len()];
        let label = format!("note {i}");
        lists.push(two_notes_listing(&author, relay, &relay.url, &label, now).await);
        follows.push(author);
    }
    // Follows whose only listed relay never answers; their notes are on the reader's relay.
    for (i, hole) in holes.iter().enumerate() {
        let author = keys(100 + i as u8);
        let label = format!("hole note {i}");
        lists.push(two_notes_listing(&author, &reader, &hole.url, &label, now).await);
        follows.push(author);
    }
    let expected = 2 * follows.len();
    let mut limits = LimitsConfig::fast_for_tests();
    limits.nip11.enabled = false;
    let mut config = RuntimeConfig {
        since: Some(Timestamp::from(now - 7 * DAY)),
        // Far longer than the deadline: only giving the place up lets the others answer.
        connect_timeout: Duration::from_secs(120),
        deadline: Some(Duration::from_secs(60)),
        limits,
        ..given_lists(true)
    };
    config.schedule.slow_dial = Duration::from_millis(500);
    let toml = "max_connections = 20\n[strategy]\ntype = \"greedy\"\n";
    let mut input = local_input(
        router(toml),
        follows.iter().map(|k| k.public_key()).collect(),
        [&reader.url],
    );
    for list in &lists {
        assert!(input.add_relay_list_event(list));
    }
    // One lasting place: the reader's relay, the writers and the black holes take turns.
    let (handle, rx) = start(input, &Client::with(config, budget(2), None)).await;
    let collected = drain(rx);
    let summary = run_once(handle, &collected, Duration::from_secs(120)).await;
    let notes = collected.lock().unwrap().notes.len();
    assert!(
        matches!(summary.places, Places::Shared { places: 1, .. }),
        "{:?}",
        summary.places
    );
    assert!(
        !summary.deadline_reached,
        "the black holes held the place until the deadline: {summary:#?}"
    );
    assert_eq!(notes, expected, "{summary:#?}");
}

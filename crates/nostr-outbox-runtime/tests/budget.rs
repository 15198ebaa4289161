//! Budgets that cannot stall: a one-shot feed with fewer socket places than relays takes
//! turns (a relay that has answered gives its place to one waiting), fetches what an
//! unbounded run fetches, and never holds more connections than the budget on the relays'
//! side — NIP-11 requests included. A continuing feed with no place left beside the reader's
//! relays routes nothing and lets them carry everyone.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nostr::types::Timestamp;
use nostr_outbox_core::UrlPolicy;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    start, Client, FeedInput, FeedSummary, LimitsConfig, Places, RuntimeConfig, SocketBudget,
};

/// Relays besides the reader's: each follow writes to one of them only, so a run that never
/// reaches one of them misses its writers.
const WRITE_RELAYS: usize = 6;
const FOLLOWS: u8 = 18;

/// Reader relays and write relays, every note stored once.
struct Fleet {
    relays: Vec<RealRelay>,
    readers: usize,
}

impl Fleet {
    async fn start(readers: usize) -> Self {
        let mut relays = Vec::new();
        for _ in 0..readers + WRITE_RELAYS {
            relays.push(RealRelay::start().await);
        }
        let now = now();
        for i in 0..FOLLOWS {
            let author = keys(i + 1);
            let relay = &relays[readers + usize::from(i) % WRITE_RELAYS];
            for n in 0..2u64 {
                relay
                    .store(&note(&author, now - 100 - n, &format!("note {i}.{n}")))
                    .await;
            }
        }
        Self { relays, readers }
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
        let gauge = Gauge::default();
        let mut urls = Vec::new();
        for relay in &self.relays {
            urls.push(proxy(&relay.url, gauge.clone()).await);
        }
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
        let mut input = FeedInput::new(
            router(toml),
            follows.iter().map(|k| k.public_key()).collect(),
            &urls[..self.readers],
        );
        input.router = input.router.with_policy(UrlPolicy::allow_local());
        for (i, f) in follows.iter().enumerate() {
            let write = &urls[self.readers + i % WRITE_RELAYS];
            assert!(input.add_relay_list_event(&relay_list(f, now - 1000, &[(write, None)])));
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

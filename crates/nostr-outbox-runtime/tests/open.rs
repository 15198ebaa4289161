//! A feed left open loses nothing: what a relay holds for a follow who lists it is printed,
//! whatever happened to the relay or the follow's list since the feed started. A relay that
//! goes down and comes back, a relay that held nothing in the window when the feed started,
//! a follow who moves to a relay it never listed, and a socket budget the reader's relays
//! fill: in each, notes published while the feed runs arrive.
//!
//! Every wait is on an event (a status, a relay's counter, a note) and bounded generously; no
//! timing is asserted. Notes published while the feed runs are dated when they are published,
//! as a client dates them.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostr::event::{Event, EventId, Kind, Tag};
use nostr::types::Timestamp;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    start, Client, FeedHandle, FeedInput, PenaltyPolicy, RuntimeConfig, SocketBudget, Status,
};

/// Long enough for a loaded machine; the feed is expected to deliver in well under a second.
const WITHIN: Duration = Duration::from_secs(20);

/// A continuing feed with the test timeouts and a one-second first set-aside.
fn open_config() -> RuntimeConfig {
    RuntimeConfig {
        penalty: PenaltyPolicy {
            initial: Duration::from_secs(1),
            ..PenaltyPolicy::default()
        },
        ..given_lists(false)
    }
}

/// `outbox feed --max-sockets 4`: the desktop reserve cut to half, two lasting places.
fn four_sockets() -> SocketBudget {
    SocketBudget {
        max_sockets: Some(4),
        reserve: 2,
        idle: Duration::from_millis(200),
    }
}

/// [`open_config`] discovering the follows' relay lists.
fn discovering() -> RuntimeConfig {
    RuntimeConfig {
        discover_lists: true,
        ..open_config()
    }
}

/// `author` moves to `to`: its new list, naming only `to`, is published on `announced` and on
/// `to`, then its first note there; returns that note.
async fn moves(author: &nostr::key::Keys, announced: &RealRelay, to: &RealRelay) -> Event {
    let list = relay_list(author, now_(), &[(&to.url, None)]);
    announced.publish(&list).await;
    to.publish(&list).await;
    let moved = note(author, now_(), "on its new relay");
    to.publish(&moved).await;
    moved
}

/// The feed printed it, as a note or as one a probe found.
fn printed(c: &Collected, id: &EventId) -> bool {
    c.notes.contains_key(id) || c.found.contains_key(id)
}

/// Which of `notes` the feed has not printed.
fn missing(collected: &Arc<Mutex<Collected>>, notes: &[Event]) -> Vec<String> {
    let c = collected.lock().unwrap();
    notes
        .iter()
        .filter(|n| !printed(&c, &n.id))
        .map(|n| n.content.clone())
        .collect()
}

/// Waits until every one of `notes` was printed; panics naming those that never came.
async fn expect_all(collected: &Arc<Mutex<Collected>>, notes: &[Event], what: &str) {
    let ids: Vec<EventId> = notes.iter().map(|n| n.id).collect();
    let all = wait_for(collected, WITHIN, |c| ids.iter().all(|id| printed(c, id))).await;
    assert!(all, "{what}: never printed {:?}", missing(collected, notes));
}

/// Starts a continuing feed and waits until its first plan settled.
async fn open_feed(input: FeedInput, client: &Client) -> (FeedHandle, Arc<Mutex<Collected>>) {
    let (handle, rx) = start(input, client).await;
    let out = drain(rx);
    let settled = wait_for(&out, WITHIN, |c| c.statuses.contains(&Status::Settled)).await;
    assert!(
        settled,
        "the feed settled: {:?}",
        out.lock().unwrap().statuses
    );
    (handle, out)
}

/// The present, when a note is published.
fn now_() -> u64 {
    Timestamp::now().as_secs()
}

/// [`input`] for a greedy router of `max_connections`.
fn greedy(max_connections: usize, follows: &[nostr::key::Keys], readers: &[&str]) -> FeedInput {
    let toml = format!("max_connections = {max_connections}\n[strategy]\ntype = \"greedy\"\n");
    input(&toml, follows, readers)
}

fn input(toml: &str, follows: &[nostr::key::Keys], readers: &[&str]) -> FeedInput {
    let follows = follows.iter().map(|k| k.public_key()).collect();
    local_input(router(toml), follows, readers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_restarts_delivers_what_was_published_while_it_was_down_and_after() {
    let [reader, mut only, other] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=4).map(keys).collect();
    // The first two follows write only to the relay that restarts.
    let mut input = greedy(5, &f, &[&reader.url]);
    for (i, k) in f.iter().enumerate() {
        let relay = if i < 2 { &only.url } else { &other.url };
        assert!(input.add_relay_list_event(&relay_list(k, now - 100, &[(relay, None)])));
    }
    let before = [
        note(&f[0], now - 50, "f0 before"),
        note(&f[2], now - 50, "f2 before"),
    ];
    only.store(&before[0]).await;
    other.store(&before[1]).await;
    let (handle, out) = open_feed(input, &Client::new(open_config())).await;
    expect_all(&out, &before, "stored before the start").await;

    // Down long enough to be set aside: its follows have nowhere else to be heard.
    only.shutdown();
    let url = only.url.clone();
    let aside = wait_for(&out, WITHIN, |c| {
        c.statuses
            .iter()
            .any(|s| matches!(s, Status::Penalised { relay, .. } if *relay == url))
    })
    .await;
    assert!(aside, "the relay that went down was set aside");
    let while_down = note(&f[0], now_(), "f0 while down");
    only.store(&while_down).await;
    let before_restart = only.counter.reqs().len();
    only.restart().await;
    let after = [
        note(&f[1], now_(), "f1 after"),
        note(&f[3], now_(), "f3 after, elsewhere"),
    ];
    only.publish(&after[0]).await;
    other.publish(&after[1]).await;

    expect_all(
        &out,
        &[while_down, after[0].clone(), after[1].clone()],
        "around a restart",
    )
    .await;
    // Its gap was asked since the newest it had delivered, not the whole window again.
    let asked = only.counter.reqs();
    let first = asked[before_restart..].iter().find(|r| r.kinds == [1]);
    assert!(
        first.is_some_and(|r| r.since.is_some_and(|s| s > now - 50)),
        "asked since its mark on its return: {first:?}"
    );
    let summary = handle.shutdown().await;
    let c = out.lock().unwrap();
    assert_eq!(
        c.notes.len() + c.found.len(),
        5,
        "each note once: {summary:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_empty_in_the_window_at_the_start_still_deliver_new_notes() {
    let reader = RealRelay::start().await;
    let busy = [RealRelay::start().await, RealRelay::start().await];
    let now = now();
    // Twelve follows list both busy relays, which hold only notes older than the window: both
    // answer with nothing for all of them.
    let f: Vec<_> = (1..=12).map(keys).collect();
    let mut input = input(
        "max_connections = 10\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n",
        &f,
        &[&reader.url],
    );
    for k in &f {
        let lists = [(busy[0].url.as_str(), None), (busy[1].url.as_str(), None)];
        assert!(input.add_relay_list_event(&relay_list(k, now - 5000, &lists)));
        for relay in &busy {
            relay.store(&note(k, now - 7200, "two hours ago")).await;
        }
    }
    let config = RuntimeConfig {
        since: Some(Timestamp::from(now - 3600)),
        ..open_config()
    };
    let (handle, out) = open_feed(input, &Client::new(config)).await;

    // Then the follows write, each to one of the relays it lists.
    let mut new = Vec::new();
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now_(), &format!("f{i} new"));
        busy[i % 2].publish(&n).await;
        new.push(n);
    }
    expect_all(&out, &new, "new notes on relays empty at the start").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_that_moves_to_a_relay_it_never_listed_is_heard_there() {
    let [reader, old, other, moved_to] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=3).map(keys).collect();
    let mut input = greedy(5, &f, &[&reader.url]);
    for (i, k) in f.iter().enumerate() {
        let relay = if i == 0 { &old.url } else { &other.url };
        let list = relay_list(k, now - 100, &[(relay, None)]);
        assert!(input.add_relay_list_event(&list));
        // Where discovery finds it too.
        reader.store(&list).await;
    }
    let first = note(&f[0], now - 50, "f0 on its old relay");
    old.store(&first).await;
    other.store(&note(&f[1], now - 50, "f1")).await;
    let (handle, out) = open_feed(input, &Client::new(discovering())).await;
    expect_all(&out, std::slice::from_ref(&first), "before the move").await;

    // The follow names only a relay it never listed, publishing the list where a NIP-65
    // client does (its old write relay and the new one), and writes there from now on.
    let moved = moves(&f[0], &old, &moved_to).await;
    let asked = wait_until(WITHIN, || moved_to.counter.feed_reqs() > 0).await;
    assert!(asked, "the feed asked the relay the follow moved to");
    let later = note(&f[0], now_(), "f0 later on its new relay");
    moved_to.publish(&later).await;
    expect_all(&out, &[moved, later], "after the move").await;
    handle.shutdown().await;
}

/// Relays besides the reader's for the budget test: each follow writes to one of them only.
const WRITE_RELAYS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_sockets_filled_by_the_reader_relays_still_hear_every_write_relay() {
    let readers: [RealRelay; 2] = RealRelay::several().await;
    let writers: [RealRelay; WRITE_RELAYS] = RealRelay::several().await;
    let gauge = Gauge::default();
    let mut urls = Vec::new();
    for relay in readers.iter().chain(&writers) {
        urls.push(proxy(&relay.url, gauge.clone()).await);
    }
    let now = now();
    let f: Vec<_> = (1..=6).map(keys).collect();
    let reader_urls: Vec<&str> = urls[..2].iter().map(String::as_str).collect();
    let mut input = greedy(20, &f, &reader_urls);
    let mut stored = Vec::new();
    for (i, k) in f.iter().enumerate() {
        let w = 2 + i % WRITE_RELAYS;
        assert!(input.add_relay_list_event(&relay_list(k, now - 1000, &[(&urls[w], None)])));
        let n = note(k, now - 100, &format!("f{i} stored"));
        writers[i % WRITE_RELAYS].store(&n).await;
        stored.push(n);
    }
    let config = RuntimeConfig {
        since: Some(Timestamp::from(now - 7 * DAY)),
        ..open_config()
    };
    let client = Client::with(config, four_sockets(), None);
    let (handle, rx) = start(input, &client).await;
    // The reader's follow list is watched too (`outbox feed --npub`): in turns it must not
    // hold the reader's relays' places for good.
    let me = keys(60);
    handle
        .follow_contact_list(me.public_key(), Timestamp::from(now - 10))
        .await
        .expect("watching the follow list");
    let out = drain(rx);
    expect_all(&out, &stored, "stored on the write relays").await;

    let mut new = Vec::new();
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now_(), &format!("f{i} new"));
        writers[i % WRITE_RELAYS].publish(&n).await;
        new.push(n);
    }
    expect_all(&out, &new, "new notes on the write relays").await;
    let summary = handle.shutdown().await;
    let printed: BTreeSet<EventId> = {
        let c = out.lock().unwrap();
        c.notes.keys().chain(c.found.keys()).copied().collect()
    };
    assert_eq!(printed.len(), 12, "each note once: {summary:?}");
    let peak = gauge.peak.load(Ordering::SeqCst);
    assert!(peak <= 4, "{peak} connections at once, over 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_the_reader_adds_while_the_feed_is_open_is_heard() {
    let [reader_relay, write] = RealRelay::several().await;
    let now = now();
    let me = keys(50);
    let f: Vec<_> = (1..=2).map(keys).collect();
    // Only the first is followed at the start; both lists are where discovery finds them.
    let mut input = greedy(5, &f[..1], &[&reader_relay.url]);
    for k in &f {
        let list = relay_list(k, now - 100, &[(&write.url, None)]);
        input.add_relay_list_event(&list);
        reader_relay.store(&list).await;
    }
    let follow = |k: &nostr::key::Keys| Tag::public_key(k.public_key());
    let first = signed(&me, Kind::ContactList, "", vec![follow(&f[0])], 50);
    reader_relay.store(&first).await;
    let (handle, out) = open_feed(input, &Client::new(discovering())).await;
    handle
        .follow_contact_list(me.public_key(), first.created_at)
        .await
        .expect("a relay to ask");
    let watching = wait_until(WITHIN, || {
        reader_relay.counter.reqs().iter().any(|r| r.kinds == [3])
    })
    .await;
    assert!(watching, "the reader's follow list is watched");

    let second = signed(
        &me,
        Kind::ContactList,
        "",
        vec![follow(&f[0]), follow(&f[1])],
        0,
    );
    reader_relay.publish(&second).await;
    let new = note(&f[1], now_(), "f1, followed while the feed is open");
    write.publish(&new).await;
    expect_all(&out, &[new], "a follow added while open").await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feed_given_the_marks_a_run_ended_with_asks_each_relay_only_since_them() {
    let relay = RealRelay::start().await;
    let now = now();
    let f: Vec<_> = (1..=2).map(keys).collect();
    let make = |marks| {
        let mut input = greedy(5, &f, &[&relay.url]);
        for k in &f {
            assert!(input.add_relay_list_event(&relay_list(k, now - 100, &[(&relay.url, None)])));
        }
        input.marks = marks;
        input
    };
    let window = now - 3600;
    let config = RuntimeConfig {
        since: Some(Timestamp::from(window)),
        discover_lists: false,
        ..RuntimeConfig::fast_for_tests()
    };
    let old = note(&f[0], now - 600, "old");
    relay.store(&old).await;
    let (first, c) = nostr_outbox_fleet::start_once(make(Vec::new()), config.clone()).await;
    assert!(c.notes.contains_key(&old.id), "{first:?}");
    let mut follows: Vec<_> = f.iter().map(|k| k.public_key()).collect();
    follows.sort_unstable();
    let mark = first
        .marks
        .iter()
        .find(|m| m.authors == follows)
        .cloned()
        .unwrap_or_else(|| panic!("a mark naming both follows: {:?}", first.marks));
    assert!(mark.at >= now && mark.at <= now_(), "{mark:?}");

    let new = note(&f[1], now_(), "new");
    relay.store(&new).await;
    let asked = relay.counter.reqs().len();
    // A continuing feed started from them.
    let config = RuntimeConfig {
        since: Some(Timestamp::from(window)),
        ..open_config()
    };
    let (handle, out) = open_feed(make(first.marks.clone()), &Client::new(config.clone())).await;
    expect_all(&out, std::slice::from_ref(&new), "what is new").await;
    handle.shutdown().await;
    let reqs = relay.counter.reqs();
    let feed = reqs[asked..].iter().find(|r| r.kinds == [1]);
    let margin = config.open.margin.as_secs();
    assert!(
        feed.is_some_and(|r| r.since == Some(mark.at - margin)),
        "asked since the kept mark less the margin, not the window ({window}): {feed:?}"
    );
    assert!(
        !out.lock().unwrap().notes.contains_key(&old.id),
        "what was delivered is not asked again"
    );
}

/// With fewer socket places than relays (the relays take turns), a follow that moves to a
/// relay it never listed is still heard there: its new list comes at a turn of a relay that
/// holds it, and the new relay takes its turns like the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_that_moves_while_relays_take_turns_is_heard_on_its_new_relay() {
    let readers: [RealRelay; 2] = RealRelay::several().await;
    let writers: [RealRelay; WRITE_RELAYS] = RealRelay::several().await;
    let moved_to = RealRelay::start().await;
    let now = now();
    let f: Vec<_> = (1..=6).map(keys).collect();
    let reader_urls: Vec<&str> = readers.iter().map(|r| r.url.as_str()).collect();
    let mut input = greedy(20, &f, &reader_urls);
    for (i, k) in f.iter().enumerate() {
        let list = relay_list(k, now - 1000, &[(&writers[i % WRITE_RELAYS].url, None)]);
        assert!(input.add_relay_list_event(&list));
        writers[i % WRITE_RELAYS]
            .store(&note(k, now - 100, &format!("f{i} stored")))
            .await;
    }
    let config = RuntimeConfig {
        since: Some(Timestamp::from(now - 7 * DAY)),
        ..discovering()
    };
    let (handle, out) = open_feed(input, &Client::with(config, four_sockets(), None)).await;

    // f0 names only a relay it never listed, publishing the list where a NIP-65 client does
    // (its old write relay, the new one and the relays its readers read), and writes there.
    let list = relay_list(&f[0], now_(), &[(&moved_to.url, None)]);
    for relay in readers.iter().chain([&writers[0], &moved_to]) {
        relay.publish(&list).await;
    }
    let moved = note(&f[0], now_(), "f0 on its new relay");
    moved_to.publish(&moved).await;
    expect_all(&out, std::slice::from_ref(&moved), "after the move").await;
    let summary = handle.shutdown().await;
    assert!(
        matches!(summary.places, nostr_outbox_runtime::Places::Turns { .. }),
        "the relays took turns: {:?}",
        summary.places
    );
}

/// A follow that moves and publishes its new list only where its readers look (the reader's
/// relays) and where it now writes is heard: the reader's relays keep discovery's lookup of
/// every follow's list open, even when a plan gives them follows of their own to watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_published_only_on_the_reader_relays_is_heard() {
    let [reader, old, moved_to] = RealRelay::several().await;
    let now = now();
    let f: Vec<_> = (1..=3).map(keys).collect();
    let mut input = greedy(5, &f, &[&reader.url]);
    // f0 and f1 write to the old relay; f2's list is not known yet, so the first plan gives
    // the reader's relay f2 of its own (and a watch for f2's lists) until discovery finds it
    // there and the next plan moves f2 to the old relay.
    for k in &f[..2] {
        assert!(input.add_relay_list_event(&relay_list(k, now - 100, &[(&old.url, None)])));
    }
    reader
        .store(&relay_list(&f[2], now - 50, &[(&old.url, None)]))
        .await;
    let (handle, out) = open_feed(input, &Client::new(discovering())).await;
    let first = note(&f[0], now_(), "f0 on its old relay");
    old.publish(&first).await;
    expect_all(&out, std::slice::from_ref(&first), "before the move").await;

    let moved = moves(&f[0], &reader, &moved_to).await;
    expect_all(&out, std::slice::from_ref(&moved), "after the move").await;
    handle.shutdown().await;
}

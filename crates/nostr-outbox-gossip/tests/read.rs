//! The routed, paged read on a real nostr-sdk `Client`: relays that cap each REQ give every
//! note of the window, where nostr-sdk's own fetch stops at the first page.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{Event, EventId, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_fleet::{keys, note, now, relay_list, RealRelay, DAY};
use nostr_outbox_gossip::{OutboxGossip, ReadOptions, RelayOutcome};

/// What each write relay returns per REQ at most (above the paging's floor of 100, below the
/// 500 it asks for, and published nowhere).
const CAP: usize = 120;
/// Notes per follow: well past the cap.
const NOTES: u64 = 300;

struct Setup {
    reader: RealRelay,
    writers: Vec<RealRelay>,
    follows: Vec<PublicKey>,
    notes: BTreeSet<EventId>,
    lists: Vec<Event>,
}

/// Two follows, each writing to a capped relay of its own; the reader's relay holds nothing.
async fn setup() -> Setup {
    let reader = RealRelay::start().await;
    let t = now();
    let (mut writers, mut follows, mut notes, mut lists) =
        (Vec::new(), Vec::new(), BTreeSet::new(), Vec::new());
    for i in 0..2u8 {
        let relay =
            RealRelay::start_with(|b| b.max_filter_limit(CAP).default_filter_limit(CAP)).await;
        let author = keys(20 + i);
        for n in 0..NOTES {
            // Two notes a minute, some sharing a second at page edges.
            let event = note(
                &author,
                t - 30 * (n + 1) / 2 * 2,
                &format!("note {n} of {i}"),
            );
            relay.store(&event).await;
            notes.insert(event.id);
        }
        lists.push(relay_list(&author, t - DAY, &[(&relay.url, Some("write"))]));
        follows.push(author.public_key());
        writers.push(relay);
    }
    Setup {
        reader,
        writers,
        follows,
        notes,
        lists,
    }
}

async fn engine(s: &Setup) -> Arc<OutboxGossip> {
    routed(4, "greedy", &s.reader.url, &s.lists).await
}

/// An engine running `strategy` with `budget` routed relays, reading from `reader`, handed
/// `lists`; its plans drawn from one seed, the same in every run.
async fn routed(budget: usize, strategy: &str, reader: &str, lists: &[Event]) -> Arc<OutboxGossip> {
    let gossip = OutboxGossip::from_toml(&format!(
        "max_connections = {budget}\n[url_policy]\nallow_loopback = true\n\
         [strategy]\ntype = \"{strategy}\"\n"
    ))
    .unwrap()
    .reader_relays([reader])
    .seed(1)
    .open()
    .await
    .unwrap();
    for list in lists {
        nostr_gossip::NostrGossip::process(&gossip, list, None)
            .await
            .unwrap();
    }
    Arc::new(gossip)
}

fn filter(follows: &[PublicKey]) -> Filter {
    Filter::new()
        .authors(follows.iter().copied())
        .kind(Kind::TextNote)
        .since(Timestamp::from(now() - 30 * DAY))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_paged_read_gets_every_note_past_each_relay_s_cap() {
    let s = setup().await;
    // nostr-sdk's own fetch, routed by the engine, stops at each relay's first page.
    let gossip = engine(&s).await;
    let plain = common::client(gossip.clone(), common::local_config(), &s.reader.url).await;
    let first = plain
        .fetch_events(filter(&s.follows))
        .timeout(Duration::from_secs(10))
        .await
        .expect("fetched");
    assert!(
        first.len() <= 2 * CAP,
        "the relays cap each REQ at {CAP}: {} came in one page each",
        first.len()
    );
    plain.shutdown().await;

    let gossip = engine(&s).await;
    let client = common::client(gossip.clone(), common::local_config(), &s.reader.url).await;
    let report = gossip
        .read(&client, filter(&s.follows), ReadOptions::default())
        .await;
    let got: BTreeSet<EventId> = report.events.iter().map(|e| e.id).collect();
    let missing = s.notes.difference(&got).count();
    assert_eq!(
        missing,
        0,
        "{missing} of {} notes missing: {:?}",
        s.notes.len(),
        report.relays
    );
    assert_eq!(report.unrouted, 0);
    for relay in report.relays.iter().filter(|r| r.events > 0) {
        assert_eq!(relay.outcome, RelayOutcome::Complete, "{relay:?}");
        assert!(relay.pages > 1, "paged past the cap: {relay:?}");
    }
    // The read ended the engine's round: each relay was learned as asked about its follows
    // and answering.
    let stats = gossip.stats();
    assert!(stats.session() >= 1);
    for writer in &s.writers {
        let learned = stats.get(&writer.url);
        assert!(
            learned.asked >= 1 && learned.failures == 0,
            "{}: {learned:?}",
            writer.url
        );
    }
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_kept_in_one_round_are_learned_when_the_caller_ends_it() {
    let s = setup().await;
    let gossip = engine(&s).await;
    let client = common::client(gossip.clone(), common::local_config(), &s.reader.url).await;
    let before = gossip.stats().session();
    let keep = ReadOptions {
        end_round: false,
        ..ReadOptions::default()
    };
    let week = filter(&s.follows).since(Timestamp::from(now() - 7 * DAY));
    let first = gossip.read(&client, week, keep).await;
    let second = gossip.read(&client, filter(&s.follows), keep).await;
    assert_eq!(
        gossip.stats().session(),
        before,
        "nothing learned while the round is open"
    );
    let mut reached = first.reached;
    reached.extend(second.reached);
    assert!(gossip.end_round(Some(&reached)), "the round is learned");
    assert_eq!(gossip.stats().session(), before + 1, "as one round");
    for writer in &s.writers {
        assert!(gossip.stats().get(&writer.url).asked >= 1, "{}", writer.url);
    }
    client.shutdown().await;
}

/// A follow on two relays, each holding a note the other lacks, and a budget of one routed
/// relay: the read asks one, and its probe asks the other, which the engine then knows as
/// answering and whose note comes back as found. Without probes the engine learns nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_the_plan_leaves_out_is_probed_and_learned() {
    let reader = RealRelay::start().await;
    let (a, b) = (RealRelay::start().await, RealRelay::start().await);
    let t = now();
    let author = keys(30);
    let (on_a, on_b) = (
        note(&author, t - 600, "only on a"),
        note(&author, t - 900, "only on b"),
    );
    a.store(&on_a).await;
    b.store(&on_b).await;
    let list = relay_list(&author, t - DAY, &[(&a.url, None), (&b.url, None)]);
    let policy = nostr_outbox_core::UrlPolicy::allow_local();
    for probes in [1, 0] {
        let gossip = routed(1, "recall", &reader.url, std::slice::from_ref(&list)).await;
        let client = common::client(gossip.clone(), common::local_config(), &reader.url).await;
        let options = ReadOptions {
            probes,
            ..ReadOptions::default()
        };
        let report = gossip
            .read(&client, filter(&[author.public_key()]), options)
            .await;
        let pool = client.relays().all().await;
        client.shutdown().await;
        let asked: Vec<String> = report.relays.iter().map(|r| r.url.to_string()).collect();
        assert_eq!(asked.len(), 1, "one routed relay: {asked:?}");
        let other = if asked[0] == a.url.trim_end_matches('/') || asked[0] == a.url {
            &b
        } else {
            &a
        };
        let learned = gossip.stats();
        let other_stats = learned.get(&policy.canonicalize(&other.url).unwrap());
        if probes == 0 {
            assert!(report.probed.is_empty(), "{:?}", report.probed);
            assert_eq!(other_stats.asked, 0, "never asked without probes");
            continue;
        }
        assert_eq!(report.probed.len(), 1, "{:?}", report.probed);
        assert!(
            !pool.contains_key(&report.probed[0].url),
            "a probed relay leaves the pool after its probe"
        );
        assert_eq!(report.probed[0].outcome, RelayOutcome::Complete);
        assert_eq!(
            report.found.len(),
            1,
            "the other relay's note: {:?}",
            report.found
        );
        assert!(
            other_stats.asked > other_stats.failures,
            "the probed relay is learned as answering: {other_stats:?}"
        );
    }
}

/// Two follows who list a relay where nothing listens: `moved` also lists `live` relays, each
/// holding its note `kept`; `stays` lists nothing else. With one routed relay, a plan asks the
/// dead relay (it covers both).
struct DeadRelay {
    reader: RealRelay,
    /// Held so the live relays stay up.
    _live: Vec<RealRelay>,
    dead: String,
    kept: Event,
    lists: [Event; 2],
    follows: [PublicKey; 2],
}

async fn dead_relay(live: usize, first_key: u8) -> DeadRelay {
    let reader = RealRelay::start().await;
    let mut relays = Vec::new();
    for _ in 0..live {
        relays.push(RealRelay::start().await);
    }
    let dead = nostr_outbox_fleet::dead_url().await;
    let t = now();
    let (moved, stays) = (keys(first_key), keys(first_key + 1));
    let kept = note(&moved, t - 600, "on the live relays");
    let mut listed = vec![(dead.as_str(), None)];
    for relay in &relays {
        relay.store(&kept).await;
        listed.push((relay.url.as_str(), None));
    }
    let lists = [
        relay_list(&moved, t - DAY, &listed),
        relay_list(&stays, t - DAY, &[(&dead, None)]),
    ];
    DeadRelay {
        reader,
        _live: relays,
        dead,
        kept,
        lists,
        follows: [moved.public_key(), stays.public_key()],
    }
}

/// Two follows list a relay where nothing listens, one of them also two live relays holding
/// its note, and the budget is one routed relay: the plan asks the dead relay (it covers both).
/// The read sets it aside and asks the moved follow on one live relay; without room to ask
/// elsewhere (`fallback: 0`) the note is lost for the read. A probe then goes to the other live
/// relay, beside the one added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follows_of_a_relay_that_fails_are_asked_elsewhere() {
    let s = dead_relay(2, 40).await;
    let policy = nostr_outbox_core::UrlPolicy::allow_local();
    // (fallback, probes, relays probed)
    for (fallback, probes, probed) in [(1, 0, 0), (1, 1, 1), (0, 0, 0)] {
        let gossip = routed(1, "recall", &s.reader.url, &s.lists).await;
        let client = common::client(gossip.clone(), common::local_config(), &s.reader.url).await;
        let options = ReadOptions {
            probes,
            fallback,
            ..ReadOptions::default()
        };
        let report = gossip.read(&client, filter(&s.follows), options).await;
        client.shutdown().await;
        let dead_stats = gossip.stats().get(&policy.canonicalize(&s.dead).unwrap());
        assert!(
            dead_stats.failures >= 1,
            "the dead relay is learned as failing: {dead_stats:?}"
        );
        assert_eq!(report.probed.len(), probed, "{:?}", report.probed);
        let got = report.events.iter().any(|e| e.id == s.kept.id);
        if fallback == 0 {
            assert!(!got, "nothing asked elsewhere: {:?}", report.relays);
            continue;
        }
        assert!(got, "asked on a live relay: {:?}", report.relays);
        // The dead relay, one live one, and the reader's for the follow with nowhere else.
        assert_eq!(report.asked(), 3, "{:?}", report.relays);
    }
}

/// Within one round, a relay that did not answer the first read is not asked again: the next
/// read asks its follows where the first one found them, from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_s_later_reads_ask_around_a_relay_that_failed() {
    let s = dead_relay(1, 42).await;
    let gossip = routed(1, "recall", &s.reader.url, &s.lists).await;
    let client = common::client(gossip.clone(), common::local_config(), &s.reader.url).await;
    let options = ReadOptions {
        probes: 0,
        fallback: 1,
        end_round: false,
        ..ReadOptions::default()
    };
    let first = gossip.read(&client, filter(&s.follows), options).await;
    let second = gossip.read(&client, filter(&s.follows), options).await;
    client.shutdown().await;
    let policy = nostr_outbox_core::UrlPolicy::allow_local();
    let dead = policy.canonicalize(&s.dead).unwrap();
    let asked = |r: &nostr_outbox_gossip::ReadReport| -> Vec<String> {
        r.relays.iter().map(|r| r.url.to_string()).collect()
    };
    assert!(asked(&first).contains(&dead), "{:?}", first.relays);
    assert!(!asked(&second).contains(&dead), "{:?}", second.relays);
    for report in [&first, &second] {
        assert!(
            report.events.iter().any(|e| e.id == s.kept.id),
            "{:?}",
            report.relays
        );
    }
    // Only the second read's first wave asked the live relay: one part per relay.
    assert_eq!(second.relays.len(), second.asked(), "{:?}", second.relays);
}

/// A prolific follow lists two relays: `a`, which also covers another follow and so is the
/// plan's one routed relay, holds none of its notes; `b` holds 300, capped at 120 a REQ. The
/// read's probe of `b` comes back full and holding notes the read lacks, so the follow is paged
/// there on the spot: all 300 are in the read, none left as merely found. The round's next read
/// asks `b` about it from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_that_finds_a_follow_s_notes_reads_them_whole() {
    let reader = RealRelay::start().await;
    let a = RealRelay::start().await;
    let b = RealRelay::start_with(|b| b.max_filter_limit(CAP).default_filter_limit(CAP)).await;
    let t = now();
    let (prolific, other) = (keys(50), keys(51));
    let mut notes = BTreeSet::new();
    for n in 0..NOTES {
        let event = note(&prolific, t - 600 * (n + 1), &format!("note {n}"));
        b.store(&event).await;
        notes.insert(event.id);
    }
    a.store(&note(&other, t - 300, "the other follow's note"))
        .await;
    let lists = [
        relay_list(&prolific, t - DAY, &[(&a.url, None), (&b.url, None)]),
        relay_list(&other, t - DAY, &[(&a.url, None)]),
    ];
    let follows = [prolific.public_key(), other.public_key()];
    let gossip = routed(1, "recall", &reader.url, &lists).await;
    let client = common::client(gossip.clone(), common::local_config(), &reader.url).await;
    let options = ReadOptions {
        probes: 1,
        fallback: 0,
        end_round: false,
        ..ReadOptions::default()
    };
    let first = gossip.read(&client, filter(&follows), options).await;
    let second = gossip
        .read(
            &client,
            filter(&follows),
            ReadOptions {
                probes: 0,
                ..options
            },
        )
        .await;
    client.shutdown().await;
    let on_b = |url: &nostr::types::RelayUrl| {
        url.as_str().trim_end_matches('/') == b.url.trim_end_matches('/')
    };
    assert!(
        !first.relays.iter().any(|r| on_b(&r.url)),
        "the plan asks `a`: {:?}",
        first.relays
    );
    assert_eq!(first.probed.len(), 1, "{:?}", first.probed);
    assert!(
        first.probed[0].pages > 1,
        "paged past the cap: {:?}",
        first.probed
    );
    for (name, report) in [("first", &first), ("second", &second)] {
        let got: BTreeSet<EventId> = report.events.iter().map(|e| e.id).collect();
        let missing = notes.difference(&got).count();
        assert_eq!(
            missing, 0,
            "{name} read: {missing} of {NOTES} missing: {:?}",
            report.relays
        );
    }
    assert!(
        first.found.is_empty(),
        "read whole, not found: {}",
        first.found.len()
    );
    assert!(
        second.relays.iter().any(|r| on_b(&r.url)),
        "the round's next read asks `b`: {:?}",
        second.relays
    );
}

//! Relays that cap each REQ and refuse long messages: the runtime pages backwards through a
//! year of notes, chunks author lists to fit, and reads the limits relays publish (NIP-11).

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures_util::SinkExt;
use nostr::event::{Event, EventId, Kind};
use nostr::filter::Filter;
use nostr::key::{Keys, PublicKey, SecretKey};
use nostr::types::Timestamp;
use nostr_outbox_client::paging::Paging;
use nostr_outbox_core::{DeliveryStats, PlanContext};
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{fetch_events, Client, Nip11Config, RuntimeConfig};
use tokio_tungstenite::tungstenite::Message;

const YEAR: u64 = 365 * DAY;

/// A key per index (beyond the 255 of `keys`).
fn key(n: u32) -> Keys {
    let mut sk = [0x23u8; 32];
    sk[0] = 0x41;
    sk[28..].copy_from_slice(&n.to_be_bytes());
    Keys::new(SecretKey::from_slice(&sk).expect("valid secret key"))
}

fn config(since: u64, paging: Paging) -> RuntimeConfig {
    let mut cfg = RuntimeConfig {
        since: Some(Timestamp::from(since)),
        eose_timeout: Duration::from_secs(10),
        ..given_lists(true)
    };
    cfg.limits.paging = paging;
    cfg
}

/// Relay documents read, each bounded to two seconds.
fn quick_documents() -> Nip11Config {
    Nip11Config {
        timeout: Duration::from_secs(2),
        wait: Duration::from_secs(2),
        ..Nip11Config::default()
    }
}

struct YearRun {
    fetched: BTreeSet<EventId>,
    predicted: BTreeSet<EventId>,
    summary: nostr_outbox_runtime::FeedSummary,
    a: String,
    b: String,
    a_feed_reqs: usize,
}

/// One follow with ~1,700 notes over a year on a relay capped at 500 (three notes to a second,
/// so page edges fall inside seconds), half of them and a second follow's 400 on a relay
/// silently capped at 150.
async fn a_year_on_capped_relays(paging: Paging) -> YearRun {
    let [reader, a] = RealRelay::several().await;
    let b = RealRelay::start_with(|b| b.max_filter_limit(150)).await;
    let now = now();
    let (f0, f1) = (keys(1), keys(2));
    let mut world = World::default();
    let spacing = (YEAR - 2 * DAY) / 600;
    for i in 0..1_700u64 {
        let at = now - 100 - (i / 3) * spacing;
        let on: Vec<&RealRelay> = if i % 2 == 0 { vec![&a, &b] } else { vec![&a] };
        world.put(note(&f0, at, &format!("f0 {i}")), &on).await;
    }
    for i in 0..400u64 {
        let at = now - 130 - (i / 2) * (spacing * 2);
        world.put(note(&f1, at, &format!("f1 {i}")), &[&b]).await;
    }
    let lists = [
        relay_list(&f0, now - 50, &[(&a.url, None), (&b.url, None)]),
        relay_list(&f1, now - 50, &[(&b.url, None)]),
    ];
    let follows = vec![f0.public_key(), f1.public_key()];
    let toml = "max_connections = 3\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n";
    let raw_lists: Vec<_> = lists.iter().map(raw).collect();
    let table = table(&follows, &[&reader.url], &raw_lists);
    let plan = router(toml).plan_with(&table, &DeliveryStats::new(), PlanContext::at(now).seed(0));
    let since = now - YEAR;
    let predicted = world.predict(&plan, &table, since);

    let mut input = local_input(router(toml), follows, [&reader.url]);
    for l in &lists {
        input.add_relay_list_event(l);
    }
    let (summary, out) = start_once(input, config(since, paging)).await;
    let fetched = out.notes.keys().copied().collect();
    YearRun {
        fetched,
        predicted,
        summary,
        a: a.url.clone(),
        b: b.url.clone(),
        a_feed_reqs: a.counter.feed_reqs(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_year_is_fetched_completely_from_relays_capped_at_500_and_150() {
    let run = a_year_on_capped_relays(Paging::default()).await;
    assert_eq!(
        run.predicted.len(),
        2_100,
        "the planned relays hold every note"
    );
    let missing = run.predicted.difference(&run.fetched).count();
    let share = 1.0 - missing as f64 / run.predicted.len() as f64;
    println!(
        "fetched {} of {} ({:.1}%), {} round trips, {} events received",
        run.predicted.len() - missing,
        run.predicted.len(),
        share * 100.0,
        run.summary.round_trips,
        run.summary.events_received
    );
    assert_eq!(missing, 0, "every note the planned relays hold is fetched");
    let (a, b) = (&run.summary.relays[&run.a], &run.summary.relays[&run.b]);
    println!("a: {a:?}\nb: {b:?}");
    // a: 1,700 notes at 500 a page; b: 1,250 notes at 150 a page, learned from page sizes.
    assert!((4..=6).contains(&a.pages), "{a:?}");
    assert_eq!(run.a_feed_reqs as u64, a.pages);
    assert!(b.pages >= 9, "{b:?}");
    assert!(a.complete && b.complete);
    assert_eq!(run.summary.relays_incomplete, 0);
    assert!(a.received >= 1_700 && b.received >= 1_250);
    assert_eq!(run.summary.round_trips, a.pages + b.pages);
    assert!(run.summary.events_received >= run.summary.events);
    // Both answers were learned from, as complete fetches.
    assert!(run.summary.stats.get(&run.a).asked > 0);
    assert!(run.summary.stats.get(&run.b).asked > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_pages_a_capped_relay_is_cut_off_and_not_learned_as_missing_history() {
    let paging = Paging {
        max_pages: 1,
        ..Paging::default()
    };
    let run = a_year_on_capped_relays(paging).await;
    let got = run.predicted.intersection(&run.fetched).count();
    println!("one page per chunk: {got} of {}", run.predicted.len());
    assert!(got < run.predicted.len() * 99 / 100, "{got}");
    let a = &run.summary.relays[&run.a];
    assert_eq!(a.pages, 1);
    assert!(!a.complete, "{a:?}");
    assert_eq!(run.summary.relays_incomplete, 2);
    // Cut off by the budget: compared with, never recorded.
    assert_eq!(run.summary.stats.get(&run.a).asked, 0);
    assert_eq!(run.summary.stats.get(&run.b).asked, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_limits_shape_every_req() {
    // 20 authors fit in 256 + 67·20 bytes; pages of 50; four subscriptions at once.
    let max_message = 256 + 67 * 20;
    let doc = format!(
        r#"{{"name":"test","limitation":{{"max_limit":50,"max_message_length":{max_message},
            "max_subscriptions":4,"max_filters":1,"auth_required":false}}}}"#
    );
    let now = now();
    let follows: Vec<Keys> = (0..45).map(key).collect();
    let mut events = Vec::new();
    for (i, k) in follows.iter().enumerate() {
        for n in 0..30u64 {
            // Pairs of notes share a second.
            let at = now - 100 - (n / 2) * 3_600 - i as u64;
            events.push(note(k, at, &format!("{i} {n}")));
        }
    }
    // The relay honours 200 a page, but says 50; it refuses what is longer than it says.
    let relay = CappedRelay::start(Some(doc), 200, max_message).await;
    relay.put(events.clone());
    let toml = "max_connections = 2\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";
    let pubkeys: Vec<PublicKey> = follows.iter().map(|k| k.public_key()).collect();
    let input = local_input(router(toml), pubkeys, [&relay.url]);
    let mut cfg = config(now - YEAR, Paging::default());
    cfg.discover_lists = true;
    cfg.limits.nip11 = quick_documents();
    let (summary, out) = start_once(input, cfg).await;
    let fetched: HashSet<EventId> = out.notes.keys().copied().collect();
    let all: HashSet<EventId> = events.iter().map(|e| e.id).collect();
    assert_eq!(fetched, all, "every note, through pages of 50");
    assert!(relay.documents() >= 1, "the document was asked for");
    let messages = relay.messages();
    let reqs: Vec<&SeenMessage> = messages.iter().filter(|m| m.req).collect();
    for m in &messages {
        assert!(m.bytes <= max_message, "{m:?}");
    }
    for r in &reqs {
        assert_eq!(r.limit, Some(50), "{r:?}");
        assert!(r.authors <= 20, "{r:?}");
    }
    let feed: Vec<&&SeenMessage> = reqs.iter().filter(|r| r.kinds == [1]).collect();
    let lists = reqs.iter().filter(|r| r.kinds == [10002]).count();
    // 45 authors in three chunks of 15; each chunk's 450 notes take 9 full pages and one more.
    assert_eq!(lists, 3, "{reqs:?}");
    assert!(feed.len() >= 27 && feed.len() <= 36, "{}", feed.len());
    assert!(relay.max_open() <= 4);
    let outcome = &summary.relays[&relay.url];
    assert_eq!(outcome.pages, feed.len() as u64);
    assert_eq!(outcome.lookup_pages, lists as u64);
    assert_eq!(summary.round_trips, reqs.len() as u64);
    println!(
        "{} notes in {} feed pages and {} lookup pages; {} events received",
        fetched.len(),
        outcome.pages,
        outcome.lookup_pages,
        outcome.received
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_list_lookup_for_2000_follows_fits_strfry_messages() {
    const STRFRY_MAX: usize = 131_072;
    let now = now();
    let follows: Vec<Keys> = (0..2_000).map(key).collect();
    let relay = CappedRelay::start(None, 500, STRFRY_MAX).await;
    // Some follows have lists on the reader relay, naming it as their write relay.
    let lists: Vec<Event> = follows
        .iter()
        .step_by(7)
        .map(|k| relay_list(k, now - 60, &[(&relay.url, None)]))
        .collect();
    relay.put(lists.clone());
    let toml = "max_connections = 2\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";
    let pubkeys: Vec<PublicKey> = follows.iter().map(|k| k.public_key()).collect();
    let input = local_input(router(toml), pubkeys.clone(), [&relay.url]);
    let mut cfg = config(now - DAY, Paging::default());
    cfg.discover_lists = true;
    let (summary, _) = start_once(input, cfg).await;
    assert_eq!(summary.relay_lists, lists.len(), "every list was found");
    let messages = relay.messages();
    let largest = messages.iter().map(|m| m.bytes).max().unwrap_or(0);
    println!("{} messages, largest {largest} bytes", messages.len());
    assert!(largest <= STRFRY_MAX, "{largest}");
    let looked_up: usize = messages
        .iter()
        .filter(|m| m.req && m.kinds == [10002])
        .map(|m| m.authors)
        .sum();
    assert!(
        looked_up >= 2_000,
        "every follow was looked up: {looked_up}"
    );

    // One-shot lookups chunk too.
    let before = relay.messages().len();
    let filter = Filter::new()
        .authors(pubkeys.iter().copied())
        .kind(Kind::RelayList);
    let found = fetch_events(
        std::slice::from_ref(&relay.url),
        &filter,
        &Client::new(RuntimeConfig::fast_for_tests()),
    )
    .await;
    assert_eq!(found.len(), lists.len());
    let lookups = &relay.messages()[before..];
    assert!(lookups.iter().filter(|m| m.req).count() >= 4, "{lookups:?}");
    assert!(lookups.iter().all(|m| m.bytes <= STRFRY_MAX));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuing_feed_pages_its_history_then_keeps_live_notes_flowing() {
    let reader = RealRelay::start().await;
    let capped = RealRelay::start_with(|b| b.max_filter_limit(150)).await;
    let now = now();
    let f0 = keys(7);
    let mut world = World::default();
    for i in 0..400u64 {
        let at = now - 1_000 - (i / 2) * 600;
        world
            .put(note(&f0, at, &format!("old {i}")), &[&capped])
            .await;
    }
    let list = relay_list(&f0, now - 50, &[(&capped.url, None)]);
    let toml = "max_connections = 2\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";
    let mut input = local_input(router(toml), vec![f0.public_key()], [&reader.url]);
    input.add_relay_list_event(&list);
    let mut cfg = config(now - YEAR, Paging::default());
    cfg.once = false;
    let (handle, out) = start_settled(input, &Client::new(cfg)).await;
    assert_eq!(
        out.lock().unwrap().notes.len(),
        400,
        "the history, in pages of 150"
    );
    let pages = capped.counter.feed_reqs();
    assert!(pages >= 3, "{pages}");

    // Published after EOSE: it arrives on the subscription kept open for live notes.
    let fresh = note(&f0, now + 1, "live");
    let (mut ws, _) = tokio_tungstenite::connect_async(capped.url.as_str())
        .await
        .expect("publisher connects");
    let publish = format!(r#"["EVENT",{}]"#, fresh.as_json());
    ws.send(Message::text(publish)).await.unwrap();
    assert!(
        wait_for_note(&out, &fresh.id).await,
        "a live note reaches the feed"
    );
    assert_eq!(
        capped.counter.feed_reqs(),
        pages,
        "no REQ was needed for it"
    );
    let summary = tokio::time::timeout(Duration::from_secs(5), handle.shutdown())
        .await
        .expect("shutdown is prompt");
    assert_eq!(summary.events, 401);
    assert_eq!(summary.relays[&capped.url].pages, pages as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_document_requires_payment_is_left_out_unless_paid_for() {
    let doc = r#"{"name":"paid","limitation":{"payment_required":true}}"#.to_string();
    let now = now();
    let author = key(1);
    let n = note(&author, now - 100, "for members");
    let relay = CappedRelay::start(Some(doc), 500, 1 << 20).await;
    relay.put([n.clone()]);
    let reader = RealRelay::start().await;
    reader.store(&n).await;
    let run = |paid_relays: Vec<String>| {
        let mut input = local_input(
            router("max_connections = 2\n[strategy]\ntype = \"greedy\"\n"),
            vec![author.public_key()],
            [&reader.url],
        );
        assert!(input.add_relay_list_event(&relay_list(&author, now, &[(&relay.url, None)])));
        let mut cfg = config(now - DAY, Paging::default());
        cfg.paid_relays = paid_relays;
        cfg.limits.nip11 = quick_documents();
        (input, cfg)
    };
    let (input, cfg) = run(Vec::new());
    let (unpaid, _) = start_once(input, cfg).await;
    assert!(unpaid.penalised.contains(&relay.url), "{unpaid:?}");
    let kept = unpaid.penalties.get(&relay.url).expect("remembered");
    assert_eq!(kept.last_reason, "requires payment (NIP-11)");
    assert_eq!(unpaid.events, 1, "the reader's relay stands in");

    let (input, cfg) = run(vec![relay.url.clone()]);
    let (paying, _) = start_once(input, cfg).await;
    assert!(paying.penalised.is_empty(), "{:?}", paying.penalised);
    assert!(paying.relays[&relay.url].answered, "{:?}", paying.relays);
}

/// A first run asks nothing of a relay whose document says it serves only paying or signed-in
/// readers the run cannot be: not one REQ reaches it, its follows are read elsewhere, and the
/// summary counts it refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_whose_document_excludes_the_reader_receives_no_req() {
    let now = now();
    let (paid_author, members_author) = (key(11), key(12));
    let notes = vec![
        note(&paid_author, now - 100, "paid"),
        note(&members_author, now - 100, "members"),
    ];
    let limitation =
        |field: &str| Some(serde_json::json!({"name": "closed", "limitation": {field: true}}));
    let paid = PlainRelay::with_document(notes.clone(), limitation("payment_required")).await;
    let members = PlainRelay::with_document(notes.clone(), limitation("auth_required")).await;
    let reader = RealRelay::start().await;
    for n in &notes {
        reader.store(n).await;
    }
    let mut input = local_input(
        router("max_connections = 4\n[strategy]\ntype = \"greedy\"\n"),
        vec![paid_author.public_key(), members_author.public_key()],
        [&reader.url],
    );
    for (author, relay) in [(&paid_author, &paid), (&members_author, &members)] {
        assert!(input.add_relay_list_event(&relay_list(author, now, &[(&relay.url, None)])));
    }
    let mut cfg = config(now - DAY, Paging::default());
    // Documents are read as on the network, within their default wait.
    cfg.limits.nip11 = Nip11Config::default();
    let (summary, _) = start_once(input, cfg).await;
    assert_eq!((paid.reqs(), members.reqs()), (0, 0), "{summary:?}");
    assert!(summary.penalised.contains(&paid.url), "{summary:?}");
    assert!(summary.penalised.contains(&members.url), "{summary:?}");
    assert_eq!(summary.events, 2, "the reader's relay stands in");
    assert_eq!(summary.relays_refused, 2, "{summary:?}");
    let mut unreadable = summary.unreadable.clone();
    unreadable.sort();
    let mut expected = vec![paid_author.public_key(), members_author.public_key()];
    expected.sort();
    assert_eq!(unreadable, expected, "named as having nowhere to be read");
    assert_eq!(summary.relays_failed, 0, "{summary:?}");
}

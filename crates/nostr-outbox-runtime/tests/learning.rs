//! A client with its own relay pool learns what the runtime learns: the runtime runs a `--once`
//! feed against local relays; a bare client sends the same plan's REQs to the same relays over
//! plain WebSockets and feeds the frames to a `RoundRecorder`. The stats are equal.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::{DeliveryStats, Plan, PlanContext, RouteTable};
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::RuntimeConfig;
use tokio_tungstenite::tungstenite::Message;

const CONFIG: &str = "max_connections = 4\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n";

/// Most frames the bare client reads from one relay before giving up on its EOSE.
const MAX_FRAMES: usize = 10_000;

/// What a client with its own pool does: per plan entry one REQ, every EVENT up to EOSE into
/// the recorder, a relay it cannot reach failed; at the end of the run, one final round.
async fn bare_client(plan: &Plan, table: &RouteTable, since: u64, now: u64) -> DeliveryStats {
    let mut recorder = RoundRecorder::new();
    for entry in plan.entries(table) {
        let url = table.url(entry.relay);
        let authors: Vec<PublicKey> = entry.authors.iter().map(|a| *table.pubkey(*a)).collect();
        recorder.asked(url, authors.iter().copied(), 1);
        let filter = Filter::new()
            .authors(authors)
            .kind(Kind::TextNote)
            .since(Timestamp::from(since));
        let mut ws = match tokio_tungstenite::connect_async(url).await {
            Ok((ws, _)) => ws,
            Err(e) => {
                recorder.failed(url, &e.to_string());
                continue;
            }
        };
        let req = serde_json::json!(["REQ", "bare", filter]).to_string();
        ws.send(Message::text(req)).await.expect("REQ sent");
        let mut frames = 0;
        let read = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(Ok(Message::Text(text))) = ws.next().await {
                frames += 1;
                if frames > MAX_FRAMES {
                    break;
                }
                let value: serde_json::Value = serde_json::from_str(&text).expect("JSON frame");
                match value[0].as_str() {
                    Some("EVENT") => {
                        let event: Event =
                            serde_json::from_value(value[2].clone()).expect("an event");
                        event.verify().expect("signed");
                        recorder.event(url, &event);
                    }
                    Some("EOSE") => {
                        recorder.eose(url, 1, true);
                        return;
                    }
                    _ => {}
                }
            }
            recorder.failed(url, "closed before EOSE");
        })
        .await;
        if read.is_err() {
            recorder.failed(url, "no EOSE in time");
        }
        let _ = ws.close(None).await;
    }
    let mut stats = DeliveryStats::new();
    stats.begin_session();
    let round = recorder.take_final_round().expect("the plan's relays");
    stats.record_round(&round, now);
    stats
}

/// The stats without what depends on the clock (when each update happened) or on timing
/// (latency): what was learned from delivery.
fn learned(stats: &DeliveryStats) -> DeliveryStats {
    let mut out = stats.clone();
    for (url, s) in stats.iter() {
        out.set(
            url,
            nostr_outbox_core::RelayStats {
                latency_ms: None,
                updated_at: 0,
                ..*s
            },
        );
    }
    for (author, a) in stats.authors() {
        out.set_author(
            *author,
            nostr_outbox_core::stats::AuthorStats {
                updated_at: 0,
                ..a.clone()
            },
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_recorder_learns_what_the_runtime_learns_from_the_same_frames() {
    let reader = RealRelay::start().await;
    let dead_reader = dead_url().await;
    let [deep, prunes] = RealRelay::several().await;
    let now = now();
    let since = now - 30 * DAY;
    let (f1, f2, f3, stranger) = (keys(1), keys(2), keys(3), keys(9));
    let mut world = World::default();
    for i in 0..6u64 {
        let on: Vec<&RealRelay> = if i < 2 {
            vec![&deep, &prunes]
        } else {
            vec![&deep]
        };
        world
            .put(note(&f1, now - 100 - i * 60, &format!("f1 {i}")), &on)
            .await;
    }
    for i in 0..3u64 {
        world
            .put(note(&f2, now - 200 - i * 60, &format!("f2 {i}")), &[&deep])
            .await;
    }
    world
        .put(note(&f2, now - 90 * DAY, "f2 too old"), &[&deep, &prunes])
        .await;
    // f3 has no list: the residual, on both reader relays.
    world.put(note(&f3, now - 300, "f3 a"), &[&reader]).await;
    world.put(note(&f3, now - 360, "f3 b"), &[&reader]).await;
    world
        .put(note(&stranger, now - 50, "not followed"), &[&deep])
        .await;
    let lists = [
        relay_list(&f1, now - 50, &[(&deep.url, None), (&prunes.url, None)]),
        relay_list(&f2, now - 50, &[(&deep.url, None), (&prunes.url, None)]),
    ];
    let follows = vec![f1.public_key(), f2.public_key(), f3.public_key()];
    let readers = [reader.url.as_str(), dead_reader.as_str()];
    let raw_lists: Vec<_> = lists.iter().map(raw).collect();
    let table = table(&follows, &readers, &raw_lists);
    let plan =
        router(CONFIG).plan_with(&table, &DeliveryStats::new(), PlanContext::at(now).seed(0));
    assert_eq!(
        plan.entries(&table).len(),
        4,
        "two routed, two reader relays"
    );

    let mut input = local_input(router(CONFIG), follows, readers);
    for l in &lists {
        input.add_relay_list_event(l);
    }
    let config = RuntimeConfig {
        since: Some(Timestamp::from(since)),
        // Both clients learn at the same present: notes' ages are part of what is learned.
        clock: Some(now),
        ..given_lists(true)
    };
    let (summary, _) = start_once(input, config).await;
    // The runtime asked what the bare client asks: the same relays about the same authors.
    for entry in plan.entries(&table) {
        let outcome = &summary.relays[table.url(entry.relay)];
        assert!(outcome.reqs >= 1, "{summary:#?}");
        assert_eq!(outcome.authors, entry.authors.len(), "{summary:#?}");
    }
    assert_eq!(
        summary.relays.values().filter(|r| r.reqs > 0).count(),
        4,
        "{summary:#?}"
    );

    let bare = bare_client(&plan, &table, since, now).await;
    let runtime = learned(&summary.stats);
    assert_eq!(learned(&bare), runtime);
    // What was learned is the point, not an empty match: the dead reader failed, the pruning
    // relay delivered less than the deep one and its history reaches less far back, and the
    // volumes are the deep relay's counts.
    let get = |url: &str| runtime.get(url);
    assert_eq!(get(&dead_reader).failures, 1);
    assert!(get(&prunes.url).mean() < get(&deep.url).mean());
    assert!(get(&prunes.url).depth_secs < get(&deep.url).depth_secs);
    assert_eq!(runtime.author(&f1.public_key()).unwrap().volume, 6.0);
    assert_eq!(runtime.author(&f3.public_key()).unwrap().volume, 2.0);
    assert!(runtime.author(&stranger.public_key()).is_none());
}

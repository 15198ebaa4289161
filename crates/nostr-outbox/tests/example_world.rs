//! The example world under `examples/` is made here, so it can be regenerated and never drifts.
//!
//! `OUTBOX_WRITE_EXAMPLES=1 cargo test -p nostr-outbox --test example_world` rewrites it; without
//! the variable the test fails when the checked-in file differs from what this code makes.

use std::path::PathBuf;

use nostr_outbox_core::testkit::test_key;
use nostr_outbox_sim::world::{PartEvent, World, WorldParts, WorldRelayList};

const NOW: u64 = 1_767_225_600; // 2026-01-01
const DAY: u64 = 86_400;
const SESSIONS: usize = 3;

/// Relays of the example: (canonical URL, up per session). Hubs first, then small relays.
const RELAYS: &[(&str, [bool; SESSIONS])] = &[
    ("wss://hub.one.example", [true, true, true]),
    ("wss://hub.two.example", [true, false, true]),
    ("wss://mid.three.example", [true, true, true]),
    ("wss://mid.four.example", [true, true, false]),
    ("wss://small.five.example", [true, true, true]),
    ("wss://small.six.example", [false, true, true]),
    ("wss://small.seven.example", [true, true, true]),
    ("wss://small.eight.example", [true, true, true]),
    ("wss://home.example", [true, true, true]),
];

/// Listed but gone: appears in lists, never answers.
const DEAD: &str = "wss://gone.example";

fn tags(entries: &[(&str, Option<&str>)]) -> Vec<Vec<String>> {
    entries
        .iter()
        .map(|(url, marker)| {
            let mut t = vec!["r".to_string(), url.to_string()];
            t.extend(marker.map(str::to_string));
            t
        })
        .collect()
}

fn example_world() -> World {
    let follows: Vec<_> = (0..36).map(|i| test_key(10_000 + i)).collect();
    let mut lists = Vec::new();
    let mut write_relays: Vec<Vec<&str>> = vec![Vec::new(); follows.len()];
    for (i, author) in follows.iter().enumerate() {
        // Every sixth follow publishes no relay list.
        if i % 6 == 5 {
            continue;
        }
        let hub = RELAYS[i % 2].0;
        let mid = RELAYS[2 + i % 2].0;
        let small = RELAYS[4 + i % 4].0;
        let mut entries: Vec<(&str, Option<&str>)> = vec![(hub, None), (small, Some("write"))];
        if i % 3 == 0 {
            entries.push((mid, None));
        }
        if i % 4 == 1 {
            entries.push((DEAD, None));
        }
        write_relays[i] = entries.iter().map(|(u, _)| *u).collect();
        // Messy but valid spellings of the same relays, and junk a client must drop.
        match i % 7 {
            0 => entries.push(("WSS://Hub.One.Example/", None)),
            1 => entries.push(("https://web.example", None)),
            2 => entries.push(("ws://127.0.0.1:4869", None)),
            3 => entries.push(("wss://abcdefghijklmnop.onion", None)),
            4 => entries.push(("not a url at all", None)),
            5 => entries.push(("wss://read.only.example", Some("read"))),
            _ => entries.push(("wss://small.five.example", Some("sometimes"))),
        }
        lists.push(WorldRelayList {
            author: *author,
            created_at: NOW - 30 * DAY - i as u64 * 3600,
            tags: tags(&entries),
        });
        // Some authors moved: an older list names relays they no longer use.
        if i % 5 == 0 {
            lists.push(WorldRelayList {
                author: *author,
                created_at: NOW - 400 * DAY,
                tags: tags(&[("wss://small.eight.example", None)]),
            });
        }
    }
    // A list from someone the reader does not follow.
    lists.push(WorldRelayList {
        author: test_key(99_999),
        created_at: NOW - DAY,
        tags: tags(&[("wss://stranger.example", None)]),
    });

    let mut events = Vec::new();
    for (i, relays) in write_relays.iter().enumerate() {
        let notes = (i * 7) % 9; // 0..8 notes, some authors silent
        for n in 0..notes {
            let age_days = ((i * 13 + n * 97) % 700) as u64;
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&(i as u64).to_be_bytes());
            id[8..16].copy_from_slice(&(n as u64).to_be_bytes());
            id[31] = 1;
            // Hubs prune notes older than 90 days; small relays keep everything.
            let mut on: Vec<String> = relays
                .iter()
                .filter(|r| **r != DEAD && !(r.starts_with("wss://hub") && age_days > 90))
                .map(|r| r.to_string())
                .collect();
            if i % 5 == 0 && age_days > 300 {
                on.push("wss://small.eight.example".into()); // where they wrote before moving
            }
            if relays.is_empty() {
                on.push(RELAYS[(i + n) % 2].0.to_string()); // no list: notes land on hubs
                on.push("wss://home.example".into());
            }
            events.push(PartEvent {
                id,
                author: i as u32,
                created_at: NOW - age_days * DAY - (n as u64 * 60),
                kind: 1,
                on,
            });
        }
    }

    World::from_parts(WorldParts {
        name: "example/36-follows".into(),
        now: NOW,
        sessions: SESSIONS as u32,
        reader: Some(test_key(1)),
        follows,
        reader_relays: vec!["wss://home.example".into(), "wss://hub.one.example/".into()],
        relay_lists: lists,
        relays: RELAYS
            .iter()
            .map(|(url, up)| (url.to_string(), up.to_vec()))
            .collect(),
        events,
    })
    .expect("the example world is well-formed")
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

#[test]
fn checked_in_example_world_is_current() {
    let made = example_world().to_json();
    let path = examples_dir().join("world.json");
    if std::env::var_os("OUTBOX_WRITE_EXAMPLES").is_some() {
        std::fs::write(&path, &made).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path)
        .expect("examples/world.json exists (OUTBOX_WRITE_EXAMPLES=1 makes it)");
    assert!(
        on_disk == made,
        "examples/world.json is stale: rerun with OUTBOX_WRITE_EXAMPLES=1"
    );
    let read = World::from_json(&on_disk).unwrap();
    assert_eq!(read.follows.len(), 36);
}

#[test]
fn greedy_plan_for_the_example_world() {
    nostr_outbox_strategies::link();
    let world = World::read_path(&examples_dir().join("world.json")).unwrap();
    let config_text = std::fs::read_to_string(examples_dir().join("greedy.toml")).unwrap();
    let config = nostr_outbox_core::RouterConfig::from_toml(&config_text).unwrap();
    let table = world.route_table(&config.url_policy);
    let mut router = nostr_outbox_core::Router::from_config(&config);
    let plan = router.plan(&table, 0);
    assert!(!plan.residual().is_empty());
    assert!(nostr_outbox_core::check_plan(&plan, &table, router.limits()).is_empty());
    let file = nostr_outbox_sim::PlanFile::from_plan(&plan, &table, 0);
    insta::assert_json_snapshot!("example_world_greedy_plan", file);
}

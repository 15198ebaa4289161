//! World files: the reader's mentions and the people notes tag, read, written and generated.

use nostr_outbox_world::generate::{generate_with, WorldModel};
use nostr_outbox_world::{generate, Profile, World, WorldError, MAX_EVENT_TAGS};

const READER: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const FOLLOW: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const STRANGER: &str = "e493dbf1c10d80f3581e4904930b1404cc6c13900ee0758474fa94abe8c4cd13";
const OTHER: &str = "2f8bde4d1a07209355b4a7250a5c5128e88b84bddc619ab7cba8d569b240efe4";
const ID1: &str = "0000000000000000000000000000000000000000000000000000000000000001";
const ID2: &str = "0000000000000000000000000000000000000000000000000000000000000002";

fn world_json(extra: &str, event_extra: &str) -> String {
    format!(
        r#"{{"format": "outbox-world/1", "name": "t", "now": 1000, "sessions": 1,{extra}
  "reader": {{"pubkey": "{READER}", "follows": ["{FOLLOW}"], "relays": ["wss://home.example"]}},
  "relay_lists": [], "relays": {{"wss://a.example": {{"up": [true]}}, "wss://home.example": {{"up": [true]}}}},
  "events": [{{"id": "{ID1}", "author": "{FOLLOW}", "created_at": 5, "kind": 1, "on": ["wss://a.example"]{event_extra}}}]}}"#
    )
}

fn field_of(err: WorldError) -> String {
    match err {
        WorldError::Invalid { field, .. } => field,
        other => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn mentions_and_tags_round_trip_and_absent_means_none() {
    let mentions = format!(
        r#" "mentions": [
          {{"id": "{ID2}", "author": "{STRANGER}", "created_at": 900, "kind": 1, "on": ["wss://home.example", "wss://gone.example", "wss://home.example"]}},
          {{"id": "{ID1}", "author": "{FOLLOW}", "created_at": 800, "kind": 7, "on": [], "p": ["not read"]}}],"#
    );
    let tags = format!(r#", "p": ["{OTHER}", "{STRANGER}", "{OTHER}"]"#);
    let w = World::from_json(&world_json(&mentions, &tags)).unwrap();
    // Mentions: anyone may write them, sorted by time, `on` canonical, their `p` not read.
    let m = w.mentions();
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].created_at, m[0].kind), (800, 7));
    assert_eq!(hex(&m[1].author), STRANGER);
    let on: Vec<&str> = w
        .mention_relays(&m[1])
        .iter()
        .map(|&r| w.relays()[r as usize].url.as_str())
        .collect();
    assert_eq!(on, ["wss://home.example", "wss://gone.example"]);
    // Tags: in order, a repeat kept once.
    let tagged: Vec<String> = w
        .event_tags(&w.events()[0])
        .iter()
        .map(|p| p.to_hex())
        .collect();
    assert_eq!(tagged, [OTHER, STRANGER]);

    let json = w.to_json();
    assert!(json.contains(&format!(
        r#""on": ["wss://a.example"], "p": ["{OTHER}", "{STRANGER}"]}}"#
    )));
    let back = World::from_json(&json).unwrap();
    assert_eq!(back, w);
    assert_eq!(back.to_json(), json, "writing again gives the same bytes");

    // Absent: no mentions, no tags, and nothing written for them.
    let plain = World::from_json(&world_json("", "")).unwrap();
    assert!(plain.mentions().is_empty());
    assert!(plain.event_tags(&plain.events()[0]).is_empty());
    let text = plain.to_json();
    assert!(
        !text.contains("mentions") && !text.contains("\"p\""),
        "{text}"
    );
    // An empty `p` and an empty `mentions` mean the same as absent ones.
    let empty = World::from_json(&world_json(r#" "mentions": [],"#, r#", "p": []"#)).unwrap();
    assert_eq!(empty.to_json(), text);
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn bad_mentions_and_tags_name_the_field() {
    let mention = |body: &str| format!(r#" "mentions": [{{{body}}}],"#);
    let ok =
        format!(r#""id": "{ID1}", "author": "{STRANGER}", "created_at": 5, "kind": 1, "on": []"#);
    let too_many = format!(
        r#", "p": [{}]"#,
        vec![format!("\"{OTHER}\""); MAX_EVENT_TAGS + 1].join(", ")
    );
    let cases: Vec<(String, &str)> = vec![
        (world_json(r#" "mentions": {},"#, ""), "mentions"),
        (
            world_json(&mention(&ok.replace(ID1, "zz")), ""),
            "mentions[0].id",
        ),
        (
            world_json(&mention(&ok.replace(STRANGER, "x")), ""),
            "mentions[0].author",
        ),
        (
            world_json(&mention(&ok.replace("\"kind\": 1", "\"kind\": 70000")), ""),
            "mentions[0].kind",
        ),
        (
            world_json(&mention(&ok.replace(", \"on\": []", "")), ""),
            "mentions[0]",
        ),
        (
            world_json(&mention(&ok.replace("\"on\": []", "\"on\": [3]")), ""),
            "mentions[0].on[0]",
        ),
        (world_json("", r#", "p": "x""#), "events[0].p"),
        (
            world_json(
                "",
                r#", "p": ["0000000000000000000000000000000000000000000000000000000000000000"]"#,
            ),
            "events[0].p[0]",
        ),
        (world_json("", r#", "p": [12]"#), "events[0].p[0]"),
        (
            world_json("", &format!(r#", "p": ["{OTHER}"], "p": ["{OTHER}"]"#)),
            "events[0]",
        ),
        (world_json("", &too_many), "events[0].p"),
    ];
    for (json, want) in cases {
        let field = field_of(World::from_json(&json).expect_err(want));
        assert_eq!(field, want, "{json}");
    }
    // Exactly the bound is fine.
    let at_bound = format!(
        r#", "p": [{}]"#,
        vec![format!("\"{OTHER}\""); MAX_EVENT_TAGS].join(", ")
    );
    assert!(World::from_json(&world_json("", &at_bound)).is_ok());
}

#[test]
fn the_generated_inbox_leaves_the_rest_of_the_world_alone() {
    let world = generate(Profile::Small, 5);
    assert_eq!(world, generate(Profile::Small, 5), "deterministic");
    let quiet = generate_with(
        &WorldModel {
            mention_rate_per_day: 0.0,
            tagged_note_share: 0.0,
            ..WorldModel::for_profile(Profile::Small)
        },
        "small/seed-5",
        5,
    )
    .unwrap();
    assert!(quiet.mentions().is_empty());
    assert!(quiet
        .events()
        .iter()
        .all(|e| quiet.event_tags(e).is_empty()));
    assert!(world.relay_lists.len() > quiet.relay_lists.len());
    // Take the new parts away: the same bytes as a world generated without them.
    let mut without = world.clone();
    without.set_mentions(Vec::new());
    without.set_event_tags(|_| Vec::new());
    without.relay_lists.truncate(quiet.relay_lists.len());
    assert_eq!(without.to_json(), quiet.to_json());
}

#[test]
fn generated_mentions_and_tags_look_like_the_model() {
    let world = generate(Profile::Medium, 2);
    let follows: std::collections::HashSet<[u8; 32]> =
        world.follows.iter().map(|f| f.to_bytes()).collect();
    // The reader publishes a list: its relays unmarked, plus read-only relays.
    let list = world
        .relay_lists
        .iter()
        .find(|l| l.author == world.reader)
        .expect("the reader's list");
    let read_only: Vec<&str> = list
        .tags
        .iter()
        .filter(|t| t.get(2).map(String::as_str) == Some("read"))
        .map(|t| t[1].as_str())
        .collect();
    assert_eq!(read_only.len(), 2, "{list:?}");
    assert_eq!(list.tags.len(), world.reader_relays.len() + 2);
    // Mentions: about 0.5 a day over the history, from follows and strangers, some delivered
    // to the reader's read relays.
    let m = world.mentions();
    assert!((450..700).contains(&m.len()), "{}", m.len());
    let from_follows = m.iter().filter(|x| follows.contains(&x.author)).count();
    assert!(
        from_follows * 10 > m.len() * 5 && from_follows * 10 < m.len() * 7,
        "{from_follows}"
    );
    let read_ids: Vec<u32> = read_only.iter().filter_map(|u| world.relay_id(u)).collect();
    let in_inbox = m
        .iter()
        .filter(|x| world.mention_relays(x).iter().any(|r| read_ids.contains(r)))
        .count();
    assert!(
        in_inbox > m.len() / 5 && in_inbox < m.len() * 3 / 5,
        "{in_inbox} of {}",
        m.len()
    );
    assert!(m.iter().all(|x| x.created_at < world.now));
    // Tags: about a fifth of notes tag one to three people, never the reader or the author.
    let tagged: Vec<_> = world
        .events()
        .iter()
        .filter(|e| !world.event_tags(e).is_empty())
        .collect();
    let share = tagged.len() as f64 / world.events().len() as f64;
    assert!((0.17..0.23).contains(&share), "{share}");
    for e in tagged {
        let tags = world.event_tags(e);
        assert!(tags.len() <= 3);
        assert!(!tags.contains(&world.reader));
        assert!(!tags.contains(&world.follows[e.author as usize]));
    }
}

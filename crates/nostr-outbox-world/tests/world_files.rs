//! World files: round trip, malformed input naming the field, generator determinism.

use nostr_outbox_world::{generate, Profile, RelayTiming, World, WorldError};

/// `w` read back from its JSON is `w`, and writes the same JSON.
#[track_caller]
fn assert_round_trips(w: &World) {
    let back = World::from_json(&w.to_json()).unwrap();
    assert_eq!(&back, w);
    assert_eq!(back.to_json(), w.to_json());
}

/// A world with none of the optional parts.
fn plain_world() -> World {
    World::from_json(&world_json("[]", r#"{}"#, "")).unwrap()
}

#[test]
fn generated_world_round_trips_through_json() {
    let world = generate(Profile::Small, 11);
    let json = world.to_json();
    let back = World::from_json(&json).expect("reads back");
    assert_eq!(back, world);
    assert_eq!(back.to_json(), json, "writing again gives the same bytes");
    // Through a file too (buffered, streaming).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    world.write_path(&path).unwrap();
    assert_eq!(World::read_path(&path).unwrap(), world);
}

#[test]
fn generator_is_deterministic_for_profile_and_seed() {
    let a = generate(Profile::Small, 3);
    let b = generate(Profile::Small, 3);
    assert_eq!(a, b);
    let c = generate(Profile::Small, 4);
    assert_ne!(a.events(), c.events());
    assert_ne!(a.follows, c.follows);
}

const KEY_A: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const KEY_B: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const ID: &str = "0000000000000000000000000000000000000000000000000000000000000001";

fn world_json(events: &str, relays: &str, extra: &str) -> String {
    format!(
        r#"{{"format": "outbox-world/1", "name": "t", "now": 1000, "sessions": 2,{extra}
  "reader": {{"pubkey": "{KEY_A}", "follows": ["{KEY_B}"], "relays": ["wss://home.example"]}},
  "relay_lists": [], "relays": {relays}, "events": {events}}}"#
    )
}

fn field_of(err: WorldError) -> String {
    match err {
        WorldError::Invalid { field, .. } => field,
        other => panic!("expected a field error, got {other}"),
    }
}

#[test]
fn unknown_fields_are_ignored() {
    let json = world_json(
        &format!(
            r#"[{{"id": "{ID}", "author": "{KEY_B}", "created_at": 5, "kind": 1, "on": [], "sig": "x"}}]"#
        ),
        r#"{"wss://a.example": {"up": [true, false], "note": 1}}"#,
        r#" "generator": {"version": 2},"#,
    );
    let w = World::from_json(&json).unwrap();
    assert_eq!(w.events().len(), 1);
    assert!(w.is_up(0, 0) && !w.is_up(0, 1));
}

#[test]
fn malformed_worlds_name_the_field() {
    let ok_relays = r#"{"wss://a.example": {"up": [true, true]}}"#;
    let event = |body: &str| format!("[{{{body}}}]");
    let cases: Vec<(String, &str)> = vec![
        (
            world_json(
                &event(&format!(
                    r#""id": "zz", "author": "{KEY_B}", "created_at": 5, "kind": 1, "on": []"#
                )),
                ok_relays,
                "",
            ),
            "events[0].id",
        ),
        (
            world_json(
                &event(&format!(
                    r#""id": "{ID}", "author": "{KEY_B}", "kind": 1, "on": []"#
                )),
                ok_relays,
                "",
            ),
            "events[0]",
        ),
        (
            world_json(
                &event(&format!(
                    r#""id": "{ID}", "author": "{KEY_A}", "created_at": 5, "kind": 1, "on": []"#
                )),
                ok_relays,
                "",
            ),
            "events[0].author",
        ),
        (
            world_json("[]", r#"{"wss://a.example": {"up": [true]}}"#, ""),
            "relays[\"wss://a.example\"].up",
        ),
        (
            world_json("[]", r#"{"wss://a.example": {"up": "yes"}}"#, ""),
            "relays.wss://a.example.up",
        ),
        (
            world_json("[]", ok_relays, "").replace(r#""now": 1000,"#, ""),
            "now",
        ),
        (
            world_json("[]", ok_relays, "").replace("outbox-world/1", "outbox-world/9"),
            "format",
        ),
        (
            world_json("[]", ok_relays, "").replace(&format!(r#"["{KEY_B}"]"#), r#"["abc"]"#),
            "reader.follows[0]",
        ),
    ];
    for (json, field) in cases {
        let err = World::from_json(&json).expect_err(field);
        let message = err.to_string();
        assert_eq!(field_of(err), field, "{message}");
    }
    // Truncated input is an error, not a panic.
    let full = world_json("[]", ok_relays, "");
    assert!(World::from_json(&full[..full.len() / 2]).is_err());
    assert!(World::from_json("").is_err());
}

#[test]
fn relay_caps_round_trip_and_absent_means_no_cap() {
    let relays = r#"{"wss://a.example": {"up": [true, true], "max_limit": 250},
        "wss://b.example": {"up": [true, false]},
        "wss://c.example": {"up": [true, true], "max_limit": null}}"#;
    let w = World::from_json(&world_json("[]", relays, "")).unwrap();
    let cap = |url: &str| w.relays()[w.relay_id(url).unwrap() as usize].max_limit;
    assert_eq!(cap("wss://a.example"), Some(250));
    assert_eq!(cap("wss://b.example"), None, "absent: no cap");
    assert_eq!(cap("wss://c.example"), None, "null: no cap");
    let json = w.to_json();
    assert!(json.contains(r#""max_limit": 250"#), "{json}");
    assert_eq!(
        json.matches("max_limit").count(),
        1,
        "no cap is not written"
    );
    assert_eq!(World::from_json(&json).unwrap(), w);
}

#[test]
fn relay_timing_round_trips_and_absent_means_the_default() {
    let relays = r#"{"wss://a.example": {"up": [true, true],
            "timing": {"connect_ms": 120, "query_ms": 900, "jitter": 0.25, "tail": 0.5, "hangs": true, "later": 1}},
        "wss://b.example": {"up": [true, false]}}"#;
    let w = World::from_json(&world_json("[]", relays, "")).unwrap();
    let a = w.timing(w.relay_id("wss://a.example").unwrap());
    assert_eq!((a.connect_ms, a.query_ms, a.hangs), (120, 900, true));
    assert_eq!(
        (a.jitter, a.spread, a.tail),
        (0.25, 0.0, 0.5),
        "absent spread: 0"
    );
    let b = w.relay_id("wss://b.example").unwrap();
    assert_eq!(w.relays()[b as usize].timing, None);
    assert_eq!(w.timing(b), RelayTiming::default(), "absent: the default");
    let json = w.to_json();
    assert_eq!(
        json.matches("timing").count(),
        1,
        "no timing is not written"
    );
    assert_eq!(World::from_json(&json).unwrap(), w);
    assert!(
        generate(Profile::Small, 2).is_timed(),
        "generated worlds have a clock"
    );
}

#[test]
fn a_bad_timing_names_the_field() {
    for value in [
        r#"{"connect_ms": 100}"#,
        r#"{"connect_ms": 100, "query_ms": 4000000000}"#,
        r#"{"connect_ms": -1, "query_ms": 100}"#,
        r#"{"connect_ms": 100, "query_ms": 100, "tail": 2}"#,
        r#"{"connect_ms": 100, "query_ms": 100, "spread": -0.5}"#,
        r#"{"connect_ms": 100, "query_ms": 100, "hangs": "yes"}"#,
        r#""fast""#,
    ] {
        let relays = format!(r#"{{"wss://a.example": {{"up": [true, true], "timing": {value}}}}}"#);
        let err = World::from_json(&world_json("[]", &relays, "")).expect_err(value);
        let message = err.to_string();
        let field = field_of(err);
        assert!(
            field.starts_with("relays.wss://a.example.timing"),
            "{value}: {field}: {message}"
        );
    }
}

#[test]
fn huge_caps_are_big_caps() {
    for value in ["4294967296", "99999999999999999999999999", "1e30"] {
        let relays =
            format!(r#"{{"wss://a.example": {{"up": [true, true], "max_limit": {value}}}}}"#);
        let w = World::from_json(&world_json("[]", &relays, "")).expect(value);
        assert_eq!(w.relays()[0].max_limit, Some(u32::MAX), "{value}");
    }
}

#[test]
fn a_bad_cap_names_the_field() {
    for value in ["-1", "0", "1.5", r#""500""#, "true", "[500]", "-1e3"] {
        let relays =
            format!(r#"{{"wss://a.example": {{"up": [true, true], "max_limit": {value}}}}}"#);
        let err = World::from_json(&world_json("[]", &relays, "")).expect_err(value);
        let message = err.to_string();
        assert_eq!(
            field_of(err),
            "relays.wss://a.example.max_limit",
            "{value}: {message}"
        );
    }
}

#[test]
fn generated_worlds_cap_most_relays_at_500() {
    let world = generate(Profile::Medium, 2);
    let caps: Vec<Option<u32>> = world
        .relays()
        .iter()
        .filter(|r| r.exists)
        .map(|r| r.max_limit)
        .collect();
    let count = |c: Option<u32>| caps.iter().filter(|&&x| x == c).count();
    assert!(
        count(Some(500)) * 2 > caps.len(),
        "most at strfry's default"
    );
    assert!(count(None) > 0, "a few uncapped");
    assert!(caps.iter().flatten().any(|&c| c < 500));
    assert!(caps.iter().flatten().any(|&c| c > 500));
    assert!(caps.iter().flatten().all(|&c| (100..=5_000).contains(&c)));
    assert!(world
        .relays()
        .iter()
        .filter(|r| !r.exists)
        .all(|r| r.max_limit.is_none()));
}

fn world_with_sessions(sessions: u64, up_len: usize) -> String {
    let up = vec!["true"; up_len].join(",");
    // `relays` before `sessions`: an overlong `up` array is refused while it is read.
    format!(
        r#"{{"format": "outbox-world/1", "now": 1000,
  "relays": {{"wss://a.example": {{"up": [{up}]}}}}, "sessions": {sessions},
  "reader": {{"pubkey": "{KEY_A}", "follows": ["{KEY_B}"], "relays": []}},
  "relay_lists": [], "events": []}}"#
    )
}

#[test]
fn session_counts_past_the_limit_are_refused_naming_the_field() {
    use nostr_outbox_world::generate::{generate_with, WorldModel};
    use nostr_outbox_world::world::WorldParts;
    use nostr_outbox_world::MAX_SESSIONS;

    let max = MAX_SESSIONS as usize;
    let w = World::from_json(&world_with_sessions(MAX_SESSIONS.into(), max)).expect("at the limit");
    assert_eq!(w.sessions, MAX_SESSIONS);

    for sessions in [u64::from(MAX_SESSIONS) + 1, 10_000_000, 300_000_000] {
        let no_relays = format!(
            r#"{{"format": "outbox-world/1", "now": 1000, "sessions": {sessions},
  "reader": {{"pubkey": "{KEY_A}", "follows": [], "relays": []}},
  "relay_lists": [], "relays": {{}}, "events": []}}"#
        );
        let err = World::from_json(&no_relays).expect_err("too many sessions");
        let message = err.to_string();
        assert!(message.contains(&MAX_SESSIONS.to_string()), "{message}");
        assert_eq!(field_of(err), "sessions", "{message}");
    }

    let err = World::from_json(&world_with_sessions(u64::from(MAX_SESSIONS) + 1, max + 1))
        .expect_err("an overlong up array");
    assert_eq!(field_of(err), "relays.wss://a.example.up");

    let parts = WorldParts {
        sessions: 300_000_000,
        reader: Some(nostr_outbox_core::public_key_from_hex(KEY_A).unwrap()),
        ..WorldParts::default()
    };
    assert_eq!(field_of(World::from_parts(parts).unwrap_err()), "sessions");

    let model = WorldModel {
        sessions: 300_000_000,
        ..WorldModel::for_profile(Profile::Small)
    };
    assert_eq!(
        field_of(generate_with(&model, "big", 1).unwrap_err()),
        "sessions"
    );
}

#[test]
fn monitor_data_round_trips_and_absent_means_none() {
    let json = world_json(
        "[]",
        r#"{"wss://a.example": {"up": [true, true]}}"#,
        r#" "monitor": {"wss://b.example": {"last_seen": 900}, "wss://a.example": {"last_seen": 990, "rtt": 4}},"#,
    );
    let w = World::from_json(&json).unwrap();
    let urls: Vec<(&str, u64)> = w
        .monitor()
        .iter()
        .map(|m| (m.url.as_str(), m.last_seen))
        .collect();
    assert_eq!(urls, [("wss://a.example", 990), ("wss://b.example", 900)]);
    assert_round_trips(&w);
    let plain = plain_world();
    assert!(plain.monitor().is_empty());
    assert!(!plain.to_json().contains("monitor"));
}

#[test]
fn hints_round_trip_and_absent_means_none() {
    let json = world_json(
        "[]",
        r#"{"wss://a.example": {"up": [true, true]}}"#,
        &format!(
            r#" "hints": [{{"author": "{KEY_B}", "relay": "wss://b.example", "source": "seen_on", "seen": 3}},
                          {{"author": "{KEY_A}", "relay": "WSS://A.example/", "source": "contact_list"}},
                          {{"author": "{KEY_B}", "relay": "wss://b.example", "source": "seen_on"}},
                          {{"author": "{KEY_B}", "relay": "wss://c.example", "source": "pointer"}}],"#
        ),
    );
    let w = World::from_json(&json).unwrap();
    let hints: Vec<(String, &str, &str)> = w
        .hints()
        .iter()
        .map(|h| (h.author.to_hex(), h.relay.as_str(), h.source.name()))
        .collect();
    // Sorted by author, source and relay; the repeat counted once; URLs kept as written.
    let (a, b) = (KEY_A.to_string(), KEY_B.to_string());
    let mut want = vec![
        (b.clone(), "wss://c.example", "pointer"),
        (b, "wss://b.example", "seen_on"),
        (a, "WSS://A.example/", "contact_list"),
    ];
    want.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(hints, want);
    assert_round_trips(&w);
    let plain = plain_world();
    assert!(plain.hints().is_empty());
    assert!(!plain.to_json().contains("hints"));
}

#[test]
fn bad_hints_name_the_field() {
    for (hints, field) in [
        (r#"{}"#.to_string(), "hints"),
        (
            format!(r#"[{{"author": "{KEY_B}", "relay": "wss://b.example", "source": "rumour"}}]"#),
            "hints[0].source",
        ),
        (
            r#"[{"author": "00", "relay": "wss://b.example", "source": "pointer"}]"#.to_string(),
            "hints[0].author",
        ),
        (
            format!(r#"[{{"author": "{KEY_B}", "source": "pointer"}}]"#),
            "hints[0]",
        ),
        (
            format!(
                r#"[{{"author": "{KEY_B}", "relay": "wss://b.example", "relay": "wss://c.example", "source": "pointer"}}]"#
            ),
            "hints[0]",
        ),
        (
            format!(r#"[{{"author": "{KEY_B}", "relay": 7, "source": "pointer"}}]"#),
            "hints[0].relay",
        ),
    ] {
        let json = world_json("[]", "{}", &format!(r#" "hints": {hints},"#));
        let got = field_of(World::from_json(&json).unwrap_err());
        assert!(got.starts_with(field), "{hints}: {got}");
    }
    let twice = world_json("[]", "{}", r#" "hints": [], "hints": [],"#);
    let got = field_of(World::from_json(&twice).unwrap_err());
    assert!(got.contains("(document)") || got.contains("hints"), "{got}");
}

#[test]
fn bad_monitor_data_names_the_field() {
    for monitor in [
        r#"{"": {"last_seen": 1}}"#,
        r#"{"wss://a.example": {"last_seen": -1}}"#,
        r#"{"wss://a.example": {}}"#,
        r#"{"wss://a.example": {"last_seen": 1}, "wss://a.example": {"last_seen": 2}}"#,
        r#"[]"#,
    ] {
        let json = world_json("[]", "{}", &format!(r#" "monitor": {monitor},"#));
        let field = field_of(World::from_json(&json).unwrap_err());
        assert!(field.starts_with("monitor"), "{monitor}: {field}");
    }
}

#[test]
fn generated_monitor_data_is_noisy_lagging_and_leaves_the_rest_of_the_world_alone() {
    use nostr_outbox_world::generate::{generate_with, WorldModel};
    let world = generate(Profile::Small, 5);
    let quiet = generate_with(
        &WorldModel {
            monitor_coverage: 0.0,
            monitor_dead_listed: 0.0,
            ..WorldModel::for_profile(Profile::Small)
        },
        "small/seed-5",
        5,
    )
    .unwrap();
    assert!(quiet.monitor().is_empty());
    let mut without = world.clone();
    without.set_monitor(Vec::new());
    assert_eq!(without.to_json(), quiet.to_json());

    let live = |url: &str| {
        world
            .relay_id(url)
            .is_some_and(|r| world.relays()[r as usize].exists)
    };
    let (mut live_listed, mut dead_recent, mut dead_old) = (0, 0, 0);
    for m in world.monitor() {
        let age = world.now - m.last_seen;
        assert!(age <= 400 * 86_400, "{m:?}");
        match (live(&m.url), age <= 4 * 3_600) {
            (true, recent) => {
                assert!(recent && age >= 3_600, "{m:?}");
                live_listed += 1;
            }
            (false, true) => dead_recent += 1,
            (false, false) => dead_old += 1,
        }
    }
    let live_total = world.relays().iter().filter(|r| r.exists).count();
    assert!(live_listed < live_total, "some live relays are missing");
    assert!(
        live_listed * 10 > live_total * 7,
        "{live_listed} of {live_total}"
    );
    assert!(
        dead_recent > 0 && dead_old > dead_recent,
        "{dead_recent} {dead_old}"
    );
}

#[test]
fn a_field_given_twice_is_an_error_not_the_last_value() {
    let relays = r#"{"wss://a.example": {"up": [true, true]}}"#;
    let note = |extra: &str| {
        format!(
            r#"[{{"id": "{ID}", "author": "{KEY_B}", "created_at": 5, "kind": 1, "on": []{extra}}}]"#
        )
    };
    assert!(World::from_json(&world_json(&note(""), relays, "")).is_ok());
    let twice = [
        world_json("[]", relays, r#" "now": 2000,"#),
        world_json("[]", relays, r#" "sessions": 1,"#),
        world_json("[]", relays, r#" "relays": {},"#),
        world_json(&note(r#", "created_at": 6"#), relays, ""),
        world_json(&note(r#", "on": ["wss://a.example"]"#), relays, ""),
    ];
    for json in twice {
        let err = World::from_json(&json).expect_err(&json);
        assert!(err.to_string().contains("duplicate field"), "{err}");
    }
}

/// A file that cannot be read says why once: the OS error is in the message, not also the
/// source an error chain would print after it.
#[test]
fn a_missing_file_names_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let err = World::read_path(&dir.path().join("missing.json")).expect_err("no such file");
    assert!(matches!(err, WorldError::Io(_)), "{err:?}");
    assert!(std::error::Error::source(&err).is_none());
    let text = err.to_string();
    assert!(
        text.starts_with("world file: ") && text.len() > "world file: ".len(),
        "{text}"
    );
}

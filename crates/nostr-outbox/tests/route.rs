//! `outbox route`: the binary on a small world and relay-list events, without the network.

use std::path::{Path, PathBuf};
use std::process::Output;

use nostr::event::{EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::{Keys, SecretKey};
use nostr::nips::nip19::{Nip19Event, ToBech32};
use nostr::types::RelayUrl;
use nostr_outbox_fleet::{assert_says, cli};
use serde_json::{json, Value};

fn keys(n: u8) -> Keys {
    Keys::new(SecretKey::from_slice(&[n; 32]).unwrap())
}

fn hex(n: u8) -> String {
    keys(n).public_key().to_hex()
}

fn outbox(args: &[&str]) -> Output {
    cli::run_blocking(env!("CARGO_BIN_EXE_outbox"), args)
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Reader 1 (reads on in.example, writes on out.example) follows 2 (writes a, b; reads r2);
/// 3 is no follow and reads p1, p2, p3; 4 takes DMs only (in the lists file).
struct Fixture {
    _dir: tempfile::TempDir,
    world: PathBuf,
    lists: PathBuf,
    dir: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let list = |n: u8, tags: Value| json!({"author": hex(n), "created_at": 10, "tags": tags});
    let world = json!({
        "format": "outbox-world/1",
        "name": "routes",
        "now": 1_767_225_600u64,
        "sessions": 1,
        "reader": {"pubkey": hex(1), "follows": [hex(2)], "relays": ["wss://home.example"]},
        "relay_lists": [
            list(1, json!([["r", "wss://in.example", "read"], ["r", "wss://out.example", "write"]])),
            list(2, json!([["r", "wss://a.example", "write"], ["r", "wss://b.example", "write"], ["r", "wss://r2.example", "read"]])),
            list(3, json!([["r", "wss://p1.example", "read"], ["r", "wss://p2.example", "read"], ["r", "wss://p3.example", "read"]])),
        ],
        "relays": {"wss://a.example": {"up": [true]}},
        "events": [],
    });
    let world_path = dir.path().join("world.json");
    std::fs::write(&world_path, world.to_string()).unwrap();
    let dm_list = EventBuilder::new(Kind::InboxRelays, "")
        .tag(Tag::parse(["relay", "wss://dm4.example"]).unwrap())
        .finalize(&keys(4))
        .unwrap();
    let mut forged = EventBuilder::new(Kind::InboxRelays, "")
        .tag(Tag::parse(["relay", "wss://forged.example"]).unwrap())
        .finalize(&keys(3))
        .unwrap();
    forged.content = "changed".into();
    let lists = dir.path().join("lists.json");
    std::fs::write(
        &lists,
        serde_json::to_string(&vec![
            serde_json::to_value(&dm_list).unwrap(),
            serde_json::to_value(&forged).unwrap(),
            json!({"not": "an event"}),
        ])
        .unwrap(),
    )
    .unwrap();
    Fixture {
        world: world_path,
        lists,
        dir: dir.path().to_path_buf(),
        _dir: dir,
    }
}

impl Fixture {
    /// `route`, then `args`, then this world: what a test asks `outbox`.
    fn route<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        [&["route"], args, &["--world", self.world.to_str().unwrap()]].concat()
    }
}

fn write_event(dir: &Path, name: &str, event: Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, event.to_string()).unwrap();
    path.to_str().unwrap().to_string()
}

/// The JSON plan `outbox args --json` prints.
fn plan_of(args: &[&str]) -> Value {
    let out = outbox(&[args, &["--json"]].concat());
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// A relay of a plan with its reasons, as [`targets`] lists them.
fn target(url: &str, reasons: &[&str]) -> (String, Vec<String>) {
    (
        url.to_string(),
        reasons.iter().map(|r| r.to_string()).collect(),
    )
}

/// Author 2's write relays, as [`targets`] lists them ahead of the rest.
fn authors_outbox() -> Vec<(String, Vec<String>)> {
    let author = format!("author_write {}", hex(2));
    vec![
        target("wss://a.example", &[&author]),
        target("wss://b.example", &[&author]),
    ]
}

fn targets(plan: &Value) -> Vec<(String, Vec<String>)> {
    plan["route"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let reasons = t["reasons"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| match r.get("pubkey") {
                    Some(pk) => {
                        format!("{} {}", r["reason"].as_str().unwrap(), pk.as_str().unwrap())
                    }
                    None => r["reason"].as_str().unwrap().to_string(),
                })
                .collect();
            (t["url"].as_str().unwrap().to_string(), reasons)
        })
        .collect()
}

#[test]
fn publish_names_the_authors_outbox_and_the_tagged_persons_inbox() {
    let f = fixture();
    let event = write_event(
        &f.dir,
        "note.json",
        json!({"pubkey": hex(2), "kind": 1, "tags": [["p", hex(3)], ["p", hex(9)]], "content": "hi"}),
    );
    let plan = plan_of(&f.route(&["publish", "--event", &event]));
    let tagged = format!("tagged_read {}", hex(3));
    let inbox = [
        target("wss://p1.example", &[&tagged]),
        target("wss://p2.example", &[&tagged]),
    ];
    assert_eq!(targets(&plan), [authors_outbox(), inbox.to_vec()].concat());
    assert_eq!(plan["route"]["unknown"], json!([hex(9)]));
    assert_eq!(plan["violations"], json!([]));

    // The text form says the same, one relay per line with its reasons.
    let text = stdout(&outbox(&f.route(&["publish", "--event", &event])));
    assert!(text.starts_with("publish route: 4 relays"), "{text}");
    assert_says(
        &text,
        &format!("wss://p1.example  quality 0.25  tagged-read {}", hex(3)),
    );
    assert_says(&text, &format!("no relays known for: {}", hex(9)));

    // A total budget of 2: the author and the tagged person get one relay each.
    let plan = plan_of(&f.route(&["publish", "--event", &event, "--max-relays", "2"]));
    let urls: Vec<String> = targets(&plan).into_iter().map(|(u, _)| u).collect();
    assert_eq!(urls, ["wss://a.example", "wss://p1.example"]);

    // `--per-person 0` drops the tagged person, and says so.
    let args = f.route(&["publish", "--event", &event, "--per-person", "0"]);
    let text = stdout(&outbox(&args));
    assert_says(
        &text,
        &format!("left out by --per-person 0: tagged-read {}", hex(3)),
    );
    let plan: Value =
        serde_json::from_str(&stdout(&outbox(&[&args[..], &["--json"]].concat()))).unwrap();
    assert_eq!(
        plan["route"]["left_out"],
        json!([{"reason": "tagged_read", "pubkey": hex(3)}])
    );
    assert_eq!(plan["violations"], json!([]));
}

#[test]
fn private_messages_go_to_dm_inboxes_from_the_lists_file() {
    let f = fixture();
    let wrap = write_event(
        &f.dir,
        "wrap.json",
        json!({"pubkey": hex(7), "kind": 1059, "tags": [["p", hex(4)], ["p", hex(3)]]}),
    );
    let plan = plan_of(&f.route(&[
        "publish",
        "--event",
        &wrap,
        "--lists",
        f.lists.to_str().unwrap(),
    ]));
    // Only 4's DM inbox; 3 has read relays but no (verified) DM list, so is reported.
    assert_eq!(
        targets(&plan),
        [target(
            "wss://dm4.example",
            &[&format!("dm_inbox {}", hex(4))]
        )]
    );
    assert_eq!(plan["route"]["unknown"], json!([hex(3)]));
}

#[test]
fn the_inbox_is_read_from_the_readers_read_relays() {
    let f = fixture();
    let plan = plan_of(&f.route(&["inbox", "--kind", "1"]));
    assert_eq!(
        targets(&plan),
        [target("wss://in.example", &["reader_read"])]
    );
    let filter = &plan["route"]["targets"][0]["filters"][0];
    assert_eq!(filter["#p"], json!([hex(1)]));
    assert_eq!(filter["kinds"], json!([1]));
    // A reader with no read relay falls back to the configured relays (the world's belong to
    // the world's reader only).
    let plan = plan_of(&f.route(&[
        "inbox",
        "--reader",
        &hex(5),
        "--reader-relay",
        "wss://mine.example",
    ]));
    let urls: Vec<String> = targets(&plan).into_iter().map(|(u, _)| u).collect();
    assert_eq!(urls, ["wss://mine.example"]);
    assert_eq!(
        plan["route"]["targets"][0]["reasons"][0]["reason"],
        "reader_relay"
    );
}

#[test]
fn a_thread_asks_hints_the_author_and_tagged_people() {
    let f = fixture();
    let id = nostr::event::EventId::from_byte_array([5; 32]);
    let code = Nip19Event::new(id)
        .author(keys(2).public_key())
        .relays([RelayUrl::parse("wss://hint.example").unwrap()])
        .to_bech32()
        .unwrap();
    let plan = plan_of(&f.route(&["thread", "--event", &code]));
    // NIP-65: replies to the author are sent to their read relay.
    let reads = format!("author_read {}", hex(2));
    let more = [
        target("wss://hint.example", &["hint"]),
        target("wss://r2.example", &[&reads]),
    ];
    assert_eq!(targets(&plan), [authors_outbox(), more.to_vec()].concat());
    let filters = &plan["route"]["targets"][0]["filters"];
    assert_eq!(filters[0]["#e"], json!([id.to_hex()]));
    assert_eq!(filters[0]["kinds"], json!([1, 6, 7, 16, 1111, 9735]));
    assert_eq!(filters[1]["#q"], json!([id.to_hex()]));
    assert_eq!(filters[2]["#E"], json!([id.to_hex()]));

    // From an event file: its tagged people too; a hostile hint is refused, never printed raw.
    let event = write_event(
        &f.dir,
        "root.json",
        json!({"id": id.to_hex(), "pubkey": hex(2), "kind": 1,
               "tags": [["p", hex(3)], ["e", id.to_hex(), "wss://x.example/\u{1b}[2J"]]}),
    );
    let out = outbox(&f.route(&["thread", "--event", &event]));
    let text = stdout(&out);
    assert_says(&text, &format!("tagged-read {}", hex(3)));
    assert_says(&text, "hints refused by the URL policy: 1");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let f = fixture();
    let world = f.world.to_str().unwrap();
    let secret = keys(9).secret_key().to_bech32().unwrap();
    let out = outbox(&["route", "thread", "--event", &secret, "--world", world]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "secret key");
    assert!(
        !stderr.contains(&secret),
        "the secret key was echoed: {stderr}"
    );

    let out = outbox(&["route", "publish", "--event", "/dev/zero", "--world", world]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    let bad = write_event(
        &f.dir,
        "bad.json",
        json!({"pubkey": hex(2), "kind": 70000, "tags": []}),
    );
    let out = outbox(&["route", "publish", "--event", &bad, "--world", world]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("field `kind`"));
    let out = outbox(&["route", "inbox"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no relay lists"));
}

#[test]
fn a_config_without_a_strategy_is_read_for_its_url_policy() {
    let f = fixture();
    let world = f.world.to_str().unwrap();
    let config = f.dir.join("routes.toml");
    std::fs::write(&config, "[url_policy]\ndeny = [\"wss://b.example\"]\n").unwrap();
    let code = Nip19Event::new(nostr::event::EventId::from_byte_array([5; 32]))
        .author(keys(2).public_key())
        .to_bech32()
        .unwrap();
    let config_arg = config.to_str().unwrap();
    let args = ["route", "thread", "--event", &code, "--world", world];
    let out = outbox(&[&args[..], &["--config", config_arg, "--json"]].concat());
    let plan: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let urls: Vec<String> = targets(&plan).into_iter().map(|(url, _)| url).collect();
    assert_eq!(
        urls,
        ["wss://a.example", "wss://r2.example"],
        "the denied relay is left out"
    );

    // Other problems are still named, the strategy among them only when it is given wrong.
    std::fs::write(&config, "max_connections = \"many\"\n").unwrap();
    let out = outbox(&[&args[..], &["--config", config_arg]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "max_connections");
    assert!(!stderr.contains("strategy"), "{stderr}");
    std::fs::write(&config, "[strategy]\ntype = \"nope\"\n").unwrap();
    let out = outbox(&[&args[..], &["--config", config_arg]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_says(&stderr, "unknown strategy `nope`");
}

#[test]
fn an_event_known_by_its_id_alone_says_why_no_relay_is_asked() {
    let f = fixture();
    let world = f.world.to_str().unwrap();
    let id = nostr::event::EventId::from_byte_array([5; 32]);
    let note = id.to_bech32().unwrap();
    for given in [id.to_hex(), note] {
        let out = outbox(&["route", "thread", "--event", &given, "--world", world]);
        let text = stdout(&out);
        assert_says(&text, "thread route: 0 relays");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_says(
            &stderr,
            &format!("event {} known by its id alone", id.to_hex()),
        );
        assert_says(&stderr, "no relay is asked");
        assert!(stderr.contains("nevent"), "what to give instead: {stderr}");
    }
    let out = outbox(&["route", "pointer", &id.to_hex(), "--world", world]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_says(&stderr, "known by its id alone");

    // An event with an author is routed without the note.
    let code = Nip19Event::new(id)
        .author(keys(2).public_key())
        .to_bech32()
        .unwrap();
    let out = outbox(&["route", "thread", "--event", &code, "--world", world]);
    assert!(stdout(&out).contains("thread route: 3 relays"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("id alone"));
}

/// `--allow-local` keeps loopback relays in the lists, as on every other command; without it a
/// route that lost them says so and names the option.
#[test]
fn loopback_relays_need_allow_local_and_their_drop_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let list = EventBuilder::new(Kind::RelayList, "")
        .tag(Tag::parse(["r", "ws://127.0.0.1:7777", "write"]).unwrap())
        .tag(Tag::parse(["r", "ws://localhost:7778", "write"]).unwrap())
        .finalize(&keys(5))
        .unwrap();
    let lists = dir.path().join("lists.json");
    std::fs::write(&lists, json!([list]).to_string()).unwrap();
    let event = write_event(
        dir.path(),
        "note.json",
        json!({"pubkey": hex(5), "kind": 1, "tags": []}),
    );
    let lists = lists.to_str().unwrap();
    let base = [
        "route",
        "publish",
        "--event",
        event.as_str(),
        "--lists",
        lists,
    ];

    let out = outbox(&base);
    let text = stdout(&out);
    assert!(text.starts_with("publish route: 0 relays"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_says(
        &err,
        "2 entries dropped: localhost or loopback address (use --allow-local)",
    );

    let mut local = base.to_vec();
    local.push("--allow-local");
    let out = outbox(&local);
    let text = stdout(&out);
    assert!(text.starts_with("publish route: 2 relays"), "{text}");
    assert_says(&text, "ws://127.0.0.1:7777");
    assert_says(&text, "ws://localhost:7778");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("dropped:"), "{err}");
}

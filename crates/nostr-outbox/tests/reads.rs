//! `outbox req`, `count`, `get`, `thread` and `search` against local relays: each read goes where what it
//! names lives (an author's write relay, a hint, a NIP-50 relay), learned live from relay lists.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use nostr::event::{Event, Kind, Tag};
use nostr::key::Keys;
use nostr::nips::nip01::Coordinate;
use nostr::nips::nip19::{Nip19Coordinate, Nip19Event, ToBech32};
use nostr::types::RelayUrl;

use nostr_outbox_fleet::{key, signed, RealRelay};

/// Runs `outbox` with `args` (loopback allowed, nothing kept).
async fn outbox(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_outbox"))
            .args(&args)
            .args(["--allow-local", "--no-stats"])
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn args(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The ids of the JSON lines on stdout.
fn ids(out: &Output) -> BTreeSet<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            event["id"].as_str().unwrap().to_string()
        })
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn write_list(keys: &Keys, write: &str) -> Event {
    let r = Tag::parse(["r", write, "write"]).unwrap();
    signed(keys, Kind::RelayList, "", vec![r], 1_000)
}

fn npub(keys: &Keys) -> String {
    keys.public_key().to_bech32().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_reads_an_author_on_the_write_relay_their_list_names() {
    let (home, theirs) = (RealRelay::start().await, RealRelay::start().await);
    let alice = key(0xa1);
    home.store(&write_list(&alice, &theirs.url)).await;
    let note = signed(&alice, Kind::TextNote, "only on my own relay", vec![], 60);
    let elsewhere = signed(&key(7), Kind::TextNote, "someone else", vec![], 60);
    theirs.store(&note).await;
    theirs.store(&elsewhere).await;

    let a = npub(&alice);
    let out = outbox(args(&[
        "req", "-a", &a, "-k", "1", "--json", "--relays", &home.url,
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        ids(&out),
        BTreeSet::from([note.id.to_hex()]),
        "{}",
        stderr(&out)
    );
    // The plan (on stderr with --json) names the write relay and why.
    let err = stderr(&out);
    assert!(err.contains(&theirs.url), "{err}");
    assert!(
        err.contains(&format!("author-write {}", alice.public_key().to_hex())),
        "{err}"
    );
    // Text output: the plan, then the note, its content escaped.
    let out = outbox(args(&["req", "-a", &a, "--relays", &home.url])).await;
    let text = stdout(&out);
    assert!(text.starts_with("req: 2 relays"), "{text}");
    assert!(text.contains("only on my own relay"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_refuses_bad_input_with_clear_errors() {
    let home = RealRelay::start().await;
    for (bad, says) in [
        (vec!["--filter", "{\"kinds\":"], "not a NIP-01 filter"),
        (
            vec!["--filter", "{\"authors\":[\"xyz\"]}"],
            "not a NIP-01 filter",
        ),
        (vec!["--filter", "/nonexistent/filter.json"], "neither JSON"),
        (vec!["-a", "npub1notakey"], "not a person"),
        (vec!["-e", "nevent1qqqqq"], "not an event"),
        (
            vec![
                "-p",
                "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5",
            ],
            "secret key",
        ),
        (vec!["--since", "soon"], "--since"),
        (vec!["--limit", "100000"], "--limit"),
        (vec!["--since", "100", "--until", "50"], "after until"),
    ] {
        let mut words = vec!["req"];
        words.extend(bad.iter().copied());
        words.extend(["--relays", &home.url]);
        let out = outbox(args(&words)).await;
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert!(stderr(&out).contains(says), "{bad:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_follows_a_nevent_hint_and_an_naddr_to_the_authors_relay() {
    let (home, hinted, theirs) = (
        RealRelay::start().await,
        RealRelay::start().await,
        RealRelay::start().await,
    );
    let bob = key(0xb0);
    let note = signed(&bob, Kind::TextNote, "find me by my hint", vec![], 60);
    hinted.store(&note).await;
    let code = Nip19Event::new(note.id)
        .relays([RelayUrl::parse(&hinted.url).unwrap()])
        .to_bech32()
        .unwrap();
    let out = outbox(args(&["get", &code, "--json", "--relays", &home.url])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ids(&out), BTreeSet::from([note.id.to_hex()]));
    assert!(
        stderr(&out).contains(&format!("{}  hint", hinted.url)),
        "{}",
        stderr(&out)
    );

    // An address: its author's write relay, from their list on the reader's relay.
    home.store(&write_list(&bob, &theirs.url)).await;
    let d = Tag::parse(["d", "post"]).unwrap();
    let article = signed(&bob, Kind::LongFormTextNote, "an article", vec![d], 60);
    theirs.store(&article).await;
    let naddr = Nip19Coordinate::new(
        Coordinate::new(Kind::LongFormTextNote, bob.public_key()).identifier("post"),
        Vec::<RelayUrl>::new(),
    )
    .to_bech32()
    .unwrap();
    let out = outbox(args(&["get", &naddr, "--json", "--relays", &home.url])).await;
    assert_eq!(
        ids(&out),
        BTreeSet::from([article.id.to_hex()]),
        "{}",
        stderr(&out)
    );

    // Not there: exit status 1, saying where it was looked for.
    let missing = signed(&bob, Kind::TextNote, "never stored", vec![], 60);
    let note1 = missing.id.to_bech32().unwrap();
    let out = outbox(args(&["get", &note1, "--relays", &home.url])).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    // Not a pointer at all.
    let out = outbox(args(&["get", "nevent1zzzz", "--relays", &home.url])).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("reading the pointer"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_reads_replies_where_the_author_and_the_tagged_people_are() {
    let (home, author_relay, inbox) = (
        RealRelay::start().await,
        RealRelay::start().await,
        RealRelay::start().await,
    );
    let (alice, bob, carol) = (key(0xa1), key(0xb0), key(0xc0));
    home.store(&write_list(&alice, &author_relay.url)).await;
    // Bob reads on `inbox`: replies tagging him are sent there.
    let read = Tag::parse(["r", inbox.url.as_str(), "read"]).unwrap();
    home.store(&signed(&bob, Kind::RelayList, "", vec![read], 1_000))
        .await;
    let p = Tag::parse(["p", bob.public_key().to_hex().as_str()]).unwrap();
    let root = signed(&alice, Kind::TextNote, "the root, for bob", vec![p], 300);
    author_relay.store(&root).await;
    let e = Tag::parse(["e", root.id.to_hex().as_str(), "", "root"]).unwrap();
    let reply = signed(&carol, Kind::TextNote, "a reply", vec![e.clone()], 200);
    let reply_elsewhere = signed(&bob, Kind::TextNote, "bob's reply", vec![e], 100);
    inbox.store(&reply).await;
    author_relay.store(&reply_elsewhere).await;

    let code = Nip19Event::new(root.id)
        .author(alice.public_key())
        .to_bech32()
        .unwrap();
    let out = outbox(args(&["thread", &code, "--json", "--relays", &home.url])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        ids(&out),
        BTreeSet::from([
            root.id.to_hex(),
            reply.id.to_hex(),
            reply_elsewhere.id.to_hex()
        ]),
        "{}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("tagged-read {}", bob.public_key().to_hex())),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_asks_the_search_list_then_nip11_relays_then_the_configured_ones() {
    use nostr_outbox_fleet::SearchRelay;
    let home = RealRelay::start().await;
    let (reader, alice) = (key(0x51), key(0xa1));
    let hit = signed(
        &alice,
        Kind::TextNote,
        "all about Relays and routing",
        vec![],
        60,
    );
    let miss = signed(&alice, Kind::TextNote, "nothing to see", vec![], 60);
    let corpus = vec![hit.clone(), miss.clone()];
    let listed = SearchRelay::start(corpus.clone(), false).await;
    let advertised = SearchRelay::start(corpus.clone(), true).await;
    let configured = SearchRelay::start(corpus.clone(), false).await;
    let search = |relays: String| {
        args(&[
            "search",
            "relays",
            "--json",
            "--npub",
            &npub(&reader),
            "--relays",
            &relays,
            "--search-relays",
            &configured.url,
        ])
    };
    let both = format!("{},{}", home.url, advertised.url);

    // 3. Neither a list nor a relay that says it searches: the configured relays.
    let out = outbox(search(home.url.clone())).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        ids(&out),
        BTreeSet::from([hit.id.to_hex()]),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("as --search-relays"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        (
            listed.searches(),
            advertised.searches(),
            configured.searches()
        ),
        (0, 0, 1)
    );

    // 2. A known relay whose NIP-11 document lists NIP 50 comes before them.
    let out = outbox(search(both.clone())).await;
    assert_eq!(
        ids(&out),
        BTreeSet::from([hit.id.to_hex()]),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("NIP-11 documents list NIP 50"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        (
            listed.searches(),
            advertised.searches(),
            configured.searches()
        ),
        (0, 1, 1)
    );

    // 1. The reader's own search relays (kind:10007) come first of all.
    let tag = Tag::parse(["relay", listed.url.as_str()]).unwrap();
    home.store(&signed(&reader, Kind::SearchRelays, "", vec![tag], 500))
        .await;
    let out = outbox(search(both)).await;
    assert_eq!(
        ids(&out),
        BTreeSet::from([hit.id.to_hex()]),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("kind:10007"), "{}", stderr(&out));
    assert_eq!(
        (
            listed.searches(),
            advertised.searches(),
            configured.searches()
        ),
        (1, 1, 1)
    );

    // Nothing to search with, or nothing to search for: clear errors.
    let out = outbox(args(&["search", "relays", "--relays", &home.url])).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no relay to search"),
        "{}",
        stderr(&out)
    );
    let out = outbox(args(&["search", "  ", "--relays", &home.url])).await;
    assert!(
        stderr(&out).contains("nothing to search for"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_asks_the_authors_write_relay_and_names_the_largest_count() {
    let (home, theirs) = (RealRelay::start().await, RealRelay::start().await);
    let alice = key(0xa3);
    home.store(&write_list(&alice, &theirs.url)).await;
    for i in 0..3 {
        let note = signed(&alice, Kind::TextNote, &format!("note {i}"), vec![], 60 + i);
        theirs.store(&note).await;
    }
    // The reader's relay holds one of them too: counts overlap, so they are not added.
    home.store(&signed(&alice, Kind::TextNote, "note 0", vec![], 60))
        .await;
    let a = npub(&alice);
    let out = outbox(args(&["count", "-a", &a, "-k", "1", "--relays", &home.url])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(&format!("{}  3", theirs.url)), "{text}");
    assert!(text.contains(&format!("{}  1", home.url)), "{text}");
    assert!(text.contains("at least 3 events match"), "{text}");

    let out = outbox(args(&[
        "count", "-a", &a, "-k", "1", "--relays", &home.url, "--json",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let last: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().last().unwrap()).unwrap();
    assert_eq!(last["largest"], 3);
    assert_eq!(last["counted"], 2);
}

//! `outbox req`, `count`, `get`, `thread` and `search` against local relays: each read goes where what it
//! names lives (an author's write relay, a hint, a NIP-50 relay), learned live from relay lists.

use std::collections::BTreeSet;
use std::process::Output;

use nostr::event::{Event, Kind, Tag};
use nostr::key::Keys;
use nostr::nips::nip01::Coordinate;
use nostr::nips::nip19::{Nip19Coordinate, Nip19Event, ToBech32};
use nostr::types::RelayUrl;

use nostr_outbox_fleet::{assert_says, cli, key, signed, RealRelay};

/// Runs `outbox` with `args` (loopback allowed, nothing kept).
async fn outbox(mut args: Vec<String>) -> Output {
    args.push("--no-stats".into());
    outbox_keeping(args).await
}

/// Runs `outbox` with `args` (loopback allowed), keeping what `args` say.
async fn outbox_keeping(args: Vec<String>) -> Output {
    cli::run(
        env!("CARGO_BIN_EXE_outbox"),
        &[],
        [args, vec!["--allow-local".into()]].concat(),
    )
    .await
}

/// [`outbox`] started and left running, for a test to stop.
fn outbox_started(words: &[String]) -> std::process::Child {
    let mut cmd = cli::command(env!("CARGO_BIN_EXE_outbox"));
    cmd.args(words).args(["--allow-local", "--no-stats"]);
    cmd.spawn().unwrap()
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

/// How a run names `relay` asked for `reason` of `keys`' events.
fn asked(relay: &RealRelay, reason: &str, keys: &Keys) -> String {
    format!("{}  {reason} {}", relay.url, keys.public_key().to_hex())
}

/// Asserts that `out` succeeded and printed exactly `events`.
#[track_caller]
fn assert_found(out: &Output, events: &[&Event]) {
    assert!(out.status.success(), "{}", stderr(out));
    let want: BTreeSet<String> = events.iter().map(|e| e.id.to_hex()).collect();
    assert_eq!(ids(out), want, "{}", stderr(out));
}

/// Asserts that `out`'s stderr says `what`.
#[track_caller]
fn assert_stderr_says(out: &Output, what: &str) {
    assert_says(&stderr(out), what);
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn write_list(keys: &Keys, write: &str) -> Event {
    list_of(keys, &[(write, "write")])
}

/// `keys`'s kind:10002 naming each `(url, marker)`.
fn list_of(keys: &Keys, relays: &[(&str, &str)]) -> Event {
    let tags = relays
        .iter()
        .map(|(url, marker)| Tag::parse(["r", url, marker]).unwrap())
        .collect();
    signed(keys, Kind::RelayList, "", tags, 1_000)
}

/// `event`'s nevent naming its author, `author`.
fn nevent_by(event: &Event, author: &Keys) -> String {
    Nip19Event::new(event.id)
        .author(author.public_key())
        .to_bech32()
        .unwrap()
}

/// `event`'s nevent with `relay` as its hint.
fn nevent_on(event: &Event, relay: &str) -> String {
    Nip19Event::new(event.id)
        .relays([RelayUrl::parse(relay).unwrap()])
        .to_bech32()
        .unwrap()
}

/// A home relay and the relay `author` writes to, as the author's list on the home relay says.
async fn home_and_outbox(author: &Keys) -> [RealRelay; 2] {
    let [home, theirs] = RealRelay::several().await;
    home.store(&write_list(author, &theirs.url)).await;
    [home, theirs]
}

fn npub(keys: &Keys) -> String {
    keys.public_key().to_bech32().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_reads_an_author_on_the_write_relay_their_list_names() {
    let alice = key(0xa1);
    let [home, theirs] = home_and_outbox(&alice).await;
    let note = signed(&alice, Kind::TextNote, "only on my own relay", vec![], 60);
    let elsewhere = signed(&key(7), Kind::TextNote, "someone else", vec![], 60);
    theirs.store(&note).await;
    theirs.store(&elsewhere).await;

    let a = npub(&alice);
    let out = outbox(args(&[
        "req", "-a", &a, "-k", "1", "--json", "--relays", &home.url,
    ]))
    .await;
    assert_found(&out, &[&note]);
    // The plan (on stderr with --json) names the write relay and why.
    let err = stderr(&out);
    assert_says(&err, &theirs.url);
    assert_says(
        &err,
        &format!("author-write {}", alice.public_key().to_hex()),
    );
    // Text output: the plan, then the note, its content escaped.
    let out = outbox(args(&["req", "-a", &a, "--relays", &home.url])).await;
    let text = stdout(&out);
    assert!(text.starts_with("req: 2 relays"), "{text}");
    assert_says(&text, "only on my own relay");
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

/// A secret key given where a public key, event or pointer was expected is refused without
/// being shown in any form: nsec, ncryptsec, or the hex of a secret key that is not a point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_error_echoes_a_secret_key() {
    let home = RealRelay::start().await;
    let secret = key(0x5e);
    let nsec = secret.secret_key().to_bech32().unwrap();
    let ncryptsec = format!("ncryptsec1{}", "qpzry9x8gf2tvdw0s3jn54khce6mua7l".repeat(4));
    // The hex of a secret key that no public key has: refused as a key, so quoted if at all.
    let hex = (0u32..)
        .map(|n| key(n).secret_key().to_secret_hex())
        .find(|hex| nostr_outbox_core::parse_public_key(hex).is_err())
        .unwrap();
    let secrets = [nsec.clone(), hex.clone(), ncryptsec.clone()];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for value in [&nsec, &ncryptsec] {
        for flag in ["-e", "-a", "-p"] {
            cases.push(args(&["req", flag, value]));
        }
        cases.push(args(&["count", "-a", value]));
        cases.push(args(&["get", value]));
        cases.push(args(&["thread", value]));
    }
    for value in &secrets {
        cases.push(args(&["req", "-a", value]));
        cases.push(args(&["feed", "--once", "--npub", value]));
        cases.push(args(&["feed", "--once", "--follows", value]));
        cases.push(args(&["req", "-k", "1", "--npub", value]));
    }
    let mut wrong = Vec::new();
    for mut case in cases {
        case.extend(args(&["--relays", &home.url]));
        let out = outbox(case.clone()).await;
        let err = stderr(&out);
        let shown: Vec<&String> = secrets
            .iter()
            .filter(|s| err.to_lowercase().contains(&s.to_lowercase()))
            .collect();
        if out.status.success() || !shown.is_empty() || err.contains("panicked") {
            wrong.push(format!("{case:?}: {:?}\n{err}", out.status));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_follows_a_nevent_hint_and_an_naddr_to_the_authors_relay() {
    let [home, hinted, theirs] = RealRelay::several().await;
    let bob = key(0xb0);
    let note = signed(&bob, Kind::TextNote, "find me by my hint", vec![], 60);
    hinted.store(&note).await;
    let code = nevent_on(&note, &hinted.url);
    let out = outbox(args(&["get", &code, "--json", "--relays", &home.url])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(ids(&out), BTreeSet::from([note.id.to_hex()]));
    assert_stderr_says(&out, &format!("{}  hint", hinted.url));

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
    assert_stderr_says(&out, "not found");
    // Not a pointer at all.
    let out = outbox(args(&["get", "nevent1zzzz", "--relays", &home.url])).await;
    assert!(!out.status.success());
    assert_stderr_says(&out, "reading the pointer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_reads_replies_where_the_author_and_the_tagged_people_are() {
    let [home, author_relay, inbox] = RealRelay::several().await;
    let (alice, bob, carol) = (key(0xa1), key(0xb0), key(0xc0));
    home.store(&write_list(&alice, &author_relay.url)).await;
    // Bob reads on `inbox`: replies tagging him are sent there.
    home.store(&list_of(&bob, &[(&inbox.url, "read")])).await;
    let p = Tag::parse(["p", bob.public_key().to_hex().as_str()]).unwrap();
    let root = signed(&alice, Kind::TextNote, "the root, for bob", vec![p], 300);
    author_relay.store(&root).await;
    let e = Tag::parse(["e", root.id.to_hex().as_str(), "", "root"]).unwrap();
    let reply = signed(&carol, Kind::TextNote, "a reply", vec![e.clone()], 200);
    let reply_elsewhere = signed(&bob, Kind::TextNote, "bob's reply", vec![e], 100);
    inbox.store(&reply).await;
    author_relay.store(&reply_elsewhere).await;

    let code = nevent_by(&root, &alice);
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
    assert_says(&err, &format!("tagged-read {}", bob.public_key().to_hex()));
}

/// The JSON lines on stdout, by id: each event's `relation` to the thread.
fn relations(out: &Output) -> std::collections::BTreeMap<String, String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            let relation = event["relation"].as_str().unwrap_or("(none)").to_string();
            (event["id"].as_str().unwrap().to_string(), relation)
        })
        .collect()
}

/// NIP-65: a reply goes to the replier's write relays and the replied author's read relays.
/// Alice's list names a write relay and a separate read relay; Bob's and Carol's replies are on
/// their own write relays and on Alice's read relay, never on her write relay. Carol's answer
/// to Bob is on her own write relay alone: the second pass, on the repliers' write relays,
/// finds it. Dave quotes the root, Erin reacts to it; each is labelled apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_finds_replies_on_the_authors_read_relays_and_the_repliers_write_relays() {
    let home = RealRelay::start().await;
    let [alice_write, alice_read] = RealRelay::several().await;
    let [bob_write, carol_write] = RealRelay::several().await;
    let [dave_write, erin_write] = RealRelay::several().await;
    let (alice, bob, carol, dave, erin) = (key(0xa1), key(0xb0), key(0xc0), key(0xd0), key(0xe0));
    let lists = [
        (alice_write.url.as_str(), "write"),
        (&alice_read.url, "read"),
    ];
    home.store(&list_of(&alice, &lists)).await;
    for (who, relay) in [
        (&bob, &bob_write),
        (&carol, &carol_write),
        (&dave, &dave_write),
        (&erin, &erin_write),
    ] {
        home.store(&write_list(who, &relay.url)).await;
    }
    let root = signed(&alice, Kind::TextNote, "the root", vec![], 500);
    alice_write.store(&root).await;

    let p_alice = Tag::parse(["p", alice.public_key().to_hex().as_str()]).unwrap();
    let e_root = Tag::parse(["e", root.id.to_hex().as_str(), "", "root"]).unwrap();
    let tags = vec![e_root.clone(), p_alice.clone()];
    let bob_reply = signed(&bob, Kind::TextNote, "bob replies", tags.clone(), 400);
    let carol_reply = signed(&carol, Kind::TextNote, "carol replies", tags, 300);
    for (reply, own) in [(&bob_reply, &bob_write), (&carol_reply, &carol_write)] {
        own.store(reply).await;
        alice_read.store(reply).await;
    }
    let e_bob = Tag::parse(["e", bob_reply.id.to_hex().as_str(), "", "reply"]).unwrap();
    let tags = vec![e_root.clone(), e_bob, p_alice.clone()];
    let carol_to_bob = signed(&carol, Kind::TextNote, "carol answers bob", tags, 200);
    carol_write.store(&carol_to_bob).await;
    let q = Tag::parse(["q", root.id.to_hex().as_str()]).unwrap();
    let quote = signed(
        &dave,
        Kind::TextNote,
        "dave quotes",
        vec![q, p_alice.clone()],
        150,
    );
    let e = Tag::parse(["e", root.id.to_hex().as_str()]).unwrap();
    let reaction = signed(&erin, Kind::Reaction, "+", vec![e, p_alice], 100);
    for (event, own) in [(&quote, &dave_write), (&reaction, &erin_write)] {
        own.store(event).await;
        alice_read.store(event).await;
    }

    let code = nevent_by(&root, &alice);
    let out = outbox(args(&["thread", &code, "--json", "--relays", &home.url])).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let hex = |e: &Event| e.id.to_hex();
    let want = [
        (hex(&root), "root"),
        (hex(&bob_reply), "reply"),
        (hex(&carol_reply), "reply"),
        (hex(&carol_to_bob), "reply"),
        (hex(&quote), "quote"),
        (hex(&reaction), "reaction"),
    ]
    .map(|(id, r)| (id, r.to_string()));
    assert_eq!(relations(&out), want.into_iter().collect(), "{err}");
    assert_says(&err, &asked(&alice_read, "author-read", &alice));
    assert!(
        err.contains(&asked(&carol_write, "author-write", &carol)),
        "the second pass asks Carol's write relay: {err}"
    );
    assert_says(
        &err,
        "thread: 3 replies, 1 quote, 1 reaction, 0 reposts, 0 zaps, 0 mentions",
    );

    // As text: each line says what it is.
    let out = outbox(args(&["thread", &code, "--relays", &home.url])).await;
    let text = stdout(&out);
    for line in [
        "reply: bob replies",
        "reply: carol answers bob",
        "quote: dave quotes",
        "reaction: +",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}

/// `thread --stream`: after both passes every relay asked stays open; a reply published later
/// is printed, labelled, and what the passes printed is not printed again.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_stream_prints_later_replies_once() {
    let [home, alice_write, alice_read] = RealRelay::several().await;
    let (alice, bob, carol) = (key(0xa2), key(0xb2), key(0xc2));
    let lists = [
        (alice_write.url.as_str(), "write"),
        (&alice_read.url, "read"),
    ];
    home.store(&list_of(&alice, &lists)).await;
    let root = signed(&alice, Kind::TextNote, "the root", vec![], 500);
    alice_write.store(&root).await;
    let e_root = Tag::parse(["e", root.id.to_hex().as_str(), "", "root"]).unwrap();
    let early = signed(&bob, Kind::TextNote, "early", vec![e_root.clone()], 400);
    alice_read.store(&early).await;
    let code = nevent_by(&root, &alice);
    let words = args(&["thread", &code, "--stream", "--json", "--relays", &home.url]);
    let child = tokio::task::spawn_blocking(move || outbox_started(&words))
        .await
        .unwrap();
    // Both passes end and the streaming subscriptions open well within this.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    let late = signed(&carol, Kind::TextNote, "late", vec![e_root], 0);
    alice_read.publish(&late).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let out = tokio::task::spawn_blocking(move || {
        cli::signal("-INT", child.id());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let err = stderr(&out);
    let want = [
        (root.id.to_hex(), "root".to_string()),
        (early.id.to_hex(), "reply".to_string()),
        (late.id.to_hex(), "reply".to_string()),
    ];
    assert_eq!(relations(&out), want.into_iter().collect(), "{err}");
    assert_eq!(stdout(&out).lines().count(), 3, "each event once: {err}");
    assert_says(&err, "thread: 2 replies");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_asks_the_search_list_then_nip11_relays_then_the_configured_ones() {
    use nostr_outbox_fleet::PlainRelay;
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
    // Relays with no document may search; one whose document leaves NIP-50 out does not.
    let listed = PlainRelay::documented(corpus.clone(), None).await;
    let advertised = PlainRelay::start(corpus.clone(), true).await;
    let configured = PlainRelay::documented(corpus.clone(), None).await;
    let says_no = PlainRelay::start(corpus.clone(), false).await;
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
    // The hit alone, found where `said` says, with how often each relay was searched so far.
    let found = |out: &Output, said: &str, searched| {
        assert_eq!(
            ids(out),
            BTreeSet::from([hit.id.to_hex()]),
            "{}",
            stderr(out)
        );
        assert_stderr_says(out, said);
        let asked = (
            listed.searches(),
            advertised.searches(),
            configured.searches(),
        );
        assert_eq!(asked, searched);
    };

    // 3. Neither a list nor a relay that says it searches: the configured relays.
    let out = outbox(search(home.url.clone())).await;
    assert!(out.status.success(), "{}", stderr(&out));
    found(&out, "as --search-relays", (0, 0, 1));

    // 2. A known relay whose NIP-11 document lists NIP 50 comes before them.
    let out = outbox(search(both.clone())).await;
    found(&out, "NIP-11 documents list NIP 50", (0, 1, 1));

    // 1. The reader's own search relays (kind:10007) come first of all.
    let tag = Tag::parse(["relay", listed.url.as_str()]).unwrap();
    home.store(&signed(&reader, Kind::SearchRelays, "", vec![tag], 500))
        .await;
    let out = outbox(search(both)).await;
    found(&out, "kind:10007", (1, 1, 1));

    // A relay whose document does not list NIP-50 is not searched, and said; with no other,
    // the search fails.
    let search_only = |searched: &str| {
        args(&[
            "search",
            "relays",
            "--relays",
            &home.url,
            "--search-relays",
            searched,
        ])
    };
    let out = outbox(search_only(&format!("{},{}", says_no.url, configured.url))).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "{}: not searched: its document does not list NIP-50",
            says_no.url
        )),
        "{}",
        stdout(&out)
    );
    let out = outbox(search_only(&says_no.url)).await;
    assert!(!out.status.success());
    assert_stderr_says(&out, "none of the chosen relays supports NIP-50");
    assert_eq!(says_no.searches(), 0);

    // Nothing to search with, or nothing to search for: clear errors.
    let out = outbox(args(&["search", "relays", "--relays", &home.url])).await;
    assert!(!out.status.success());
    assert_stderr_says(&out, "no relay to search");
    let out = outbox(args(&["search", "  ", "--relays", &home.url])).await;
    assert_stderr_says(&out, "nothing to search for");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_asks_the_authors_write_relay_and_names_the_largest_count() {
    let alice = key(0xa3);
    let [home, theirs] = home_and_outbox(&alice).await;
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
    assert_says(&text, &format!("{}  3", theirs.url));
    assert_says(&text, &format!("{}  1", home.url));
    assert_says(&text, "at least 3 events match");

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

/// Raw C1 and bidirectional controls in `text`, which `--json` output never carries.
fn raw_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        })
        .collect()
}

/// A relay's `CLOSED` reason in `outbox count --json` is written as every `--json` output
/// writes text: its C1 and bidirectional controls escaped, the reason itself kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_json_escapes_a_relay_s_refusal() {
    const REASON: &str = "no\u{9b}2J count\u{85}\u{202e}txt.exe\u{2066}";
    let home = RealRelay::start().await;
    let refusing =
        nostr_outbox_fleet::FaultServer::start(nostr_outbox_fleet::Fault::Refuse(REASON), vec![])
            .await;
    let alice = key(0xa7);
    home.store(&write_list(&alice, &refusing.url)).await;
    let a = npub(&alice);
    let out = outbox(args(&[
        "count", "-a", &a, "-k", "1", "--relays", &home.url, "--json",
    ]))
    .await;
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let raw = raw_controls(&text);
    assert!(raw.is_empty(), "raw controls {raw:?} in {text}");
    let error = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|v| v["relay"] == refusing.url.as_str() && v.get("error").is_some())
        .unwrap_or_else(|| panic!("no error line for the refusing relay: {text}"));
    assert!(
        error["error"].as_str().unwrap().contains("txt.exe\u{2066}"),
        "{error}"
    );
}

/// A person's public key put in the secret key file is refused by every reading command that
/// was given that person, before anything is asked, as `feed` and `publish` refuse it.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_person_s_public_key_is_refused_as_the_secret_key() {
    use std::os::unix::fs::PermissionsExt;
    let home = RealRelay::start().await;
    let alice = key(0xa9);
    home.store(&write_list(&alice, &home.url)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    std::fs::write(&file, alice.public_key().to_hex()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let a = npub(&alice);
    let note = signed(&alice, Kind::TextNote, "hi", vec![], 60);
    let nevent = nevent_by(&note, &alice);
    let hex = alice.public_key().to_hex();
    let mut wrong = Vec::new();
    for case in [
        vec!["req", "-a", &a],
        vec!["req", "-p", &hex],
        vec!["count", "-a", &a],
        vec!["get", &a],
        vec!["thread", &nevent],
    ] {
        let mut words = args(&case);
        words.extend(args(&["--relays", &home.url, "--secret-key-file"]));
        words.push(file.to_str().unwrap().to_string());
        let out = outbox(words).await;
        let err = stderr(&out);
        if out.status.success() || !err.contains("public key, not a secret key") {
            wrong.push(format!("{case:?}: {:?}\n{err}", out.status));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `req -e nevent` asks the nevent author's write relays, as `get` does: with no hint, or a
/// hint that does not answer, the event is found where its author writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_asks_a_nevent_author_s_write_relays() {
    let alice = key(0xab);
    let [home, theirs] = home_and_outbox(&alice).await;
    // A hint nobody answers at: nothing listens on port 1.
    let gone = "ws://127.0.0.1:1";
    let note = signed(&alice, Kind::TextNote, "where I write", vec![], 60);
    theirs.store(&note).await;
    for hints in [vec![], vec![RelayUrl::parse(gone).unwrap()]] {
        let code = Nip19Event::new(note.id)
            .author(alice.public_key())
            .relays(hints.clone())
            .to_bech32()
            .unwrap();
        let out = outbox(args(&["req", "-e", &code, "--json", "--relays", &home.url])).await;
        assert_eq!(
            ids(&out),
            BTreeSet::from([note.id.to_hex()]),
            "hints {hints:?}: {}",
            stderr(&out)
        );
    }
}

/// `req --stream` against a relay that replays its stored events after EOSE: the replays are
/// cut off at the flood bound by their ids, without verifying each, the relay is reported as
/// misbehaving and not dialled again, and each event is printed once.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_stream_cuts_off_a_relay_replaying_its_events() {
    use nostr_outbox_fleet::{Fault, FaultServer};
    use std::sync::atomic::Ordering;
    let home = RealRelay::start().await;
    let alice = key(0xad);
    let notes: Vec<Event> = (0..3)
        .map(|i| signed(&alice, Kind::TextNote, &format!("note {i}"), vec![], 60 + i))
        .collect();
    let replayer = FaultServer::start(Fault::Replay, notes.clone()).await;
    home.store(&write_list(&alice, &replayer.url)).await;
    let a = npub(&alice);
    let words = args(&[
        "req", "-a", &a, "-k", "1", "--stream", "--json", "--relays", &home.url,
    ]);
    let out = tokio::task::spawn_blocking(move || {
        let child = outbox_started(&words);
        // Long enough for the whole replay (300,000 frames) to be read when nothing stops it.
        std::thread::sleep(std::time::Duration::from_secs(6));
        cli::signal("-INT", child.id());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let err = stderr(&out);
    let want: BTreeSet<String> = notes.iter().map(|n| n.id.to_hex()).collect();
    assert_eq!(ids(&out), want, "{err}");
    assert_eq!(stdout(&out).lines().count(), 3, "each event once: {err}");
    assert!(
        err.contains("misbehaving"),
        "the replayer is not reported: {err}"
    );
    let dials = replayer.connections.load(Ordering::SeqCst);
    assert_eq!(dials, 1, "a flooding relay is not dialled again: {err}");
}

/// A relay's COUNT marked `"approximate": true` (NIP-45) is shown as an estimate, in text and
/// in `--json`, and so is a summary whose largest count is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_shows_an_approximate_count_as_approximate() {
    use nostr_outbox_fleet::{Fault, FaultServer};
    let home = RealRelay::start().await;
    let estimating = FaultServer::start(Fault::ApproximateCount(4_200), vec![]).await;
    let alice = key(0xae);
    home.store(&write_list(&alice, &estimating.url)).await;
    let a = npub(&alice);
    let words = ["count", "-a", &a, "-k", "1", "--relays", &home.url];
    let out = outbox(args(&words)).await;
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = text
        .lines()
        .find(|l| l.starts_with(&estimating.url))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("~4200 (approximate)"), "{text}");
    assert_says(&text, "about 4200 events match");
    let mut words = args(&words);
    words.push("--json".into());
    let out = outbox(words).await;
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let relay = lines
        .iter()
        .find(|v| v["relay"] == estimating.url.as_str())
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(relay["count"], 4200);
    assert_eq!(relay["approximate"], true);
    let last = lines.last().unwrap();
    assert_eq!(last["largest"], 4200);
    assert_eq!(last["approximate"], true);
}

/// A relay that never answers `COUNT` is waited on briefly once, and the next run, reading
/// what the store kept, does not ask it again; one whose document leaves NIP-45 out is never
/// asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_remembers_relays_that_do_not_count() {
    use nostr_outbox_fleet::PlainRelay;
    let alice = key(0xa7);
    let notes: Vec<Event> = (0..2)
        .map(|i| signed(&alice, Kind::TextNote, &format!("n{i}"), vec![], 60 + i))
        .collect();
    let home = RealRelay::start().await;
    let silent = PlainRelay::documented(notes.clone(), None).await;
    let says_no = PlainRelay::documented(notes, Some(&[1, 11])).await;
    let lists = [(silent.url.as_str(), "write"), (&says_no.url, "write")];
    home.store(&list_of(&alice, &lists)).await;
    home.store(&signed(&alice, Kind::TextNote, "n0", vec![], 60))
        .await;
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("kept.sqlite").display());
    let a = npub(&alice);
    let run = || {
        outbox_keeping(args(&[
            "count", "-a", &a, "-k", "1", "--relays", &home.url, "--store", &store,
        ]))
    };
    let first = run().await;
    let err = stderr(&first);
    assert!(first.status.success(), "{err}");
    assert_says(&err, "does not list NIP-45");
    assert_eq!(says_no.ignored(), 0, "{err}");
    assert_eq!(silent.ignored(), 1, "{err}");
    let second = run().await;
    let err = stderr(&second);
    assert!(second.status.success(), "{err}");
    assert_says(&err, "did not answer NIP-45 when last asked");
    assert_eq!(silent.ignored(), 1, "not asked again: {err}");
    assert!(
        stdout(&second).contains("at least 1 events match"),
        "{}",
        stdout(&second)
    );
}

/// Each read's `--help` says what the reader options do for that read, not what they do for
/// `outbox feed` (a follow list, the residual pool, the config's indexers, learning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_read_s_help_says_what_its_reader_options_do_for_it() {
    let feed_only = [
        "kind:3 follow list",
        "residual pool",
        "the config's `indexers`",
        "explores anew",
        "writes it on a timer",
        "are set aside",
    ];
    let mut wrong = Vec::new();
    for (command, own) in [
        ("req", "always asked the filter"),
        ("count", "always asked to count"),
        (
            "get",
            "when the pointer carries no relay hint and its author's relays are unknown",
        ),
        ("thread", "where the event and its replies are"),
        ("search", "Not needed with --search-relays"),
    ] {
        let out = outbox(args(&[command, "--help"])).await;
        let help = stdout(&out);
        let shown: Vec<&&str> = feed_only.iter().filter(|t| help.contains(**t)).collect();
        if !out.status.success()
            || !shown.is_empty()
            || !help.contains(own)
            || !help.contains("a read never writes it")
        {
            wrong.push(format!("{command}: feed's texts {shown:?}:\n{help}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `get` and `thread` need no `--relays` when the code's hints say where, nor `search` when
/// `--search-relays` does; when nothing says where, `--relays` is still asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_are_needed_only_when_nothing_else_says_where_to_ask() {
    use nostr_outbox_fleet::PlainRelay;
    let hinted = RealRelay::start().await;
    let bob = key(0xb3);
    let note = signed(&bob, Kind::TextNote, "hinted, no relays given", vec![], 60);
    hinted.store(&note).await;
    let code = nevent_on(&note, &hinted.url);
    for command in ["get", "thread"] {
        let out = outbox(args(&[command, &code, "--json"])).await;
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        assert!(
            ids(&out).contains(&note.id.to_hex()),
            "{command}: {}",
            stderr(&out)
        );
    }
    // An id alone says nothing of where: --relays is asked for, and nothing is asked.
    let bare = note.id.to_bech32().unwrap();
    let out = outbox(args(&["get", &bare])).await;
    assert!(!out.status.success());
    assert_stderr_says(&out, "--relays is required");
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));

    let hit = signed(&bob, Kind::TextNote, "routing relays", vec![], 60);
    let searcher = PlainRelay::start(vec![hit.clone()], true).await;
    let out = outbox(args(&[
        "search",
        "relays",
        "--json",
        "--search-relays",
        &searcher.url,
    ]))
    .await;
    assert_found(&out, &[&hit]);
    // Neither: the usage error names --relays.
    let out = outbox(args(&["search", "relays"])).await;
    assert!(!out.status.success());
    assert_stderr_says(&out, "--relays");
}

/// The `nevent` of a text line: the word starting `nevent1`.
fn nevent_word(line: &str) -> &str {
    line.split(' ')
        .find(|w| w.starts_with("nevent1"))
        .unwrap_or_else(|| panic!("no nevent on {line:?}"))
}

/// The first line of `text` that ends with `end`.
fn line_ending<'a>(text: &'a str, end: &str) -> Option<&'a str> {
    text.lines().find(|l| l.ends_with(end))
}

/// The `nevent` of a text line, decoded.
fn nevent_of(line: &str) -> Nip19Event {
    use nostr::nips::nip19::FromBech32;
    Nip19Event::from_bech32(nevent_word(line)).unwrap()
}

/// Text output of `req`, `get` and `thread` names every event by a `nevent` with the relay it
/// came from as a hint, which `outbox get` takes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_output_names_each_event_by_a_nevent_with_its_relay() {
    let alice = key(0xa5);
    let [home, theirs] = home_and_outbox(&alice).await;
    let note = signed(&alice, Kind::TextNote, "find me again", vec![], 60);
    theirs.store(&note).await;
    let a = npub(&alice);
    let out = outbox(args(&["req", "-a", &a, "-k", "1", "--relays", &home.url])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = line_ending(&text, "find me again").unwrap_or_else(|| panic!("{text}"));
    let code = nevent_of(line);
    assert_eq!(code.event_id, note.id, "{line}");
    assert_eq!(code.author, Some(alice.public_key()), "{line}");
    let hints: Vec<String> = code.relays.iter().map(|r| r.to_string()).collect();
    assert_eq!(hints, std::slice::from_ref(&theirs.url), "{line}");

    // The code printed is one `get` and `thread` take: they find the note with it alone.
    let printed = nevent_word(line).to_string();
    for command in ["get", "thread"] {
        let out = outbox(args(&[command, &printed, "--relays", &home.url])).await;
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        let text = stdout(&out);
        let line =
            line_ending(&text, "find me again").unwrap_or_else(|| panic!("{command}: {text}"));
        assert_eq!(nevent_of(line).event_id, note.id, "{command}: {line}");
    }
}

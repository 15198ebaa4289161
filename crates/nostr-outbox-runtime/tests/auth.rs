//! NIP-42 sign-in: a relay that answers REQs with `auth-required:` serves a reader with keys
//! (the real relay with NIP-42 on, and scripted relays that challenge before or after the
//! refusal, refuse the sign-in, never challenge, or refuse after it), and refuses one without,
//! whose follows stay covered. The AUTH event names the relay and its challenge and goes to no
//! other relay; a config never prints the secret key.

use std::collections::BTreeSet;
use std::time::Duration;

use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::Keys;
use nostr::nips::nip19::ToBech32;
use nostr_outbox_fleet::*;
use nostr_outbox_runtime::{
    start, AuthOutcome, Client, FeedSummary, PublishConfig, PublishOutcome, RuntimeConfig,
    SocketBudget, Status,
};
use nostr_relay_builder::prelude as rb;

const CONFIG: &str = "max_connections = 10\n[strategy]\ntype = \"greedy\"\ncoverage_target = 1\n";

/// The reader's identity.
fn reader_keys() -> Keys {
    keys(200)
}

/// The test timeouts, one-shot.
fn once() -> RuntimeConfig {
    RuntimeConfig {
        once: true,
        ..RuntimeConfig::fast_for_tests()
    }
}

/// A client with `config`'s knobs and the desktop budget, signing in with `signer`.
fn client(config: RuntimeConfig, signer: Option<Keys>) -> Client {
    Client::with(config, SocketBudget::default(), signer.map(Into::into))
}

/// A `once` feed of `follows` with the reader's relay `reader`, routed by `lists`.
async fn run(
    reader: &str,
    follows: &[Keys],
    lists: &[Event],
    auth: Option<Keys>,
) -> (FeedSummary, Vec<Status>, BTreeSet<nostr::event::EventId>) {
    let follows: Vec<_> = follows.iter().map(|k| k.public_key()).collect();
    let mut input = local_input(router(CONFIG), follows, [reader]);
    for l in lists {
        assert!(input.add_relay_list_event(l));
    }
    let config = given_lists(true);
    let (handle, rx) = start(input, &client(config, auth)).await;
    let out = drain(rx);
    let summary = run_once(handle, &out, Duration::from_secs(10)).await;
    let collected = out.lock().unwrap();
    let notes = collected.notes.keys().copied().collect();
    (summary, collected.statuses.clone(), notes)
}

/// The reader's relay, a relay serving signed-in readers only, three follows whose lists name
/// only that relay, and the present.
async fn private_scene() -> (RealRelay, RealRelay, Vec<Keys>, Vec<Event>, u64) {
    let reader = RealRelay::start().await;
    let private = RealRelay::start_with(nip42_relay).await;
    let now = now();
    let f: Vec<_> = (1..=3).map(keys).collect();
    let lists = f
        .iter()
        .map(|k| relay_list(k, now, &[(&private.url, None)]))
        .collect();
    (reader, private, f, lists, now)
}

fn nip42_relay(b: rb::RelayBuilder) -> rb::RelayBuilder {
    b.nip42(rb::RelayBuilderNip42 {
        mode: rb::RelayBuilderNip42Mode::Read,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_requires_auth_serves_a_signed_in_reader() {
    let (reader, private, f, lists, now) = private_scene().await;
    let mut world = World::default();
    let mut notes = BTreeSet::new();
    for (i, k) in f.iter().enumerate() {
        for j in 0..3u64 {
            let n = note(k, now - 100 - j, &format!("private {i}/{j}"));
            notes.insert(n.id);
            // Only the private relay has them: the residual cannot stand in.
            world.put(n, &[&private]).await;
        }
    }

    let (summary, statuses, got) = run(&reader.url, &f, &lists, Some(reader_keys())).await;
    assert_eq!(got, notes, "{summary:#?}");
    assert!(!summary.penalised.contains(&private.url), "{summary:#?}");
    assert_eq!(
        summary.auth.get(&private.url),
        Some(&AuthOutcome::SignedIn),
        "{:?}",
        summary.auth
    );
    assert_eq!(summary.auth.len(), 1, "the reader's relay never asked");
    assert!(summary.relays[&private.url].answered);
    assert!(statuses
        .iter()
        .any(|s| matches!(s, Status::Authenticated { relay } if relay == &private.url)));
    assert!(!statuses
        .iter()
        .any(|s| matches!(s, Status::Refused { .. } | Status::Penalised { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_reader_is_refused_and_the_follows_stay_covered() {
    let (reader, private, f, lists, now) = private_scene().await;
    let mut world = World::default();
    let mut notes = BTreeSet::new();
    for (i, k) in f.iter().enumerate() {
        let n = note(k, now - 100, &format!("note {i}"));
        notes.insert(n.id);
        world.put(n, &[&private, &reader]).await;
    }

    let (summary, statuses, got) = run(&reader.url, &f, &lists, None).await;
    assert!(summary.penalised.contains(&private.url), "{summary:#?}");
    assert_eq!(
        summary.auth.get(&private.url),
        Some(&AuthOutcome::NoKeys),
        "{:?}",
        summary.auth
    );
    assert!(statuses.iter().any(|s| matches!(
        s,
        Status::Refused { relay, reason } if relay == &private.url && reason.starts_with("auth-required:")
    )));
    assert!(!statuses
        .iter()
        .any(|s| matches!(s, Status::Authenticated { .. })));
    // Its follows went to the residual on the reader's relay.
    assert_eq!(summary.authors_covered, f.len(), "{summary:#?}");
    assert_eq!(got, notes);
}

/// The value of the first tag named `name`.
fn tag<'a>(event: &'a Event, name: &str) -> Option<&'a str> {
    event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .find(|t| t.first().map(String::as_str) == Some(name))
        .and_then(|t| t.get(1))
        .map(String::as_str)
}

/// One follow writing to a scripted relay (its only copy of the note), and another to a relay
/// that challenges at connect but serves everyone (so must never see an AUTH event); the
/// reader's relay is the same kind.
struct Scene {
    reader: AuthRelay,
    open: AuthRelay,
    private: AuthRelay,
    follows: Vec<Keys>,
    lists: Vec<Event>,
    private_note: Event,
    open_note: Event,
}

/// The two ways a relay asks for sign-in before serving.
const SIGN_IN_ASKED: [AuthScript; 2] = [
    AuthScript::ChallengeFirst,
    AuthScript::ChallengeAfterRefusal,
];

async fn scene(script: AuthScript) -> Scene {
    let now = now();
    let follows: Vec<_> = (1..=2).map(keys).collect();
    let private_note = note(&follows[0], now - 100, "behind the sign-in");
    let open_note = note(&follows[1], now - 100, "open to all");
    let private = AuthRelay::start(script, vec![private_note.clone()]).await;
    let open = AuthRelay::start(AuthScript::ChallengeOnly, vec![open_note.clone()]).await;
    let reader = AuthRelay::start(AuthScript::ChallengeOnly, Vec::new()).await;
    let lists = vec![
        relay_list(&follows[0], now, &[(&private.url, None)]),
        relay_list(&follows[1], now, &[(&open.url, None)]),
    ];
    Scene {
        reader,
        open,
        private,
        follows,
        lists,
        private_note,
        open_note,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_event_names_the_relay_and_its_challenge_and_goes_nowhere_else() {
    for script in SIGN_IN_ASKED {
        let s = scene(script).await;
        let keys = reader_keys();
        let (summary, _, got) = run(&s.reader.url, &s.follows, &s.lists, Some(keys.clone())).await;
        assert!(got.contains(&s.private_note.id), "{script:?}: {summary:#?}");
        assert!(got.contains(&s.open_note.id), "{script:?}");
        assert_eq!(
            summary.auth.get(&s.private.url),
            Some(&AuthOutcome::SignedIn),
            "{script:?}"
        );
        assert!(summary.penalised.is_empty(), "{script:?}: {summary:#?}");

        let seen = s.private.seen();
        assert_eq!(
            seen.auths.len(),
            1,
            "{script:?}: one sign-in per connection"
        );
        let (event, challenge) = &seen.auths[0];
        event.verify().expect("a valid signature");
        assert_eq!(event.kind, Kind::Authentication);
        assert_eq!(event.pubkey, keys.public_key());
        assert_eq!(
            tag(event, "relay"),
            Some(s.private.url.as_str()),
            "{script:?}"
        );
        assert_eq!(
            tag(event, "challenge"),
            Some(challenge.as_str()),
            "{script:?}"
        );
        assert!(event.content.is_empty());
        // The refused REQ was asked again once signed in.
        assert!(
            seen.reqs_signed_in >= 1 && seen.reqs > seen.reqs_signed_in,
            "{seen:?}"
        );
        drop(seen);
        // Relays that did not refuse never see who reads, even the one that challenged.
        assert!(s.reader.seen().auths.is_empty(), "{script:?}");
        assert!(s.open.seen().auths.is_empty(), "{script:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sign_in_sets_the_relay_aside_and_says_why() {
    let cases = [
        (
            AuthScript::RejectsAuth,
            "sign-in refused: restricted: not on the list",
        ),
        (AuthScript::NoChallenge, "no AUTH challenge came in time"),
        (
            AuthScript::RefusesAfterAuth,
            "still refused after signing in",
        ),
    ];
    for (script, why) in cases {
        let s = scene(script).await;
        let (summary, statuses, got) =
            run(&s.reader.url, &s.follows, &s.lists, Some(reader_keys())).await;
        assert!(got.contains(&s.open_note.id), "{script:?}");
        assert!(!got.contains(&s.private_note.id), "{script:?}");
        assert!(
            summary.penalised.contains(&s.private.url),
            "{script:?}: {summary:#?}"
        );
        let reason = statuses
            .iter()
            .find_map(|st| match st {
                Status::Refused { relay, reason } if relay == &s.private.url => Some(reason),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{script:?}: no refusal in {statuses:#?}"));
        assert!(reason.starts_with("auth-required:"), "{script:?}: {reason}");
        assert!(reason.contains(why), "{script:?}: {reason}");
        match summary.auth.get(&s.private.url) {
            Some(AuthOutcome::Failed(r)) => assert!(r.contains(why), "{script:?}: {r}"),
            other => panic!("{script:?}: {other:?}"),
        }
        let seen = s.private.seen();
        if script == AuthScript::RefusesAfterAuth {
            // Asked again once after signing in, then given up: not a loop.
            assert_eq!(seen.reqs_signed_in, 1, "{seen:?}");
            assert_eq!(seen.auths.len(), 1, "{seen:?}");
        }
        if script == AuthScript::NoChallenge {
            assert!(seen.auths.is_empty(), "{seen:?}");
        }
    }
}

#[test]
fn debug_of_a_client_never_prints_the_secret_key() {
    let keys = reader_keys();
    let client = client(RuntimeConfig::default(), Some(keys.clone()));
    let printed = format!("{client:?}\n{client:#?}");
    let secret = keys.secret_key();
    assert!(!printed.contains(&secret.to_secret_hex()), "{printed}");
    assert!(!printed.contains(&secret.to_bech32().unwrap()), "{printed}");
    // The public key may show: it says who signs in.
    assert!(printed.contains("signer: Some("), "{printed}");
}

/// A route plan asking `url` for `author`'s notes.
fn route_plan(url: &str, author: &Keys) -> nostr_outbox_client::routes::RoutePlan {
    plan_over(vec![reader_target(
        url,
        Filter::new().author(author.public_key()),
    )])
}

/// The notes a `once` route feed over `plan` delivers.
async fn route_notes(
    plan: &nostr_outbox_client::routes::RoutePlan,
    client: &Client,
) -> Vec<nostr::event::EventId> {
    let (feed, mut rx) = nostr_outbox_runtime::start_route(plan, client);
    let mut notes = Vec::new();
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await {
        if let nostr_outbox_runtime::RouteEvent::Note { event, .. } = e {
            notes.push(event.id);
        }
    }
    feed.shutdown().await;
    notes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_and_route_feeds_sign_in_where_asked_and_nowhere_else() {
    for script in SIGN_IN_ASKED {
        let s = scene(script).await;
        let filter = Filter::new().author(s.follows[0].public_key());
        let config = once();
        let anonymous = client(config.clone(), None);
        let signed = client(config.clone(), Some(reader_keys()));
        let found = nostr_outbox_runtime::fetch_events(
            std::slice::from_ref(&s.private.url),
            &filter,
            &anonymous,
        )
        .await;
        assert!(found.is_empty(), "{script:?}: served without sign-in");
        assert!(s.private.seen().auths.is_empty(), "{script:?}");
        let found = nostr_outbox_runtime::fetch_events(
            &[s.private.url.clone(), s.open.url.clone()],
            &filter,
            &signed,
        )
        .await;
        let ids: Vec<_> = found.iter().map(|e| e.id).collect();
        assert_eq!(ids, [s.private_note.id], "{script:?}: the lookup signed in");
        // Sockets of its own, so the lookup's sign-in does not serve it.
        let signed_alone = client(config.clone(), Some(reader_keys()));
        let routed = route_notes(&route_plan(&s.private.url, &s.follows[0]), &signed_alone).await;
        assert_eq!(
            routed,
            [s.private_note.id],
            "{script:?}: the route feed signed in"
        );
        // Sign-in holds for the socket: an anonymous reader has sockets of its own.
        let alone = client(config.clone(), None);
        let refused = route_notes(&route_plan(&s.private.url, &s.follows[0]), &alone).await;
        assert!(refused.is_empty(), "{script:?}");
        assert!(
            s.open.seen().auths.is_empty(),
            "{script:?}: an open relay saw an AUTH"
        );
        let seen = s.private.seen();
        assert!(!seen.auths.is_empty(), "{script:?}");
        for (event, challenge) in &seen.auths {
            assert_eq!(tag(event, "relay"), Some(s.private.url.as_str()));
            assert_eq!(tag(event, "challenge"), Some(challenge.as_str()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_that_joins_a_socket_later_still_gets_its_challenge() {
    // The relay challenges once, at connect. A first link that is never refused (a publish:
    // the relay ignores EVENTs, so no OK and no `auth-required:` ever comes) opens the socket
    // and lets the challenge go by without signing in; the lookup (the same client, so the
    // same sockets and the same key) joins that socket after the challenge went by and must
    // sign in with it.
    let s = scene(AuthScript::ChallengeFirst).await;
    let filter = Filter::new().author(s.follows[0].public_key());
    let signed = client(once(), Some(reader_keys()));
    let first = PublishConfig {
        max_attempts: 1,
        ..PublishConfig::fast_for_tests()
    };
    let sent = nostr_outbox_runtime::publish(
        &s.open_note,
        std::slice::from_ref(&s.private.url),
        &signed,
        &first,
    )
    .await;
    assert_eq!(sent.relays[0].outcome, PublishOutcome::Timeout, "{sent:?}");
    assert!(
        s.private.seen().auths.is_empty(),
        "the first link was never refused, so never signed in"
    );
    let found =
        nostr_outbox_runtime::fetch_events(std::slice::from_ref(&s.private.url), &filter, &signed)
            .await;
    assert_eq!(
        found.len(),
        1,
        "the joining link signed in with the replayed challenge"
    );
    assert_eq!(
        signed.sockets().stats().dials,
        1,
        "one socket served both links"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_on_one_socket_sign_in_once() {
    // NIP-42 authenticates a connection: two lookups refused on one socket share one AUTH.
    for script in SIGN_IN_ASKED {
        let s = scene(script).await;
        let filter = Filter::new().author(s.follows[0].public_key());
        let signed = client(once(), Some(reader_keys()));
        let private = std::slice::from_ref(&s.private.url);
        let (one, two) = tokio::join!(
            nostr_outbox_runtime::fetch_events(private, &filter, &signed),
            nostr_outbox_runtime::fetch_events(private, &filter, &signed)
        );
        assert_eq!((one.len(), two.len()), (1, 1), "{script:?}: both signed in");
        assert_eq!(signed.sockets().stats().dials, 1, "{script:?}: one socket");
        assert_eq!(
            s.private.seen().auths.len(),
            1,
            "{script:?}: one AUTH for the connection"
        );
    }
}

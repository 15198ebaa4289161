//! Tests of every route kind and of the route checker: each guards one rule of `select`, a
//! route's candidates or `check_route`, and fails when that rule is broken.

use nostr::event::{EventId, Kind};
use nostr::key::{Keys, PublicKey, SecretKey};
use nostr::nips::nip19::{Nip19Coordinate, Nip19Event, Nip19Profile, ToBech32};
use nostr::types::RelayUrl;

use super::*;
use crate::directory::RelayDirectoryBuilder;
use nostr_outbox_core::route_table::RawRelayList;
use nostr_outbox_core::stats::RelayStats;

pub(crate) fn key(n: u8) -> PublicKey {
    Keys::new(SecretKey::from_slice(&[n.max(1); 32]).unwrap()).public_key()
}

fn tags(raw: &[&[&str]]) -> Vec<Vec<String>> {
    raw.iter()
        .map(|t| t.iter().map(|s| s.to_string()).collect())
        .collect()
}

fn r(url: &str, marker: &str) -> Vec<String> {
    let mut t = vec!["r".to_string(), url.to_string()];
    if !marker.is_empty() {
        t.push(marker.to_string());
    }
    t
}

fn p(pk: &PublicKey) -> Vec<String> {
    vec!["p".to_string(), pk.to_hex()]
}

/// Author 1 writes to a, b (reads nowhere); 2 reads p1..p3; 3 reads z3 and shared; 4 reads
/// shared and s4; 5 takes DMs on dm5 and reads r5; 9 is unknown.
fn directory() -> RelayDirectory {
    let mut b = RelayDirectoryBuilder::new(UrlPolicy::default());
    let lists = [
        (
            1,
            vec![r("wss://a.example", "write"), r("wss://b.example", "write")],
        ),
        (
            2,
            vec![
                r("wss://p3.example", "read"),
                r("wss://p1.example", "read"),
                r("wss://p2.example", "read"),
                r("wss://w2.example", "write"),
            ],
        ),
        (
            3,
            vec![
                r("wss://z3.example", "read"),
                r("wss://shared.example", "read"),
            ],
        ),
        (
            4,
            vec![
                r("wss://shared.example", "read"),
                r("wss://s4.example", "read"),
            ],
        ),
        (5, vec![r("wss://r5.example", "")]),
    ];
    for (n, tags) in lists {
        b.add_relay_list(RawRelayList {
            author: key(n),
            created_at: 1,
            tags,
        });
    }
    b.add_dm_list(RawRelayList {
        author: key(5),
        created_at: 1,
        tags: tags(&[&["relay", "wss://dm5.example"]]),
    });
    b.build()
}

fn ctx<'a>(
    dir: &'a RelayDirectory,
    stats: &'a DeliveryStats,
    budget: RouteBudget,
) -> RouteContext<'a> {
    RouteContext {
        directory: dir,
        stats,
        now: 1_000_000,
        budget,
    }
}

fn urls(plan: &RoutePlan) -> Vec<&str> {
    plan.urls().collect()
}

fn reasons<'p>(plan: &'p RoutePlan, url: &str) -> &'p [Reason] {
    &plan
        .target(url)
        .unwrap_or_else(|| panic!("{url} not chosen"))
        .reasons
}

/// A relay that answered nothing ten times in a row.
fn dead() -> RelayStats {
    RelayStats {
        beta: 11.0,
        live_beta: 11.0,
        asked: 10,
        failures: 10,
        updated_at: 1_000_000,
        ..RelayStats::default()
    }
}

fn note(author: u8, tagged: &[u8]) -> PublishQuery {
    PublishQuery {
        author: key(author),
        kind: Kind::TextNote,
        tags: tagged.iter().map(|&n| p(&key(n))).collect(),
    }
}

#[test]
fn publish_goes_to_author_writes_and_tagged_reads_with_reasons() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    let (plan, violations) = note(1, &[2, 9, 1]).plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(
        urls(&plan),
        [
            "wss://a.example",
            "wss://b.example",
            "wss://p1.example",
            "wss://p2.example"
        ]
    );
    assert_eq!(
        reasons(&plan, "wss://a.example"),
        [Reason::AuthorWrite(key(1))]
    );
    // Two of 2's three read relays (the cap), the smaller URLs on a tie; never its write relay.
    assert_eq!(
        reasons(&plan, "wss://p1.example"),
        [Reason::TaggedRead(key(2))]
    );
    assert_eq!(plan.unknown, [key(9)]);
    assert!(plan.cut_off.is_empty());
    assert!(plan.targets.iter().all(|t| t.filters.is_empty()));
}

#[test]
fn a_relay_two_people_read_serves_both_for_one_connection() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let budget = RouteBudget {
        per_person: 1,
        ..RouteBudget::default()
    };
    let plan = note(1, &[3, 4]).plan(&ctx(&dir, &stats, budget));
    assert_eq!(
        reasons(&plan, "wss://shared.example"),
        [Reason::TaggedRead(key(3)), Reason::TaggedRead(key(4))]
    );
    assert_eq!(plan.targets.len(), 3, "{:?}", urls(&plan));
}

#[test]
fn private_messages_go_only_to_dm_inboxes() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    for kind in [Kind::GiftWrap, Kind::PrivateDirectMessage] {
        let query = PublishQuery {
            kind,
            ..note(1, &[5, 2])
        };
        let (plan, violations) = query.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(urls(&plan), ["wss://dm5.example"]);
        assert_eq!(
            reasons(&plan, "wss://dm5.example"),
            [Reason::DmInbox(key(5))]
        );
        // 2 has read relays but no DM inbox: not reached, reported.
        assert_eq!(plan.unknown, [key(2)]);
    }
}

#[test]
fn the_total_cap_cuts_people_last_in_line_and_reports_them() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let budget = RouteBudget {
        max_relays: 2,
        ..RouteBudget::default()
    };
    let (plan, violations) = note(1, &[2, 3, 5]).plan_checked(&ctx(&dir, &stats, budget));
    assert!(violations.is_empty(), "{violations:?}");
    // Breadth first: the author and the first tagged person get a relay each before depth.
    assert_eq!(urls(&plan), ["wss://a.example", "wss://p1.example"]);
    assert_eq!(
        plan.cut_off,
        [Reason::TaggedRead(key(3)), Reason::TaggedRead(key(5))]
    );
}

#[test]
fn dead_relays_sink_below_unknown_ones() {
    let dir = directory();
    let mut stats = DeliveryStats::new();
    stats.set("wss://p1.example", dead());
    let plan = note(1, &[2]).plan(&ctx(&dir, &stats, RouteBudget::default()));
    assert!(
        plan.target("wss://p1.example").is_none(),
        "{:?}",
        urls(&plan)
    );
    assert!(plan.target("wss://p2.example").is_some());
    assert!(plan.target("wss://p3.example").is_some());
    assert!(
        plan.target("wss://p2.example").unwrap().quality
            > relay_quality(&stats, "wss://p1.example", 1_000_000)
    );
}

#[test]
fn plans_are_deterministic_whatever_the_order_lists_arrive_in() {
    let stats = DeliveryStats::new();
    let forward = directory();
    let mut b = RelayDirectoryBuilder::new(UrlPolicy::default());
    for n in [5u8, 4, 3, 2, 1] {
        let list = RawRelayList {
            author: key(n),
            created_at: 1,
            tags: forward
                .write_relays(&key(n))
                .iter()
                .map(|u| r(u, "write"))
                .chain(forward.read_relays(&key(n)).iter().map(|u| r(u, "read")))
                .collect(),
        };
        b.add_relay_list(list);
    }
    let backward = b.build();
    let query = note(1, &[4, 3, 2]);
    let budget = RouteBudget {
        max_relays: 5,
        ..RouteBudget::default()
    };
    let first = query.plan(&ctx(&forward, &stats, budget));
    assert_eq!(first, query.plan(&ctx(&forward, &stats, budget)));
    assert_eq!(first, query.plan(&ctx(&backward, &stats, budget)));
}

#[test]
fn inbox_asks_the_readers_read_relays_for_mentions() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    let mut query = InboxQuery::new(key(5));
    query.kinds = vec![Kind::TextNote];
    query.since = Some(10);
    query.reader_relays = vec!["wss://configured.example".into()];
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(urls(&plan), ["wss://r5.example"]);
    assert_eq!(reasons(&plan, "wss://r5.example"), [Reason::ReaderRead]);
    let filter = &plan.targets[0].filters[0];
    let json = serde_json::to_value(filter).unwrap();
    assert_eq!(json["#p"][0], key(5).to_hex());
    assert_eq!(json["kinds"][0], 1);
    assert_eq!(json["since"], 10);

    // A reader whose list names no read relay (1 only writes) is asked on its configured relays.
    let mut query = InboxQuery::new(key(1));
    query.reader_relays = vec!["wss://Configured.example/".into(), "http://bad".into()];
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(urls(&plan), ["wss://configured.example"]);
    assert_eq!(
        reasons(&plan, "wss://configured.example"),
        [Reason::ReaderRelay]
    );
    // Nobody to ask: reported, not a panic.
    let plan = InboxQuery::new(key(9)).plan(&ctx);
    assert!(plan.targets.is_empty());
    assert_eq!(plan.unknown, [key(9)]);
}

#[test]
fn threads_ask_author_writes_hints_and_tagged_reads_for_replies_and_quotes() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    let id = EventId::from_byte_array([7; 32]);
    let mut event_tags = vec![p(&key(3))];
    event_tags.push(vec![
        "e".into(),
        EventId::from_byte_array([8; 32]).to_hex(),
        "wss://Hint.example".into(),
        "root".into(),
    ]);
    event_tags.push(vec![
        "p".into(),
        key(4).to_hex(),
        "ftp://not-a-relay".into(),
    ]);
    let query = ThreadQuery {
        id,
        author: Some(key(1)),
        tags: event_tags,
        hints: Vec::new(),
        quotes: true,
    };
    let candidates = query.candidates(&ctx);
    assert_eq!(candidates.dropped_hints, 1);
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(
        reasons(&plan, "wss://a.example"),
        [Reason::AuthorWrite(key(1))]
    );
    assert_eq!(reasons(&plan, "wss://hint.example"), [Reason::Hint]);
    assert_eq!(
        reasons(&plan, "wss://shared.example"),
        [Reason::TaggedRead(key(3)), Reason::TaggedRead(key(4))]
    );
    let filters: Vec<serde_json::Value> = plan.targets[0]
        .filters
        .iter()
        .map(|f| serde_json::to_value(f).unwrap())
        .collect();
    assert_eq!(filters[0]["#e"][0], id.to_hex());
    assert_eq!(
        filters[0]["kinds"],
        serde_json::json!([1, 6, 7, 16, 1111, 9735])
    );
    assert_eq!(filters[1]["#q"][0], id.to_hex());
    assert!(
        filters[1].get("kinds").is_none(),
        "a quote may be of any kind"
    );
    assert_eq!(filters[2]["#E"][0], id.to_hex());
    assert_eq!(filters[2]["kinds"], serde_json::json!([1111]));
    assert!(plan.targets.iter().all(|t| t.filters.len() == 3));
}

/// NIP-65: a reply is sent to the replied author's read relays. Author 2 writes to w2 and
/// reads on p1..p3; replies to them are on p1..p3, so the thread asks there too.
#[test]
fn threads_ask_the_authors_read_relays_where_replies_to_them_are_sent() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    let code = Nip19Event::new(EventId::from_byte_array([6; 32]))
        .author(key(2))
        .relays([RelayUrl::parse("wss://hint.example").unwrap()]);
    let query = ThreadQuery::of_nevent(&code);
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(
        urls(&plan),
        [
            "wss://hint.example",
            "wss://p1.example",
            "wss://p2.example",
            "wss://p3.example",
            "wss://w2.example",
        ]
    );
    assert_eq!(
        reasons(&plan, "wss://w2.example"),
        [Reason::AuthorWrite(key(2))]
    );
    for read in ["wss://p1.example", "wss://p2.example", "wss://p3.example"] {
        assert_eq!(reasons(&plan, read), [Reason::AuthorRead(key(2))], "{read}");
    }
    assert_eq!(reasons(&plan, "wss://hint.example"), [Reason::Hint]);

    // An author who only reads somewhere is reached there, not reported unknown; one with no
    // list is.
    for (author, unknown) in [(3, vec![]), (9, vec![key(9)])] {
        let query = ThreadQuery {
            author: Some(key(author)),
            ..query.clone()
        };
        let (plan, violations) = query.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(plan.unknown, unknown, "author {author}");
    }
    let reader_only = ThreadQuery {
        author: Some(key(3)),
        ..query.clone()
    };
    let plan = reader_only.plan(&ctx);
    assert_eq!(
        reasons(&plan, "wss://z3.example"),
        [Reason::AuthorRead(key(3))]
    );

    // The author tagging themself is asked as the author, not again as a tagged person.
    let query = ThreadQuery {
        tags: vec![p(&key(2)), p(&key(3))],
        ..query
    };
    let candidates = query.candidates(&ctx);
    assert!(candidates.group(&Reason::TaggedRead(key(2))).is_none());
    assert!(candidates.group(&Reason::TaggedRead(key(3))).is_some());

    // A tight budget cuts depth first: each group gets one relay before any gets a second,
    // so the author's read relays are not crowded out by their write relays or the hints.
    let tight = RouteBudget {
        max_relays: 4,
        ..RouteBudget::default()
    };
    let ctx = super::tests::ctx(&dir, &stats, tight);
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    let served: Vec<Reason> = plan
        .targets
        .iter()
        .flat_map(|t| t.reasons.iter().copied())
        .collect();
    for reason in [
        Reason::AuthorWrite(key(2)),
        Reason::AuthorRead(key(2)),
        Reason::Hint,
        Reason::TaggedRead(key(3)),
    ] {
        assert!(served.contains(&reason), "{reason} not served: {plan:?}");
    }
    // `per_author` caps the read relays as it caps the write relays.
    let one = RouteBudget {
        per_author: 1,
        ..RouteBudget::default()
    };
    let ctx = super::tests::ctx(&dir, &stats, one);
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    let reads = plan
        .targets
        .iter()
        .filter(|t| t.reasons.contains(&Reason::AuthorRead(key(2))))
        .count();
    assert_eq!(reads, 1);
}

/// The second pass asks each replier's write relays the first pass did not ask, with the
/// thread's filters; a replier whose relays were all asked adds nothing, an unknown one is
/// reported.
#[test]
fn repliers_are_asked_on_their_write_relays_not_yet_asked() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let ctx = ctx(&dir, &stats, RouteBudget::default());
    let thread = ThreadQuery::of_nevent(&Nip19Event::new(EventId::from_byte_array([6; 32])));
    let query = RepliersQuery {
        thread: thread.clone(),
        repliers: vec![key(1), key(2), key(1), key(9)],
        asked: vec!["wss://a.example".into(), "wss://w2.example".into()],
    };
    let (plan, violations) = query.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(urls(&plan), ["wss://b.example"]);
    assert_eq!(
        reasons(&plan, "wss://b.example"),
        [Reason::AuthorWrite(key(1))]
    );
    assert_eq!(plan.unknown, [key(9)]);
    assert_eq!(plan.targets[0].filters, thread.filters());
    // Nothing new to ask: an empty plan, not an error.
    let none = RepliersQuery {
        repliers: vec![key(2)],
        ..query
    };
    let (plan, violations) = none.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    assert!(plan.targets.is_empty() && plan.unknown.is_empty());
}

#[test]
fn events_found_are_told_apart_by_their_relation_to_the_thread() {
    use nostr::event::{EventBuilder, FinalizeEvent, Tag};
    let keys = Keys::generate();
    let root = EventId::from_byte_array([6; 32]);
    let reply_id = EventId::from_byte_array([7; 32]);
    let other = EventId::from_byte_array([8; 32]);
    let thread: std::collections::HashSet<EventId> = [reply_id].into();
    let event = |kind: u16, tags: &[&[&str]]| {
        let tags = tags.iter().map(|t| Tag::parse(t.iter().copied()).unwrap());
        EventBuilder::new(Kind::from_u16(kind), "")
            .tags(tags)
            .finalize(&keys)
            .unwrap()
    };
    let (r, n, o) = (root.to_hex(), reply_id.to_hex(), other.to_hex());
    let cases: [(nostr::event::Event, Relation); 13] = [
        (event(1, &[&["e", &r, "", "root"]]), Relation::Reply),
        (event(1, &[&["e", &r]]), Relation::Reply),
        // A reply to a reply in the thread.
        (
            event(1, &[&["e", &o, "", "root"], &["e", &n, "", "reply"]]),
            Relation::Reply,
        ),
        (event(1111, &[&["E", &r], &["e", &o]]), Relation::Reply),
        (event(1, &[&["q", &r]]), Relation::Quote),
        (
            event(1, &[&["e", &r, "", "mention"], &["q", &r]]),
            Relation::Quote,
        ),
        (event(1, &[&["e", &r, "", "mention"]]), Relation::Mention),
        (event(7, &[&["e", &r]]), Relation::Reaction),
        (event(6, &[&["e", &r]]), Relation::Repost),
        (event(16, &[&["e", &r]]), Relation::Repost),
        (event(9735, &[&["e", &r]]), Relation::Zap),
        // Malformed or elsewhere: not a reply.
        (
            event(1, &[&["e", "not-hex"], &["e"], &["e", &o]]),
            Relation::Mention,
        ),
        (event(30023, &[&["e", &r]]), Relation::Mention),
    ];
    for (event, want) in cases {
        assert_eq!(relation(&event, &root, &thread), want, "{:?}", event.tags);
    }
    assert_eq!(Relation::Reply.label(), "reply");
    assert_eq!(Relation::Reaction.plural(), "reactions");
}

#[test]
fn pointers_ask_hints_first_then_the_authors_write_relays() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let budget = RouteBudget {
        max_relays: 3,
        hints: 2,
        ..RouteBudget::default()
    };
    let ctx = ctx(&dir, &stats, budget);
    let id = EventId::from_byte_array([3; 32]);
    let relays = ["wss://h1.example", "wss://h2.example", "wss://h3.example"]
        .map(|u| RelayUrl::parse(u).unwrap());
    let code = Nip19Event::new(id)
        .author(key(1))
        .relays(relays.clone())
        .to_bech32()
        .unwrap();
    let pointer = Pointer::parse(&format!("nostr:{code}")).unwrap();
    assert_eq!(pointer.author(), Some(key(1)));
    let (plan, violations) = pointer.plan_checked(&ctx);
    assert!(violations.is_empty(), "{violations:?}");
    // Two hints (the hint budget), then the author's best write relay within the total of 3.
    assert_eq!(
        urls(&plan),
        ["wss://a.example", "wss://h1.example", "wss://h2.example"]
    );
    assert_eq!(plan.cut_off, Vec::<Reason>::new());
    let json = serde_json::to_value(&plan.targets[0].filters[0]).unwrap();
    assert_eq!(json["ids"][0], id.to_hex());

    let profile = Nip19Profile::new(key(2), [relays[0].clone()])
        .to_bech32()
        .unwrap();
    let Pointer::Profile {
        pubkey,
        relays: hinted,
    } = Pointer::parse(&profile).unwrap()
    else {
        panic!("not a profile");
    };
    assert_eq!((pubkey, hinted.len()), (key(2), 1));
    let coordinate =
        nostr::nips::nip01::Coordinate::new(Kind::LongFormTextNote, key(1)).identifier("post");
    let naddr = Nip19Coordinate::new(coordinate.clone(), [relays[1].clone()])
        .to_bech32()
        .unwrap();
    let plan = Pointer::parse(&naddr).unwrap().plan(&ctx);
    let json = serde_json::to_value(&plan.targets[0].filters[0]).unwrap();
    assert_eq!(json["#d"][0], "post");
    assert_eq!(json["kinds"][0], 30023);
    assert_eq!(reasons(&plan, "wss://h2.example"), [Reason::Hint]);

    assert_eq!(Pointer::parse(&id.to_hex()).unwrap().author(), None);
    let secret = Keys::generate().secret_key().to_bech32().unwrap();
    assert_eq!(Pointer::parse(&secret), Err(PointerError::SecretKey));
    assert_eq!(
        Pointer::parse("nevent1garbage"),
        Err(PointerError::Malformed)
    );
    assert_eq!(
        Pointer::parse(&"n".repeat(10_000)),
        Err(PointerError::TooLong)
    );

    let tag = vec![
        "e".to_string(),
        id.to_hex(),
        "wss://t.example".into(),
        String::new(),
        key(1).to_hex(),
    ];
    let from_tag = Pointer::from_tag(&tag).unwrap();
    assert_eq!(
        (from_tag.author(), from_tag.hints()),
        (Some(key(1)), &["wss://t.example".to_string()][..])
    );
    // As a feed table's hints: about the author, from a pointer; none without an author.
    assert_eq!(
        from_tag.table_hints(),
        [nostr_outbox_core::Hint {
            author: key(1),
            relay: "wss://t.example".into(),
            source: nostr_outbox_core::HintSource::Pointer,
        }]
    );
    let anonymous = vec!["e".to_string(), id.to_hex(), "wss://t.example".into()];
    assert!(Pointer::from_tag(&anonymous)
        .unwrap()
        .table_hints()
        .is_empty());
    let a_tag = vec!["a".to_string(), format!("30023:{}:post", key(1).to_hex())];
    assert!(matches!(
        Pointer::from_tag(&a_tag),
        Some(Pointer::Address { .. })
    ));
    assert_eq!(Pointer::from_tag(&["e".to_string(), "zz".into()]), None);
}

/// The checker: a sound plan, then one break per violation kind, each reported.
mod checker {
    use super::*;

    fn sound() -> (RoutePlan, Candidates, RouteBudget) {
        let dir = directory();
        let stats = DeliveryStats::new();
        let budget = RouteBudget {
            max_relays: 4,
            ..RouteBudget::default()
        };
        let ctx = ctx(&dir, &stats, budget);
        let query = note(1, &[2, 3]);
        let candidates = query.candidates(&ctx);
        let plan = query.plan(&ctx);
        assert!(check_route(&plan, &candidates, &budget).is_empty());
        (plan, candidates, budget)
    }

    fn broken(change: impl FnOnce(&mut RoutePlan, &mut RouteBudget)) -> Vec<RouteViolation> {
        let (mut plan, candidates, mut budget) = sound();
        change(&mut plan, &mut budget);
        check_route(&plan, &candidates, &budget)
    }

    #[test]
    fn a_plan_over_budget_is_caught() {
        let v = broken(|_, budget| budget.max_relays = 3);
        assert!(
            v.contains(&RouteViolation::OverBudget { targets: 4, max: 3 }),
            "{v:?}"
        );
    }

    #[test]
    fn a_tagged_person_left_out_silently_is_caught() {
        let v = broken(|plan, _| plan.targets.retain(|t| t.url != "wss://shared.example"));
        assert_eq!(v, [RouteViolation::Unreached(Reason::TaggedRead(key(3)))]);
        // Reported as cut off while the budget still had room: also caught.
        let v = broken(|plan, _| {
            plan.targets.retain(|t| t.url != "wss://shared.example");
            plan.cut_off.push(Reason::TaggedRead(key(3)));
        });
        assert_eq!(v, [RouteViolation::FalseCutOff(Reason::TaggedRead(key(3)))]);
        // Reported as left out while its cap allowed it: also caught.
        let v = broken(|plan, _| {
            plan.targets.retain(|t| t.url != "wss://shared.example");
            plan.left_out.push(Reason::TaggedRead(key(3)));
        });
        assert_eq!(
            v,
            [RouteViolation::FalseLeftOut(Reason::TaggedRead(key(3)))]
        );
    }

    #[test]
    fn a_cap_of_zero_reports_the_people_it_drops() {
        let (dir, stats) = (directory(), DeliveryStats::new());
        let budget = RouteBudget {
            per_person: 0,
            ..RouteBudget::default()
        };
        let ctx = ctx(&dir, &stats, budget);
        let query = note(1, &[2, 3]);
        let (plan, violations) = query.plan_checked(&ctx);
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(
            plan.left_out,
            [Reason::TaggedRead(key(2)), Reason::TaggedRead(key(3))]
        );
        assert!(plan.cut_off.is_empty());
        // Dropping them without saying so is caught.
        let mut silent = plan.clone();
        silent.left_out.clear();
        let v = check_route(&silent, &query.candidates(&ctx), &budget);
        assert_eq!(
            v,
            [
                RouteViolation::Unreached(Reason::TaggedRead(key(2))),
                RouteViolation::Unreached(Reason::TaggedRead(key(3)))
            ]
        );
    }

    #[test]
    fn relays_outside_the_candidates_and_over_a_persons_cap_are_caught() {
        let v = broken(|plan, _| {
            plan.targets[0].url = "wss://elsewhere.example".into();
        });
        assert!(
            v.iter().any(|x| matches!(x, RouteViolation::NotACandidate { url, .. } if url == "wss://elsewhere.example")),
            "{v:?}"
        );
        let v = broken(|plan, budget| {
            budget.max_relays = 10;
            for url in ["wss://p2.example", "wss://p3.example"] {
                let mut extra = plan.target("wss://p1.example").unwrap().clone();
                extra.url = url.into();
                plan.targets.push(extra);
            }
        });
        assert!(
            v.contains(&RouteViolation::OverCap {
                reason: Reason::TaggedRead(key(2)),
                count: 3,
                cap: 2
            }),
            "{v:?}"
        );
    }

    #[test]
    fn duplicates_missing_reasons_and_wrong_filters_are_caught() {
        let v = broken(|plan, budget| {
            budget.max_relays = 10;
            let twice = plan.targets[0].clone();
            plan.targets.push(twice);
            plan.targets[1].reasons.clear();
            plan.targets[2].filters.push(nostr::filter::Filter::new());
        });
        let url = |i: usize| sound().0.targets[i].url.clone();
        assert!(
            v.contains(&RouteViolation::DuplicateTarget(url(0))),
            "{v:?}"
        );
        assert!(v.contains(&RouteViolation::NoReason(url(1))), "{v:?}");
        assert!(v.contains(&RouteViolation::WrongFilters(url(2))), "{v:?}");
    }
}

mod random {
    //! Random directories, stats and budgets: every route's plan passes its own checker.
    use proptest::prelude::*;

    use super::*;

    fn world(lists: Vec<Vec<(u8, u8)>>, failing: Vec<u8>) -> (RelayDirectory, DeliveryStats) {
        let mut b = RelayDirectoryBuilder::new(UrlPolicy::default());
        for (i, entries) in lists.into_iter().enumerate() {
            let person = key(i as u8 + 1);
            let marker = |m: u8| ["", "read", "write"][usize::from(m % 3)];
            b.add_relay_list(RawRelayList {
                author: person,
                created_at: 1,
                tags: entries
                    .iter()
                    .map(|&(relay, m)| r(&format!("wss://r{}.example", relay % 12), marker(m)))
                    .collect(),
            });
            b.add_dm_list(RawRelayList {
                author: person,
                created_at: 1,
                tags: entries
                    .iter()
                    .filter(|(_, m)| m % 2 == 0)
                    .map(|&(relay, _)| {
                        vec!["relay".into(), format!("wss://r{}.example", relay % 12)]
                    })
                    .collect(),
            });
        }
        let mut stats = DeliveryStats::new();
        for relay in failing {
            stats.set(format!("wss://r{}.example", relay % 12), dead());
        }
        (b.build(), stats)
    }

    proptest! {
        #[test]
        fn every_route_passes_its_checker(
            lists in prop::collection::vec(prop::collection::vec((0u8..12, 0u8..3), 0..6), 1..8),
            failing in prop::collection::vec(0u8..12, 0..4),
            tagged in prop::collection::vec(1u8..10, 0..8),
            author in 1u8..10,
            kind in prop::sample::select(vec![1u16, 7, 14, 1059]),
            max_relays in 0usize..8,
            per_person in 0usize..3,
            per_author in 0usize..4,
            hints in 0usize..3,
        ) {
            let (dir, stats) = world(lists, failing);
            let budget = RouteBudget { max_relays, per_person, per_author, hints };
            let ctx = ctx(&dir, &stats, budget);
            let mut event_tags: Vec<Vec<String>> = tagged.iter().map(|&n| p(&key(n))).collect();
            event_tags.push(vec!["e".into(), EventId::from_byte_array([1; 32]).to_hex(), "wss://r3.example".into()]);
            let publish = PublishQuery { author: key(author), kind: Kind::from_u16(kind), tags: event_tags.clone() };
            let thread = ThreadQuery { id: EventId::from_byte_array([2; 32]), author: Some(key(author)), tags: event_tags, hints: vec!["wss://r5.example".into()], quotes: true };
            let repliers = RepliersQuery { thread: thread.clone(), repliers: tagged.iter().map(|&n| key(n)).collect(), asked: vec!["wss://r3.example".into()] };
            let pointer = Pointer::Profile { pubkey: key(author), relays: vec!["wss://r7.example".into(), "junk".into()] };
            let mut inbox = InboxQuery::new(key(author));
            inbox.reader_relays = vec!["wss://r1.example".into()];
            let plans = [
                publish.plan_checked(&ctx),
                thread.plan_checked(&ctx),
                repliers.plan_checked(&ctx),
                pointer.plan_checked(&ctx),
                inbox.plan_checked(&ctx),
            ];
            for (plan, violations) in &plans {
                prop_assert!(violations.is_empty(), "{:?}: {:?}", plan.kind, violations);
            }
            prop_assert_eq!(&plans[0].0, &publish.plan(&ctx));
        }
    }
}

/// Past the handful of URLs numbered by a scan, a URL seen before keeps its number: a relay
/// thirty groups offer is one target serving all thirty, whichever way it was numbered.
#[test]
fn a_relay_many_groups_offer_is_one_target_past_the_scanned_few() {
    let dir = directory();
    let stats = DeliveryStats::new();
    let budget = RouteBudget {
        max_relays: 100,
        per_person: 1,
        ..RouteBudget::default()
    };
    let mut candidates = Candidates::default();
    for n in 1..=30u8 {
        candidates.push(
            Reason::TaggedRead(key(n)),
            [
                "wss://a-shared.example".to_string(),
                format!("wss://z-own-{n}.example"),
            ],
            1,
        );
    }
    let ctx = ctx(&dir, &stats, budget);
    let plan = select(RouteKind::Publish, &candidates, Vec::new(), &ctx);
    assert_eq!(urls(&plan), ["wss://a-shared.example"]);
    assert_eq!(reasons(&plan, "wss://a-shared.example").len(), 30);
    assert!(check_route(&plan, &candidates, &budget).is_empty());
}

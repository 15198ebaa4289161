//! The recall strategy: conformance, config errors, and that what it learns moves its plans.

use nostr_outbox_core::stats::{AuthorRound, RelayRound, RoundReport};
use nostr_outbox_core::testkit::{
    check_strategy, relay_list, table_builder, table_with_lists, test_key,
};
use nostr_outbox_core::{check_plan, DeliveryStats, PlanContext, RouteTable, Router};
use nostr_outbox_recall::RecallConfig;

/// Follows are `test_key(0..n)`, one list each.
fn table(lists: &[(u64, &[&str])]) -> RouteTable {
    table_with_lists(
        lists.len() as u64,
        lists.iter().map(|(k, relays)| relay_list(*k, relays)),
    )
}

/// `follows` follows, each listing every one of `relays`.
fn all_on(follows: u64, relays: &[&str]) -> RouteTable {
    table_with_lists(follows, (0..follows).map(|k| relay_list(k, relays)))
}

fn router(budget: usize, extra: &str) -> Router {
    Router::from_toml(&format!(
        "max_connections = {budget}\n[strategy]\ntype = \"recall\"\n{extra}"
    ))
    .unwrap()
}

#[test]
fn passes_the_conformance_suite() {
    let failures = check_strategy(&RecallConfig::default());
    assert!(failures.is_empty(), "{failures:#?}");
    let no_exploration = RecallConfig {
        explore: false,
        ..RecallConfig::default()
    };
    assert!(check_strategy(&no_exploration).is_empty());
}

#[test]
fn bad_parameters_name_their_keys() {
    let err = Router::from_toml(
        "[strategy]\ntype = \"recall\"\nper_author = 0\ndisclosure = -1.0\nsilent_weight = 2.0\n",
    )
    .unwrap_err();
    let keys: Vec<_> = err.issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "strategy.per_author",
            "strategy.disclosure",
            "strategy.silent_weight"
        ]
    );
}

/// Every follow writes to a hub that keeps only recent notes and to one of two small relays:
/// `deep.example` keeps everything, `other` is either dead or keeps as little as the hub.
fn world(other: &str) -> RouteTable {
    let hub = "wss://hub.example";
    let deep = "wss://deep.example";
    let lists: Vec<(u64, Vec<&str>)> = (0..12)
        .map(|i| (i, vec![hub, if i % 2 == 0 { deep } else { other }]))
        .collect();
    let lists: Vec<(u64, &[&str])> = lists.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    table(&lists)
}

/// What a client would observe asking these relays: the hub and the shallow relay return 2 notes
/// per follow, the deep relay 20, the dead relay never answers.
fn observe(t: &RouteTable, plan: &nostr_outbox_core::Plan) -> RoundReport {
    RoundReport {
        relays: plan
            .entries(t)
            .into_iter()
            .map(|e| {
                let url = t.url(e.relay).to_string();
                let per_author = match url.as_str() {
                    "wss://deep.example" => 20,
                    "wss://hub.example" | "wss://home.example" | "wss://shallow.example" => 2,
                    _ => 0,
                };
                RelayRound {
                    answered: url != "wss://dead.example",
                    authors: e
                        .authors
                        .iter()
                        .map(|&a| AuthorRound::counted(*t.pubkey(a), per_author))
                        .collect(),
                    url,
                    compare_only: false,
                }
            })
            .collect(),
    }
}

/// Picks of (deep, other, hub) with budget 2 over six sessions, summed over trials, for the
/// first three sessions and the last three.
fn learned_picks(other: &str, config: &str) -> [[u32; 3]; 2] {
    let t = world(other);
    let ids = ["wss://deep.example", other, "wss://hub.example"].map(|u| t.relay_id(u).unwrap());
    let mut picks = [[0u32; 3]; 2];
    for trial in 0..40u64 {
        let mut stats = DeliveryStats::new();
        // Two connections for three relays: completeness is learned by comparing relays asked
        // about the same follows, so the plan must be able to ask two at once.
        let mut r = router(2, config);
        for session in 0..6u64 {
            let plan = r.plan_with(
                &t,
                &stats,
                PlanContext::at(session * 3600).seed(trial * 100 + session),
            );
            assert!(check_plan(&plan, &t, r.limits()).is_empty());
            let phase = usize::from(session >= 3);
            for a in plan.routed() {
                let slot = ids.iter().position(|&x| x == a.relay).unwrap();
                picks[phase][slot] += 1;
            }
            stats.record_round(&observe(&t, &plan), session * 3600);
        }
    }
    eprintln!(
        "{other}: picks (deep, other, hub): sessions 0-2 {:?}, 3-5 {:?}",
        picks[0], picks[1]
    );
    picks
}

#[test]
fn learning_drops_a_dead_relay() {
    let [before, after] = learned_picks("wss://dead.example", "");
    assert!(after[1] < before[1], "dead relay chosen less once learned");
    assert!(after[0] > after[1] * 4, "the deep relay beats the dead one");
}

#[test]
fn learned_completeness_picks_the_relay_that_keeps_history() {
    // Two relays serving the same follows, equally alive; one returned far less than the other
    // when both were asked. The URL order favours the shallow one on a tie.
    let shallow = "wss://a-shallow.example";
    let deep = "wss://z-deep.example";
    let t = all_on(4, &[shallow, deep]);
    let mut stats = DeliveryStats::new();
    for run in 0..5 {
        let report = RoundReport {
            relays: [(shallow, 2), (deep, 20)]
                .iter()
                .map(|&(url, events)| {
                    RelayRound::new(
                        url,
                        true,
                        (0..4)
                            .map(|i| AuthorRound::counted(test_key(i), events))
                            .collect(),
                    )
                })
                .collect(),
        };
        stats.record_round(&report, run);
    }
    let pick = |config: &str| {
        let plan = router(1, config).plan_with(&t, &stats, PlanContext::at(5).seed(0));
        t.url(plan.routed()[0].relay).to_string()
    };
    assert_eq!(pick("explore = false\n"), deep);
    assert_eq!(
        pick("explore = false\ncompleteness = false\npairs = false\n"),
        shallow
    );
}

#[test]
fn prolific_follows_get_more_relays_than_silent_ones_under_the_disclosure_budget() {
    // Six follows, each on three relays; follow 0 is prolific, the others were seen silent.
    let relays = ["wss://a.example", "wss://b.example", "wss://c.example"];
    let t = all_on(6, &relays);
    let mut stats = DeliveryStats::new();
    let report = RoundReport {
        relays: relays
            .iter()
            .map(|url| {
                RelayRound::new(
                    url.to_string(),
                    true,
                    (0..6)
                        .map(|i| AuthorRound::counted(test_key(i), if i == 0 { 50 } else { 0 }))
                        .collect(),
                )
            })
            .collect(),
    };
    stats.record_round(&report, 0);
    let mut r = router(3, "explore = false\nper_author = 3\ndisclosure = 1.5\n");
    let plan = r.plan_with(&t, &stats, PlanContext::at(0).seed(1));
    let asked: Vec<usize> = t.authors().map(|a| plan.asked(a).len()).collect();
    assert_eq!(
        asked[0], 3,
        "the prolific follow keeps all three: {asked:?}"
    );
    assert!(asked.iter().sum::<usize>() <= 9, "1.5 × 6 listed follows");
    assert!(asked[1..].iter().all(|&n| n >= 1), "everyone keeps a relay");
}

/// A monitor's liveness prior moves the first plan: every follow writes to two relays, one of
/// which a monitor saw online an hour ago and the other not for two months. With one
/// connection and no draws, the relay leaning alive is the one asked, whichever sorts first.
#[test]
fn a_monitor_prior_steers_the_first_plan() {
    use nostr_outbox_client::{apply_monitor_prior, MonitorReport};
    use nostr_outbox_core::UrlPolicy;
    const NOW: u64 = 1_767_225_600;
    for (alive, dead) in [
        ("wss://a.example", "wss://b.example"),
        ("wss://b.example", "wss://a.example"),
    ] {
        let lists: Vec<(u64, &[&str])> = (0..6)
            .map(|i| (i, &["wss://a.example", "wss://b.example"][..]))
            .collect();
        let t = table(&lists);
        let mut stats = DeliveryStats::new();
        let reports = [
            MonitorReport::seen(alive, NOW - 3_600),
            MonitorReport::seen(dead, NOW - 60 * 86_400),
        ];
        apply_monitor_prior(&mut stats, &reports, &UrlPolicy::default(), NOW);
        let mut r = router(1, "explore = false\n");
        let plan = r.plan_with(&t, &stats, PlanContext::at(NOW).seed(1));
        let asked: Vec<&str> = plan.routed().iter().map(|a| t.url(a.relay)).collect();
        assert_eq!(asked, [alive], "alive {alive}");
    }
}

const DAY: u64 = 86_400;
const NOW: u64 = 1_800_000_000;

/// What `url` did for follows `test_key(0..4)`: if it answered, `events` notes each, the
/// oldest `days` old and the newest a day old.
fn relay_round(url: &str, answered: bool, events: u32, days: u64) -> RelayRound {
    RelayRound::new(
        url,
        answered,
        (0..4)
            .map(|i| AuthorRound {
                author: test_key(i),
                events: if answered { events } else { 0 },
                oldest: NOW - days * DAY,
                newest: NOW - DAY,
                capped: false,
                missed: 0,
            })
            .collect(),
    )
}

/// The relays a plan with `budget` connections and `config` routes to at `now`, sorted.
fn routed_urls(
    t: &RouteTable,
    stats: &DeliveryStats,
    budget: usize,
    config: &str,
    now: u64,
) -> Vec<String> {
    let plan = router(budget, config).plan_with(t, stats, PlanContext::at(now).seed(0));
    let mut urls: Vec<String> = (plan.routed().iter())
        .map(|a| t.url(a.relay).to_string())
        .collect();
    urls.sort();
    urls
}

/// Two relays that both keep a month overlap: together they return that month and nothing
/// older. Every follow writes to both and to a deep relay that keeps a year but lost a third of
/// the notes; with two connections the plan takes the deep relay and one monthly one, where
/// counting the monthly relays as independent chances (no depth) takes both of them.
#[test]
fn relays_that_keep_the_same_month_do_not_add_up() {
    let now = NOW;
    let relays = [
        "wss://month-a.example",
        "wss://month-b.example",
        "wss://year.example",
    ];
    let t = all_on(4, &relays);
    let mut stats = DeliveryStats::new();
    let answer = |url: &str, events: u32, days: u64| relay_round(url, true, events, days);
    for run in 0..3 {
        let report = RoundReport {
            relays: vec![
                answer(relays[0], 30, 30),
                answer(relays[1], 30, 30),
                answer(relays[2], 240, 360),
            ],
        };
        stats.record_round(&report, now + run);
    }
    let picks = |config: &str| routed_urls(&t, &stats, 2, config, now + 3);
    let with_depth = picks("explore = false\n");
    assert!(
        with_depth.contains(&relays[2].to_string()),
        "{with_depth:?}"
    );
    assert_eq!(with_depth.len(), 2, "{with_depth:?}");
    assert_eq!(
        picks("explore = false\ndepth = false\n"),
        [relays[0], relays[1]],
        "without depth the two monthly relays look best"
    );
}

#[test]
fn the_learning_knobs_are_bounded() {
    let err = Router::from_toml(
        "[strategy]\ntype = \"recall\"\ndead_share = 1.0\nwindow_days = -3.0\nrecent_weight = inf\n",
    )
    .unwrap_err();
    let text: Vec<String> = err.issues.iter().map(|i| i.to_string()).collect();
    assert_eq!(err.issues.len(), 3, "{text:?}");
    assert!(
        text.iter()
            .any(|t| t.contains("dead_share") && t.contains("[0, 1)")),
        "{text:?}"
    );
    assert!(text.iter().any(|t| t.contains("window_days")), "{text:?}");
    assert!(text.iter().any(|t| t.contains("recent_weight")), "{text:?}");
    assert!(Router::from_toml("[strategy]\ntype = \"recall\"\nbeyond_weight = 1.0\n").is_ok());
}

#[test]
fn a_weeks_plan_and_a_years_plan_ask_different_relays() {
    let now = NOW;
    // One relay answers most runs but keeps a month; the other keeps a year but is often down.
    let (month, year) = ("wss://month.example", "wss://year.example");
    let t = all_on(4, &[month, year]);
    let mut stats = DeliveryStats::new();
    for run in 0..3 {
        let report = RoundReport {
            relays: vec![
                relay_round(month, true, 30, 30),
                relay_round(year, run == 0, 360, 360),
            ],
        };
        stats.record_round(&report, now + run);
    }
    let pick = |config: &str, days: u64| {
        let ctx = PlanContext::at(now + 3).seed(0).window(days * DAY);
        let plan = router(1, config).plan_with(&t, &stats, ctx);
        let urls: Vec<&str> = plan.routed().iter().map(|a| t.url(a.relay)).collect();
        assert_eq!(urls.len(), 1, "{urls:?}");
        urls[0].to_string()
    };
    assert_eq!(pick("", 7), month, "this week: the relay that answers");
    assert_eq!(pick("", 365), year, "this year: the relay that keeps it");
    assert_eq!(
        pick("windowed = false\n", 7),
        year,
        "not windowed, the week is planned as a year"
    );
}

/// A follow without a list is routed where it was hinted; without the hint it is residual.
#[test]
fn a_follow_without_a_list_is_asked_where_it_was_hinted() {
    use nostr_outbox_core::HintSource;
    let build = |hinted: bool| {
        let mut b = table_builder(4);
        for k in 0..3 {
            b.add_list(relay_list(k, &["wss://a.example"]));
        }
        if hinted {
            b.hint(test_key(3), "wss://c.example", HintSource::ContactList);
        }
        b.build()
    };
    for hinted in [false, true] {
        let t = build(hinted);
        let mut r = router(5, "");
        let plan = r.plan_with(&t, &DeliveryStats::new(), PlanContext::at(0));
        assert!(check_plan(&plan, &t, r.limits()).is_empty());
        let lonely = t.author_id(&test_key(3)).unwrap();
        assert_eq!(
            plan.residual().contains(&lonely),
            !hinted,
            "hinted: {hinted}"
        );
        if hinted {
            let c = t.relay_id("wss://c.example").unwrap();
            assert_eq!(plan.asked(lonely), vec![c]);
        }
    }
}

/// A hint at one of the reader's relays (a residual follow's notes seen arriving there) never
/// spends a connection: the residual asks the reader's relays about the follow anyway.
#[test]
fn a_hint_at_a_reader_relay_leaves_the_follow_to_the_residual() {
    use nostr_outbox_core::HintSource;
    let mut b = table_builder(3);
    for k in 0..2 {
        b.add_list(relay_list(k, &["wss://a.example"]));
    }
    b.hint(test_key(2), "wss://home.example", HintSource::SeenOn);
    let t = b.build();
    let mut r = router(5, "");
    let plan = r.plan_with(&t, &DeliveryStats::new(), PlanContext::at(0));
    let lonely = t.author_id(&test_key(2)).unwrap();
    let home = t.relay_id("wss://home.example").unwrap();
    assert!(plan.residual().contains(&lonely));
    assert!(plan.routed().iter().all(|a| a.relay != home), "{plan:?}");
}

/// One answer from a relay, on a network where every relay that answered kept answering and
/// held all it was asked for, is judged from that network (`empirical_priors`): follows 0–3
/// are on `shared.example`, the prolific 0 and 1 also on `second.example`, and 4 and 5 only on
/// their own `own.example`. With two connections the plan takes the follows' own relay, where
/// a uniform prior (one answer: two chances in three) makes a second relay for 0 and 1 look
/// worth more than 4 and 5's only one.
#[test]
fn one_answer_is_judged_from_how_relays_that_answered_did() {
    let shared = "wss://shared.example";
    let second = "wss://second.example";
    let own = "wss://own.example";
    let (both, alone, mine) = ([shared, second], [shared], [own]);
    let lists: Vec<(u64, &[&str])> = vec![
        (0, &both),
        (1, &both),
        (2, &alone),
        (3, &alone),
        (4, &mine),
        (5, &mine),
    ];
    let t = table(&lists);
    let notes = |i: u64| {
        if i < 2 {
            300
        } else if i < 4 {
            20
        } else {
            150
        }
    };
    let answer = |url: &str, follows: &[u64]| {
        RelayRound::new(
            url,
            true,
            follows
                .iter()
                .map(|&i| AuthorRound {
                    author: test_key(i),
                    events: notes(i),
                    oldest: NOW - 360 * DAY,
                    newest: NOW - DAY,
                    capped: false,
                    missed: 0,
                })
                .collect(),
        )
    };
    let mut stats = DeliveryStats::new();
    let report = RoundReport {
        relays: vec![
            answer(shared, &[0, 1, 2, 3]),
            answer(second, &[0, 1]),
            answer(own, &[4, 5]),
        ],
    };
    stats.record_round(&report, NOW);
    let picks = |config: &str| routed_urls(&t, &stats, 2, config, NOW + 1);
    assert_eq!(picks(""), [own, shared]);
    assert_eq!(
        picks("empirical_priors = false\n"),
        [second, shared],
        "with a uniform prior the second relay of the prolific follows looks worth more"
    );
}

/// The reader's relays are connected for the residual anyway, so routing follows to one of
/// them spends none of the budget: follows 0–2 list the reader's `home.example` (the relay
/// most of them share), 3 lists only `a.example`. With one connection the plan asks home about
/// 0–2 and still has its connection for `a.example`.
#[test]
fn a_reader_relay_in_the_pool_costs_none_of_the_budget() {
    let mut b = table_builder(4);
    for k in 0..3 {
        b.add_list(relay_list(k, &["wss://home.example"]));
    }
    b.add_list(relay_list(3, &["wss://a.example"]));
    let t = b.build();
    let mut r = router(1, "");
    let plan = r.plan_with(&t, &DeliveryStats::new(), PlanContext::at(0));
    assert!(check_plan(&plan, &t, r.limits()).is_empty());
    let urls: Vec<&str> = plan.routed().iter().map(|a| t.url(a.relay)).collect();
    assert_eq!(urls, ["wss://a.example", "wss://home.example"], "{plan:?}");
    assert!(plan.residual().is_empty(), "{plan:?}");
}

/// Four follows list the same two relays, each keeping a year; a budget of 1.6 relays per
/// follow allows six of the eight (follow, relay) pairs.
fn pairs_asked(rounds: &[RoundReport]) -> usize {
    let relays = ["wss://a.example", "wss://b.example"];
    let t = all_on(4, &relays);
    let mut stats = DeliveryStats::new();
    for (i, round) in rounds.iter().enumerate() {
        stats.record_round(round, NOW + i as u64);
    }
    let plan =
        router(2, "explore = false\n").plan_with(&t, &stats, PlanContext::at(NOW + 9).seed(0));
    plan.routed().iter().map(|a| a.authors.len()).sum()
}

/// `url` answered with `events` notes of each follow, lacking `missed` another relay had.
fn answered(url: &str, events: u32, missed: u32) -> RelayRound {
    let mut r = relay_round(url, true, events, 360);
    for a in &mut r.authors {
        a.missed = missed;
    }
    r
}

#[test]
fn a_follows_relays_stay_asked_until_one_is_seen_holding_what_the_other_held() {
    // One relay asked alone shows nothing of what the other holds: both stay asked.
    let alone = RoundReport {
        relays: vec![answered("wss://a.example", 10, 0)],
    };
    assert_eq!(pairs_asked(&[alone]), 8);
    // Seen side by side, each lacking notes the other had: both still add notes.
    let both_partial = RoundReport {
        relays: vec![
            answered("wss://a.example", 8, 2),
            answered("wss://b.example", 8, 2),
        ],
    };
    assert_eq!(pairs_asked(&[both_partial]), 8);
    // One seen holding all the other held: the budget drops pairs of the other.
    let one_complete = RoundReport {
        relays: vec![
            answered("wss://a.example", 10, 0),
            answered("wss://b.example", 8, 2),
        ],
    };
    assert_eq!(pairs_asked(&[one_complete]), 6);
}

//! The simulator's clock on a tiny hand-made world: what arrives when, the black hole's cost,
//! the first run's wait for the lists, and the socket budget.

use nostr_outbox_core::Probe;
use nostr_outbox_sim::clock::{
    fastest, replay, screen_wait, time_score, ClientTiming, Policy, RunShape, Timeline, Wait,
};
use nostr_outbox_sim::{Asks, PlanFile, PlanFileEntry, SimWorld};
use nostr_outbox_world::World;

const READER: &str = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5";
const ALICE: &str = "f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9";
const BOB: &str = "e493dbf1c10d80f3581e4904930b1404cc6c13900ee0758474fa94abe8c4cd13";
const NOW: u64 = 100_000_000;

/// Alice writes to `fast` (connect 100 ms, queries 200 ms, no noise) and `slow` (connect 1 s,
/// queries 3 s); Bob to `hole`, which accepts sockets and never answers. The reader's relay
/// `home` connects in 300 ms and answers in 400 ms.
fn world() -> SimWorld {
    world_sharing(&[])
}

/// [`world`], with the notes numbered in `shared` (of Alice's 4–6, on `slow`) on `fast` too.
fn world_sharing(shared: &[u8]) -> SimWorld {
    let timing = |connect: u32, query: u32, hangs: bool| {
        format!(r#"{{"connect_ms": {connect}, "query_ms": {query}, "hangs": {hangs}}}"#)
    };
    let events: Vec<String> = (1..=6u8)
        .map(|n| {
            let on = if n <= 3 {
                r#""wss://fast.example""#
            } else if shared.contains(&n) {
                r#""wss://slow.example", "wss://fast.example""#
            } else {
                r#""wss://slow.example""#
            };
            format!(
                r#"{{"id": "{:064x}", "author": "{ALICE}", "created_at": {}, "kind": 1, "on": [{on}]}}"#,
                n,
                NOW - u64::from(n) * 3_600
            )
        })
        .chain(std::iter::once(format!(
            r#"{{"id": "{:064x}", "author": "{BOB}", "created_at": {}, "kind": 1, "on": ["wss://hole.example"]}}"#,
            99,
            NOW - 60
        )))
        .collect();
    let json = format!(
        r#"{{"format": "outbox-world/1", "name": "clock", "now": {NOW}, "sessions": 1,
  "reader": {{"pubkey": "{READER}", "follows": ["{ALICE}", "{BOB}"], "relays": ["wss://home.example"]}},
  "relay_lists": [
    {{"author": "{ALICE}", "created_at": 1, "tags": [["r", "wss://fast.example"], ["r", "wss://slow.example"]]}},
    {{"author": "{BOB}", "created_at": 1, "tags": [["r", "wss://hole.example"]]}}
  ],
  "relays": {{
    "wss://fast.example": {{"up": [true], "timing": {}}},
    "wss://slow.example": {{"up": [true], "timing": {}}},
    "wss://hole.example": {{"up": [false], "timing": {}}},
    "wss://home.example": {{"up": [true], "timing": {}}}
  }},
  "events": [{}]}}"#,
        timing(100, 200, false),
        timing(1_000, 3_000, false),
        timing(100, 200, true),
        timing(300, 400, false),
        events.join(",\n")
    );
    SimWorld::new(World::from_json(&json).expect("a valid world"))
}

fn asks(sim: &SimWorld, entries: &[(&str, &[&str])]) -> Asks {
    let relays = entries
        .iter()
        .map(|(url, authors)| PlanFileEntry::new(format!("wss://{url}.example"), authors.to_vec()));
    let file = PlanFile::new("hand", 0, relays.collect());
    Asks::from_plan_file(sim, &file).expect("a valid plan")
}

/// Replays `waves` in session 0 with `client`; `lists_kept` as in [`RunShape`], no probes.
fn run(sim: &SimWorld, waves: &[Asks], lists_kept: bool, client: &ClientTiming) -> Timeline {
    let shape = RunShape {
        waves,
        lists_kept,
        probes: &[],
        probes_at_once: 1,
    };
    replay(sim, 0, 0, shape, client)
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() < 1e-6
}

/// With the lists kept, each note arrives one connect and one query after the start on the
/// relay that holds it; the black hole costs three connect timeouts and the backoff between
/// them before the run settles, and never delays a note.
#[test]
fn notes_arrive_from_the_relay_that_holds_them_and_a_black_hole_only_delays_the_end() {
    let sim = world();
    let plan = asks(
        &sim,
        &[("fast", &[ALICE]), ("slow", &[ALICE]), ("hole", &[BOB])],
    );
    // With no policy, a black hole gets every connect attempt.
    let client = ClientTiming {
        policy: Policy::default(),
        ..ClientTiming::default()
    };
    let timeline = run(&sim, std::slice::from_ref(&plan), true, &client);
    assert_eq!(timeline.arrived.len(), 6, "{timeline:?}");
    let mut times: Vec<f64> = timeline.arrived.values().map(|t| t.expect("in")).collect();
    times.sort_by(f64::total_cmp);
    assert!(close(times[0], 300.0), "{times:?}");
    assert!(close(times[3], 4_000.0), "{times:?}");
    let hole = 3.0 * client.connect_timeout_ms + 0.75 * client.backoff_ms * 3.0;
    assert!(
        close(timeline.settled_ms, hole),
        "settled {}",
        timeline.settled_ms
    );
    // Reachable: Alice's six notes (Bob's is only on the black hole).
    let score = time_score(&sim, &timeline, 6, None);
    assert!(close(score.first_note_ms.unwrap(), 300.0));
    assert!(close(score.screen_ms.unwrap(), 4_000.0));
    assert!(close(score.p90_ms.unwrap(), 4_000.0));
    assert!(close(score.at(2_000).unwrap().own, 0.5));
    assert!(close(score.at(2_000).unwrap().reachable, 0.5));
}

/// A first run plans its routed relays only once the reader's relay answered the lists lookup
/// and the debounce passed; a run with kept lists dials them at the start.
#[test]
fn a_first_run_waits_for_the_lists() {
    let sim = world();
    let plan = asks(&sim, &[("fast", &[ALICE]), ("home", &[BOB])]);
    let client = ClientTiming::default();
    let first_note = |lists_kept| {
        let timeline = run(&sim, std::slice::from_ref(&plan), lists_kept, &client);
        time_score(&sim, &timeline, 7, None)
            .first_note_ms
            .expect("a note")
    };
    assert!(close(first_note(true), 300.0));
    // Lookup: 300 ms connect + 400 ms query; then the debounce; then fast's connect and query.
    assert!(close(first_note(false), 700.0 + client.debounce_ms + 300.0));
    // A client handed the lists at its start (the live bench's runtime) does not wait.
    let given = ClientTiming {
        lists_given: true,
        ..ClientTiming::default()
    };
    let timeline = run(&sim, std::slice::from_ref(&plan), false, &given);
    let first = time_score(&sim, &timeline, 7, None).first_note_ms;
    assert!(close(first.expect("a note"), 300.0));
}

/// A re-plan wave goes out only once every relay asked before answered or was set aside: the
/// notes only its new relay holds wait for the black hole, and a relay it asks again about the
/// same follows is not asked twice.
#[test]
fn a_wave_waits_for_the_slowest_relay_of_the_one_before() {
    let sim = world();
    let first = asks(&sim, &[("slow", &[ALICE]), ("hole", &[BOB])]);
    let second = asks(&sim, &[("slow", &[ALICE]), ("fast", &[ALICE])]);
    // With no policy: every connect attempt, and waves that wait.
    let client = ClientTiming {
        policy: Policy::default(),
        ..ClientTiming::default()
    };
    let waves = [first, second];
    let timeline = run(&sim, &waves, true, &client);
    let hole = 3.0 * client.connect_timeout_ms + 0.75 * client.backoff_ms * 3.0;
    let mut times: Vec<f64> = timeline.arrived.values().flatten().copied().collect();
    times.sort_by(f64::total_cmp);
    assert_eq!(times.len(), 6, "{timeline:?}");
    assert!(times[..3].iter().all(|&t| close(t, 4_000.0)), "{times:?}");
    assert!(
        times[3..].iter().all(|&t| close(t, hole + 300.0)),
        "{times:?}"
    );
    assert!(close(timeline.settled_ms, hole + 300.0), "{timeline:?}");
}

/// Notes that would arrive after the deadline never do, and the run ends at it.
#[test]
fn the_deadline_ends_the_run() {
    let sim = world();
    let plan = asks(&sim, &[("slow", &[ALICE]), ("hole", &[BOB])]);
    let client = ClientTiming {
        deadline_ms: 2_000.0,
        ..ClientTiming::default()
    };
    let timeline = run(&sim, std::slice::from_ref(&plan), true, &client);
    assert!(
        timeline.arrived.values().all(Option::is_none),
        "{timeline:?}"
    );
    assert!(close(timeline.end_ms, 2_000.0));
    let score = time_score(&sim, &timeline, 6, None);
    assert_eq!((score.first_note_ms, score.screen_ms), (None, None));
}

/// A dial waits while the socket budget is spent: with one place, held by the reader's relay
/// for the run, the routed relay is never dialled.
#[test]
fn a_spent_socket_budget_holds_dials_back() {
    let sim = world();
    let plan = asks(&sim, &[("fast", &[ALICE]), ("home", &[BOB])]);
    let client = ClientTiming {
        lasting_sockets: Some(1),
        ..ClientTiming::default()
    };
    let timeline = run(&sim, std::slice::from_ref(&plan), true, &client);
    assert!(
        timeline.arrived.values().all(Option::is_none),
        "{timeline:?}"
    );
}

/// Policies the runtime does not have yet, measured before they are built: each changes the
/// timeline the way it says and nothing when off.
#[test]
fn policies_change_the_timeline_as_they_say() {
    let sim = world();
    let run_with = |waves: &[Asks], policy: Policy| {
        let client = ClientTiming {
            policy,
            ..ClientTiming::default()
        };
        run(&sim, waves, true, &client)
    };
    let times = |t: &Timeline| {
        let mut v: Vec<f64> = t.arrived.values().flatten().copied().collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let client = ClientTiming::default();

    // A black hole set aside after one connect timeout.
    let hole = [asks(&sim, &[("hole", &[BOB])])];
    let today = run_with(&hole, Policy::default());
    let aside = run_with(
        &hole,
        Policy {
            aside_on_timeout: true,
            ..Policy::default()
        },
    );
    assert!(
        today.settled_ms > 3.0 * client.connect_timeout_ms,
        "{today:?}"
    );
    assert!(
        close(aside.settled_ms, client.connect_timeout_ms),
        "{aside:?}"
    );

    // A re-plan that goes out once the relay it replaces is set aside, not when the slow relay
    // of the same plan answers.
    let waves = [
        asks(&sim, &[("slow", &[ALICE]), ("gone", &[BOB])]),
        asks(&sim, &[("slow", &[ALICE]), ("fast", &[ALICE])]),
    ];
    let late = times(&run_with(&waves, Policy::default()));
    let early = times(&run_with(
        &waves,
        Policy {
            early_waves: true,
            ..Policy::default()
        },
    ));
    assert!(close(late[0], 4_000.0), "the wave waits for slow: {late:?}");
    assert!(
        early[0] < 4_000.0 - 300.0,
        "the wave goes out early: {early:?}"
    );
}

/// What held a first screen back, told apart: a note fast holds too but only slow was asked
/// about is not asked; asking fast on a first run, which dials it after the lists lookup, is a
/// late socket; a note only slow holds, in on slow's first page, is on time.
#[test]
fn a_first_screen_wait_is_laid_at_the_right_door() {
    let wait_of = |sim: &SimWorld, waves: &[Asks], lists_kept: bool| {
        let client = ClientTiming::default();
        let timeline = run(sim, waves, lists_kept, &client);
        let ideal = fastest(sim, 0, 0, &client);
        screen_wait(sim, 0, &client, &timeline, &ideal, waves)
    };
    let sim = world();
    let both = [asks(&sim, &[("fast", &[ALICE]), ("slow", &[ALICE])])];
    assert_eq!(wait_of(&sim, &both, true), Some(Wait::OnTime));
    // Slow's notes are on fast too.
    let shared = world_sharing(&[4, 5, 6]);
    let slow_only = [asks(&shared, &[("slow", &[ALICE])])];
    assert_eq!(wait_of(&shared, &slow_only, true), Some(Wait::NotAsked));
    let fast_only = [asks(&shared, &[("fast", &[ALICE])])];
    assert_eq!(wait_of(&shared, &fast_only, true), Some(Wait::OnTime));
    assert_eq!(wait_of(&shared, &fast_only, false), Some(Wait::LateSocket));
}

mod properties {
    use super::*;
    use nostr_outbox_core::Router;
    use nostr_outbox_sim::{run_sessions, LoopConfig, Window};
    use nostr_outbox_world::{generate, Profile};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 12,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever the world, the client's knobs and the policies, a timed session's figures
        /// are consistent: every time within the run, the first note before 90% before the
        /// last, completeness within 0–1 and never falling, and no note after the deadline.
        #[test]
        fn timed_sessions_are_consistent(
            seed in 0u64..1_000,
            sockets in 1usize..40,
            deadline_s in 1u32..120,
            waves in any::<bool>(),
            aside in any::<bool>(),
            early in any::<bool>(),
        ) {
            nostr_outbox_strategies::link();
            let sim = SimWorld::new(generate(Profile::Small, seed));
            let mut router = Router::from_toml("[strategy]\ntype = \"greedy\"\n").unwrap();
            let client = ClientTiming {
                lasting_sockets: Some(sockets),
                deadline_ms: f64::from(deadline_s) * 1_000.0,
                policy: Policy {
                    aside_on_timeout: aside,
                    early_waves: early,
                    probe_timeout_ms: None,
                },
                ..ClientTiming::default()
            };
            let cfg = LoopConfig {
                sessions: 2,
                windows: vec![Window::D7],
                timing_repeats: 0,
                replan_on_failure: waves,
                clock: Some(Window::D7),
                client: client.clone(),
                ..LoopConfig::default()
            };
            let run = run_sessions(&sim, &mut router, &cfg, |_, _, _| {});
            for outcome in &run.sessions {
                let t = outcome.score.time.as_ref().expect("timed");
                prop_assert!(t.end_ms <= client.deadline_ms && t.settled_ms <= t.end_ms + 1e-9);
                for ms in [t.first_note_ms, t.screen_ms, t.p90_ms, t.last_note_ms].into_iter().flatten() {
                    prop_assert!(ms.is_finite() && ms >= 0.0 && ms <= client.deadline_ms, "{t:?}");
                }
                if let (Some(first), Some(p90)) = (t.first_note_ms, t.p90_ms) {
                    prop_assert!(first <= p90);
                }
                if let (Some(p90), Some(last)) = (t.p90_ms, t.last_note_ms) {
                    prop_assert!(p90 <= last);
                }
                let mut before = 0.0;
                for c in &t.completeness {
                    prop_assert!((0.0..=1.0).contains(&c.own) && c.own >= before, "{t:?}");
                    before = c.own;
                }
            }
        }
    }
}

#[test]
fn probes_wait_for_a_free_place() {
    let sim = world();
    let fetch = [asks(&sim, &[("home", &[ALICE])])];
    let probe = |url: &str| Probe {
        url: format!("wss://{url}.example"),
        authors: Vec::new(),
        patient: false,
    };
    let probes = [probe("slow"), probe("fast")];
    let probed = |at_once: usize| {
        let shape = RunShape {
            waves: &fetch,
            lists_kept: true,
            probes: &probes,
            probes_at_once: at_once,
        };
        let t = replay(&sim, 0, 0, shape, &ClientTiming::default());
        t.end_ms - t.settled_ms
    };
    // Side by side, the slow relay's connect and query; one at a time, the fast one's after.
    let (side, queue) = (probed(2), probed(1));
    assert!(close(side, 4_000.0), "{side}");
    assert!(close(queue, 4_300.0), "{queue}");
}

/// What a probe learns depends on the clock as in the runtime: a relay slower to accept than a
/// probe waits fails it, unless the probe is patient.
#[test]
fn a_short_probe_fails_on_a_relay_slow_to_accept_and_a_patient_one_does_not() {
    let sim = world();
    let client = ClientTiming {
        policy: Policy {
            probe_timeout_ms: Some(500.0),
            ..Policy::runtime()
        },
        ..ClientTiming::default()
    };
    let alice: nostr::key::PublicKey = ALICE.parse().expect("a key");
    let answered = |patient: bool| {
        let plan = nostr_outbox_core::ProbePlan {
            probes: vec![Probe {
                url: "wss://slow.example".into(),
                authors: vec![alice],
                patient,
            }],
            limit: 20,
        };
        let mut recorder = nostr_outbox_client::RoundRecorder::new();
        let cost = nostr_outbox_sim::probe::probe_recorded(
            &sim,
            &plan,
            0,
            0,
            Some(&client),
            &mut recorder,
        );
        let round = recorder.take_final_round().expect("a round");
        (cost.cost.reqs, round.relays.iter().any(|r| r.answered))
    };
    // `slow` accepts in 1 s: past the short probe's 0.5 s, within the connect timeout.
    assert_eq!(answered(false), (0, false));
    assert_eq!(answered(true), (1, true));
}

/// Alice lists `index` (answers at once, keeps nothing), `part` (her older note) and `own`
/// (both her notes); Bob lists `slow` (his note, answered after 4 s). With four lasting
/// sockets (the reader's relay holds one), the first plan asks `index` and `part` about Alice and `slow` about Bob; the
/// re-plan moves Alice to `own`. `index` is shown empty when `part` answers with her note, so
/// her newer note comes from `own` a debounce, a connect and a query later, on the socket
/// `index` gave back, without waiting for `slow`.
#[test]
fn a_relay_that_answered_empty_gives_its_follows_and_its_socket_back_at_once() {
    let timing = |connect: u32, query: u32| {
        format!(r#"{{"connect_ms": {connect}, "query_ms": {query}, "hangs": false}}"#)
    };
    let note = |n: u8, author: &str, on: &str| {
        format!(
            r#"{{"id": "{n:064x}", "author": "{author}", "created_at": {}, "kind": 1, "on": [{on}]}}"#,
            NOW - u64::from(n) * 60
        )
    };
    let events = [
        note(1, ALICE, r#""wss://own.example""#),
        note(2, ALICE, r#""wss://part.example", "wss://own.example""#),
        note(3, BOB, r#""wss://slow.example""#),
    ];
    let json = format!(
        r#"{{"format": "outbox-world/1", "name": "empty", "now": {NOW}, "sessions": 1,
  "reader": {{"pubkey": "{READER}", "follows": ["{ALICE}", "{BOB}"], "relays": ["wss://home.example"]}},
  "relay_lists": [
    {{"author": "{ALICE}", "created_at": 1, "tags": [["r", "wss://index.example"], ["r", "wss://part.example"], ["r", "wss://own.example"]]}},
    {{"author": "{BOB}", "created_at": 1, "tags": [["r", "wss://slow.example"]]}}
  ],
  "relays": {{
    "wss://index.example": {{"up": [true], "timing": {}}},
    "wss://part.example": {{"up": [true], "timing": {}}},
    "wss://own.example": {{"up": [true], "timing": {}}},
    "wss://slow.example": {{"up": [true], "timing": {}}},
    "wss://home.example": {{"up": [true], "timing": {}}}
  }},
  "events": [{}]}}"#,
        timing(100, 200),
        timing(100, 400),
        timing(100, 200),
        timing(1_000, 3_000),
        timing(300, 400),
        events.join(",\n")
    );
    let sim = SimWorld::new(World::from_json(&json).expect("a valid world"));
    let first = asks(
        &sim,
        &[("index", &[ALICE]), ("part", &[ALICE]), ("slow", &[BOB])],
    );
    let second = asks(
        &sim,
        &[("own", &[ALICE]), ("part", &[ALICE]), ("slow", &[BOB])],
    );
    let client = ClientTiming {
        lasting_sockets: Some(4),
        ..ClientTiming::default()
    };
    let timeline = run(&sim, &[first, second], true, &client);
    let at = |n: u8| {
        let i = (sim.world.events().iter())
            .position(|e| e.id == [[0u8; 31].as_slice(), &[n]].concat().as_slice())
            .expect("the note") as u32;
        timeline.arrived.get(&i).copied().flatten()
    };
    // `part` answers at 500 ms: `index` (answered at 300) is shown empty then.
    let shown = 500.0;
    let own = shown + client.debounce_ms + 100.0 + 200.0;
    assert!(at(1).is_some_and(|t| close(t, own)), "{timeline:?}");
    assert!(at(2).is_some_and(|t| close(t, 500.0)), "{timeline:?}");
    assert!(at(3).is_some_and(|t| close(t, 4_000.0)), "{timeline:?}");
}

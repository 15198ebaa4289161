//! What the parity tests share: one fixed small world, the strategies, the bench run and the
//! checks. Each parity test is its own test binary, so the two never run at once and neither
//! times the other's relays.

use nostr_outbox_live::{run_live, LiveConfig, LiveReport, LiveStrategy, Progress};
use nostr_outbox_sim::{generate, Profile};

/// Percentage points allowed between live and simulated declared recall (1-year window).
pub const BOUND: f64 = 3.0;

/// Relays probed per session by the strategies that learn (`recall`; `greedy` does not).
pub const PROBES: usize = 20;

pub fn strategies() -> Vec<LiveStrategy> {
    nostr_outbox_strategies::link();
    ["greedy", "recall"]
        .iter()
        .map(|name| {
            let toml = format!(
                "max_connections = 20\nprobe_connections = {PROBES}\n[strategy]\ntype = \"{name}\"\n"
            );
            LiveStrategy::from_toml(name, &toml).expect("a registered strategy")
        })
        .collect()
}

pub async fn bench(one_plan: bool, port_hint: u16) -> LiveReport {
    let cfg = LiveConfig {
        one_plan,
        port_hint,
        ..LiveConfig::default()
    };
    run_live(generate(Profile::Small, 1), &strategies(), &cfg, |p| {
        if let Progress::Session { label, result: r } = p {
            eprintln!(
                "{label} s{}: live {:.1} simulated {:.1} live plan {:.1} (plans {}, set aside {}, \
                 probed {}/{} answered {}/{} notes {}/{})",
                r.session,
                r.live.declared_recall * 100.0,
                r.simulated.declared_recall * 100.0,
                r.live_plan.declared_recall * 100.0,
                r.plans,
                r.set_aside,
                r.probes.live,
                r.probes.simulated,
                r.probes.live_answered,
                r.probes.simulated_answered,
                r.probes.live_events,
                r.probes.simulated_events,
            );
        }
    })
    .await
    .expect("the live bench runs")
}

/// Every session of every strategy: `|a − b| ≤ BOUND`, naming both numbers when not.
pub fn assert_close(
    report: &LiveReport,
    what: &str,
    pick: impl Fn(&nostr_outbox_live::SessionResult) -> (f64, f64),
) {
    let mut failures = Vec::new();
    for st in &report.strategies {
        for r in &st.sessions {
            let (live, other) = pick(r);
            let (live, other) = (live * 100.0, other * 100.0);
            if (live - other).abs() > BOUND {
                failures.push(format!(
                    "session {} strategy {}: live {live:.1}% vs {what} {other:.1}%",
                    r.session, st.label
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "live and {what} declared 1-year recall differ by more than {BOUND} points:\n{}",
        failures.join("\n")
    );
}

/// [`bench`], checked: live recall close to the simulator's ([`assert_close`]) and the probes
/// agreeing ([`assert_probes_agree`]).
pub async fn bench_agreeing(one_plan: bool, port_hint: u16) -> LiveReport {
    let report = bench(one_plan, port_hint).await;
    assert_close(&report, "simulated", |r| {
        (r.live.declared_recall, r.simulated.declared_recall)
    });
    assert_probes_agree(&report);
    report
}

/// `recall` probed, within its budget, and in every session the runtime's probes are the
/// simulator's: as many relays, as many answering, as many notes returned. Both leave out every
/// relay a plan of the session asked (re-plans included) and the same relays answer, so this
/// holds when the sessions' plans are the same.
pub fn assert_probes_agree(report: &LiveReport) {
    let learning = report
        .strategies
        .iter()
        .find(|st| st.label == "recall")
        .expect("recall ran");
    assert!(
        learning.sessions.iter().any(|r| r.probes.live > 0),
        "recall probed in some session: {:?}",
        learning
            .sessions
            .iter()
            .map(|r| &r.probes)
            .collect::<Vec<_>>()
    );
    for st in &report.strategies {
        for r in &st.sessions {
            let p = &r.probes;
            assert!(
                p.live <= PROBES as u64,
                "session {} strategy {}: {p:?}",
                r.session,
                st.label
            );
            assert_eq!(
                (p.live, p.live_answered, p.live_events),
                (p.simulated, p.simulated_answered, p.simulated_events),
                "session {} strategy {}: probes live vs simulated",
                r.session,
                st.label
            );
        }
    }
}

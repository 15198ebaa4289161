//! The churn scenario: relay lists changing between planning ticks, planned plainly and through
//! hysteresis.

use nostr_outbox_sim::churn::{self, ChurnShape, FLAP_URL, IMPROVEMENT_URL};
use nostr_outbox_strategies::nostr_outbox_greedy::GreedyConfig;
use nostr_outbox_strategies::nostr_outbox_hysteresis::HysteresisConfig;

#[test]
fn a_churn_scenario_with_the_longest_tick_keeps_time_monotone() {
    let shape = ChurnShape {
        follows: 20,
        relays: 8,
        ticks: 4,
        tick_secs: u64::MAX,
        improvement_tick: 2,
        ..ChurnShape::default()
    };
    let scenario = churn::scenario(shape, 3);
    let times: Vec<u64> = scenario.ticks.iter().map(|t| t.now).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(times[3], u64::MAX);
}

#[test]
fn churn_scenario_hysteresis_churns_far_less_and_covers_everyone() {
    let scenario = churn::scenario(ChurnShape::default(), 7);
    let plain = GreedyConfig::default();
    let damped = HysteresisConfig {
        margin: 1.25,
        settle: "30s".into(),
        inner: Box::new(GreedyConfig::default()),
    };
    let reports = churn::compare(
        &scenario,
        &[("greedy", &plain), ("hysteresis+greedy", &damped)],
        20,
        1,
    );
    eprintln!("{}", churn::ReportTable(&reports));
    let (p, h) = (&reports[0], &reports[1]);
    assert_eq!(p.violations + h.violations, 0);
    assert_eq!(p.uncovered + h.uncovered, 0);
    assert_eq!(h.flap_dials, 0, "flapping must not redial {FLAP_URL}");
    assert!(p.flap_dials > 10, "plain re-planning redials the flapper");
    let applied = h
        .improvement_dialled_at
        .unwrap_or_else(|| panic!("{IMPROVEMENT_URL} never dialled"));
    let settle_ticks = 30 / scenario.shape.tick_secs as usize;
    assert!(applied >= scenario.shape.improvement_tick + settle_ticks);
    assert_eq!(
        p.improvement_dialled_at,
        Some(scenario.shape.improvement_tick)
    );
    assert!(
        h.churn() * 3 < p.churn(),
        "hysteresis churn {} vs plain {}",
        h.churn(),
        p.churn()
    );
    assert!(h.recall_proxy > 0.9, "recall proxy {}", h.recall_proxy);
}

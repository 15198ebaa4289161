//! The simulator's clock replays the runtime with the runtime's own knobs: when a default
//! changes on one side, this fails until the other follows.

use nostr_outbox_runtime::{RuntimeConfig, SocketBudget};
use nostr_outbox_sim::clock::ClientTiming;

#[test]
fn the_clock_replays_the_runtimes_defaults() {
    let runtime = RuntimeConfig::default();
    let clock = ClientTiming::default();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1_000.0;
    assert_eq!(clock.connect_timeout_ms, ms(runtime.connect_timeout));
    assert_eq!(clock.eose_timeout_ms, ms(runtime.eose_timeout));
    assert_eq!(clock.attempts, runtime.penalty.strikes);
    assert_eq!(clock.backoff_ms, ms(runtime.backoff.initial));
    assert_eq!(
        runtime.backoff.factor, 2.0,
        "the clock doubles each backoff"
    );
    assert_eq!(clock.concurrent_pages, runtime.limits.concurrent_pages);
    assert_eq!(clock.lookup_grace_ms, ms(runtime.lookup_grace));
    assert_eq!(clock.debounce_ms, ms(runtime.replan_debounce));
    assert_eq!(Some(clock.deadline_ms), runtime.deadline.map(ms));
    assert_eq!(
        clock.lasting_sockets,
        SocketBudget::default().lasting_sockets()
    );
    let schedule = runtime.schedule;
    assert_eq!(
        clock.policy.aside_on_timeout,
        schedule.aside_on_connect_timeout
    );
    assert_eq!(clock.policy.early_waves, schedule.early_waves);
    assert_eq!(
        clock.policy.probe_timeout_ms,
        Some(ms(schedule.probe_connect_timeout))
    );
    // The live bench times the simulator with the client it builds from its runtime config.
    assert_eq!(
        nostr_outbox_live::client_timing(&runtime, SocketBudget::default()),
        clock
    );
}

//! Live and simulated recall on one fixed small world: the real runtime against local relays
//! holding exactly what the world stores, beside the simulator's session loop. Both probe the
//! relays their session did not ask with the configs' budget (`probe_connections`) and learn
//! from the answers before the next session.

mod parity_common;

use parity_common::bench_agreeing;

/// With one plan per session (the simulator's model of a session), the runtime sends exactly
/// the simulator's plans, probes the same relays after each fetch, learns the same from both,
/// and its recall is the simulator's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_plan_sessions_match_the_simulator() {
    let report = bench_agreeing(true, 21_000).await;
    for st in &report.strategies {
        for r in &st.sessions {
            assert!(
                r.seed_matches,
                "session {} strategy {}: planning seed",
                r.session, st.label
            );
            assert!(
                r.same_plan,
                "session {} strategy {}: plan differs",
                r.session, st.label
            );
        }
    }
}

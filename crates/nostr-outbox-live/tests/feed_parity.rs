//! Live and simulated recall, as `outbox feed --once` runs, on one fixed small world: the real runtime against local relays
//! holding exactly what the world stores, beside the simulator's session loop. Both probe the
//! relays their session did not ask with the configs' budget (`probe_connections`) and learn
//! from the answers before the next session.

mod parity_common;

use parity_common::bench_agreeing;

/// As `outbox feed --once` runs, live recall against the simulator's session loop with
/// in-session re-planning (`LoopConfig::replan_on_failure`). A `--once` run re-plans in waves
/// (once every relay of the plan answered or was set aside), so which failures share a re-plan
/// does not depend on timing: live recall and the probes agree with the simulator's session
/// by session (to the tenth of a point in every measured run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_once_matches_the_simulator() {
    bench_agreeing(false, 26_000).await;
}

//! What a bench keeps of one strategy's run on one world: every session's score, the feed left
//! open after each, and the planning times. The bench's tables and each row's share of the
//! learnable ceiling are both made from these.

use nostr_outbox_world::Profile;
use serde::Serialize;

use crate::open::OpenScore;
use crate::score::PlanScore;

/// One strategy on one world, every session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecord {
    /// Row label.
    pub label: String,
    /// World profile.
    pub profile: Profile,
    /// World seed.
    pub seed: u64,
    /// Median planning time over every timed plan, µs ([`StrategyRun::plan_us_median`]).
    ///
    /// [`StrategyRun::plan_us_median`]: crate::StrategyRun::plan_us_median
    pub plan_us: f64,
    /// Mean over sessions of each session's first plan's time, µs (cold).
    pub plan_us_cold: f64,
    /// Median of the plans repeated with the final stats after the sessions, µs (warm; 0
    /// when the bench repeats no plans, `BenchConfig::timing_repeats`). The bounds, which
    /// learn nothing, take the median of their sessions' plans.
    pub plan_us_warm: f64,
    /// Per session.
    pub sessions: Vec<PlanScore>,
    /// Per session, the feed left open after the fetch (when the bench keeps it open,
    /// `BenchConfig::open`; the learnable ceiling's row holds the live ceiling). Empty when not
    /// measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open: Vec<OpenScore>,
}

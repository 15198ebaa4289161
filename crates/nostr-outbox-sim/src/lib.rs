//! The simulator and benchmark: synthetic relay worlds (`nostr-outbox-world`'s, calibrated to the
//! published measurements) replayed through the session loop (plan → fetch → learn), scoring
//! exactly as `docs/formats.md` defines it (REQs capped per relay and paged as the runtime
//! pages), an oracle ceiling, and the benchmark suite.
//!
//! ```
//! use nostr_outbox_sim::{SimWorld, LoopConfig, run_sessions};
//! use nostr_outbox_world::{generate, Profile};
//! nostr_outbox_strategies::link();
//! let sim = SimWorld::new(generate(Profile::Small, 7));
//! let mut router = nostr_outbox_core::Router::from_toml("[strategy]\ntype = \"greedy\"\n").unwrap();
//! let run = run_sessions(&sim, &mut router, &LoopConfig::default(), |_, _, _| {});
//! assert_eq!(run.sessions.len(), 5);
//! ```
//!
//! What a strategy learns from is only what its own REQs returned: [`Observation`] per session,
//! of which only [`nostr_outbox_core::DeliveryStats`] is fed today.

pub mod asks;
pub mod bench;
pub mod ceiling;
pub mod churn;
pub mod clock;
pub mod delivered;
pub mod fetch;
pub mod fixed;
mod holdings;
pub mod mean;
pub mod observe;
pub mod open;
pub mod planfile;
pub mod probe;
mod replan;
pub mod route_rows;
pub mod routes;
pub mod run_record;
pub mod score;
pub mod session;
pub mod share;
pub mod sim_world;
pub mod window;

// The worlds a session replays are `nostr-outbox-world`'s, and this crate reaches them only by
// that crate's own paths. The items the workspace's other crates still name through this crate
// are re-exported under the paths they had here (`nostr_outbox_sim::world::World`,
// `nostr_outbox_sim::generate`, ...); new code names `nostr_outbox_world` directly.
pub use nostr_outbox_world::{generate, world};
pub use nostr_outbox_world::{
    generate_in, generate_with, world_stats, Family, Profile, RelayTiming, Span, World, WorldError,
    WorldModel, MAX_SESSIONS,
};

pub use asks::{Ask, Asks};
pub use bench::{
    default_suite, open_rows, run_bench, BenchConfig, BenchReport, OpenRow, Progress, Row, Skipped,
    SuiteEntry, TimeFigures, TimeRow, COMBINATIONS,
};
pub use ceiling::{ceiling_asks, expected_events, run_ceiling, up_rates, CEILING};
pub use fetch::{fetch, AuthorReturn, FetchCost, Fetched, RelayFetch, WindowCost};
pub use fixed::{
    best_fixed, fixed_asks, run_best_fixed, FixedChoice, FixedSearch, BEST_FIXED,
    MAX_EXHAUSTIVE_SETS,
};
pub use mean::MeanSe;
pub use observe::{observe, Observation, RelayObservation};
pub use planfile::{PlanFile, PlanFileEntry, PlanFileError, ScoreError, PLAN_FORMAT};
pub use route_rows::{route_rows, RouteRecord, RouteRow, RouteRowWindow};
pub use routes::{
    score_routes, InboxScore, PublishScore, RouteLoopConfig, RouteSessionScore, NAIVE_LABEL,
    ROUTES_LABEL,
};
pub use run_record::RunRecord;
pub use score::{score, score_and_observe, PlanScore, WindowScore};
pub use session::{
    oracle_asks, oracle_asks_within, run_oracle, run_oracle_within, run_sessions,
    run_sessions_with, LoopConfig, OracleScope, SessionOutcome, SessionView, StrategyRun, ORACLE,
};
pub use share::{ceiling_shares, ShareRow, ShareWindow, WorstWorld, FALL_POINTS};
pub use sim_world::SimWorld;
pub use window::Window;

//! The core of the outbox router: route table, strategy traits, plans and their invariants.
//!
//! A client builds a [`RouteTable`] from kind:10002 relay lists, loads a strategy by name from
//! TOML into a [`Router`], and asks it for a [`Plan`]: which relay to ask about which follows,
//! with every follow no routed relay covers (the residual) asked of the reader's own relays.
//!
//! ```
//! use nostr_outbox_core::{RouteTable, RouteTableBuilder, UrlPolicy, Selection, Plan};
//! # let reader = nostr::key::Keys::generate().public_key();
//! // No relay lists known yet: the plan asks the reader's relays about everyone.
//! let table = RouteTable::without_lists(UrlPolicy::default(), [reader], ["wss://home.example"]);
//! let plan = Plan::from_selection(&table, "none", Selection::default());
//! assert_eq!(plan.residual().len(), 1);
//! let filters = plan.to_filters(&table, &[nostr::event::Kind::TextNote], None);
//! assert_eq!(filters.len(), 1);
//! ```
//!
//! This crate does no IO and is all a strategy needs. Strategies live in their own crates and
//! register themselves with [`register_strategy!`] (see [`registry`] for what "strategy" and
//! "selector" mean). What a client does around a plan without IO (routes, directory, paging,
//! recording rounds, store traits) is `nostr-outbox-client`; the runtime, simulator and CLI are
//! separate crates.

pub mod config;
mod fastmap;
pub mod hints;
pub mod ids;
pub mod invariants;
pub mod issue;
pub mod keys;
pub mod plan;
pub mod probe;
pub mod registry;
pub mod route_table;
pub mod router;
pub mod scorer;
pub mod selector;
pub mod stats;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod url_policy;

pub use config::{RouterConfig, DEFAULT_MAX_CONNECTIONS};
pub use hints::{contact_list_hints, seen_on_hints, Hint, HintCounts, HintSource};
pub use ids::{AuthorId, RelayId};
pub use invariants::{check_plan, Limits, Violation};
pub use issue::{ConfigError, ConfigIssue};
pub use keys::{follows_from_contact_list, parse_public_key, public_key_from_hex, KeyError};
pub use plan::{Disclosure, Plan, PlanEntry};
pub use probe::{default_probes, plan_probes, probes_at_once, Probe, ProbeBudget, ProbePlan};
pub use registry::{ScorerDescriptor, StrategyDescriptor};
pub use route_table::{
    keep_newest_list, DropReport, NotARelayList, RawRelayList, RouteTable, RouteTableBuilder,
};
pub use router::{session_seed, BrokenPlan, PlanContext, Router};
pub use scorer::{CoverageScorer, RelayView, Scorer, ScorerConfig};
pub use selector::{Assignment, PlanInput, Selection, Selector, StrategyConfig};
pub use stats::{AuthorStats, Decay, DeliveryStats, PairStats, Pairs, RelayStats, RoundReport};
pub use url_policy::{blocked_relays, DenyList, DropReason, UrlPolicy};

/// Re-exported so strategy crates name the RNG type of [`Selector::select`] without depending
/// on `rand` themselves.
pub use rand::RngCore;
/// Re-exported so config types derive `Serialize`/`Deserialize` without a `serde` dependency of
/// their own: `#[serde(crate = "nostr_outbox_core::serde")]`.
pub use serde;

/// What [`register_strategy!`] and [`register_scorer!`] expand to; not an API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use std::boxed::Box;
    pub use typetag;
}

#![doc = include_str!("../README.md")]

mod engine;
#[cfg(feature = "sdk")]
mod read;
mod state;

pub use engine::{Error, OutboxGossip, OutboxGossipBuilder, PlanSummary, DEFAULT_CONFIG};
#[cfg(feature = "sdk")]
pub use read::{
    ReadOptions, ReadReport, RelayOutcome, RelayRead, DEFAULT_READ_FALLBACK, DEFAULT_READ_PROBES,
    MAX_READ_EVENTS, MAX_READ_WAVES,
};
pub use state::{
    DEFAULT_LIST_TTL, DEFAULT_ROUND_IDLE, MAX_KEPT_LISTS, MAX_PLANNED_KEYS, MAX_ROUND_EVENTS,
    MAX_TRACKED_KEYS,
};

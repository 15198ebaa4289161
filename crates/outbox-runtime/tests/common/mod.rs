//! The test harness is `outbox-fleet`'s; this module only re-exports it.

pub use outbox_fleet::*;

//! The asks: each a bounded piece of work on the connection layer that ends by itself — relay
//! list and event lookups (`lookup`), route feeds (inbox, thread, pointer), probes, publishing,
//! counts (NIP-45), reconciliation (NIP-77), direct messages and NIP-66 monitor reports.

pub mod count;
pub mod dms;
pub mod lookup;
pub mod monitor;
pub(crate) mod probe;
pub mod publish;
pub mod route_feed;
pub mod sync;

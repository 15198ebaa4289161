//! What a client does around an outbox plan, without IO: the routes beyond the feed (inbox,
//! threads, pointers, publishing), the relay directory they read, NIP-66 monitor reports,
//! paging past relay caps, the relays that carry the residual, slots and the diff between two
//! plans, recording what relays delivered as a round, and the store traits that keep state
//! between runs.
//!
//! Strategies never need this crate: they plan with [`nostr_outbox_core`] alone. The runtime and
//! the simulator drive the same code here, so a live client and a simulated one learn and page
//! alike.

pub mod carriers;
pub mod diff;
pub mod directory;
pub mod monitor;
pub mod paging;
pub mod recorder;
pub mod routes;
pub mod store;

pub use carriers::{Carriers, Network};
pub use diff::{PlanDiff, Slot, Slots};
pub use directory::{
    NotADirectoryList, PersonRelays, RelayDirectory, RelayDirectoryBuilder, MAX_DIRECTORY_PEOPLE,
};
pub use monitor::{
    apply_monitor_prior, MonitorAnnouncement, MonitorReport, NotAMonitorEvent, PriorSummary,
};
pub use paging::{Paging, RelayLimits};
pub use recorder::RoundRecorder;
pub use routes::{
    check_route, relay_quality, DmQuery, DmSource, FilterQuery, InboxQuery, Pointer, PointerError,
    PublishQuery, Reason, Route, RouteBudget, RouteContext, RouteKind, RoutePlan, RouteTarget,
    RouteViolation, ThreadQuery,
};
pub use routes::{Relation, RepliersQuery};
pub use store::{
    async_trait, lists_to_keep, LoadWarning, Loaded, MemoryStore, Restored, StateStore, StatsStore,
    StatsStoreError, MAX_STORED_LISTS,
};

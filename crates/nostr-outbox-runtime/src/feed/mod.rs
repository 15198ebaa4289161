//! A feed's vocabulary and handle: what it starts from ([`FeedInput`]), what its channel
//! carries ([`FeedEvent`], [`Status`]), what it reports at the end ([`FeedSummary`]), and the
//! handle that controls it ([`FeedHandle`], made by [`start`](crate::start)). The feed itself
//! runs in the coordinator; these files know nothing of how.

pub(crate) mod control;
mod coordinator;
pub(crate) mod event;
pub(crate) mod handle;
pub(crate) mod input;
pub mod places;
pub mod slot;
mod start;
pub(crate) mod summary;

pub use control::SubscribeError;
pub use event::{FeedEvent, Status};
pub use handle::{FeedHandle, Subscription};
pub use input::{FeedInput, RelayMark};
pub use start::start;
pub use summary::{
    AuthOutcome, FeedSummary, ProbeOutcome, ProbeSummary, RelayOutcome, SUMMARY_FORMAT,
};

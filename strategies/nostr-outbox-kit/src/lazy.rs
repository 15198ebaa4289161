//! The heap entry of lazy greedy selection, shared by every strategy that maximises a gain
//! which only shrinks as relays are chosen.
//!
//! A max-heap holds possibly stale values; an entry valued in the current round (`round` equals
//! the number of relays chosen so far) is the true best, any other is re-valued and pushed
//! back. Ordering is by value, then by URL rank, so equal values break ties deterministically.

use std::cmp::Ordering;

use nostr_outbox_core::RelayId;

/// A relay's value as of `round`.
#[derive(Clone, Copy, Debug)]
pub struct LazyCandidate {
    /// The value (gain, score) when last computed.
    pub value: f64,
    /// [`RouteTable::url_rank`](nostr_outbox_core::RouteTable::url_rank) of the relay: the tie-breaker.
    pub url_rank: u32,
    /// The relay.
    pub relay: RelayId,
    /// How many relays had been chosen when `value` was computed.
    pub round: usize,
}

impl PartialEq for LazyCandidate {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for LazyCandidate {}

impl PartialOrd for LazyCandidate {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LazyCandidate {
    #[inline]
    /// Larger value first; on equal values the smaller URL wins.
    fn cmp(&self, other: &Self) -> Ordering {
        self.value
            .total_cmp(&other.value)
            .then_with(|| other.url_rank.cmp(&self.url_rank))
    }
}

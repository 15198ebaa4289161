//! The socket budget a replay dials under: a place per socket, held for the run by a relay that
//! answers, freed when a relay is set aside.

use std::collections::BinaryHeap;

/// Places on the socket budget: when each held socket frees (`f64::INFINITY`: held for the run).
pub(super) struct Budget {
    limit: usize,
    held: BinaryHeap<std::cmp::Reverse<Ms>>,
}

/// A total order on finite-or-infinite milliseconds, for the heap.
#[derive(Clone, Copy, Debug)]
struct Ms(f64);
impl PartialEq for Ms {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Ms {}
impl PartialOrd for Ms {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ms {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl Budget {
    pub(super) fn new(limit: Option<usize>) -> Self {
        Self {
            limit: limit.unwrap_or(usize::MAX).max(1),
            held: BinaryHeap::new(),
        }
    }

    /// The earliest time at or after `at` a socket may be opened (the place is taken by the
    /// caller with [`Budget::hold`]).
    pub(super) fn place(&mut self, at: f64) -> f64 {
        while self.held.peek().is_some_and(|r| r.0 .0 <= at) {
            self.held.pop();
        }
        if self.held.len() < self.limit {
            return at;
        }
        // Wait for the first place to free; a budget held for the run never frees.
        let first = self.held.pop().map_or(at, |r| r.0 .0);
        first.max(at)
    }

    pub(super) fn hold(&mut self, until: f64) {
        self.held.push(std::cmp::Reverse(Ms(until)));
    }

    /// Frees at `at` one place held for the run (a relay the run stopped using).
    pub(super) fn release(&mut self, at: f64) {
        let mut held = std::mem::take(&mut self.held).into_vec();
        if let Some(place) = held.iter_mut().find(|r| r.0 .0 == f64::INFINITY) {
            place.0 .0 = at;
        }
        self.held = BinaryHeap::from(held);
    }
}

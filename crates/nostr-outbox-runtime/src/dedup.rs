//! The feed's de-duplication of notes delivered by several relays, bounded in memory.

use std::collections::{HashSet, VecDeque};

use nostr::event::EventId;

/// Remembers recent event ids, forgetting the oldest beyond a capacity.
#[derive(Debug)]
pub(crate) struct Dedup {
    set: HashSet<EventId>,
    order: VecDeque<EventId>,
    capacity: usize,
}

impl Dedup {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Whether `id` is remembered.
    pub(crate) fn contains(&self, id: &EventId) -> bool {
        self.set.contains(id)
    }

    /// True the first time an id is seen.
    pub(crate) fn insert(&mut self, id: EventId) -> bool {
        if !self.set.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_forgets_the_oldest_beyond_capacity() {
        let mut d = Dedup::new(2);
        let id = |n: u8| EventId::from_byte_array([n; 32]);
        assert!(d.insert(id(1)));
        assert!(!d.insert(id(1)));
        assert!(d.insert(id(2)));
        assert!(d.insert(id(3)));
        assert!(d.insert(id(1)), "oldest id was forgotten");
        assert!(!d.insert(id(3)));
    }
}

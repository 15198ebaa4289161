//! The guard against replays and floods on a relay's answers to one `REQ`, for every read that
//! goes through an exchange (`crate::exchange`): route feeds (`req`, `get`, `thread`, `dms`,
//! `search`, the inbox), lookups and probes. The feed's slots count the same way per
//! connection (`slot`): an event sent again on its subscription, or one outside what was asked,
//! is unrequested, and more than [`RuntimeConfig::max_unrequested`] beyond the events asked
//! for ends the conversation as a flood.
//!
//! A replayed event is recognised by its id before it is verified, so a relay replaying its
//! stored events after the `EOSE` costs parsing only, and only up to the bound.
//!
//! [`RuntimeConfig::max_unrequested`]: crate::config::RuntimeConfig::max_unrequested

use nostr::event::EventId;

use crate::dedup::Dedup;

/// Ids remembered per subscription to recognise replays (the newest ones): a page's answer, at
/// most its cap when the relay is honest, and the newest live events.
pub const MAX_SEEN: usize = 10_000;

/// What the guard says of one event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not sent before: admit it.
    New,
    /// Unrequested (sent before, or not what was asked), within the bound: skip it.
    Skip,
    /// Unrequested beyond the bound: the relay floods; this many so far.
    Flooded(u64),
}

/// Counts one subscription's unrequested events and remembers the ids it sent.
#[derive(Debug)]
pub(crate) struct FloodGuard {
    seen: Dedup,
    /// Events asked for: the cap on stored events.
    asked: u64,
    /// Unrequested events counted so far.
    unrequested: u64,
    /// Unrequested events allowed beyond `asked`.
    max: u64,
}

impl FloodGuard {
    /// A guard for a subscription that asked for `asked` stored events, allowing `max`
    /// unrequested ones beyond them.
    pub(crate) fn new(asked: usize, max: u64) -> Self {
        Self {
            seen: Dedup::new(MAX_SEEN),
            asked: asked as u64,
            unrequested: 0,
            max,
        }
    }

    /// Before an event is verified: one already sent on this subscription is a replay.
    pub(crate) fn arrived(&mut self, id: &EventId) -> Verdict {
        if self.seen.contains(id) {
            self.unrequested()
        } else {
            Verdict::New
        }
    }

    /// The event was admitted: remembered, so it is not taken again.
    pub(crate) fn admitted(&mut self, id: EventId) {
        self.seen.insert(id);
    }

    /// One unrequested event counted.
    pub(crate) fn unrequested(&mut self) -> Verdict {
        self.unrequested += 1;
        if self.unrequested > self.max.saturating_add(self.asked) {
            Verdict::Flooded(self.unrequested)
        } else {
            Verdict::Skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_and_unasked_events_count_up_to_the_bound() {
        let mut guard = FloodGuard::new(2, 3);
        let (a, b) = (
            EventId::from_byte_array([0; 32]),
            EventId::from_byte_array([1; 32]),
        );
        assert_eq!(guard.arrived(&a), Verdict::New);
        guard.admitted(a);
        assert_eq!(guard.arrived(&b), Verdict::New);
        guard.admitted(b);
        for _ in 0..4 {
            assert_eq!(guard.arrived(&a), Verdict::Skip);
        }
        assert_eq!(guard.unrequested(), Verdict::Skip);
        assert_eq!(guard.arrived(&b), Verdict::Flooded(6));
    }
}

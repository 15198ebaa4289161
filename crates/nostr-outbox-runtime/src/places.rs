//! How a feed's relays fit the places the socket budget leaves lasting work.
//!
//! The reader's relays and the indexers are feed slots like the routed relays, and each slot
//! needs a socket of its own. When they do not all fit beside the reserve for short work:
//!
//! - a continuing feed, whose slots hold their subscriptions open for live notes, keeps its
//!   whole routed budget and takes the places in turns: the coordinator makes a relay that has
//!   answered (or has held its place a turn) give it to one waiting and asks it again, since it
//!   gave the place up, a turn later ([`OpenFeed::turn_every`](crate::OpenFeed::turn_every)),
//!   so a note on a relay without a place waits at most about two turns. (A cut budget would
//!   leave follows on the reader's relays, where their new notes may never be.)
//! - a one-shot run cuts its routed budget to the places left beside the reader's relays and
//!   indexers: every slot then holds its place for the run, and none waits behind another.
//!   When no place is left, the whole routed budget is kept and the places are time-shared (a
//!   slot that has answered everything gives its place to one waiting: see the slot's
//!   `answered`).
//!
//! `start` fits a feed before it runs.

/// How the feed's relays fit the lasting places ([`FeedSummary::places`](crate::FeedSummary)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "fit")]
pub enum Places {
    /// No bound, or a place for every slot.
    #[default]
    Enough,
    /// A one-shot run whose reader's relays and indexers take every place: the slots take
    /// turns, one that has answered giving its place to one waiting.
    Shared {
        /// Lasting places: `max_sockets - reserve`.
        places: usize,
        /// The slots that may want one: reader relays, indexers and the routed budget.
        slots: usize,
    },
    /// A continuing feed whose relays do not all fit: a relay that has answered gives its place
    /// to one waiting and is asked again, since then, `every` later. A note on a
    /// relay without a place waits at most about twice that ([`Places::bound`]) while relays
    /// answer promptly.
    Turns {
        /// Lasting places: `max_sockets - reserve`.
        places: usize,
        /// The slots that may want one: reader relays, indexers and the routed budget.
        slots: usize,
        /// How long a relay rests before it is asked again.
        every: std::time::Duration,
    },
    /// The routed budget was cut to the places left beside the reader's relays and indexers
    /// (at least one such place was left).
    Cut {
        /// Lasting places: `max_sockets - reserve`.
        places: usize,
        /// The routed budget left (0: the reader's relays carry every follow).
        routed: usize,
    },
}

impl Places {
    /// With turns, the longest a note on a relay without a place waits while relays answer
    /// promptly: a rest, then waiting for a place as long again at most.
    pub fn bound(&self) -> Option<std::time::Duration> {
        match self {
            Places::Turns { every, .. } => Some(every.saturating_mul(2)),
            _ => None,
        }
    }
}

impl std::fmt::Display for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Places::Enough => f.write_str("a socket for every relay"),
            Places::Shared { places, slots } => write!(
                f,
                "{places} places time-shared by up to {slots} relays (each gives its place up once it has answered)"
            ),
            Places::Turns {
                places,
                slots,
                every,
            } => write!(
                f,
                "{places} places taken in turns by up to {slots} relays: each asked again since its last answer every {} s, a note waiting at most about {} s",
                every.as_secs_f64(),
                every.saturating_mul(2).as_secs_f64()
            ),
            Places::Cut { places, routed: 0 } => write!(
                f,
                "{places} places, all taken by the reader's relays: nothing routed, they carry every follow"
            ),
            Places::Cut { places, routed } => write!(
                f,
                "{places} places: the routed budget cut to {routed} beside the reader's relays"
            ),
        }
    }
}

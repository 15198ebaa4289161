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
//! - a one-shot run keeps its whole routed budget too and time-shares the places (a slot that
//!   has answered everything gives its place to one waiting: see the slot's `answered`). So a
//!   run with one more socket asks the same relays, sooner: never fewer notes. (A budget cut
//!   to the places left beside the reader's relays would plan fewer relays with fewer
//!   sockets, and a different plan at each size.) A place is kept for each reader relay and
//!   indexer until its socket opens, so they never wait behind a routed relay that is slow to
//!   connect; a routed relay still dialling past its bound (the schedule's `slow_dial`) gives
//!   its place up as its follows are asked elsewhere.
//!
//! `start` fits a feed before it runs.

/// How the feed's relays fit the lasting places ([`FeedSummary::places`](crate::FeedSummary)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "fit")]
pub enum Places {
    /// No bound, or a place for every slot.
    #[default]
    Enough,
    /// A one-shot run whose relays do not all fit: the slots take turns, one that has answered
    /// giving its place to one waiting.
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
        }
    }
}

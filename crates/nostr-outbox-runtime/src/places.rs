//! How a feed's relays fit the places the socket budget leaves lasting work.
//!
//! The reader's relays and the indexers are feed slots like the routed relays, and each slot
//! needs a socket of its own. When they do not all fit beside the reserve for short work, the
//! routed budget is cut to the places left beside the reader's relays and indexers: every slot
//! then holds its place for the run, and none waits behind another (a slot that gave its place
//! up and is asked again by a re-plan would wait behind relays that may take a connect
//! timeout to fail). When no place is left, a continuing feed, whose slots hold their
//! subscriptions open for live notes, routes nothing and the reader's relays carry every
//! follow; a one-shot run keeps its whole routed budget and time-shares the places (a slot
//! that has answered everything gives its place to one waiting: see the slot's `answered`),
//! so it still reaches the relays the follows write to. `start` fits a feed before it runs.

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
    /// The routed budget was cut to the places left beside the reader's relays and indexers
    /// (a one-shot run with at least one such place, or a continuing feed).
    Cut {
        /// Lasting places: `max_sockets - reserve`.
        places: usize,
        /// The routed budget left (0: the reader's relays carry every follow).
        routed: usize,
    },
}

impl std::fmt::Display for Places {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Places::Enough => f.write_str("a socket for every relay"),
            Places::Shared { places, slots } => write!(
                f,
                "{places} places time-shared by up to {slots} relays (each gives its place up once it has answered)"
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

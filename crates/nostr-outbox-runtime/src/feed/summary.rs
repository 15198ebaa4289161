//! What a feed reports when it ends.

use std::collections::BTreeMap;
use std::time::Duration;

use nostr::key::PublicKey;
use nostr_outbox_client::Carriers;
use nostr_outbox_core::{DeliveryStats, RawRelayList};
use serde::Serialize;

use crate::connection::sockets::SocketStats;
use crate::feed::places::Places;
use crate::feed::slot::FrameDrop;
use crate::penalty::PenaltyBox;

/// What a relay did during the feed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RelayOutcome {
    /// Authors in its last feed filter.
    pub authors: usize,
    /// Feed REQs sent to it (first REQs and in-place replacements).
    pub reqs: u64,
    /// Notes it delivered first.
    pub events: u64,
    /// Whether its last feed filter reached EOSE.
    pub answered: bool,
    /// Failed attempts.
    pub failures: u32,
    /// Successful connections.
    pub connections: u32,
    /// Feed REQs sent: every page of every author chunk, as reported at each EOSE.
    pub pages: u64,
    /// Relay-list lookup REQs sent, counted the same way.
    pub lookup_pages: u64,
    /// Feed events received, page-edge repeats and notes other relays delivered first
    /// included: what the relay made us transfer.
    pub received: u64,
    /// Its last answered feed filter was fetched completely (no chunk was cut off by the page
    /// budget).
    pub complete: bool,
    /// A re-plan closed its feed REQ before it answered (its follows went to other relays).
    pub replanned_away: bool,
    /// It answered with none of its follows' notes where other relays returned some, and was
    /// left out of the feed's later plans, its follows asked elsewhere
    /// ([`RoundRecorder::empty_answers`](nostr_outbox_client::RoundRecorder::empty_answers)).
    pub empty: bool,
}

/// How a relay that asked for sign-in (NIP-42, `auth-required:`) was answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthOutcome {
    /// It accepted our AUTH event and was asked again.
    SignedIn,
    /// The client has no signer ([`Client::signer`](crate::Client::signer)): it was set aside.
    NoKeys,
    /// Signing in did not help (refused, no challenge or no `OK` in time, or still refused
    /// after): it was set aside. The reason is the relay's text; escape it before display.
    Failed(String),
}

/// One probed relay ([`nostr_outbox_core::probe`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeOutcome {
    /// Follows it was asked about.
    pub authors: usize,
    /// It sent EOSE.
    pub answered: bool,
    /// Distinct notes of the asked follows it returned within the window (learned from).
    pub events: u64,
    /// Of those, notes no relay had delivered before: passed on to the feed as
    /// [`FeedEvent::Found`](crate::FeedEvent::Found).
    #[serde(default)]
    pub found: u64,
    /// Why it did not answer, as the socket or the relay said it; escape it before display.
    pub failure: Option<String>,
}

/// What probing did: relays the run did not ask, each asked after the fetch about the follows
/// who list it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProbeSummary {
    /// Per probed relay whose probe answered or failed, by canonical URL.
    pub relays: BTreeMap<String, ProbeOutcome>,
}

impl ProbeSummary {
    /// Relays probed.
    pub fn probed(&self) -> usize {
        self.relays.len()
    }

    /// Relays that answered their probe.
    pub fn answered(&self) -> usize {
        self.relays.values().filter(|r| r.answered).count()
    }

    /// Notes the probes returned.
    pub fn events(&self) -> u64 {
        self.relays.values().map(|r| r.events).sum()
    }

    /// Notes the probes found that no relay had delivered: what probing added to the feed.
    pub fn found(&self) -> u64 {
        self.relays.values().map(|r| r.found).sum()
    }
}

/// The `format` of a serialised [`FeedSummary`] document (`outbox feed --summary-json`):
/// `{"format": SUMMARY_FORMAT, "summary": {...}}`.
pub const SUMMARY_FORMAT: &str = "outbox-feed-summary/1";

/// The outcome of a feed, returned when it ends.
///
/// It serialises (`serde`) for tools, durations as serde's `{"secs", "nanos"}`, without the
/// learned [`stats`](Self::stats) and the [`lists`](Self::lists), which are large and kept by
/// the store.
#[derive(Clone, Debug, Serialize)]
pub struct FeedSummary {
    /// Distinct notes delivered.
    pub events: u64,
    /// Follows.
    pub follows: usize,
    /// Follows named in the filter of a relay whose last feed REQ reached EOSE.
    pub authors_covered: usize,
    /// Relays sent a feed REQ.
    pub relays_asked: usize,
    /// Relays whose feed REQ reached EOSE (the last one, or one a re-plan closed afterwards).
    pub relays_answered: usize,
    /// Relays asked that did not answer (set aside, or still failing at the end), refusals
    /// for payment or sign-in aside.
    pub relays_failed: usize,
    /// Relays asked whose feed REQ a re-plan closed before they answered: not failures.
    pub relays_replanned_away: usize,
    /// Relays asked that serve only readers who pay or sign in, which this run could not (their
    /// document, a monitor's report or their `CLOSED` said so): not failures.
    pub relays_refused: usize,
    /// Relays set aside during the feed.
    pub penalised: Vec<String>,
    /// Relays that asked for sign-in (NIP-42), by canonical URL, and how the last request
    /// was answered.
    pub auth: BTreeMap<String, AuthOutcome>,
    /// Relay lists known at the end.
    pub relay_lists: usize,
    /// Relay lists (new, or newer than the one known) that an indexer delivered before any of
    /// the reader's relays did: what the indexers added.
    pub lists_from_indexers: usize,
    /// Discovery relays whose relay lists were reconciled (NIP-77) with the kept ones instead
    /// of paged: only the lists that changed came
    /// ([`RuntimeConfig::sync_lists`](crate::RuntimeConfig::sync_lists)).
    pub lists_reconciled: usize,
    /// Plans made.
    pub plans: u64,
    /// From start to the first note.
    pub time_to_first_event: Option<Duration>,
    /// From start until 90% of the notes that arrived before the plan settled had arrived.
    pub time_to_90_percent: Option<Duration>,
    /// From start to the first moment every slot had answered or been set aside.
    pub time_to_full_eose: Option<Duration>,
    /// The run stopped at the end of its EOSE race, before every relay answered.
    pub raced: bool,
    /// The run stopped at its [`RuntimeConfig::deadline`](crate::RuntimeConfig::deadline): before every relay answered or was
    /// set aside, or while probing after the fetch.
    pub deadline_reached: bool,
    /// Relays still awaited (a feed or lookup not answered) when the run stopped at its
    /// deadline or at the end of its EOSE race, by canonical URL.
    pub pending: Vec<String>,
    /// The planning seed of this run (see [`RuntimeConfig::seed`](crate::RuntimeConfig::seed)).
    pub seed: u64,
    /// Who carried the residual in the last plan.
    pub carriers: Carriers,
    /// Follows asked of no relay because no plan could be applied (0 when every follow was
    /// asked somewhere).
    pub uncovered: usize,
    /// Follows with nowhere to be read: every relay their list says they write to was set
    /// aside (refused, needs payment or sign-in the run could not give, or failed). The
    /// reader's relays may have been asked in their place, so they can still count as covered.
    pub unreadable: Vec<PublicKey>,
    /// How many relays the last applied plan told about each follow (each learns the reader
    /// follows them): the privacy side of recall.
    pub disclosure: nostr_outbox_core::Disclosure,
    /// Plans that broke an invariant and were not applied.
    pub plans_rejected: u64,
    /// Per relay, up to when it delivered everything it holds for the follows it was asked
    /// about (the newest first): give them back as [`FeedInput::marks`](crate::FeedInput::marks)
    /// so the next run asks each relay only for what is new.
    #[serde(skip)]
    pub marks: Vec<crate::RelayMark>,
    /// The relay lists known at the end (persist them so the next run plans routed at once).
    #[serde(skip)]
    pub lists: Vec<RawRelayList>,
    /// From start to the end.
    pub elapsed: Duration,
    /// REQs sent to fetch the feed and the relay lists (pages of every chunk on every relay).
    pub round_trips: u64,
    /// Feed events received from all relays, duplicates included (the transfer behind
    /// [`events`](Self::events)).
    pub events_received: u64,
    /// Relays whose last answered feed filter was cut off by the page budget.
    pub relays_incomplete: usize,
    /// Frames dropped, by reason.
    pub dropped: BTreeMap<FrameDrop, u64>,
    /// Per relay, by canonical URL.
    pub relays: BTreeMap<String, RelayOutcome>,
    /// The sockets when the feed ended: the most open at once (for every purpose that shares
    /// them), dials and joins.
    pub sockets: SocketStats,
    /// How the feed's relays fit the socket budget: a place each, time-shared, or cut.
    pub places: Places,
    /// What probing did (relays probed are not among [`relays`](Self::relays) nor counted in
    /// [`relays_asked`](Self::relays_asked): the run did not ask them for its feed).
    pub probes: ProbeSummary,
    /// The learned stats at the end (also saved to the store).
    #[serde(skip)]
    pub stats: DeliveryStats,
    /// The penalty box at the end (persist it to remember set-aside relays).
    pub penalties: PenaltyBox,
    /// Why saving the stats failed, if it did.
    pub stats_error: Option<String>,
}

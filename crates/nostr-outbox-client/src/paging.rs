//! Fetching a window completely from relays that cap each REQ: author chunks and backward pages.
//!
//! Real relays return at most some number of events per filter (strfry's default is 500,
//! others 100–5,000), refuse messages above a size, and cap filters and subscriptions. A year of
//! a prolific author is many pages. This module is the one description of how the project pages,
//! IO-free, so the runtime (over WebSockets) and the simulator (over a world) page identically:
//!
//! 1. **Chunks.** A relay's author list is split so each REQ fits its limits
//!    ([`chunk_sizes`]): at most [`Paging::max_authors`] authors, and a REQ no longer than the
//!    relay's `max_message_length` (or [`Paging::message_budget`] when unknown).
//! 2. **Pages.** Each chunk is asked with `limit` = the smaller of [`Paging::page_limit`] and
//!    the relay's published `max_limit`. When a page is *full* ([`CapEstimate::is_full`]), the
//!    next page asks `until` = the oldest `created_at` seen, inclusive, so events sharing that
//!    second are not lost at the page edge; ids already seen are de-duplicated by the caller.
//! 3. **End.** A chunk is done when a page is not full, brings nothing new, reaches `since`, or
//!    the page budget ([`Paging::max_pages`]) runs out ([`Ended`]); only the last means the
//!    window may be incomplete, and learning must then not read the relay's silence about older
//!    notes as missing history.
//!
//! Without a published `max_limit` a relay's cap is unknown and may be below what was asked.
//! A page is then taken as full when it returned at least as many events as the relay has ever
//! returned in one page, and never fewer than [`Paging::cap_floor`] (no relay measured caps
//! lower): a silent cap shows as pages of equal size.

use serde::{Deserialize, Serialize};

/// Bytes of a REQ that are not author keys (`["REQ","id",{"kinds":[..],"since":..,...}]`),
/// rounded up generously.
const REQ_OVERHEAD: usize = 256;
/// Bytes one author adds to a REQ: 64 hex digits, two quotes and a comma.
const BYTES_PER_AUTHOR: usize = 67;

/// What a relay publishes about its limits (NIP-11 `limitation`), all optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayLimits {
    /// Largest `limit` the relay honours per filter.
    pub max_limit: Option<u32>,
    /// Filters per REQ.
    pub max_filters: Option<u32>,
    /// Open subscriptions per connection.
    pub max_subscriptions: Option<u32>,
    /// Longest message (bytes) the relay accepts.
    pub max_message_length: Option<u32>,
    /// The relay asks clients to sign in (NIP-42) before reading.
    pub auth_required: bool,
    /// The relay asks for payment before use.
    pub payment_required: bool,
}

/// How the project pages; the defaults suit the public network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Paging {
    /// `limit` asked per filter (lowered to a relay's published `max_limit`).
    pub page_limit: u32,
    /// With no published `max_limit`, a page of at least this many events counts as full.
    pub cap_floor: u32,
    /// Pages per chunk at most: a bound on what one relay can make us fetch.
    pub max_pages: u32,
    /// Most authors per filter.
    pub max_authors: usize,
    /// Longest REQ sent to a relay that publishes no `max_message_length` (bytes). strfry's
    /// default maximum message is 131,072 bytes; half of it leaves room for stricter relays.
    pub message_budget: usize,
}

impl Default for Paging {
    fn default() -> Self {
        Self {
            page_limit: 500,
            cap_floor: 100,
            max_pages: 200,
            max_authors: 500,
            message_budget: 65_536,
        }
    }
}

impl Paging {
    /// The `limit` to ask of a relay with these limits.
    pub fn limit_for(&self, limits: &RelayLimits) -> u32 {
        let asked = self.page_limit.max(1);
        limits.max_limit.map_or(asked, |max| asked.min(max.max(1)))
    }

    /// Most authors one filter may name on a relay with these limits (at least 1).
    pub fn authors_per_filter(&self, limits: &RelayLimits) -> usize {
        let budget = limits
            .max_message_length
            .map_or(self.message_budget, |m| m as usize);
        let by_size = budget.saturating_sub(REQ_OVERHEAD) / BYTES_PER_AUTHOR;
        by_size.min(self.max_authors).max(1)
    }
}

/// The sizes of the chunks `authors` authors are split into for a relay with these limits: as
/// even as possible, in order, none empty. Zero authors give no chunks.
pub fn chunk_sizes(authors: usize, limits: &RelayLimits, paging: &Paging) -> Vec<usize> {
    if authors == 0 {
        return Vec::new();
    }
    let per = paging.authors_per_filter(limits);
    let chunks = authors.div_ceil(per);
    let (base, extra) = (authors / chunks, authors % chunks);
    (0..chunks).map(|i| base + usize::from(i < extra)).collect()
}

/// Splits `authors` into chunks for a relay with these limits ([`chunk_sizes`]).
pub fn chunk<T: Clone>(authors: &[T], limits: &RelayLimits, paging: &Paging) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut rest = authors;
    for size in chunk_sizes(authors.len(), limits, paging) {
        let (head, tail) = rest.split_at(size);
        out.push(head.to_vec());
        rest = tail;
    }
    out
}

/// What is known of one relay's per-filter cap: published, or seen in the pages it returned.
/// Shared by every chunk asked of the relay in one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapEstimate {
    known: Option<u32>,
    largest_page: u32,
}

impl CapEstimate {
    /// An estimate from the relay's published limits.
    pub fn new(limits: &RelayLimits) -> Self {
        Self {
            known: limits.max_limit,
            largest_page: 0,
        }
    }

    /// Whether a page that returned `returned` events when `limit` was asked may have been cut
    /// off by the relay's cap (so older events may remain).
    pub fn is_full(&self, returned: u32, limit: u32, paging: &Paging) -> bool {
        let threshold = match self.known {
            Some(max) => limit.min(max.max(1)),
            None => limit.min(paging.cap_floor.max(self.largest_page).max(1)),
        };
        returned >= threshold
    }

    /// Remembers a page's size.
    pub fn observe(&mut self, returned: u32) {
        self.largest_page = self.largest_page.max(returned);
    }
}

/// Why a chunk's paging ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The last page was not full: the relay returned all it had.
    Complete,
    /// A full page brought no event not already seen.
    NothingNew,
    /// The oldest event reached the window's start.
    ReachedSince,
    /// The page budget ran out: older events may remain unfetched.
    Budget,
}

impl Ended {
    /// Whether the relay returned everything it holds in the window.
    pub fn is_complete(self) -> bool {
        self != Ended::Budget
    }
}

/// One page's answer, as the caller saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// Events the relay returned for the page (matching, verified), duplicates included.
    pub returned: u32,
    /// Of those, events not seen before in this chunk.
    pub new: u32,
    /// The oldest `created_at` among the returned events.
    pub oldest: Option<u64>,
}

/// What to do after a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Ask the same chunk again with this `until` (inclusive).
    Page {
        /// Newest `created_at` the next page may return.
        until: u64,
    },
    /// The chunk is done.
    Done(Ended),
}

/// The paging state of one chunk on one relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    limit: u32,
    since: Option<u64>,
    until: Option<u64>,
    pages: u32,
}

impl Cursor {
    /// A chunk about to send its first page: `limit` from [`Paging::limit_for`], `since` the
    /// window's start.
    pub fn new(limit: u32, since: Option<u64>) -> Self {
        Self {
            limit: limit.max(1),
            since,
            until: None,
            pages: 0,
        }
    }

    /// The `limit` of every page of this chunk.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The `until` of the next page (`None` for the first).
    pub fn until(&self) -> Option<u64> {
        self.until
    }

    /// Pages answered so far.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Takes one page's answer (and teaches `cap` its size); says whether to ask again.
    pub fn answer(&mut self, page: Page, cap: &mut CapEstimate, paging: &Paging) -> Next {
        self.pages = self.pages.saturating_add(1);
        let full = cap.is_full(page.returned, self.limit, paging);
        cap.observe(page.returned);
        if !full {
            return Next::Done(Ended::Complete);
        }
        if page.new == 0 {
            return Next::Done(Ended::NothingNew);
        }
        let Some(oldest) = page.oldest else {
            return Next::Done(Ended::Complete);
        };
        if self.since.is_some_and(|since| oldest <= since) {
            return Next::Done(Ended::ReachedSince);
        }
        if self.pages >= paging.max_pages.max(1) {
            return Next::Done(Ended::Budget);
        }
        // A full page inside one second would come back unchanged with an inclusive `until`;
        // step past that second rather than loop (more than `limit` notes in one second by the
        // asked authors: the rest of it is given up).
        let until = if self.until == Some(oldest) {
            oldest.saturating_sub(1)
        } else {
            oldest
        };
        self.until = Some(until);
        Next::Page { until }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(
        history: &[u64],
        cap: u32,
        paging: &Paging,
        known: Option<u32>,
    ) -> (usize, u32, Ended) {
        // `history` newest first; a relay returns the newest `min(limit, cap)` at or before until.
        let limits = RelayLimits {
            max_limit: known,
            ..RelayLimits::default()
        };
        let mut est = CapEstimate::new(&limits);
        let mut cursor = Cursor::new(paging.limit_for(&limits), None);
        let mut seen = std::collections::HashSet::new();
        loop {
            let page: Vec<(usize, u64)> = history
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, t)| cursor.until().is_none_or(|u| *t <= u))
                .take(cursor.limit().min(cap) as usize)
                .collect();
            let new = page.iter().filter(|(i, _)| seen.insert(*i)).count() as u32;
            let answer = Page {
                returned: page.len() as u32,
                new,
                oldest: page.iter().map(|(_, t)| *t).min(),
            };
            if let Next::Done(why) = cursor.answer(answer, &mut est, paging) {
                return (seen.len(), cursor.pages(), why);
            }
        }
    }

    #[test]
    fn pages_through_a_deep_history_without_losing_same_second_events() {
        // 1,234 events, three per second: page edges fall inside seconds.
        let history: Vec<u64> = (0..1234u64).map(|i| 1_000_000 - i / 3).collect();
        let paging = Paging::default();
        let (got, pages, why) = drive(&history, 500, &paging, Some(500));
        assert_eq!(got, 1234);
        assert_eq!(why, Ended::Complete);
        assert_eq!(pages, 3);
        // Unknown cap below what we ask: still everything.
        let (got, _, why) = drive(&history, 300, &paging, None);
        assert_eq!(got, 1234);
        assert!(why.is_complete());
    }

    #[test]
    fn a_page_under_a_known_cap_ends_the_chunk_at_once() {
        let history: Vec<u64> = (0..40u64).map(|i| 1_000 - i).collect();
        let (got, pages, why) = drive(&history, 500, &Paging::default(), Some(500));
        assert_eq!((got, pages, why), (40, 1, Ended::Complete));
        // Unknown cap: 40 is under the floor, also one page.
        let (_, pages, _) = drive(&history, 500, &Paging::default(), None);
        assert_eq!(pages, 1);
    }

    #[test]
    fn a_silent_cap_is_paged_through() {
        let history: Vec<u64> = (0..450u64).map(|i| 10_000 - i).collect();
        let (got, pages, why) = drive(&history, 150, &Paging::default(), None);
        assert_eq!(got, 450);
        assert_eq!(why, Ended::Complete);
        assert_eq!(
            pages, 4,
            "3 full pages of 150, then one that brings only the edge"
        );
    }

    #[test]
    fn the_page_budget_ends_paging_and_says_so() {
        let history: Vec<u64> = (0..5000u64).map(|i| 100_000 - i).collect();
        let paging = Paging {
            max_pages: 3,
            ..Paging::default()
        };
        let (got, pages, why) = drive(&history, 500, &paging, Some(500));
        // One event per second: each later page repeats the edge event once.
        assert_eq!((got, pages, why), (1498, 3, Ended::Budget));
        assert!(!why.is_complete());
    }

    #[test]
    fn more_than_a_page_in_one_second_terminates() {
        let history = vec![5u64; 1200];
        let (_, pages, _) = drive(&history, 500, &Paging::default(), Some(500));
        assert!(pages <= 3, "{pages}");
    }

    #[test]
    fn chunks_fit_the_message_budget_and_are_even() {
        let paging = Paging::default();
        let small = RelayLimits {
            max_message_length: Some(131_072),
            ..RelayLimits::default()
        };
        // 131,072 bytes fit 1,952 authors; max_authors caps at 500.
        assert_eq!(chunk_sizes(2000, &small, &paging), vec![500; 4]);
        let tiny = RelayLimits {
            max_message_length: Some(256 + 67 * 10),
            ..RelayLimits::default()
        };
        assert_eq!(chunk_sizes(25, &tiny, &paging), vec![9, 8, 8]);
        assert!(chunk_sizes(0, &tiny, &paging).is_empty());
        let keys: Vec<u32> = (0..25).collect();
        let chunks = chunk(&keys, &tiny, &paging);
        assert_eq!(chunks.concat(), keys);
        // A limit of zero is never asked.
        let zero = RelayLimits {
            max_limit: Some(0),
            max_message_length: Some(0),
            ..RelayLimits::default()
        };
        assert_eq!(paging.limit_for(&zero), 1);
        assert_eq!(paging.authors_per_filter(&zero), 1);
    }
}

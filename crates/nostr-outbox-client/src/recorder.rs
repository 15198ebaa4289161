//! From relay frames to a [`RoundReport`]: what a client took note of since the last round.
//!
//! The runtime, the simulator and any client with its own relay pool feed a [`RoundRecorder`]
//! what they asked and what came back, and learn from each [`RoundRecorder::take_round`] with
//! [`DeliveryStats::record_round`](nostr_outbox_core::DeliveryStats::record_round). The rules of what a
//! round holds live here once, so every client learns the same from the same frames.

use std::collections::{BTreeMap, HashMap, HashSet};

use nostr::event::{Event, EventId};
use nostr::key::PublicKey;

use nostr_outbox_core::stats::{AuthorRound, RelayRound, RoundReport};

/// Distinct event ids, hashed with foldhash (seeded at random per process, as the core's maps
/// are): every returned event is looked up here, and SipHash made it a tenth of a simulated
/// session.
type IdSet = HashSet<EventId, foldhash::fast::RandomState>;

/// Per author, every distinct note the answering relays of a round returned: what each relay
/// is compared with ([`AuthorRound::missed`]).
type Together = HashMap<PublicKey, IdSet>;

/// Follows a relay answers about with no note at all, beyond which the answer is empty even
/// where no other relay contradicts it ([`RoundRecorder::empty_answers`]): that many follows
/// all silent over the window is rare, a relay that keeps nothing common.
pub const EMPTY_FOLLOWS: usize = 10;

/// Takes notes of REQs, events, EOSEs and failures per relay, and hands them over as rounds.
///
/// A *round* is every relay whose current filter answered and was not learned from yet, plus
/// every relay that failed since the last round:
///
/// - per asked author, the distinct event ids the relay returned up to its EOSE count (what it
///   had stored); events after EOSE, for authors it was not asked about, or from a relay with
///   no filter do not;
/// - a fetch cut off early (`complete == false` at EOSE, e.g. by a page budget) is learned
///   compare-only: its counts are a lower bound of what the relay holds, so they set what
///   others are measured against but its own completeness is not judged from them;
/// - a relay that fails before its EOSE and then answers (after a reconnect) counts as
///   answered; one that fails and never answers is in the round as not answered once it is
///   closed, replaced or set aside, or when the run ends ([`take_final_round`]);
/// - a relay that fails after its answer was learned is in the next round as not answered, and
///   its answer to the same filter after reconnecting is not learned twice;
/// - a relay set aside is in the next round as not answered, whatever it answered before; a
///   relay that fails while asked nothing (a lookup-only connection) is in it with no authors;
/// - a relay that declined to serve ([`refused`]: sign-in or payment the reader lacks, rate
///   limits) is up: it is not in the round for the refusal;
/// - a filter closed or replaced by a new [`asked`] after answering, before its round was
///   learned, is learned in the next round from that answer. When replaced, one entry per
///   relay: the newest answer for authors both filters named, the older for the rest;
/// - every relay whose current answer was learned in an earlier round joins each later round as
///   compare-only (a yardstick), so a relay alone in a later round is measured against the
///   relays that already answered for its authors instead of against nobody.
///
/// A relay still waiting for its EOSE is left out of [`take_round`] (it may still answer);
/// [`take_final_round`] counts it as not answered if it failed since its REQ.
///
/// Only pass events the client accepted for that relay's subscription (verified, matching the
/// filter): the recorder checks the author, nothing else.
///
/// [`asked`]: Self::asked
/// [`refused`]: Self::refused
/// [`take_round`]: Self::take_round
/// [`take_final_round`]: Self::take_final_round
///
/// ```
/// use nostr::event::{EventBuilder, FinalizeEvent, Kind};
/// use nostr::key::Keys;
/// use nostr_outbox_client::RoundRecorder;
/// use nostr_outbox_core::DeliveryStats;
///
/// let alice = Keys::generate();
/// let note = EventBuilder::new(Kind::TextNote, "hi").finalize(&alice).unwrap();
/// let mut recorder = RoundRecorder::new();
/// // REQ sent: generation 1 of each relay's filter.
/// recorder.asked("wss://a.example", [alice.public_key()], 1);
/// recorder.asked("wss://b.example", [alice.public_key()], 1);
/// // Frames as they arrive.
/// recorder.event("wss://a.example", &note);
/// recorder.event("wss://a.example", &note); // the same id again: counted once
/// recorder.eose("wss://a.example", 1, true);
/// recorder.failed("wss://b.example", "connection refused");
/// // The client gives up on b: closing its subscription puts the failure in the round.
/// recorder.closed("wss://b.example");
///
/// let mut stats = DeliveryStats::new();
/// let round = recorder.take_round().expect("a answered, b failed");
/// stats.record_round(&round, 1_700_000_000);
/// assert!(stats.get("wss://a.example").live_mean() > 0.5);
/// assert!(stats.get("wss://b.example").live_mean() < 0.5);
/// // Nothing new since: no round.
/// assert!(recorder.take_round().is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct RoundRecorder {
    /// The current filter per relay (canonical URL).
    feeds: BTreeMap<String, Feed>,
    /// Relays that failed since the last round, with the authors they were asked about.
    down: BTreeMap<String, Vec<PublicKey>>,
    /// Answers of filters closed or replaced before their round was learned.
    closed: Vec<RelayRound>,
}

/// One relay's current filter and what it returned for it.
#[derive(Clone, Debug)]
struct Feed {
    /// Sorted, without duplicates.
    authors: Vec<PublicKey>,
    generation: u64,
    /// EOSE arrived for this generation (and no failure since).
    answered: bool,
    /// Distinct ids per author, indexed like `authors`, up to EOSE.
    returned: Vec<IdSet>,
    /// Per author, indexed like `authors`: the `created_at` range of what was returned.
    ages: Vec<Option<(u64, u64)>>,
    /// This generation's answer was learned (or its failure queued): not learned again.
    recorded: bool,
    /// Failed since this generation's REQ and has not answered since.
    failed: bool,
    /// The last EOSE said the fetch was complete.
    complete: bool,
    /// A probe's filters asked at most this many notes per author ([`RoundRecorder::probed`]).
    limit: Option<u32>,
}

impl Feed {
    fn new(authors: Vec<PublicKey>, generation: u64) -> Self {
        Self {
            limit: None,
            returned: vec![IdSet::default(); authors.len()],
            ages: vec![None; authors.len()],
            authors,
            generation,
            answered: false,
            recorded: false,
            failed: false,
            complete: true,
        }
    }

    fn round(&self, url: &str, compare_only: bool, together: &Together) -> RelayRound {
        RelayRound {
            url: url.to_string(),
            answered: true,
            authors: self
                .authors
                .iter()
                .zip(&self.returned)
                .zip(&self.ages)
                .map(|((author, ids), ages)| {
                    let (oldest, newest) = ages.unwrap_or((0, 0));
                    let events = u32::try_from(ids.len()).unwrap_or(u32::MAX);
                    let all = together.get(author).map_or(0, |all| all.len());
                    AuthorRound {
                        author: *author,
                        events,
                        oldest,
                        newest,
                        capped: self.limit.is_some_and(|limit| events >= limit),
                        missed: u32::try_from(all.saturating_sub(ids.len())).unwrap_or(u32::MAX),
                    }
                })
                .collect(),
            compare_only,
        }
    }
}

impl RoundRecorder {
    /// Nothing asked yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A REQ for `authors` went to `relay` as filter `generation`. It replaces the relay's
    /// current filter, which is retired as if [`closed`](Self::closed).
    pub fn asked(
        &mut self,
        relay: &str,
        authors: impl IntoIterator<Item = PublicKey>,
        generation: u64,
    ) {
        let mut authors: Vec<PublicKey> = authors.into_iter().collect();
        authors.sort_unstable();
        authors.dedup();
        if let Some(old) = self
            .feeds
            .insert(relay.to_string(), Feed::new(authors, generation))
        {
            self.retire(relay, old);
        }
    }

    /// A probe for `authors` went to `relay` as filter `generation`, asking each author's newest
    /// `limit` notes ([`nostr_outbox_core::probe`]). Recorded like [`asked`](Self::asked), except that an
    /// author whose page reached the limit is [`capped`](nostr_outbox_core::stats::AuthorRound::capped): a sample of
    /// its notes, not all of them.
    pub fn probed(
        &mut self,
        relay: &str,
        authors: impl IntoIterator<Item = PublicKey>,
        generation: u64,
        limit: u32,
    ) {
        self.asked(relay, authors, generation);
        if let Some(feed) = self.feeds.get_mut(relay) {
            feed.limit = Some(limit.max(1));
        }
    }

    /// `relay` sent `event` on its feed subscription. Returns whether it counted (a new id,
    /// for an asked author, before EOSE).
    pub fn event(&mut self, relay: &str, event: &Event) -> bool {
        self.returned(relay, event.pubkey, event.id, event.created_at.as_secs())
    }

    /// [`event`](Self::event) for a client that keeps only the author, id and `created_at`.
    pub fn returned(
        &mut self,
        relay: &str,
        author: PublicKey,
        id: EventId,
        created_at: u64,
    ) -> bool {
        let Some(feed) = self.feeds.get_mut(relay) else {
            return false;
        };
        if feed.answered {
            return false;
        }
        let Ok(i) = feed.authors.binary_search(&author) else {
            return false;
        };
        if !feed.returned[i].insert(id) {
            return false;
        }
        let ages = &mut feed.ages[i];
        *ages = Some(ages.map_or((created_at, created_at), |(o, n)| {
            (o.min(created_at), n.max(created_at))
        }));
        true
    }

    /// `relay` sent EOSE for filter `generation`; `complete` is false when the fetch was cut
    /// off (older notes may remain). Returns false, changing nothing, for an answer to a filter
    /// that was replaced since, or for a relay with no filter.
    pub fn eose(&mut self, relay: &str, generation: u64, complete: bool) -> bool {
        match self.feeds.get_mut(relay) {
            Some(feed) if feed.generation == generation => {
                feed.answered = true;
                feed.failed = false;
                feed.complete = complete;
                true
            }
            _ => false,
        }
    }

    /// `relay`'s connection failed, timed out or refused (`why`, for the trace). What it
    /// returned for its current filter is dropped: a reconnect asks again and is counted anew.
    pub fn failed(&mut self, relay: &str, why: &str) {
        tracing::debug!(relay, why, "relay failed");
        match self.feeds.get_mut(relay) {
            Some(feed) => {
                if feed.recorded {
                    // Its answer to this filter was learned; the failure is news.
                    self.down
                        .entry(relay.to_string())
                        .or_insert_with(|| feed.authors.clone());
                } else {
                    feed.failed = true;
                }
                feed.answered = false;
                feed.returned.iter_mut().for_each(IdSet::clear);
                feed.ages.iter_mut().for_each(|a| *a = None);
            }
            None => {
                self.down.entry(relay.to_string()).or_default();
            }
        }
    }

    /// The client closed `relay`'s feed subscription. A failure that never answered goes into
    /// the next round; an answer not learned yet is kept for it. Returns whether there was one.
    pub fn closed(&mut self, relay: &str) -> bool {
        match self.feeds.remove(relay) {
            Some(feed) => {
                self.retire(relay, feed);
                true
            }
            None => false,
        }
    }

    /// The client set `relay` aside (stopped using it after failures or a refusal): the next
    /// round counts it as not answered, whatever it answered before.
    pub fn set_aside(&mut self, relay: &str) {
        let authors = self
            .feeds
            .remove(relay)
            .map(|f| f.authors)
            .unwrap_or_default();
        self.down.entry(relay.to_string()).or_insert(authors);
    }

    /// The client stopped asking `relay` because it declined to serve (it needs sign-in or
    /// payment the reader lacks, or keeps asking to slow down): it is up, so nothing is learned
    /// of it from the refusal, neither an answer nor a failure. An answer it gave before, not
    /// learned yet, is kept for the next round, as when [`closed`](Self::closed).
    pub fn refused(&mut self, relay: &str) {
        if let Some(mut feed) = self.feeds.remove(relay) {
            // Answering the REQ at all shows it up, whatever failed before.
            feed.failed = false;
            self.retire(relay, feed);
        }
    }

    /// Whether `relay` has a feed filter.
    pub fn is_asked(&self, relay: &str) -> bool {
        self.feeds.contains_key(relay)
    }

    /// Whether `relay` has a filter it has not answered yet and has not failed since asked.
    pub fn is_answering(&self, relay: &str) -> bool {
        self.feeds
            .get(relay)
            .is_some_and(|f| !f.answered && !f.failed)
    }

    /// Whether `relay`'s current filter has answered.
    pub fn has_answered(&self, relay: &str) -> bool {
        self.feeds.get(relay).is_some_and(|f| f.answered)
    }

    /// Whether every current filter has answered.
    pub fn all_answered(&self) -> bool {
        self.feeds.values().all(|f| f.answered)
    }

    /// The relays whose current filter answered, with the authors it named.
    pub fn answered(&self) -> impl Iterator<Item = (&str, &[PublicKey])> {
        self.feeds
            .iter()
            .filter(|(_, f)| f.answered)
            .map(|(url, f)| (url.as_str(), f.authors.as_slice()))
    }

    /// Relays whose current filter answered, whole, with no note of any follow it was asked
    /// about, while another relay returned notes of at least one of those follows (in its
    /// current answer, or in one closed or replaced since the last round). Such a relay holds
    /// nothing of what is there to fetch for the follows it was chosen for: an indexer that
    /// keeps no notes, or a relay that prunes or lost the writes. A run that sets it aside and
    /// re-plans its follows elsewhere before it ends gets their notes in the same run instead
    /// of the next (the runtime's `--once` waves and the simulator's re-planned sessions do).
    /// The relays that carry the residual are the caller's to leave out. Sorted by URL.
    ///
    /// One answer is enough where it is contradicted: a follow silent everywhere contradicts
    /// nothing, so a relay asked only about silent follows is never named. A probe's answer
    /// (a sample) is never named.
    pub fn empty_answers(&self) -> Vec<&str> {
        let mut returned: HashSet<PublicKey> = HashSet::new();
        for feed in self.feeds.values().filter(|f| f.answered) {
            let some = feed.authors.iter().zip(&feed.returned);
            returned.extend(some.filter(|(_, ids)| !ids.is_empty()).map(|(a, _)| *a));
        }
        for answer in &self.closed {
            let some = answer.authors.iter().filter(|a| a.events > 0);
            returned.extend(some.map(|a| a.author));
        }
        self.feeds
            .iter()
            .filter(|(_, f)| f.answered && f.complete && f.limit.is_none())
            .filter(|(_, f)| f.returned.iter().all(IdSet::is_empty))
            .filter(|(_, f)| {
                f.authors.len() >= EMPTY_FOLLOWS || f.authors.iter().any(|a| returned.contains(a))
            })
            .map(|(url, _)| url.as_str())
            .collect()
    }

    /// The round since the last one, or `None` when there is nothing new to learn.
    pub fn take_round(&mut self) -> Option<RoundReport> {
        self.round(false)
    }

    /// The last round of a run: as [`take_round`](Self::take_round), and relays still waiting
    /// that failed since their REQ count as not answered (the others are left out: the run
    /// stopped, they did not fail).
    pub fn take_final_round(&mut self) -> Option<RoundReport> {
        self.round(true)
    }

    fn retire(&mut self, relay: &str, feed: Feed) {
        if feed.recorded {
            return;
        }
        if feed.failed {
            self.down.entry(relay.to_string()).or_insert(feed.authors);
        } else if feed.answered {
            // Compared with nothing: the relays it answered beside may have changed since.
            self.closed
                .push(feed.round(relay, !feed.complete, &Together::default()));
        }
    }

    fn round(&mut self, ending: bool) -> Option<RoundReport> {
        let mut report = RoundReport::default();
        let mut yardsticks = Vec::new();
        let mut together = Together::default();
        for feed in self.feeds.values().filter(|f| f.answered) {
            for (author, ids) in feed.authors.iter().zip(&feed.returned) {
                if !ids.is_empty() {
                    together
                        .entry(*author)
                        .or_default()
                        .extend(ids.iter().copied());
                }
            }
        }
        for (url, feed) in &mut self.feeds {
            if feed.recorded {
                // Learned already; its answer, if it stands, is still valid to compare with.
                if feed.answered {
                    yardsticks.push(feed.round(url, true, &together));
                }
                continue;
            }
            if feed.answered {
                feed.recorded = true;
                report
                    .relays
                    .push(feed.round(url, !feed.complete, &together));
            } else if ending && feed.failed {
                feed.recorded = true;
                self.down
                    .entry(url.clone())
                    .or_insert_with(|| feed.authors.clone());
            }
        }
        for answer in std::mem::take(&mut self.closed) {
            match report.relays.iter_mut().find(|r| r.url == answer.url) {
                Some(latest) => {
                    let named: HashSet<PublicKey> =
                        latest.authors.iter().map(|a| a.author).collect();
                    latest.authors.extend(
                        answer
                            .authors
                            .into_iter()
                            .filter(|a| !named.contains(&a.author)),
                    );
                }
                None => report.relays.push(answer),
            }
        }
        for (url, authors) in std::mem::take(&mut self.down) {
            let asked = authors.into_iter().map(|a| AuthorRound::counted(a, 0));
            report
                .relays
                .push(RelayRound::new(url, false, asked.collect()));
        }
        if report.relays.is_empty() {
            return None;
        }
        report.relays.extend(yardsticks);
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, Kind};
    use nostr::key::{Keys, SecretKey};

    const A: &str = "wss://a.example";
    const B: &str = "wss://b.example";

    fn keys(n: u8) -> Keys {
        let mut sk = [5u8; 32];
        sk[31] = n;
        Keys::new(SecretKey::from_slice(&sk).unwrap())
    }

    fn key(n: u8) -> PublicKey {
        keys(n).public_key()
    }

    fn id(n: u8) -> EventId {
        EventId::from_byte_array([n; 32])
    }

    /// A recorder whose round asked each of `relays` about follow 1 (filter 1).
    fn asking(relays: &[&str]) -> RoundRecorder {
        let mut r = RoundRecorder::new();
        for relay in relays {
            r.asked(relay, [key(1)], 1);
        }
        r
    }

    /// `relay` returns note `n` of follow 1, then ends its answer to filter 1 (`whole`: not cut
    /// off).
    fn answers(r: &mut RoundRecorder, relay: &str, n: u8, whole: bool) {
        r.returned(relay, key(1), id(n), 1_700_000_000);
        r.eose(relay, 1, whole);
    }

    /// One relay of a round: (url, answered, compare_only, events per author sorted by author).
    type Seen = (String, bool, bool, Vec<(PublicKey, u32)>);

    /// The relays of a round, sorted by URL then compare-only.
    fn summary(report: &RoundReport) -> Vec<Seen> {
        let mut out: Vec<_> = report
            .relays
            .iter()
            .map(|r| {
                let mut authors: Vec<_> = r.authors.iter().map(|a| (a.author, a.events)).collect();
                authors.sort();
                (r.url.clone(), r.answered, r.compare_only, authors)
            })
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0).then(x.2.cmp(&y.2)));
        out
    }

    /// What one relay of a round saw, as [`summary`] lists it (authors in any order).
    fn seen(url: &str, answered: bool, compare_only: bool, authors: &[(PublicKey, u32)]) -> Seen {
        let mut authors = authors.to_vec();
        authors.sort();
        (url.to_string(), answered, compare_only, authors)
    }

    /// What one relay of a round saw when asked about follow 1 alone, as [`summary`] lists it.
    fn seen_one(url: &str, answered: bool, compare_only: bool, events: u32) -> Seen {
        seen(url, answered, compare_only, &[(key(1), events)])
    }

    /// The round `r` closes now, summarised.
    fn next_round(r: &mut RoundRecorder) -> Vec<Seen> {
        summary(&r.take_round().unwrap())
    }

    /// The round `r` closes now is `want`.
    fn assert_next_round(r: &mut RoundRecorder, want: &[Seen]) {
        assert_eq!(next_round(r), want);
    }

    #[test]
    fn each_relay_is_told_what_the_others_returned_that_it_did_not() {
        let mut r = asking(&[A, B]);
        // A has notes 1 and 2, B notes 2 and 3: each lacks one the other returned.
        for (relay, n) in [(A, 1), (A, 2), (B, 2), (B, 3)] {
            r.returned(relay, key(1), id(n), 1_700_000_000);
        }
        for relay in [A, B] {
            assert!(r.eose(relay, 1, true));
        }
        let round = r.take_round().unwrap();
        for relay in &round.relays {
            let a = relay.authors[0];
            assert_eq!((a.events, a.missed), (2, 1), "{}", relay.url);
        }
    }

    #[test]
    fn distinct_ids_per_asked_author_count() {
        let mut r = RoundRecorder::new();
        r.asked(A, [key(1), key(2), key(1)], 1);
        let note = EventBuilder::new(Kind::TextNote, "x")
            .finalize(&keys(1))
            .unwrap();
        assert!(r.event(A, &note));
        assert!(!r.event(A, &note), "the same id again");
        assert!(r.returned(A, key(1), id(1), 1_700_000_000));
        assert!(!r.returned(A, key(1), id(1), 1_700_000_000));
        // The same id under another author is that author's.
        assert!(r.returned(A, key(2), id(1), 1_700_000_000));
        assert!(r.eose(A, 1, true));
        assert_next_round(&mut r, &[seen(A, true, false, &[(key(1), 2), (key(2), 1)])]);
        assert!(r.take_round().is_none(), "nothing new");
    }

    #[test]
    fn an_empty_answer_is_named_only_where_another_relay_returned_notes_of_its_follows() {
        const C: &str = "wss://c.example";
        const D: &str = "wss://d.example";
        let mut r = RoundRecorder::new();
        // A returns a note of follow 1; B (asked about 1 and 2) returns nothing; C is asked only
        // about follow 3, whom nobody returned; D returns nothing and is still answering.
        r.asked(A, [key(1)], 1);
        r.asked(B, [key(1), key(2)], 1);
        r.asked(C, [key(3)], 1);
        r.asked(D, [key(1)], 1);
        r.returned(A, key(1), id(1), 1_700_000_000);
        for relay in [A, B, C] {
            r.eose(relay, 1, true);
        }
        assert_eq!(
            r.empty_answers(),
            vec![B],
            "C's follow may be silent; D may still answer"
        );
        // A cut-off answer is a lower bound, not an empty one.
        r.asked(B, [key(1)], 2);
        r.eose(B, 2, false);
        assert!(r.empty_answers().is_empty());
        // An answer closed before its round still contradicts.
        r.asked(B, [key(1)], 3);
        r.eose(B, 3, true);
        r.closed(A);
        assert_eq!(r.empty_answers(), vec![B]);
        // Once B returns a note of any follow it was asked about, it is not empty.
        r.asked(B, [key(1), key(2)], 4);
        r.returned(B, key(2), id(2), 1_700_000_000);
        r.eose(B, 4, true);
        assert!(r.empty_answers().is_empty());
        // A probe's page is a sample: never named.
        r.probed(D, [key(1)], 2, 20);
        r.eose(D, 2, true);
        r.asked(C, [key(1)], 2);
        r.returned(C, key(1), id(3), 1_700_000_000);
        r.eose(C, 2, true);
        assert!(r.empty_answers().is_empty());
    }

    #[test]
    fn events_after_eose_for_unasked_authors_or_unasked_relays_do_not_count() {
        let mut r = asking(&[A]);
        assert!(
            !r.returned(A, key(9), id(1), 1_700_000_000),
            "not asked about this author"
        );
        assert!(
            !r.returned(B, key(1), id(2), 1_700_000_000),
            "nothing asked of this relay"
        );
        assert!(r.returned(A, key(1), id(3), 1_700_000_000));
        r.eose(A, 1, true);
        assert!(
            !r.returned(A, key(1), id(4), 1_700_000_000),
            "a live note after EOSE"
        );
        let round = r.take_round().unwrap();
        assert_eq!(summary(&round), vec![seen_one(A, true, false, 1)]);
    }

    #[test]
    fn a_failure_is_not_an_answer_until_the_relay_answers() {
        let mut r = asking(&[A, B]);
        r.returned(B, key(1), id(1), 1_700_000_000);
        r.failed(B, "reset");
        assert!(!r.is_answering(B));
        answers(&mut r, A, 1, true);
        // Still waiting for a reconnect: not in the round yet.
        let first = r.take_round().unwrap();
        assert_eq!(summary(&first).len(), 1);
        // Given up on: not answered, with the authors it was asked about.
        assert!(r.closed(B));
        let second = r.take_round().unwrap();
        assert_eq!(
            summary(&second),
            vec![seen_one(A, true, true, 1), seen_one(B, false, false, 0),]
        );

        // A failure then an answer after a reconnect counts as answered, from the new answer.
        let mut r = asking(&[A]);
        r.returned(A, key(1), id(1), 1_700_000_000);
        r.failed(A, "reset");
        r.returned(A, key(1), id(2), 1_700_000_000);
        answers(&mut r, A, 3, true);
        assert_next_round(&mut r, &[seen_one(A, true, false, 2)]);
        // Failing after its answer was learned is news; the same answer again is not.
        r.failed(A, "reset");
        answers(&mut r, A, 2, true);
        assert_next_round(
            &mut r,
            &[seen_one(A, false, false, 0), seen_one(A, true, true, 1)],
        );
    }

    #[test]
    fn the_final_round_counts_failed_waiting_relays_only() {
        let mut r = asking(&[A]);
        r.asked(B, [key(2)], 1);
        r.failed(A, "timeout");
        assert!(r.take_round().is_none(), "both may still answer");
        let last = r.take_final_round().unwrap();
        assert_eq!(summary(&last), vec![seen_one(A, false, false, 0)]);
        // A relay that fails while asked nothing learns liveness only.
        r.failed("wss://lists.example", "refused");
        let lookups = r.take_round().unwrap();
        assert_eq!(
            summary(&lookups),
            vec![("wss://lists.example".to_string(), false, false, vec![])]
        );
    }

    #[test]
    fn a_cut_off_fetch_is_compare_only() {
        let mut r = asking(&[A, B]);
        answers(&mut r, A, 1, false);
        r.eose(B, 1, true);
        assert_next_round(
            &mut r,
            &[seen_one(A, true, true, 1), seen_one(B, true, false, 0)],
        );
    }

    #[test]
    fn a_new_filter_replaces_the_old_and_an_old_answer_is_merged() {
        let mut r = RoundRecorder::new();
        r.asked(A, [key(1), key(2)], 1);
        r.returned(A, key(1), id(1), 1_700_000_000);
        r.returned(A, key(2), id(2), 1_700_000_000);
        r.eose(A, 1, true);
        r.asked(A, [key(2), key(3)], 2);
        assert!(!r.eose(A, 1, true), "an answer to the replaced filter");
        assert!(!r.all_answered(), "the new filter has not answered");
        r.returned(A, key(2), id(3), 1_700_000_000);
        r.returned(A, key(2), id(4), 1_700_000_000);
        r.returned(A, key(1), id(5), 1_700_000_000);
        assert!(r.eose(A, 2, true));
        // One entry: the newest answer for key 2 and 3, the older one for key 1.
        let authors = [(key(1), 1), (key(2), 2), (key(3), 0)];
        assert_next_round(&mut r, &[seen(A, true, false, &authors)]);

        // A filter replaced before it answered leaves nothing behind.
        let mut r = asking(&[A]);
        r.returned(A, key(1), id(1), 1_700_000_000);
        r.asked(A, [key(2)], 2);
        r.eose(A, 2, true);
        assert_next_round(&mut r, &[seen(A, true, false, &[(key(2), 0)])]);
    }

    #[test]
    fn a_closed_answer_is_still_learned_and_a_set_aside_relay_is_not_answered() {
        let mut r = asking(&[A, B]);
        answers(&mut r, A, 1, true);
        r.eose(B, 1, true);
        assert!(r.closed(A));
        r.set_aside(B);
        assert!(!r.is_asked(A) && !r.is_asked(B));
        assert_next_round(
            &mut r,
            &[seen_one(A, true, false, 1), seen_one(B, false, false, 0)],
        );
        assert!(r.take_round().is_none());
    }

    #[test]
    fn a_probe_page_that_reaches_its_limit_is_capped() {
        let mut r = asking(&[A]);
        assert!(r.returned(A, key(1), id(1), 1_700_000_000));
        assert!(r.eose(A, 1, true));
        r.take_round().unwrap();
        r.probed(B, [key(1), key(2)], 1, 2);
        for n in 2..5 {
            r.returned(B, key(1), id(n), 1_700_000_000 - u64::from(n));
        }
        r.returned(B, key(2), id(9), 1_700_000_000);
        assert!(r.eose(B, 1, true));
        let round = r.take_round().unwrap();
        let probe = round.relays.iter().find(|x| x.url == B).unwrap();
        let capped: Vec<(PublicKey, u32, bool)> = probe
            .authors
            .iter()
            .map(|a| (a.author, a.events, a.capped))
            .collect();
        let mut want = vec![(key(1), 3, true), (key(2), 1, false)];
        want.sort();
        assert_eq!(capped, want);
        // The fetch's relay is the probe round's yardstick, and a fetch is never capped.
        let fetch = round.relays.iter().find(|x| x.url == A).unwrap();
        assert!(fetch.compare_only && fetch.authors.iter().all(|a| !a.capped));
    }

    #[test]
    fn a_refusal_is_neither_an_answer_nor_a_failure() {
        let mut r = asking(&[A, B]);
        assert!(r.returned(A, key(1), id(1), 1_700_000_000));
        assert!(r.eose(A, 1, true));
        r.failed(B, "connection lost");
        r.refused(B);
        assert!(!r.is_asked(B));
        assert_next_round(&mut r, &[seen_one(A, true, false, 1)]);
        // An answer given before the refusal is still learned.
        r.asked(B, [key(2)], 2);
        assert!(r.returned(B, key(2), id(2), 1_700_000_000));
        assert!(r.eose(B, 2, true));
        r.refused(B);
        let round = next_round(&mut r);
        assert!(round.contains(&seen(B, true, false, &[(key(2), 1)])));
        // A lookup-only relay that refuses leaves nothing to learn.
        r.refused("wss://lists.example");
        assert!(r
            .take_round()
            .is_none_or(|round| round.relays.iter().all(|x| x.url != "wss://lists.example")));
    }
}

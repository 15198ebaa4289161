//! What the engine keeps between nostr-sdk's calls: lists, the keys it plans for, fetch
//! attempts, learned stats and the round being recorded. Plain data behind one lock, taken for
//! short synchronous work only (never across an `.await`, never while planning).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nostr::event::Event;
use nostr::key::PublicKey;
use nostr::types::{RelayUrl, Timestamp};
use nostr_gossip::{GossipListKind, GossipPublicKeyStatus, OutdatedPublicKey};
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_core::{keep_newest_list, DeliveryStats, RawRelayList};

/// The most relay lists kept per list kind (kind:10002 and kind:10050 each). A list of a
/// further author is ignored (counted), unless the author is one of the planned keys.
pub const MAX_KEPT_LISTS: usize = 100_000;

/// The most public keys one plan is made over. Keys nostr-sdk asks about beyond it are not
/// planned for: their reads go to the residual's carriers (the reader's relays).
pub const MAX_PLANNED_KEYS: usize = 20_000;

/// The most public keys whose last list fetch attempt is tracked, per list kind. When full,
/// attempts older than the list TTL are forgotten first; a key that still finds no room stays
/// untracked (nostr-sdk then sees it as missing and fetches its list again).
pub const MAX_TRACKED_KEYS: usize = 100_000;

/// The most notes one round counts; later notes of the round are not learned from.
pub const MAX_ROUND_EVENTS: usize = 500_000;

/// How long a fetched list counts as up to date (nostr-sdk's in-memory engine uses a day).
pub const DEFAULT_LIST_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a round may go without a new note or a new ask before the engine ends it by itself
/// (longer than a feed read takes to send its notes, so a slow relay's notes still count).
pub const DEFAULT_ROUND_IDLE: Duration = Duration::from_secs(20);

/// One relay asked in the current round.
#[derive(Debug)]
pub(crate) struct RoundRelay {
    /// The recorder's filter generation for this relay.
    pub generation: u64,
    /// The authors nostr-sdk was told to ask this relay about.
    pub authors: BTreeSet<PublicKey>,
    /// The relay sent a counted note for its current filter.
    pub delivered: bool,
}

/// The plan nostr-sdk's answers come from, as URLs (ids mean nothing outside their table).
#[derive(Debug, Default)]
pub(crate) struct PlanView {
    /// The state version the plan was made at.
    pub version: u64,
    /// The strategy's label.
    pub strategy: String,
    /// Per planned key: the relays asked about it (routed relays, or the carriers when it is
    /// residual), canonical and parsed.
    pub asked: HashMap<PublicKey, Vec<(String, RelayUrl)>>,
    /// Per planned key: the routed relays among `asked` that are hints, not declared.
    pub hinted: HashMap<PublicKey, Vec<String>>,
    /// The routed relays (within the budget).
    pub routed: Vec<String>,
    /// The residual's carriers (the reader's relays, when it has any).
    pub carriers: Vec<(String, RelayUrl)>,
    /// Planned keys no routed relay covers.
    pub residual: usize,
}

/// Everything behind the engine's lock.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Newest kind:10002 list per author.
    pub lists: HashMap<PublicKey, RawRelayList>,
    /// Newest kind:10050 list per author.
    pub dm_lists: HashMap<PublicKey, RawRelayList>,
    /// Lists ignored because [`MAX_KEPT_LISTS`] was reached.
    pub lists_over_cap: u64,
    /// The keys plans are made over, in the order first asked about.
    pub keys: Vec<PublicKey>,
    /// `keys` as a set.
    pub key_set: HashSet<PublicKey>,
    /// Keys not planned for because [`MAX_PLANNED_KEYS`] was reached.
    pub keys_over_cap: u64,
    /// Last fetch attempt per key: kind:10002 lists, then kind:10050 lists.
    pub attempts: [HashMap<PublicKey, Timestamp>; 2],
    /// What was learned.
    pub stats: DeliveryStats,
    /// The round being recorded.
    pub recorder: RoundRecorder,
    /// The relays asked in the current round.
    pub round: HashMap<String, RoundRelay>,
    /// Relays of the current round that did not answer a read: its later reads ask their
    /// follows elsewhere (at most the relays the round asked).
    pub set_aside: HashSet<String>,
    /// Relays the current round added beyond its plans to ask elsewhere.
    pub added: usize,
    /// Per relay (canonical), follows a probe of the current round found there with notes the
    /// round's reads had missed: its later reads ask them there too (at most the relays and
    /// follows the round probed).
    pub hits: BTreeMap<String, BTreeSet<PublicKey>>,
    /// Notes counted in the current round.
    pub round_events: usize,
    /// A note was counted since the round's last ask: the read the asks were for is answering,
    /// so the next read nostr-sdk starts begins a new round.
    pub noted_since_ask: bool,
    /// The round's last ask or counted note.
    pub last_activity: Option<Instant>,
    /// The last filter generation handed out.
    pub generation: u64,
    /// Bumped whenever what a plan is made from changes.
    pub version: u64,
    /// The current plan.
    pub plan: Option<Arc<PlanView>>,
}

fn list_index(kind: GossipListKind) -> usize {
    match kind {
        GossipListKind::Nip65 => 0,
        GossipListKind::Nip17 => 1,
    }
}

impl State {
    /// Adds `key` to the planned keys; returns whether it is planned for.
    pub fn note_key(&mut self, key: PublicKey) -> bool {
        if self.key_set.contains(&key) {
            return true;
        }
        if self.keys.len() >= MAX_PLANNED_KEYS {
            self.keys_over_cap += 1;
            return false;
        }
        self.keys.push(key);
        self.key_set.insert(key);
        self.version += 1;
        true
    }

    /// Keeps a kind:10002 list under the newest-list rule and the cap; returns whether kept.
    pub fn keep_list(&mut self, list: RawRelayList, reader: Option<&PublicKey>) -> bool {
        let author = list.author;
        let planned = self.key_set.contains(&author) || reader == Some(&author);
        if !self.lists.contains_key(&author) && self.lists.len() >= MAX_KEPT_LISTS && !planned {
            self.lists_over_cap += 1;
            return false;
        }
        let kept = keep_newest_list(&mut self.lists, list);
        if kept && planned {
            self.version += 1;
        }
        kept
    }

    /// Keeps a kind:10050 list under the newest-list rule and the cap; returns whether kept.
    pub fn keep_dm_list(&mut self, list: RawRelayList) -> bool {
        if !self.dm_lists.contains_key(&list.author) && self.dm_lists.len() >= MAX_KEPT_LISTS {
            self.lists_over_cap += 1;
            return false;
        }
        keep_newest_list(&mut self.dm_lists, list)
    }

    /// The status of `key`'s list of `kind` at `now`, as nostr-sdk reads it: updated when a
    /// fetch was attempted within `ttl`; outdated when an attempt is older, or a list is kept
    /// without a tracked attempt (e.g. loaded from a store); missing otherwise.
    pub fn status(
        &self,
        key: &PublicKey,
        kind: GossipListKind,
        now: Timestamp,
        ttl: Duration,
    ) -> GossipPublicKeyStatus {
        let kept = match kind {
            GossipListKind::Nip65 => self.lists.get(key),
            GossipListKind::Nip17 => self.dm_lists.get(key),
        }
        .map(|l| Timestamp::from(l.created_at));
        match self.attempts[list_index(kind)].get(key) {
            Some(&at) if at + ttl >= now => GossipPublicKeyStatus::Updated,
            Some(_) => GossipPublicKeyStatus::Outdated { created_at: kept },
            None if kept.is_some() => GossipPublicKeyStatus::Outdated { created_at: kept },
            None => GossipPublicKeyStatus::Missing,
        }
    }

    /// Notes a fetch attempt for `key`'s list of `kind` at `now` (bounded, see
    /// [`MAX_TRACKED_KEYS`]).
    pub fn attempted(
        &mut self,
        key: PublicKey,
        kind: GossipListKind,
        now: Timestamp,
        ttl: Duration,
    ) {
        let attempts = &mut self.attempts[list_index(kind)];
        if !attempts.contains_key(&key) && attempts.len() >= MAX_TRACKED_KEYS {
            attempts.retain(|_, at| *at + ttl >= now);
            if attempts.len() >= MAX_TRACKED_KEYS {
                return;
            }
        }
        attempts.insert(key, now);
    }

    /// Up to `limit` keys whose last attempt is older than `ttl`, oldest attempt first.
    pub fn outdated(
        &self,
        kind: GossipListKind,
        limit: usize,
        now: Timestamp,
        ttl: Duration,
    ) -> BTreeSet<OutdatedPublicKey> {
        let mut all: BTreeSet<OutdatedPublicKey> = self.attempts[list_index(kind)]
            .iter()
            .filter(|(_, at)| **at + ttl < now)
            .map(|(pk, at)| OutdatedPublicKey::new(*pk, *at))
            .collect();
        while all.len() > limit {
            all.pop_last();
        }
        all
    }

    /// nostr-sdk was told to ask `url` about `author`: the relay's filter in the recorder
    /// grows to name it. A relay that already delivered for its current filter has that
    /// answer kept (as if it had sent EOSE) before the wider filter replaces it.
    pub fn ask(&mut self, url: &str, author: PublicKey) {
        let relay = self
            .round
            .entry(url.to_string())
            .or_insert_with(|| RoundRelay {
                generation: 0,
                authors: BTreeSet::new(),
                delivered: false,
            });
        self.last_activity = Some(Instant::now());
        if relay.generation != 0 && relay.authors.contains(&author) {
            return;
        }
        self.noted_since_ask = false;
        if relay.delivered {
            self.recorder.eose(url, relay.generation, true);
        }
        self.generation += 1;
        relay.generation = self.generation;
        relay.authors.insert(author);
        relay.delivered = false;
        self.recorder
            .asked(url, relay.authors.iter().copied(), relay.generation);
    }

    /// A probe asks `url` (canonical, not asked in this round) for the newest `limit` notes of
    /// each of `authors`: recorded as a probe, so a full page is learned as a sample. Returns
    /// whether it was recorded (a relay the round already asked is not probed).
    #[cfg(feature = "sdk")]
    pub fn probe(&mut self, url: &str, authors: &[PublicKey], limit: u32) -> bool {
        if self.round.contains_key(url) {
            return false;
        }
        self.generation += 1;
        let generation = self.generation;
        self.round.insert(
            url.to_string(),
            RoundRelay {
                generation,
                authors: authors.iter().copied().collect(),
                delivered: false,
            },
        );
        self.recorder
            .probed(url, authors.iter().copied(), generation, limit);
        self.last_activity = Some(Instant::now());
        true
    }

    /// `url` (canonical) sent `event`; returns whether it counted for the round.
    pub fn delivered(&mut self, url: &str, event: &Event) -> bool {
        if self.round_events >= MAX_ROUND_EVENTS {
            return false;
        }
        let Some(relay) = self.round.get_mut(url) else {
            return false;
        };
        if !self.recorder.event(url, event) {
            return false;
        }
        relay.delivered = true;
        self.round_events += 1;
        self.noted_since_ask = true;
        self.last_activity = Some(Instant::now());
        true
    }

    /// Whether the open round is over by the engine's own rules: a new read begins (`new_read`)
    /// after the round's reads were answered, or nothing was asked or counted for `idle`.
    pub fn round_over(&self, new_read: bool, idle: Option<Duration>) -> bool {
        if self.round.is_empty() {
            return false;
        }
        let idle = idle.is_some_and(|idle| self.last_activity.is_some_and(|t| t.elapsed() >= idle));
        idle || (new_read && self.noted_since_ask)
    }

    /// Ends the round: a relay that delivered, or that `reached` names, answered; a relay
    /// `reached` leaves out failed; without `reached`, a relay that delivered nothing is left
    /// out of the round. Learns the round at `now`; returns whether there was anything to learn.
    pub fn end_round(&mut self, reached: Option<&HashSet<String>>, now: u64) -> bool {
        let round = std::mem::take(&mut self.round);
        self.set_aside.clear();
        self.hits.clear();
        self.added = 0;
        self.round_events = 0;
        self.noted_since_ask = false;
        self.last_activity = None;
        if round.is_empty() {
            return false;
        }
        for (url, relay) in &round {
            let answered = relay.delivered || reached.is_some_and(|r| r.contains(url));
            if answered {
                self.recorder.eose(url, relay.generation, true);
            } else if reached.is_some() {
                self.recorder.failed(url, "not reached in this round");
                self.recorder.closed(url);
            } else {
                self.recorder.closed(url);
            }
        }
        let Some(report) = self.recorder.take_round() else {
            return false;
        };
        self.stats.record_round(&report, now);
        self.stats.begin_session();
        self.version += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, Kind};
    use nostr::key::Keys;

    const TTL: Duration = DEFAULT_LIST_TTL;

    fn list(author: PublicKey, created_at: u64, url: &str) -> RawRelayList {
        RawRelayList {
            author,
            created_at,
            tags: vec![vec!["r".into(), url.into()]],
        }
    }

    #[test]
    fn status_follows_the_trait_contract() {
        let mut state = State::default();
        let key = Keys::generate().public_key();
        let now = Timestamp::from(1_000_000);
        let nip65 = GossipListKind::Nip65;
        assert_eq!(
            state.status(&key, nip65, now, TTL),
            GossipPublicKeyStatus::Missing
        );
        // A kept list without a tracked attempt (loaded from a store) is worth fetching again.
        state.keep_list(list(key, 500, "wss://a.example"), None);
        assert_eq!(
            state.status(&key, nip65, now, TTL),
            GossipPublicKeyStatus::Outdated {
                created_at: Some(Timestamp::from(500))
            }
        );
        state.attempted(key, nip65, now, TTL);
        assert_eq!(
            state.status(&key, nip65, now, TTL),
            GossipPublicKeyStatus::Updated
        );
        // The other list kind is tracked apart.
        let nip17 = GossipListKind::Nip17;
        assert_eq!(
            state.status(&key, nip17, now, TTL),
            GossipPublicKeyStatus::Missing
        );
        let later = now + TTL + Duration::from_secs(1);
        assert!(state.status(&key, nip65, later, TTL).is_outdated());
        let outdated = state.outdated(nip65, 10, later, TTL);
        assert_eq!(outdated.len(), 1);
        assert_eq!(outdated.first().unwrap().timestamp, now);
        assert!(state.outdated(nip65, 10, now, TTL).is_empty());
        assert!(state.outdated(nip17, 10, later, TTL).is_empty());
    }

    #[test]
    fn outdated_keys_come_oldest_first_up_to_the_limit() {
        let mut state = State::default();
        let kind = GossipListKind::Nip65;
        let keys: Vec<PublicKey> = (0..5).map(|_| Keys::generate().public_key()).collect();
        for (i, key) in keys.iter().enumerate() {
            state.attempted(*key, kind, Timestamp::from(100 + i as u64), TTL);
        }
        let later = Timestamp::from(200) + TTL;
        let got: Vec<PublicKey> = state
            .outdated(kind, 2, later, TTL)
            .into_iter()
            .map(|o| o.public_key)
            .collect();
        assert_eq!(got, keys[..2]);
    }

    #[test]
    fn the_newest_list_wins_and_only_planned_lists_change_the_plan() {
        let mut state = State::default();
        let (follow, other) = (Keys::generate().public_key(), Keys::generate().public_key());
        state.note_key(follow);
        let v = state.version;
        assert!(state.keep_list(list(follow, 10, "wss://new.example"), None));
        assert!(state.version > v, "a planned key's list re-plans");
        let v = state.version;
        assert!(!state.keep_list(list(follow, 5, "wss://old.example"), None));
        assert_eq!(state.version, v, "an older list changes nothing");
        assert_eq!(state.lists[&follow].tags[0][1], "wss://new.example");
        assert!(state.keep_list(list(other, 10, "wss://x.example"), None));
        assert_eq!(
            state.version, v,
            "a list of a key not planned for does not re-plan"
        );
    }

    #[test]
    fn planned_keys_are_capped() {
        let mut state = State::default();
        for _ in 0..MAX_PLANNED_KEYS {
            state.keys.push(Keys::generate().public_key());
        }
        let extra = Keys::generate().public_key();
        assert!(!state.note_key(extra));
        assert_eq!(state.keys_over_cap, 1);
        assert_eq!(state.keys.len(), MAX_PLANNED_KEYS);
    }

    #[test]
    fn a_round_learns_only_asked_authors_on_asked_relays() {
        let mut state = State::default();
        let (alice, bob) = (Keys::generate(), Keys::generate());
        let note = |k: &Keys| EventBuilder::new(Kind::TextNote, "hi").finalize(k).unwrap();
        state.ask("wss://a.example", alice.public_key());
        state.ask("wss://b.example", alice.public_key());
        assert!(state.delivered("wss://a.example", &note(&alice)));
        // Not asked about bob, nor asked at all: not counted.
        assert!(!state.delivered("wss://a.example", &note(&bob)));
        assert!(!state.delivered("wss://c.example", &note(&alice)));
        // A relay that already delivered keeps that answer when its filter grows.
        state.ask("wss://a.example", bob.public_key());
        assert!(state.delivered("wss://a.example", &note(&bob)));
        let reached: HashSet<String> = ["wss://a.example".to_string()].into();
        assert!(state.end_round(Some(&reached), 2_000_000_000));
        let a = state.stats.get("wss://a.example");
        let b = state.stats.get("wss://b.example");
        assert!(a.live_mean() > 0.5, "{a:?}");
        assert!(b.live_mean() < 0.5, "{b:?}");
        assert_eq!(state.stats.get("wss://c.example").asked, 0);
        assert!(
            !state.end_round(None, 2_000_000_000),
            "nothing left to learn"
        );
    }
}

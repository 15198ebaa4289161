//! The `outbox-world/1` world: where every event lives and which relays answer in each session.
//!
//! A world is read in one pass into compact interned structures: follows and relays are dense
//! `u32` ids, event ids are `[u8; 32]`, events are sorted by author then `created_at`, and each
//! event keeps the relays that serve it as a slice of one shared id vector. No JSON tree is
//! kept: large worlds are 100–250 MB of JSON. Writing streams too.
//!
//! Canonical form: relays that are keys of `relays` come first, sorted by URL, then URLs that
//! only appear in events' `on` lists (they never answer), sorted by URL; events are sorted by
//! (author, `created_at`, id) and their `on` lists by relay id. Reading a file and writing it
//! back gives the same world.
//!
//! A relay may carry a per-REQ cap (`max_limit`); a file without one means no cap, so files
//! written before caps existed keep their meaning (`docs/formats.md`). A world may carry what a
//! NIP-66 relay monitor reported as of `now` (`monitor`); a file without it has no monitor data.
//! A world may carry the events that tag the reader (`mentions`, from anyone) and the people a
//! note tags (`events[i].p`), for scoring the inbox and publish routes; a file without them has
//! no mentions and no tags. A world may carry the relay hints the reader's client knows
//! (`hints`: kind:3, pointer and seen-on hints, see `nostr_outbox_core::hints`); a file without them
//! has none.
//!
//! The types and queries are here; `canonical` builds the canonical form (from the generator's
//! parts or from what the reader interned), `read` is the streaming reader with its limits, and
//! `write` the streaming writer.

mod canonical;
mod read;
mod write;

use std::collections::HashMap;
use std::fmt;

use nostr::key::PublicKey;
use nostr_outbox_core::{Hint, RawRelayList, RouteTable, RouteTableBuilder, UrlPolicy};

use crate::timing::RelayTiming;

pub use read::decode_hex32;

/// The file format tag of world files.
pub const WORLD_FORMAT: &str = "outbox-world/1";

/// The most relays a world's `monitor` may name (entries are read into memory).
pub const MAX_MONITOR_ENTRIES: usize = 100_000;

/// The most mentions of the reader a world may list (`mentions`; read into memory).
pub const MAX_MENTIONS: usize = 1_000_000;

/// The most people one note may tag (`events[i].p`).
pub const MAX_EVENT_TAGS: usize = 256;

/// The most relay hints a world may list (`hints`; read into memory).
pub const MAX_WORLD_HINTS: usize = 1_000_000;

/// The most sessions a world may describe (`sessions`, and so the length of every `up` array).
/// Per-session state is allocated up front, so larger counts are refused with an error naming
/// the field instead of exhausting memory (`docs/formats.md`).
pub const MAX_SESSIONS: u32 = 10_000;

fn too_many_sessions(sessions: impl fmt::Display) -> String {
    format!("is {sessions}, more than the {MAX_SESSIONS} sessions a world may describe")
}

/// A world that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// Reading or writing the file failed. The message carries the OS error's, so it is not
    /// also a `source` (an error chain would print it twice).
    #[error("world file: {0}")]
    Io(std::io::Error),
    /// A field is missing or holds a malformed value.
    #[error("world file: field `{field}`: {message}")]
    Invalid {
        /// The JSON path of the field (`events[12].id`).
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl From<std::io::Error> for WorldError {
    fn from(e: std::io::Error) -> Self {
        WorldError::Io(e)
    }
}

impl WorldError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A number of sessions a world cannot be run for ([`World::sessions_to_run`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionsError {
    /// No session at all.
    #[error("must be at least 1")]
    Zero,
    /// More sessions than the world describes (past its last, every relay would be down).
    #[error("{requested} asked, but the world describes only {described} sessions")]
    MoreThanDescribed {
        /// The sessions asked for.
        requested: u32,
        /// The world's `sessions`.
        described: u32,
    },
}

/// One kind:10002 relay list as the reader's client fetched it: raw tags, unvalidated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldRelayList {
    /// The list's author.
    pub author: PublicKey,
    /// Unix seconds; the newest list per author wins.
    pub created_at: u64,
    /// The raw tags (`["r", url, marker?]`), possibly messy.
    pub tags: Vec<Vec<String>>,
}

/// One relay known to the world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldRelay {
    /// The URL exactly as keyed in the file.
    pub url: String,
    /// Whether the relay is a key of `relays` (otherwise it only appears in `on` lists and
    /// never answers).
    pub exists: bool,
    /// Whether it answers in each session (all false when it does not exist).
    pub up: Vec<bool>,
    /// Most events it returns per filter of one REQ (`relays[url].max_limit`); `None`: no cap.
    pub max_limit: Option<u32>,
    /// How fast it answers and how it fails (`relays[url].timing`); `None`: the default
    /// ([`RelayTiming::default`]).
    pub timing: Option<RelayTiming>,
}

/// One relay a NIP-66 monitor reported online, as of the world's `now` (`monitor[url]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorEntry {
    /// The relay URL as the monitor names it (need not be a key of `relays`).
    pub url: String,
    /// Unix seconds when the monitor last saw it online.
    pub last_seen: u64,
}

/// One kind:1 note and the relays that serve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldEvent {
    /// The event id.
    pub id: [u8; 32],
    /// The author, as an index into [`World::follows`].
    pub author: u32,
    /// Unix seconds.
    pub created_at: u64,
    /// The event kind (1 for notes).
    pub kind: u16,
    on_start: u32,
    on_len: u32,
    p_start: u32,
    p_len: u32,
}

/// One event that tags the reader (`mentions[i]`): by anyone, follow or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldMention {
    /// The event id.
    pub id: [u8; 32],
    /// The author's public key bytes (anyone; not checked as a curve point).
    pub author: [u8; 32],
    /// Unix seconds.
    pub created_at: u64,
    /// The event kind.
    pub kind: u16,
    on_start: u32,
    on_len: u32,
}

/// A mention before interning (generator output; see [`World::set_mentions`]).
#[derive(Debug, Clone)]
pub struct PartMention {
    /// The event id.
    pub id: [u8; 32],
    /// The author's public key bytes.
    pub author: [u8; 32],
    /// Unix seconds.
    pub created_at: u64,
    /// Kind.
    pub kind: u16,
    /// Relay URLs serving it at `now`.
    pub on: Vec<String>,
}

/// A world: the reader, relay lists, relays with per-session liveness, and every event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// A label (`medium/seed-7`).
    pub name: String,
    /// The world's present, unix seconds; every session happens at `now`.
    pub now: u64,
    /// How many sessions the world describes.
    pub sessions: u32,
    /// The reader's public key.
    pub reader: PublicKey,
    /// The reader's follows, without duplicates; an author id is an index here.
    pub follows: Vec<PublicKey>,
    /// The reader's own relays, raw as in the file.
    pub reader_relays: Vec<String>,
    /// The fetched relay lists, raw.
    pub relay_lists: Vec<WorldRelayList>,
    relays: Vec<WorldRelay>,
    relay_index: HashMap<String, u32>,
    /// Monitor reports, sorted by URL, one per URL.
    monitor: Vec<MonitorEntry>,
    events: Vec<WorldEvent>,
    on: Vec<u32>,
    /// The people events tag, in event order (each event a range).
    tagged: Vec<PublicKey>,
    /// Per follow, the range of its events in `events`.
    author_offsets: Vec<u32>,
    /// Events tagging the reader, sorted by (`created_at`, id, author).
    mentions: Vec<WorldMention>,
    mention_on: Vec<u32>,
    /// Relay hints the reader's client knows, sorted by (author, source, relay), no repeats.
    hints: Vec<Hint>,
}

/// The parts of a world before canonicalisation (what the generator and the reader produce).
#[derive(Debug, Default)]
pub struct WorldParts {
    /// See [`World::name`].
    pub name: String,
    /// See [`World::now`].
    pub now: u64,
    /// See [`World::sessions`].
    pub sessions: u32,
    /// See [`World::reader`].
    pub reader: Option<PublicKey>,
    /// See [`World::follows`].
    pub follows: Vec<PublicKey>,
    /// See [`World::reader_relays`].
    pub reader_relays: Vec<String>,
    /// See [`World::relay_lists`].
    pub relay_lists: Vec<WorldRelayList>,
    /// Relays that exist, with their `up` arrays (uncapped; caps are set on the built world
    /// with [`World::set_max_limit`]).
    pub relays: Vec<(String, Vec<bool>)>,
    /// Events: id, author key, created_at, kind, URLs of the relays serving it.
    pub events: Vec<PartEvent>,
}

/// An event before interning (generator output).
#[derive(Debug, Clone)]
pub struct PartEvent {
    /// The event id.
    pub id: [u8; 32],
    /// Index into [`WorldParts::follows`].
    pub author: u32,
    /// Unix seconds.
    pub created_at: u64,
    /// Kind.
    pub kind: u16,
    /// Relay URLs (need not be keys of `relays`).
    pub on: Vec<String>,
}

impl World {
    /// The sessions to run on this world: every session it describes (at least one) unless
    /// `requested`, which must be between 1 and the world's `sessions`.
    pub fn sessions_to_run(&self, requested: Option<u32>) -> Result<u32, SessionsError> {
        match requested {
            None => Ok(self.sessions.max(1)),
            Some(0) => Err(SessionsError::Zero),
            Some(n) if n > self.sessions => Err(SessionsError::MoreThanDescribed {
                requested: n,
                described: self.sessions,
            }),
            Some(n) => Ok(n),
        }
    }

    /// Every relay (existing ones first, sorted by URL).
    pub fn relays(&self) -> &[WorldRelay] {
        &self.relays
    }

    /// Sets the per-REQ cap of an existing relay (`None`: no cap). Returns false, changing
    /// nothing, when `url` is not a key of `relays` or the cap is 0 (a relay that returns
    /// nothing is a relay that is down).
    pub fn set_max_limit(&mut self, url: &str, max_limit: Option<u32>) -> bool {
        let Some(&id) = self.relay_index.get(url) else {
            return false;
        };
        let relay = &mut self.relays[id as usize];
        if !relay.exists || max_limit == Some(0) {
            return false;
        }
        relay.max_limit = max_limit;
        true
    }

    /// Sets the timing of an existing relay (`None`: the default). Returns false, changing
    /// nothing, when `url` is not a key of `relays` or the timing is out of bounds
    /// ([`RelayTiming::check`]).
    pub fn set_timing(&mut self, url: &str, timing: Option<RelayTiming>) -> bool {
        let Some(&id) = self.relay_index.get(url) else {
            return false;
        };
        let relay = &mut self.relays[id as usize];
        if !relay.exists || timing.is_some_and(|t| t.check().is_err()) {
            return false;
        }
        relay.timing = timing;
        true
    }

    /// How fast world relay `relay` answers: its `timing`, or the default for a relay without
    /// one (and for an id out of range).
    pub fn timing(&self, relay: u32) -> RelayTiming {
        self.relays
            .get(relay as usize)
            .and_then(|r| r.timing)
            .unwrap_or_default()
    }

    /// Whether any relay has a timing of its own (a world generated or written with a clock).
    pub fn is_timed(&self) -> bool {
        self.relays.iter().any(|r| r.timing.is_some())
    }

    /// What a relay monitor reported as of `now`, sorted by URL (empty: no monitor data).
    pub fn monitor(&self) -> &[MonitorEntry] {
        &self.monitor
    }

    /// Replaces the monitor data: sorted by URL, the newest `last_seen` kept when a URL comes
    /// twice, empty URLs dropped, at most [`MAX_MONITOR_ENTRIES`] kept.
    pub fn set_monitor(&mut self, mut entries: Vec<MonitorEntry>) {
        entries.retain(|e| !e.url.is_empty());
        entries.sort_by(|a, b| a.url.cmp(&b.url).then(b.last_seen.cmp(&a.last_seen)));
        entries.dedup_by(|later, first| later.url == first.url);
        entries.truncate(MAX_MONITOR_ENTRIES);
        self.monitor = entries;
    }

    /// The monitor data as the core's reports, for [`nostr_outbox_client::apply_monitor_prior`].
    pub fn monitor_reports(&self) -> Vec<nostr_outbox_client::MonitorReport> {
        self.monitor
            .iter()
            .map(|e| nostr_outbox_client::MonitorReport::seen(e.url.clone(), e.last_seen))
            .collect()
    }

    /// The id of a relay URL, exactly as keyed.
    pub fn relay_id(&self, url: &str) -> Option<u32> {
        self.relay_index.get(url).copied()
    }

    /// Whether relay `relay` answers in session `session` (false past the last session).
    #[inline]
    pub fn is_up(&self, relay: u32, session: u32) -> bool {
        self.relays[relay as usize]
            .up
            .get(session as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Every event, sorted by author then `created_at`.
    pub fn events(&self) -> &[WorldEvent] {
        &self.events
    }

    /// The events of one follow, oldest first.
    pub fn author_events(&self, author: u32) -> &[WorldEvent] {
        let a = author as usize;
        &self.events[self.author_offsets[a] as usize..self.author_offsets[a + 1] as usize]
    }

    /// The events of one follow with `created_at >= since`, oldest first.
    pub fn author_events_since(&self, author: u32, since: u64) -> &[WorldEvent] {
        let all = self.author_events(author);
        let start = all.partition_point(|e| e.created_at < since);
        &all[start..]
    }

    /// The people an event tags (`events[i].p`), in tag order, without repeats.
    #[inline]
    pub fn event_tags(&self, e: &WorldEvent) -> &[PublicKey] {
        &self.tagged[e.p_start as usize..(e.p_start + e.p_len) as usize]
    }

    /// Sets the people each event tags: `tags` is called once per event in canonical order;
    /// repeats are dropped (the first kept) and at most [`MAX_EVENT_TAGS`] kept.
    pub fn set_event_tags(&mut self, mut tags: impl FnMut(&WorldEvent) -> Vec<PublicKey>) {
        let mut tagged = Vec::new();
        for e in &mut self.events {
            let start = tagged.len();
            for pk in tags(e) {
                if tagged.len() - start == MAX_EVENT_TAGS {
                    break;
                }
                if !tagged[start..].contains(&pk) {
                    tagged.push(pk);
                }
            }
            e.p_start = start as u32;
            e.p_len = (tagged.len() - start) as u32;
        }
        self.tagged = tagged;
    }

    /// Every event tagging the reader, sorted by (`created_at`, id, author).
    pub fn mentions(&self) -> &[WorldMention] {
        &self.mentions
    }

    /// The relays serving a mention (ids into [`World::relays`]).
    #[inline]
    pub fn mention_relays(&self, m: &WorldMention) -> &[u32] {
        &self.mention_on[m.on_start as usize..(m.on_start + m.on_len) as usize]
    }

    /// Replaces the mentions. URLs that are not relays of this world are dropped (they never
    /// serve anything); at most [`MAX_MENTIONS`] are kept, the newest.
    pub fn set_mentions(&mut self, mentions: Vec<PartMention>) {
        let mut list = Vec::with_capacity(mentions.len().min(MAX_MENTIONS));
        let mut on = Vec::new();
        for m in mentions {
            let start = on.len() as u32;
            on.extend(m.on.iter().filter_map(|u| self.relay_index.get(u).copied()));
            list.push(WorldMention {
                id: m.id,
                author: m.author,
                created_at: m.created_at,
                kind: m.kind,
                on_start: start,
                on_len: on.len() as u32 - start,
            });
        }
        list.sort_by_key(|m| std::cmp::Reverse((m.created_at, m.id, m.author)));
        list.truncate(MAX_MENTIONS);
        let (mentions, mention_on) = canonical::canonical_mentions(list, &on, |r| r);
        self.mentions = mentions;
        self.mention_on = mention_on;
    }

    /// The relay hints the reader's client knows (`hints`), sorted by author, source and relay
    /// (empty: none).
    pub fn hints(&self) -> &[Hint] {
        &self.hints
    }

    /// Replaces the relay hints: sorted by (author, source, relay), repeats dropped, at most
    /// [`MAX_WORLD_HINTS`] kept.
    pub fn set_hints(&mut self, hints: Vec<Hint>) {
        self.hints = canonical::canonical_hints(hints);
    }

    /// The relays serving an event (ids into [`World::relays`]).
    #[inline]
    pub fn event_relays(&self, e: &WorldEvent) -> &[u32] {
        &self.on[e.on_start as usize..(e.on_start + e.on_len) as usize]
    }

    /// The relay lists as the core's raw lists.
    pub fn raw_lists(&self) -> impl Iterator<Item = RawRelayList> + '_ {
        self.relay_lists.iter().map(|l| RawRelayList {
            author: l.author,
            created_at: l.created_at,
            tags: l.tags.clone(),
        })
    }

    /// The route table a client would build from this world: the follows (in order, so
    /// `AuthorId(i)` is follow `i`), the reader's relays and every list through `policy`,
    /// exactly as live.
    pub fn route_table(&self, policy: &UrlPolicy) -> RouteTable {
        self.table_builder(policy).build()
    }

    /// The route table of a client that also knows relay hints: [`World::route_table`]'s, with
    /// the world's `hints` and then `more` (the relays learned stats saw notes arrive on, see
    /// [`nostr_outbox_core::seen_on_hints`]) through the same policy.
    pub fn route_table_with_hints(&self, policy: &UrlPolicy, more: &[Hint]) -> RouteTable {
        let mut b = self.table_builder(policy);
        b.add_hints(&self.hints);
        b.add_hints(more);
        b.build()
    }

    fn table_builder(&self, policy: &UrlPolicy) -> RouteTableBuilder {
        let mut b = RouteTableBuilder::new(policy.clone())
            .follows(self.follows.iter().copied())
            .reader_relays(&self.reader_relays);
        for list in self.raw_lists() {
            b.add_list(list);
        }
        b
    }
}

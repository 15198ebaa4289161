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
//! written before caps existed keep their meaning (`docs/formats.md`).

use std::collections::HashMap;
use std::fmt;
use std::io::{Read, Write};

use nostr::key::PublicKey;
use outbox_core::{RawRelayList, RouteTable, RouteTableBuilder, UrlPolicy};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The file format tag of world files.
pub const WORLD_FORMAT: &str = "outbox-world/1";

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
    /// Reading or writing the file failed.
    #[error("world file: {0}")]
    Io(#[from] std::io::Error),
    /// A field is missing or holds a malformed value.
    #[error("world file: field `{field}`: {message}")]
    Invalid {
        /// The JSON path of the field (`events[12].id`).
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl WorldError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
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
    events: Vec<WorldEvent>,
    on: Vec<u32>,
    /// Per follow, the range of its events in `events`.
    author_offsets: Vec<u32>,
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
    /// Builds the canonical world from parts. Fails if an event names an author that is not a
    /// follow, or an `up` array does not have `sessions` entries.
    pub fn from_parts(parts: WorldParts) -> Result<Self, WorldError> {
        let reader = parts
            .reader
            .ok_or_else(|| WorldError::invalid("reader.pubkey", "missing"))?;
        let mut b = Interner::default();
        for (url, up) in parts.relays {
            b.add_relay(url, up, None);
        }
        let mut events = Vec::with_capacity(parts.events.len());
        let mut on = Vec::new();
        for e in parts.events {
            let start = on.len() as u32;
            for url in &e.on {
                on.push(b.relay_id(url));
            }
            events.push(WorldEvent {
                id: e.id,
                author: e.author,
                created_at: e.created_at,
                kind: e.kind,
                on_start: start,
                on_len: on.len() as u32 - start,
            });
        }
        let raw = RawWorld {
            name: parts.name,
            now: parts.now,
            sessions: parts.sessions,
            reader,
            follows: parts.follows,
            reader_relays: parts.reader_relays,
            relay_lists: parts.relay_lists,
            relays: b,
            events,
            on,
        };
        raw.finish()
    }

    /// Reads a world file from any reader (use a `BufReader` for files).
    pub fn read(reader: impl Read) -> Result<Self, WorldError> {
        let mut de = serde_json::Deserializer::from_reader(reader);
        let raw: PartialWorld = match serde_path_to_error::deserialize(&mut de) {
            Ok(raw) => raw,
            Err(err) => {
                let path = err.path().to_string();
                let inner = err.into_inner();
                if inner.is_io() {
                    return Err(WorldError::Io(inner.into()));
                }
                let field = if path == "." || path.is_empty() {
                    "(document)".to_string()
                } else {
                    path
                };
                return Err(WorldError::invalid(field, inner.to_string()));
            }
        };
        de.end()
            .map_err(|e| WorldError::invalid("(document)", e.to_string()))?;
        raw.finish()
    }

    /// Reads a world file from a path.
    pub fn read_path(path: &std::path::Path) -> Result<Self, WorldError> {
        let file = std::fs::File::open(path)?;
        Self::read(std::io::BufReader::with_capacity(1 << 20, file))
    }

    /// Reads a world from a JSON string.
    pub fn from_json(text: &str) -> Result<Self, WorldError> {
        Self::read(text.as_bytes())
    }

    /// Writes the world as `outbox-world/1` JSON, streaming (one relay list, relay or event per
    /// line). Wrap files in a `BufWriter`.
    pub fn write(&self, mut w: impl Write) -> Result<(), WorldError> {
        let q = |s: &str| serde_json::to_string(s).expect("strings always serialise");
        writeln!(w, "{{")?;
        writeln!(w, "  \"format\": {},", q(WORLD_FORMAT))?;
        writeln!(w, "  \"name\": {},", q(&self.name))?;
        writeln!(w, "  \"now\": {},", self.now)?;
        writeln!(w, "  \"sessions\": {},", self.sessions)?;
        write!(
            w,
            "  \"reader\": {{\"pubkey\": \"{}\", \"follows\": [",
            self.reader.to_hex()
        )?;
        for (i, f) in self.follows.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(w, "{sep}\"{}\"", f.to_hex())?;
        }
        write!(w, "], \"relays\": [")?;
        for (i, r) in self.reader_relays.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(w, "{sep}{}", q(r))?;
        }
        writeln!(w, "]}},")?;
        writeln!(w, "  \"relay_lists\": [")?;
        for (i, l) in self.relay_lists.iter().enumerate() {
            let tags = serde_json::to_string(&l.tags).expect("tags always serialise");
            let sep = if i + 1 == self.relay_lists.len() {
                ""
            } else {
                ","
            };
            writeln!(
                w,
                "    {{\"author\": \"{}\", \"created_at\": {}, \"tags\": {tags}}}{sep}",
                l.author.to_hex(),
                l.created_at
            )?;
        }
        writeln!(w, "  ],")?;
        writeln!(w, "  \"relays\": {{")?;
        let existing: Vec<&WorldRelay> = self.relays.iter().filter(|r| r.exists).collect();
        for (i, r) in existing.iter().enumerate() {
            let sep = if i + 1 == existing.len() { "" } else { "," };
            let up: Vec<&str> =
                r.up.iter()
                    .map(|&u| if u { "true" } else { "false" })
                    .collect();
            write!(w, "    {}: {{\"up\": [{}]", q(&r.url), up.join(", "))?;
            if let Some(max) = r.max_limit {
                write!(w, ", \"max_limit\": {max}")?;
            }
            writeln!(w, "}}{sep}")?;
        }
        writeln!(w, "  }},")?;
        writeln!(w, "  \"events\": [")?;
        let mut hex = [0u8; 64];
        for (i, e) in self.events.iter().enumerate() {
            let sep = if i + 1 == self.events.len() { "" } else { "," };
            write!(
                w,
                "    {{\"id\": \"{}\", \"author\": \"{}\", \"created_at\": {}, \"kind\": {}, \"on\": [",
                encode_hex(&e.id, &mut hex),
                self.follows[e.author as usize].to_hex(),
                e.created_at,
                e.kind
            )?;
            for (j, &r) in self.event_relays(e).iter().enumerate() {
                let s = if j == 0 { "" } else { ", " };
                write!(w, "{s}{}", q(&self.relays[r as usize].url))?;
            }
            writeln!(w, "]}}{sep}")?;
        }
        writeln!(w, "  ]")?;
        writeln!(w, "}}")?;
        w.flush()?;
        Ok(())
    }

    /// Writes the world to a path (buffered).
    pub fn write_path(&self, path: &std::path::Path) -> Result<(), WorldError> {
        let file = std::fs::File::create(path)?;
        self.write(std::io::BufWriter::with_capacity(1 << 20, file))
    }

    /// The world as a JSON string.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write(&mut out).expect("writing to memory cannot fail");
        String::from_utf8(out).expect("the writer emits utf-8")
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
        let mut b = RouteTableBuilder::new(policy.clone())
            .follows(self.follows.iter().copied())
            .reader_relays(&self.reader_relays);
        for list in self.raw_lists() {
            b.add_list(list);
        }
        b.build()
    }
}

fn encode_hex<'a>(bytes: &[u8; 32], out: &'a mut [u8; 64]) -> &'a str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    std::str::from_utf8(out).expect("hex digits are ascii")
}

/// Decodes 64 hex digits (either case) into 32 bytes.
pub fn decode_hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for i in 0..32 {
        out[i] = (nibble(b[2 * i])? << 4) | nibble(b[2 * i + 1])?;
    }
    Some(out)
}

/// Relay URLs interned in order of appearance; `exists` marks keys of `relays`.
#[derive(Default)]
struct Interner {
    relays: Vec<WorldRelay>,
    index: HashMap<String, u32>,
}

impl Interner {
    fn relay_id(&mut self, url: &str) -> u32 {
        if let Some(&id) = self.index.get(url) {
            return id;
        }
        let id = self.relays.len() as u32;
        self.relays.push(WorldRelay {
            url: url.to_string(),
            exists: false,
            up: Vec::new(),
            max_limit: None,
        });
        self.index.insert(url.to_string(), id);
        id
    }

    /// Adds a key of `relays`; returns false if it was already a key.
    fn add_relay(&mut self, url: String, up: Vec<bool>, max_limit: Option<u32>) -> bool {
        let id = self.relay_id(&url) as usize;
        let r = &mut self.relays[id];
        let fresh = !r.exists;
        r.exists = true;
        r.up = up;
        r.max_limit = max_limit;
        fresh
    }
}

/// Everything read, before canonicalisation.
struct RawWorld {
    name: String,
    now: u64,
    sessions: u32,
    reader: PublicKey,
    follows: Vec<PublicKey>,
    reader_relays: Vec<String>,
    relay_lists: Vec<WorldRelayList>,
    relays: Interner,
    events: Vec<WorldEvent>,
    on: Vec<u32>,
}

impl RawWorld {
    /// Validates cross-field rules and puts the world into canonical form.
    fn finish(self) -> Result<World, WorldError> {
        let RawWorld {
            name,
            now,
            sessions,
            reader,
            follows,
            reader_relays,
            relay_lists,
            relays,
            mut events,
            on,
        } = self;
        if sessions > MAX_SESSIONS {
            return Err(WorldError::invalid("sessions", too_many_sessions(sessions)));
        }
        for r in relays.relays.iter().filter(|r| r.exists) {
            if r.up.len() != sessions as usize {
                return Err(WorldError::invalid(
                    format!("relays[{:?}].up", r.url),
                    format!("has {} entries, but `sessions` is {sessions}", r.up.len()),
                ));
            }
        }
        // Duplicated follows are dropped (the first one keeps its place); the authors of
        // events were interned against the original list, so remap them.
        let mut seen = HashMap::with_capacity(follows.len());
        let mut unique = Vec::with_capacity(follows.len());
        let mut remap_follow = Vec::with_capacity(follows.len());
        for pk in follows {
            let id = *seen.entry(pk).or_insert_with(|| {
                unique.push(pk);
                unique.len() as u32 - 1
            });
            remap_follow.push(id);
        }
        for (i, e) in events.iter_mut().enumerate() {
            match remap_follow.get(e.author as usize) {
                Some(&a) => e.author = a,
                None => {
                    return Err(WorldError::invalid(
                        format!("events[{i}].author"),
                        "not one of reader.follows",
                    ))
                }
            }
        }

        // Relays: existing ones sorted by URL, then the others sorted by URL.
        let mut order: Vec<u32> = (0..relays.relays.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&relays.relays[a as usize], &relays.relays[b as usize]);
            rb.exists.cmp(&ra.exists).then_with(|| ra.url.cmp(&rb.url))
        });
        let mut new_id = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
        }
        let mut old_relays: Vec<Option<WorldRelay>> = relays.relays.into_iter().map(Some).collect();
        let world_relays: Vec<WorldRelay> = order
            .iter()
            .map(|&old| old_relays[old as usize].take().expect("each relay once"))
            .collect();
        let relay_index = world_relays
            .iter()
            .enumerate()
            .map(|(i, r)| (r.url.clone(), i as u32))
            .collect();

        events.sort_by_key(|e| (e.author, e.created_at, e.id));
        let mut new_on = Vec::with_capacity(on.len());
        let mut scratch = Vec::new();
        for e in &mut events {
            scratch.clear();
            scratch.extend(
                on[e.on_start as usize..(e.on_start + e.on_len) as usize]
                    .iter()
                    .map(|&r| new_id[r as usize]),
            );
            scratch.sort_unstable();
            scratch.dedup();
            e.on_start = new_on.len() as u32;
            e.on_len = scratch.len() as u32;
            new_on.extend_from_slice(&scratch);
        }
        let mut author_offsets = vec![0u32; unique.len() + 1];
        for e in &events {
            author_offsets[e.author as usize + 1] += 1;
        }
        for i in 1..author_offsets.len() {
            author_offsets[i] += author_offsets[i - 1];
        }
        Ok(World {
            name,
            now,
            sessions,
            reader,
            follows: unique,
            reader_relays,
            relay_lists,
            relays: world_relays,
            relay_index,
            events,
            on: new_on,
            author_offsets,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Reading: a visitor per level, interning as it goes.

/// The top level while reading: required fields are options until the end.
struct PartialWorld {
    format: Option<String>,
    name: Option<String>,
    now: Option<u64>,
    sessions: Option<u32>,
    reader: Option<ReaderRaw>,
    relay_lists: Option<Vec<WorldRelayList>>,
    relays_seen: bool,
    events_seen: bool,
    relays: Interner,
    events: Vec<WorldEvent>,
    on: Vec<u32>,
    /// Event authors by key, interned in order of appearance, with the first event index.
    authors: HashMap<[u8; 32], (u32, usize)>,
    author_keys: Vec<[u8; 32]>,
}

impl PartialWorld {
    fn finish(self) -> Result<World, WorldError> {
        let missing = |f: &str| WorldError::invalid(f, "missing");
        let format = self.format.ok_or_else(|| missing("format"))?;
        if format != WORLD_FORMAT {
            return Err(WorldError::invalid(
                "format",
                format!("is {format:?}, expected {WORLD_FORMAT:?}"),
            ));
        }
        let now = self.now.ok_or_else(|| missing("now"))?;
        let sessions = self.sessions.ok_or_else(|| missing("sessions"))?;
        let reader = self.reader.ok_or_else(|| missing("reader"))?;
        let relay_lists = self.relay_lists.ok_or_else(|| missing("relay_lists"))?;
        if !self.relays_seen {
            return Err(missing("relays"));
        }
        if !self.events_seen {
            return Err(missing("events"));
        }
        // Event authors were interned by key; map them to follow indices.
        let follow_index: HashMap<[u8; 32], u32> = reader
            .follows
            .iter()
            .enumerate()
            .map(|(i, pk)| (pk.to_bytes(), i as u32))
            .collect();
        let mut remap = Vec::with_capacity(self.author_keys.len());
        for key in &self.author_keys {
            match follow_index.get(key) {
                Some(&i) => remap.push(i),
                None => {
                    let first = self.authors[key].1;
                    return Err(WorldError::invalid(
                        format!("events[{first}].author"),
                        "not one of reader.follows",
                    ));
                }
            }
        }
        let mut events = self.events;
        for e in &mut events {
            e.author = remap[e.author as usize];
        }
        RawWorld {
            name: self.name.unwrap_or_default(),
            now,
            sessions,
            reader: reader.pubkey,
            follows: reader.follows,
            reader_relays: reader.relays,
            relay_lists,
            relays: self.relays,
            events,
            on: self.on,
        }
        .finish()
    }
}

impl<'de> Deserialize<'de> for PartialWorld {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(WorldVisitor)
    }
}

struct WorldVisitor;

impl<'de> Visitor<'de> for WorldVisitor {
    type Value = PartialWorld;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an outbox-world/1 object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PartialWorld, A::Error> {
        let mut w = PartialWorld {
            format: None,
            name: None,
            now: None,
            sessions: None,
            reader: None,
            relay_lists: None,
            relays_seen: false,
            events_seen: false,
            relays: Interner::default(),
            events: Vec::new(),
            on: Vec::new(),
            authors: HashMap::new(),
            author_keys: Vec::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => w.format = Some(map.next_value()?),
                "name" => w.name = Some(map.next_value()?),
                "now" => w.now = Some(map.next_value()?),
                "sessions" => w.sessions = Some(map.next_value::<Sessions>()?.0),
                "reader" => w.reader = Some(map.next_value()?),
                "relay_lists" => {
                    let lists: Vec<RelayListRaw> = map.next_value()?;
                    w.relay_lists = Some(
                        lists
                            .into_iter()
                            .map(|l| WorldRelayList {
                                author: l.author.0,
                                created_at: l.created_at,
                                tags: l.tags,
                            })
                            .collect(),
                    );
                }
                "relays" => {
                    map.next_value_seed(RelaysSeed(&mut w.relays))?;
                    w.relays_seen = true;
                }
                "events" => {
                    map.next_value_seed(EventsSeed {
                        relays: &mut w.relays,
                        events: &mut w.events,
                        on: &mut w.on,
                        authors: &mut w.authors,
                        author_keys: &mut w.author_keys,
                    })?;
                    w.events_seen = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(w)
    }
}

/// `sessions`: a count of at most [`MAX_SESSIONS`].
struct Sessions(u32);

impl<'de> Deserialize<'de> for Sessions {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sessions = u32::deserialize(d)?;
        if sessions > MAX_SESSIONS {
            return Err(de::Error::custom(too_many_sessions(sessions)));
        }
        Ok(Sessions(sessions))
    }
}

/// A public key that must be a valid x-only secp256k1 key.
struct Key(PublicKey);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a 64-hex-digit public key")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key, E> {
                outbox_core::public_key_from_hex(s).map(Key).map_err(|e| {
                    E::custom(format!("{e}: {:?}", s.chars().take(80).collect::<String>()))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// 32 bytes as 64 hex digits (event ids and authors of events: not validated as curve points,
/// which would cost a square root per event).
struct Hex32([u8; 32]);

impl<'de> Deserialize<'de> for Hex32 {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Hex32;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("64 hex digits")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Hex32, E> {
                decode_hex32(s).map(Hex32).ok_or_else(|| {
                    E::custom(format!(
                        "expected 64 hex digits, found {:?}",
                        s.chars().take(80).collect::<String>()
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

#[derive(Deserialize)]
struct ReaderRaw {
    #[serde(deserialize_with = "de_key")]
    pubkey: PublicKey,
    #[serde(deserialize_with = "de_keys")]
    follows: Vec<PublicKey>,
    relays: Vec<String>,
}

fn de_key<'de, D: de::Deserializer<'de>>(d: D) -> Result<PublicKey, D::Error> {
    Key::deserialize(d).map(|k| k.0)
}

fn de_keys<'de, D: de::Deserializer<'de>>(d: D) -> Result<Vec<PublicKey>, D::Error> {
    Vec::<Key>::deserialize(d).map(|v| v.into_iter().map(|k| k.0).collect())
}

#[derive(Deserialize)]
struct RelayListRaw {
    author: Key,
    created_at: u64,
    tags: Vec<Vec<String>>,
}

#[derive(Deserialize)]
struct RelayRaw {
    #[serde(deserialize_with = "de_up")]
    up: Vec<bool>,
    #[serde(default, deserialize_with = "de_max_limit")]
    max_limit: Option<u32>,
}

/// `up`: an array of booleans with at most [`MAX_SESSIONS`] entries, refused as soon as it grows
/// past that (before the array is read to its end).
fn de_up<'de, D: de::Deserializer<'de>>(d: D) -> Result<Vec<bool>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<bool>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an array of at most {MAX_SESSIONS} booleans")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<bool>, A::Error> {
            let mut up = Vec::new();
            while let Some(u) = seq.next_element::<bool>()? {
                if up.len() == MAX_SESSIONS as usize {
                    return Err(de::Error::custom(format!(
                        "has more than {MAX_SESSIONS} entries, the most sessions a world may describe"
                    )));
                }
                up.push(u);
            }
            Ok(up)
        }
    }
    d.deserialize_seq(V)
}

/// `max_limit`: absent or `null` is no cap; a positive integer is a cap (beyond `u32`, the
/// largest cap: a huge cap is still a cap); zero, negative, fractional or non-numbers are errors.
fn de_max_limit<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Option<u32>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a positive whole number of events per filter (leave it out for no cap)")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<u32>, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u32>, E> {
            if v == 0 {
                return Err(E::custom(
                    "is 0: a cap must be at least 1 (leave it out for no cap)",
                ));
            }
            Ok(Some(u32::try_from(v).unwrap_or(u32::MAX)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u32>, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!(
                    "is {v}: a cap must be a positive whole number (leave it out for no cap)"
                ))),
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<u32>, E> {
            // Integers too long for u64 arrive as floats.
            if v.is_finite() && v >= 1.0 && v.fract() == 0.0 {
                Ok(Some(if v >= u32::MAX as f64 {
                    u32::MAX
                } else {
                    v as u32
                }))
            } else {
                Err(E::custom(format!(
                    "is {v}: a cap must be a positive whole number (leave it out for no cap)"
                )))
            }
        }
    }
    d.deserialize_any(V)
}

struct RelaysSeed<'a>(&'a mut Interner);

impl<'de> DeserializeSeed<'de> for RelaysSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RelaysSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object keyed by relay url")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(url) = map.next_key::<String>()? {
            let relay: RelayRaw = map.next_value()?;
            if url.is_empty() {
                return Err(de::Error::custom("empty relay url"));
            }
            if !self.0.add_relay(url.clone(), relay.up, relay.max_limit) {
                return Err(de::Error::custom(format!("relay {url:?} listed twice")));
            }
        }
        Ok(())
    }
}

struct EventsSeed<'a> {
    relays: &'a mut Interner,
    events: &'a mut Vec<WorldEvent>,
    on: &'a mut Vec<u32>,
    authors: &'a mut HashMap<[u8; 32], (u32, usize)>,
    author_keys: &'a mut Vec<[u8; 32]>,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let EventsSeed {
            relays,
            events,
            on,
            authors,
            author_keys,
        } = self;
        loop {
            let index = events.len();
            let seed = EventSeed {
                relays: &mut *relays,
                on: &mut *on,
            };
            let Some(raw) = seq.next_element_seed(seed)? else {
                break;
            };
            let next = author_keys.len() as u32;
            let (author, _) = *authors.entry(raw.author).or_insert((next, index));
            if author == next {
                author_keys.push(raw.author);
            }
            events.push(WorldEvent {
                id: raw.id,
                author,
                created_at: raw.created_at,
                kind: raw.kind,
                on_start: raw.on_start,
                on_len: raw.on_len,
            });
        }
        Ok(())
    }
}

struct EventSeed<'a> {
    relays: &'a mut Interner,
    on: &'a mut Vec<u32>,
}

struct EventRaw {
    id: [u8; 32],
    author: [u8; 32],
    created_at: u64,
    kind: u16,
    on_start: u32,
    on_len: u32,
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = EventRaw;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<EventRaw, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = EventRaw;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EventRaw, A::Error> {
        let (mut id, mut author, mut created_at, mut kind) = (None, None, None, None);
        let mut on_range = None;
        while let Some(key) = map.next_key::<EventField>()? {
            match key {
                EventField::Id => id = Some(map.next_value::<Hex32>()?.0),
                EventField::Author => author = Some(map.next_value::<Hex32>()?.0),
                EventField::CreatedAt => created_at = Some(map.next_value::<u64>()?),
                EventField::Kind => kind = Some(map.next_value::<u16>()?),
                EventField::On => {
                    let start = self.on.len() as u32;
                    map.next_value_seed(OnSeed {
                        relays: &mut *self.relays,
                        on: &mut *self.on,
                    })?;
                    on_range = Some((start, self.on.len() as u32 - start));
                }
                EventField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let (on_start, on_len) = on_range.ok_or_else(|| de::Error::missing_field("on"))?;
        Ok(EventRaw {
            id: id.ok_or_else(|| de::Error::missing_field("id"))?,
            author: author.ok_or_else(|| de::Error::missing_field("author"))?,
            created_at: created_at.ok_or_else(|| de::Error::missing_field("created_at"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            on_start,
            on_len,
        })
    }
}

struct OnSeed<'a> {
    relays: &'a mut Interner,
    on: &'a mut Vec<u32>,
}

impl<'de> DeserializeSeed<'de> for OnSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for OnSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of relay urls")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(id) = seq.next_element_seed(InternUrl(&mut *self.relays))? {
            self.on.push(id);
        }
        Ok(())
    }
}

/// Interns one URL string without allocating when it is already known.
struct InternUrl<'a>(&'a mut Interner);

impl<'de> DeserializeSeed<'de> for InternUrl<'_> {
    type Value = u32;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<u32, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for InternUrl<'_> {
    type Value = u32;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a relay url")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<u32, E> {
        Ok(self.0.relay_id(s))
    }
}

/// The keys of an event object, read without allocating.
enum EventField {
    Id,
    Author,
    CreatedAt,
    Kind,
    On,
    Other,
}

impl<'de> Deserialize<'de> for EventField {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EventField;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<EventField, E> {
                Ok(match s {
                    "id" => EventField::Id,
                    "author" => EventField::Author,
                    "created_at" => EventField::CreatedAt,
                    "kind" => EventField::Kind,
                    "on" => EventField::On,
                    _ => EventField::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

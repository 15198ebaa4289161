//! Reading `outbox-world/1`: a visitor per level, interning as it goes, so no JSON tree is
//! kept. Counts that size allocations up front are bounded as they are read (`sessions` and
//! every `up` array at [`MAX_SESSIONS`], `monitor` at [`MAX_MONITOR_ENTRIES`], `mentions` at
//! [`MAX_MENTIONS`], each event's `p` at [`MAX_EVENT_TAGS`], `hints` at [`MAX_WORLD_HINTS`]);
//! every malformed value is an error naming its field.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;

use nostr::key::PublicKey;
use nostr_outbox_core::{Hint, HintSource};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::timing::RelayTiming;

use super::canonical::{Interner, RawWorld};
use super::{
    too_many_sessions, MonitorEntry, World, WorldError, WorldEvent, WorldMention, WorldRelayList,
    MAX_EVENT_TAGS, MAX_MENTIONS, MAX_MONITOR_ENTRIES, MAX_SESSIONS, MAX_WORLD_HINTS, WORLD_FORMAT,
};

impl World {
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
    monitor: Vec<MonitorEntry>,
    events: Vec<WorldEvent>,
    on: Vec<u32>,
    tagged: Vec<PublicKey>,
    mentions: Vec<WorldMention>,
    mention_on: Vec<u32>,
    hints: Vec<Hint>,
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
            monitor: self.monitor,
            events,
            on: self.on,
            tagged: self.tagged,
            mentions: self.mentions,
            mention_on: self.mention_on,
            hints: self.hints,
        }
        .finish()
    }
}

impl<'de> Deserialize<'de> for PartialWorld {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(WorldVisitor)
    }
}

/// The top-level fields a world file may give once each.
const WORLD_FIELDS: [&str; 11] = [
    "format",
    "name",
    "now",
    "sessions",
    "reader",
    "relay_lists",
    "relays",
    "monitor",
    "mentions",
    "hints",
    "events",
];

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
            monitor: Vec::new(),
            events: Vec::new(),
            on: Vec::new(),
            tagged: Vec::new(),
            mentions: Vec::new(),
            mention_on: Vec::new(),
            hints: Vec::new(),
            authors: HashMap::new(),
            author_keys: Vec::new(),
        };
        let mut seen: Vec<&'static str> = Vec::with_capacity(WORLD_FIELDS.len());
        while let Some(key) = map.next_key::<String>()? {
            // A second value for a field would silently replace (or add to) the first.
            if let Some(&field) = WORLD_FIELDS.iter().find(|f| **f == key) {
                if seen.contains(&field) {
                    return Err(de::Error::duplicate_field(field));
                }
                seen.push(field);
            }
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
                "monitor" => map.next_value_seed(MonitorSeed(&mut w.monitor))?,
                "hints" => map.next_value_seed(HintsSeed(&mut w.hints))?,
                "mentions" => map.next_value_seed(MentionsSeed {
                    relays: &mut w.relays,
                    mentions: &mut w.mentions,
                    on: &mut w.mention_on,
                })?,
                "events" => {
                    map.next_value_seed(EventsSeed {
                        relays: &mut w.relays,
                        events: &mut w.events,
                        on: &mut w.on,
                        tagged: &mut w.tagged,
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
                nostr_outbox_core::public_key_from_hex(s)
                    .map(Key)
                    .map_err(|e| {
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
    #[serde(default, deserialize_with = "de_timing")]
    timing: Option<RelayTiming>,
}

/// `timing`: absent or `null` is the default timing; an object whose fields are out of bounds
/// ([`RelayTiming::check`]) is an error naming the field.
fn de_timing<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<RelayTiming>, D::Error> {
    let timing = Option::<RelayTiming>::deserialize(d)?;
    if let Some(Err(why)) = timing.map(|t| t.check()) {
        return Err(de::Error::custom(format!("has {why}")));
    }
    Ok(timing)
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
            if !self
                .0
                .add_relay(url.clone(), relay.up, relay.max_limit, relay.timing)
            {
                return Err(de::Error::custom(format!("relay {url:?} listed twice")));
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct MonitorRaw {
    last_seen: u64,
}

/// `monitor`: relay URL → `{"last_seen": unix seconds}`, at most [`MAX_MONITOR_ENTRIES`]
/// entries (refused as soon as there are more), each URL once, none empty.
struct MonitorSeed<'a>(&'a mut Vec<MonitorEntry>);

impl<'de> DeserializeSeed<'de> for MonitorSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MonitorSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object keyed by relay url")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(url) = map.next_key::<String>()? {
            let entry: MonitorRaw = map.next_value()?;
            if url.is_empty() {
                return Err(de::Error::custom("empty relay url"));
            }
            if self.0.len() == MAX_MONITOR_ENTRIES {
                return Err(de::Error::custom(format!(
                    "has more than {MAX_MONITOR_ENTRIES} entries"
                )));
            }
            if !seen.insert(url.clone()) {
                return Err(de::Error::custom(format!("relay {url:?} listed twice")));
            }
            self.0.push(MonitorEntry {
                url,
                last_seen: entry.last_seen,
            });
        }
        Ok(())
    }
}

/// One entry of `hints`: a valid key, a relay URL as written, and a known source.
#[derive(Deserialize)]
struct HintRaw {
    author: Key,
    relay: String,
    source: SourceRaw,
}

/// A hint source by its name (`contact_list`, `pointer`, `seen_on`); anything else is an error.
struct SourceRaw(HintSource);

impl<'de> Deserialize<'de> for SourceRaw {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SourceRaw;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("contact_list, pointer or seen_on")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SourceRaw, E> {
                s.parse::<HintSource>().map(SourceRaw).map_err(|_| {
                    E::custom(format!(
                        "unknown hint source {:?} (contact_list, pointer, seen_on)",
                        s.chars().take(40).collect::<String>()
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// `hints`: at most [`MAX_WORLD_HINTS`] entries, refused as soon as there are more.
struct HintsSeed<'a>(&'a mut Vec<Hint>);

impl<'de> DeserializeSeed<'de> for HintsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for HintsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of relay hints")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<HintRaw>()? {
            if self.0.len() == MAX_WORLD_HINTS {
                return Err(de::Error::custom(format!(
                    "has more than {MAX_WORLD_HINTS} entries"
                )));
            }
            self.0.push(Hint {
                author: raw.author.0,
                relay: raw.relay,
                source: raw.source.0,
            });
        }
        Ok(())
    }
}

struct EventsSeed<'a> {
    relays: &'a mut Interner,
    events: &'a mut Vec<WorldEvent>,
    on: &'a mut Vec<u32>,
    tagged: &'a mut Vec<PublicKey>,
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
            tagged,
            authors,
            author_keys,
        } = self;
        loop {
            let index = events.len();
            let seed = EventSeed {
                relays: &mut *relays,
                on: &mut *on,
                tagged: Some(&mut *tagged),
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
                p_start: raw.p_start,
                p_len: raw.p_len,
            });
        }
        Ok(())
    }
}

/// `mentions`: an array of events tagging the reader, by anyone, at most [`MAX_MENTIONS`]
/// (refused as soon as there are more). A mention's `p` is not read.
struct MentionsSeed<'a> {
    relays: &'a mut Interner,
    mentions: &'a mut Vec<WorldMention>,
    on: &'a mut Vec<u32>,
}

impl<'de> DeserializeSeed<'de> for MentionsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MentionsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of events tagging the reader")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let seed = EventSeed {
                relays: &mut *self.relays,
                on: &mut *self.on,
                tagged: None,
            };
            let Some(raw) = seq.next_element_seed(seed)? else {
                break;
            };
            if self.mentions.len() == MAX_MENTIONS {
                return Err(de::Error::custom(format!(
                    "has more than {MAX_MENTIONS} entries"
                )));
            }
            self.mentions.push(WorldMention {
                id: raw.id,
                author: raw.author,
                created_at: raw.created_at,
                kind: raw.kind,
                on_start: raw.on_start,
                on_len: raw.on_len,
            });
        }
        Ok(())
    }
}

/// One event object; `tagged` is where its `p` goes (`None`: `p` is not read).
struct EventSeed<'a> {
    relays: &'a mut Interner,
    on: &'a mut Vec<u32>,
    tagged: Option<&'a mut Vec<PublicKey>>,
}

struct EventRaw {
    id: [u8; 32],
    author: [u8; 32],
    created_at: u64,
    kind: u16,
    on_start: u32,
    on_len: u32,
    p_start: u32,
    p_len: u32,
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
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<EventRaw, A::Error> {
        let (mut id, mut author, mut created_at, mut kind) = (None, None, None, None);
        let mut on_range = None;
        let mut p_range = None;
        while let Some(key) = map.next_key::<EventField>()? {
            let repeated = match key {
                EventField::Id => id.is_some().then_some("id"),
                EventField::Author => author.is_some().then_some("author"),
                EventField::CreatedAt => created_at.is_some().then_some("created_at"),
                EventField::Kind => kind.is_some().then_some("kind"),
                EventField::On => on_range.is_some().then_some("on"),
                EventField::P | EventField::Other => None,
            };
            if let Some(field) = repeated {
                return Err(de::Error::duplicate_field(field));
            }
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
                EventField::P => match self.tagged.as_deref_mut() {
                    Some(tagged) => {
                        if p_range.is_some() {
                            return Err(de::Error::duplicate_field("p"));
                        }
                        let start = tagged.len() as u32;
                        map.next_value_seed(TagsSeed(&mut *tagged))?;
                        p_range = Some((start, tagged.len() as u32 - start));
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
                EventField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let (on_start, on_len) = on_range.ok_or_else(|| de::Error::missing_field("on"))?;
        let (p_start, p_len) = p_range.unwrap_or((0, 0));
        Ok(EventRaw {
            id: id.ok_or_else(|| de::Error::missing_field("id"))?,
            author: author.ok_or_else(|| de::Error::missing_field("author"))?,
            created_at: created_at.ok_or_else(|| de::Error::missing_field("created_at"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            on_start,
            on_len,
            p_start,
            p_len,
        })
    }
}

/// `events[i].p`: valid x-only public keys, at most [`MAX_EVENT_TAGS`] (refused as soon as
/// there are more), a key repeated within one event kept once.
struct TagsSeed<'a>(&'a mut Vec<PublicKey>);

impl<'de> DeserializeSeed<'de> for TagsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TagsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an array of at most {MAX_EVENT_TAGS} public keys")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let start = self.0.len();
        let mut count = 0usize;
        while let Some(Key(pk)) = seq.next_element::<Key>()? {
            count += 1;
            if count > MAX_EVENT_TAGS {
                return Err(de::Error::custom(format!(
                    "has more than {MAX_EVENT_TAGS} entries"
                )));
            }
            if !self.0[start..].contains(&pk) {
                self.0.push(pk);
            }
        }
        Ok(())
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
    P,
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
                    "p" => EventField::P,
                    _ => EventField::Other,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

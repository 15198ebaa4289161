//! The canonical form of a world, built from the generator's parts or from what the reader
//! interned: existing relays first, each group sorted by URL; events by (author, `created_at`,
//! id); follows without duplicates.

use std::collections::HashMap;

use nostr::key::PublicKey;

use nostr_outbox_core::Hint;

use crate::timing::RelayTiming;

use super::{
    too_many_sessions, MonitorEntry, World, WorldError, WorldEvent, WorldMention, WorldParts,
    WorldRelay, WorldRelayList, MAX_SESSIONS, MAX_WORLD_HINTS,
};

impl World {
    /// Builds the canonical world from parts. Fails if an event names an author that is not a
    /// follow, or an `up` array does not have `sessions` entries.
    pub fn from_parts(parts: WorldParts) -> Result<Self, WorldError> {
        let reader = parts
            .reader
            .ok_or_else(|| WorldError::invalid("reader.pubkey", "missing"))?;
        let mut b = Interner::default();
        for (url, up) in parts.relays {
            b.add_relay(url, up, None, None);
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
                p_start: 0,
                p_len: 0,
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
            monitor: Vec::new(),
            events,
            on,
            tagged: Vec::new(),
            mentions: Vec::new(),
            mention_on: Vec::new(),
            hints: Vec::new(),
        };
        raw.finish()
    }
}

/// Relay URLs interned in order of appearance; `exists` marks keys of `relays`.
#[derive(Default)]
pub(super) struct Interner {
    relays: Vec<WorldRelay>,
    index: HashMap<String, u32>,
}

impl Interner {
    pub(super) fn relay_id(&mut self, url: &str) -> u32 {
        if let Some(&id) = self.index.get(url) {
            return id;
        }
        let id = self.relays.len() as u32;
        self.relays.push(WorldRelay {
            url: url.to_string(),
            exists: false,
            up: Vec::new(),
            max_limit: None,
            timing: None,
        });
        self.index.insert(url.to_string(), id);
        id
    }

    /// Adds a key of `relays`; returns false if it was already a key.
    pub(super) fn add_relay(
        &mut self,
        url: String,
        up: Vec<bool>,
        max_limit: Option<u32>,
        timing: Option<RelayTiming>,
    ) -> bool {
        let id = self.relay_id(&url) as usize;
        let r = &mut self.relays[id];
        let fresh = !r.exists;
        r.exists = true;
        r.up = up;
        r.max_limit = max_limit;
        r.timing = timing;
        fresh
    }
}

/// Everything read, before canonicalisation.
pub(super) struct RawWorld {
    pub(super) name: String,
    pub(super) now: u64,
    pub(super) sessions: u32,
    pub(super) reader: PublicKey,
    pub(super) follows: Vec<PublicKey>,
    pub(super) reader_relays: Vec<String>,
    pub(super) relay_lists: Vec<WorldRelayList>,
    pub(super) relays: Interner,
    pub(super) monitor: Vec<MonitorEntry>,
    pub(super) events: Vec<WorldEvent>,
    pub(super) on: Vec<u32>,
    pub(super) tagged: Vec<PublicKey>,
    pub(super) mentions: Vec<WorldMention>,
    pub(super) mention_on: Vec<u32>,
    pub(super) hints: Vec<Hint>,
}

impl RawWorld {
    /// Validates cross-field rules and puts the world into canonical form.
    pub(super) fn finish(self) -> Result<World, WorldError> {
        let RawWorld {
            name,
            now,
            sessions,
            reader,
            follows,
            reader_relays,
            relay_lists,
            relays,
            monitor,
            mut events,
            on,
            tagged,
            mentions,
            mention_on,
            hints,
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
        let mut new_tagged = Vec::with_capacity(tagged.len());
        let mut scratch = Vec::new();
        for e in &mut events {
            let tags = &tagged[e.p_start as usize..(e.p_start + e.p_len) as usize];
            e.p_start = new_tagged.len() as u32;
            new_tagged.extend_from_slice(tags);
            e.p_len = tags.len() as u32;
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
        let (mentions, mention_on) =
            canonical_mentions(mentions, &mention_on, |r| new_id[r as usize]);
        let mut author_offsets = vec![0u32; unique.len() + 1];
        for e in &events {
            author_offsets[e.author as usize + 1] += 1;
        }
        for i in 1..author_offsets.len() {
            author_offsets[i] += author_offsets[i - 1];
        }
        let mut world = World {
            name,
            now,
            sessions,
            reader,
            follows: unique,
            reader_relays,
            relay_lists,
            relays: world_relays,
            relay_index,
            monitor: Vec::new(),
            events,
            on: new_on,
            tagged: new_tagged,
            author_offsets,
            mentions,
            mention_on,
            hints: canonical_hints(hints),
        };
        world.set_monitor(monitor);
        Ok(world)
    }
}

/// Mentions in canonical form: sorted by (`created_at`, id, author), each `on` list mapped
/// through `relay` (old id to new), sorted and without repeats, in one fresh vector.
pub(super) fn canonical_mentions(
    mut mentions: Vec<WorldMention>,
    on: &[u32],
    relay: impl Fn(u32) -> u32,
) -> (Vec<WorldMention>, Vec<u32>) {
    mentions.sort_by_key(|m| (m.created_at, m.id, m.author));
    let mut new_on = Vec::with_capacity(on.len());
    let mut scratch = Vec::new();
    for m in &mut mentions {
        scratch.clear();
        scratch.extend(
            on[m.on_start as usize..(m.on_start + m.on_len) as usize]
                .iter()
                .map(|&r| relay(r)),
        );
        scratch.sort_unstable();
        scratch.dedup();
        m.on_start = new_on.len() as u32;
        m.on_len = scratch.len() as u32;
        new_on.extend_from_slice(&scratch);
    }
    (mentions, new_on)
}

/// Hints in canonical order: by (author, source, relay), repeats dropped, at most
/// [`MAX_WORLD_HINTS`].
pub(super) fn canonical_hints(mut hints: Vec<Hint>) -> Vec<Hint> {
    hints.sort_unstable_by(|a, b| {
        (a.author, a.source, &a.relay).cmp(&(b.author, b.source, &b.relay))
    });
    hints.dedup();
    hints.truncate(MAX_WORLD_HINTS);
    hints
}

//! What `outbox route` reads: a world file and relay-list events into one directory, learned
//! stats, and the event a route is about. Every file is bounded and must be a regular file.

use std::path::Path;

use anyhow::{bail, Context};
use nostr::event::{Event, EventId};
use nostr::key::PublicKey;
use nostr_outbox_client::{RelayDirectory, RelayDirectoryBuilder};
use nostr_outbox_core::{parse_public_key, DeliveryStats, RouterConfig, UrlPolicy};
use nostr_outbox_sim::World;
use serde_json::Value;

use super::Common;
use crate::text::{escape, read_bounded, MAX_CONFIG_BYTES};

/// The largest relay-list events file read (about 100,000 typical lists).
pub const MAX_LISTS_BYTES: u64 = 64 << 20;

/// The largest event file read (relays commonly refuse events past a few hundred KiB).
pub const MAX_EVENT_BYTES: u64 = 4 << 20;

/// Everything a route is planned from.
pub struct Inputs {
    /// Who is where.
    pub directory: RelayDirectory,
    /// Learned relay quality.
    pub stats: DeliveryStats,
    /// The present.
    pub now: u64,
    /// The world's reader, if a world was given.
    pub reader: Option<PublicKey>,
    /// The world's reader relays (they belong to the world's reader only).
    pub world_reader_relays: Vec<String>,
    /// Events in the lists file that were not usable lists (malformed, wrong kind, unverified).
    pub rejected_events: u64,
}

/// A router config for routes: they plan no feed, so a config without a `[strategy]` table
/// (one written for routes alone) reads with the feed's default strategy; any other problem
/// is reported as `outbox feed` would.
pub(crate) fn route_config(text: &str) -> Result<RouterConfig, nostr_outbox_core::ConfigError> {
    let has_strategy =
        toml::from_str::<toml::Table>(text).map_or(true, |table| table.contains_key("strategy"));
    if has_strategy {
        return RouterConfig::from_toml(text);
    }
    // The feed's default `[strategy]` table, after the last line: a table header there starts
    // a top-level table whatever the text ends in.
    let default = crate::feed::DEFAULT_CONFIG;
    let table = default
        .find("[strategy]")
        .map_or(default, |at| &default[at..]);
    RouterConfig::from_toml(&format!("{text}\n{table}"))
}

impl Inputs {
    /// Reads every input `common` names; `allow_loopback` keeps loopback relays in the lists
    /// (for local relays).
    pub fn load_with(common: &Common, allow_loopback: bool) -> anyhow::Result<Self> {
        let mut policy = match &common.config {
            Some(path) => {
                let text = read_bounded(path, MAX_CONFIG_BYTES).context("reading config")?;
                route_config(&text)
                    .with_context(|| format!("in config {}", path.display()))?
                    .url_policy
            }
            None => UrlPolicy::default(),
        };
        if allow_loopback {
            policy.allow_loopback = true;
        }
        let mut builder = RelayDirectoryBuilder::new(policy);
        let mut reader = None;
        let mut world_reader_relays = Vec::new();
        let mut world_now = None;
        if let Some(path) = &common.world {
            regular_file(path)?;
            let world = World::read_path(path)
                .with_context(|| format!("reading world {}", path.display()))?;
            for list in world.raw_lists() {
                builder.add_relay_list(list);
            }
            reader = Some(world.reader);
            world_reader_relays = world.reader_relays.clone();
            world_now = Some(world.now);
        }
        let mut rejected_events = 0;
        if let Some(path) = &common.lists {
            rejected_events = read_lists(path, &mut builder)?;
        }
        if common.world.is_none() && common.lists.is_none() {
            bail!("no relay lists: give --world FILE or --lists FILE");
        }
        let stats = match &common.stats {
            Some(path) => {
                regular_file(path)?;
                let loaded = nostr_outbox_stats::FileStore::new(path)
                    .load()
                    .with_context(|| format!("reading stats {}", path.display()))?;
                for warning in &loaded.warnings {
                    eprintln!("stats: {}", escape(&warning.to_string()));
                }
                loaded.stats
            }
            None => DeliveryStats::new(),
        };
        let now = common.now.or(world_now).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        });
        Ok(Self {
            directory: builder.build(),
            stats,
            now,
            reader,
            world_reader_relays,
            rejected_events,
        })
    }
}

/// Refuses anything but a regular file before it is opened (a FIFO would block the open).
fn regular_file(path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    Ok(())
}

/// Adds the events of a lists file (a JSON array of signed events) to `builder`; returns how
/// many were not usable lists.
fn read_lists(path: &Path, builder: &mut RelayDirectoryBuilder) -> anyhow::Result<u64> {
    let text = read_bounded(path, MAX_LISTS_BYTES)?;
    let values: Vec<Value> = serde_json::from_str(&text)
        .with_context(|| format!("{}: expected a JSON array of events", path.display()))?;
    let mut rejected = 0u64;
    for (i, value) in values.into_iter().enumerate() {
        let result = serde_json::from_value::<Event>(value)
            .map_err(|e| e.to_string())
            .and_then(|event| builder.add_event(&event).map_err(|e| e.to_string()));
        if let Err(why) = result {
            rejected += 1;
            tracing::debug!(index = i, why = %escape(&why), "lists file entry not used");
        }
    }
    Ok(rejected)
}

/// An event as a route needs it: signed or not, only these fields are read.
pub struct EventFile {
    /// The id, when the file has one.
    pub id: Option<EventId>,
    /// The author.
    pub pubkey: PublicKey,
    /// The kind.
    pub kind: u16,
    /// The tags, raw.
    pub tags: Vec<Vec<String>>,
}

/// Reads an event file (JSON object with `pubkey`, `kind`, `tags` and optionally `id`).
pub fn read_event(path: &Path) -> anyhow::Result<EventFile> {
    let text = read_bounded(path, MAX_EVENT_BYTES)?;
    parse_event(&text).with_context(|| format!("in event {}", path.display()))
}

fn parse_event(text: &str) -> anyhow::Result<EventFile> {
    let value: Value = serde_json::from_str(text).context("not JSON")?;
    let field = |name: &str| {
        value
            .get(name)
            .with_context(|| format!("field `{name}` is missing"))
    };
    let pubkey = field("pubkey")?
        .as_str()
        .context("field `pubkey` is not a string")?;
    let pubkey = parse_public_key(pubkey).context("field `pubkey`")?;
    let kind = field("kind")?
        .as_u64()
        .filter(|k| *k <= u64::from(u16::MAX))
        .context("field `kind` is not a kind (0–65535)")?;
    let tags = field("tags")?
        .as_array()
        .context("field `tags` is not an array")?
        .iter()
        .enumerate()
        .map(|(i, tag)| {
            tag.as_array()
                .and_then(|items| {
                    items
                        .iter()
                        .map(|s| s.as_str().map(str::to_string))
                        .collect::<Option<Vec<String>>>()
                })
                .with_context(|| format!("field `tags[{i}]` is not an array of strings"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let id = match value.get("id") {
        None | Some(Value::Null) => None,
        Some(id) => Some(
            id.as_str()
                .and_then(|s| EventId::from_hex(s).ok())
                .context("field `id` is not 64 hex digits")?,
        ),
    };
    Ok(EventFile {
        id,
        pubkey,
        kind: kind as u16,
        tags,
    })
}

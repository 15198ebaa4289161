//! Synthetic relay worlds: the `outbox-world/1` format and the generator that draws worlds
//! calibrated to the published measurements.
//!
//! A [`World`] is where every event lives and which relays answer in each session: `world`
//! holds its types and queries, its canonical form, the streaming reader with its limits and
//! the writer. `generate` draws one from a [`WorldModel`] (every knob, with the fact it models)
//! for a [`Profile`] and seed, deterministically, or from a [`Family`] whose knobs are drawn per
//! seed. Replaying a world (plans scored, sessions learned from) is `nostr-outbox-sim`'s.
//!
//! ```
//! use nostr_outbox_world::{generate, Profile, World};
//! let world = generate(Profile::Small, 7);
//! let back = World::from_json(&world.to_json()).unwrap();
//! assert_eq!(back, world);
//! ```

pub mod generate;
pub mod timing;
pub mod world;

pub use generate::{
    generate, generate_in, generate_with, world_stats, CapShare, Family, Profile, Span,
    TimingModel, WorldModel, WorldStats, DEFAULT_RELAY_CAPS,
};
pub use timing::{RelayTiming, MAX_TIMING_MS};
pub use world::{
    MonitorEntry, PartMention, SessionsError, World, WorldError, WorldEvent, WorldMention,
    WorldRelay, WorldRelayList, MAX_EVENT_TAGS, MAX_MENTIONS, MAX_MONITOR_ENTRIES, MAX_SESSIONS,
    MAX_WORLD_HINTS, WORLD_FORMAT,
};

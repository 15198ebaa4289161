//! The world generator: a synthetic relay network with what makes the real one hard.
//!
//! Every knob lives in [`WorldModel`], with defaults drawn from the published measurements
//! (nostrability/outbox, 2026; the numbers are in `docs/design.md`). A world is deterministic
//! for (profile, seed).
//!
//! A world is drawn from one seeded stream, in phases: the relay network (`relays`), then for
//! each follow its write relays and relay list (`authors`) and its notes (`events`), then which
//! relays answer in each session. Per-REQ caps come from a stream of their own, so adding them
//! changed nothing else; so does the monitor data (`monitor`), and so do the reader's inbox, the
//! people the reader does not follow and the notes' tags (`mentions`). So do the shapes the
//! default never draws: hoarders (prolific follows on one relay of their own), the heavier volume
//! tail and the empty widely listed relays each have a stream of their own, and their default
//! knobs draw nothing; so do the relay hints the reader's client knows (`hints`), and so does each relay's timing
//! (`timing`: connect and query times, the slow tail, black holes). `model` holds the knobs; `stats` the headline facts to check a world
//! against the measurements.

mod authors;
mod events;
mod family;
mod hints;
mod mentions;
mod model;
mod monitor;
mod relays;
mod stats;
mod timing;

use std::collections::HashSet;

use nostr::key::PublicKey;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use family::Family;
pub use model::{CapShare, Profile, Span, WorldModel, DEFAULT_RELAY_CAPS};
pub use stats::{world_stats, WorldStats};
pub use timing::TimingModel;

use crate::world::{World, WorldError, WorldParts};

const DAY: u64 = 86_400;

/// The present of every generated world (2026-01-01T00:00:00Z): fixed so worlds are
/// reproducible.
pub const GENERATED_NOW: u64 = 1_767_225_600;

/// Generates the world for `profile` and `seed` with the default model.
pub fn generate(profile: Profile, seed: u64) -> World {
    generate_with(
        &WorldModel::for_profile(profile),
        &format!("{profile}/seed-{seed}"),
        seed,
    )
    .expect("generated worlds are always well-formed")
}

/// Generates the world for `profile` and `seed` in a [`Family`]: its knobs drawn for the seed.
/// The default family's worlds are exactly [`generate`]'s.
pub fn generate_in(family: Family, profile: Profile, seed: u64) -> World {
    if family == Family::Default {
        return generate(profile, seed);
    }
    let model = family.model(&WorldModel::for_profile(profile), seed);
    generate_with(&model, &format!("{profile}/{family}/seed-{seed}"), seed)
        .expect("generated worlds are always well-formed")
}

/// Generates a world from a model; the same (model, seed) always gives the same world.
pub fn generate_with(model: &WorldModel, name: &str, seed: u64) -> Result<World, WorldError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x776f_726c_6400 ^ (model.follows as u64) << 40);
    let now = GENERATED_NOW;
    let sessions = model.sessions;
    if sessions > crate::world::MAX_SESSIONS {
        return Err(WorldError::Invalid {
            field: "sessions".into(),
            message: format!(
                "is {sessions}, more than the {} sessions a world may describe",
                crate::world::MAX_SESSIONS
            ),
        });
    }

    // Relays: hubs, mid relays, and tail relays created on demand.
    let mut net = relays::Network::build(model, &mut rng);

    // Follows.
    let reader = authors::key_from(&mut rng);
    let follows: Vec<PublicKey> = (0..model.follows)
        .map(|_| authors::key_from(&mut rng))
        .collect();
    let no_list_share = model.no_list_share.draw(&mut rng).clamp(0.0, 1.0);

    // Hoarders are drawn from a stream of their own, which the default draws nothing from.
    let mut hoard_rng =
        ChaCha8Rng::seed_from_u64(seed ^ 0x686f_6172_6400 ^ (model.follows as u64) << 40);
    let hoarders = authors::pick_hoarders(model, &mut hoard_rng);

    let posting = events::Posting::new(model, now, seed);
    let mut relay_lists = Vec::new();
    let mut events = Vec::new();
    let mut all_writes = Vec::with_capacity(follows.len());
    let mut voices = Vec::with_capacity(follows.len());
    for (author_index, author) in follows.iter().enumerate() {
        let index = author_index as u32;
        let (writes, voice) = if hoarders.contains(&author_index) {
            let r = &mut hoard_rng;
            let writes = authors::hoarder_writes(model, &mut net, r);
            let listed_at = authors::hoarder_list_date(model, now, r);
            relay_lists.push(authors::hoarder_list(*author, &writes, &net, listed_at));
            let drawing = events::Drawing::new(index, &writes, &net, r, &mut events);
            let voice = posting.post_hoarder(model, drawing);
            (writes, voice)
        } else {
            let writes = authors::draw_writes(model, &mut net, no_list_share, now, &mut rng);
            if let Some(list) = authors::relay_list(model, *author, &writes, &net, now, &mut rng) {
                relay_lists.push(list);
            }
            let drawing = events::Drawing::new(index, &writes, &net, &mut rng, &mut events);
            let voice = posting.post(model, drawing);
            (writes, voice)
        };
        all_writes.push(writes);
        voices.push(voice);
    }
    posting.heavier_tail(model, seed, &voices, &all_writes, &net, &mut events);

    let reader_relays = net.reader_relays(model.reader_relays);
    let mut world_relays = net.up(sessions, &mut rng);
    let hoarder_keys: HashSet<PublicKey> = hoarders.iter().map(|&i| follows[i]).collect();
    relays::add_empty_relays(
        model,
        seed,
        &mut net,
        &mut relay_lists,
        &hoarder_keys,
        &mut world_relays,
        sessions,
    );

    let mut world = World::from_parts(WorldParts {
        name: name.to_string(),
        now,
        sessions,
        reader: Some(reader),
        follows,
        reader_relays,
        relay_lists,
        relays: world_relays,
        events,
    })?;
    relays::assign_caps(model, seed, &mut world);
    monitor::assign_monitor(model, seed, &net, &mut world);
    mentions::assign_inbox(model, seed, &net, &all_writes, &mut world);
    hints::assign_hints(model, seed, &net, &all_writes, &mut world);
    timing::assign_timing(&model.timing, model.follows, seed, &mut world);
    Ok(world)
}

/// Sampling an index by weight (cumulative table, binary search).
struct Weighted {
    cumulative: Vec<f64>,
}

impl Weighted {
    fn new(weights: &[f64]) -> Self {
        let mut total = 0.0;
        let cumulative = weights
            .iter()
            .map(|w| {
                total += w.max(0.0);
                total
            })
            .collect();
        Self { cumulative }
    }

    fn sample(&self, rng: &mut impl Rng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        if total <= 0.0 {
            return 0;
        }
        let x = rng.random::<f64>() * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1)
    }
}

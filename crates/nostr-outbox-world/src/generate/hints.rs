//! The relay hints the reader's client knows (the world's `hints`): the relay of each follow's
//! `p` tag in the reader's kind:3 list, relays in pointers to follows' notes the reader came
//! across, and relays the client saw follows' notes arrive on before. Drawn after the world
//! from a stream of their own, so every other part of a world is as it was; knobs at 0 draw
//! nothing.
//!
//! - A kind:3 hint names where the reader's client saw the follow when following: one of the
//!   follow's write relays, or, stale ([`WorldModel::contact_hint_stale_share`]), a relay the
//!   follow wrote to before moving (for movers) or a popular hub (for the rest), spelled as
//!   messily as list entries.
//! - A pointer names a relay that serves one of the follow's notes (an `nevent` or `e` tag hint
//!   written by whoever shared it).
//! - A seen-on hint names the relay that serves the most of the follow's notes: where reposts
//!   and other feeds showed them.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use nostr_outbox_core::{Hint, HintSource};

use super::authors::{messy, Writes};
use super::relays::Network;
use super::WorldModel;
use crate::world::World;

/// Adds the world's hints. `writes` holds each follow's write relays, in follow order.
pub(super) fn assign_hints(
    model: &WorldModel,
    seed: u64,
    net: &Network,
    writes: &[Writes],
    world: &mut World,
) {
    let contact = model.contact_hint_share.clamp(0.0, 1.0);
    let pointer = model.pointer_hint_share.clamp(0.0, 1.0);
    let seen_on = model.seen_on_hint_share.clamp(0.0, 1.0);
    if contact == 0.0 && pointer == 0.0 && seen_on == 0.0 {
        return;
    }
    let stale = model.contact_hint_stale_share.clamp(0.0, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6869_6e74_0000 ^ (model.follows as u64) << 40);
    let mut hints = Vec::new();
    let mut count: Vec<u32> = vec![0; world.relays().len()];
    for (index, (author, w)) in world.follows.iter().zip(writes).enumerate() {
        let events = world.author_events(index as u32);
        let mut hint = |relay: String, source| {
            hints.push(Hint {
                author: *author,
                relay,
                source,
            })
        };
        if rng.random_bool(contact) && !w.current.is_empty() {
            let relay = if rng.random_bool(stale) {
                if w.old.is_empty() {
                    net.hub_pick.sample(&mut rng)
                } else {
                    w.old[rng.random_range(0..w.old.len())]
                }
            } else {
                w.current[rng.random_range(0..w.current.len())]
            };
            let url = messy(&net.relays[relay].url, model.messy_url_share, &mut rng);
            hint(url, HintSource::ContactList);
        }
        if rng.random_bool(pointer) && !events.is_empty() {
            let e = &events[rng.random_range(0..events.len())];
            let on = world.event_relays(e);
            if !on.is_empty() {
                let r = on[rng.random_range(0..on.len())];
                hint(world.relays()[r as usize].url.clone(), HintSource::Pointer);
            }
        }
        if rng.random_bool(seen_on) && !events.is_empty() {
            for e in events {
                for &r in world.event_relays(e) {
                    count[r as usize] += 1;
                }
            }
            // The relay serving most of the follow's notes (ties: the first URL).
            let best = (0..count.len())
                .filter(|&r| count[r] > 0 && world.relays()[r].exists)
                .max_by(|&a, &b| count[a].cmp(&count[b]).then(b.cmp(&a)));
            for e in events {
                for &r in world.event_relays(e) {
                    count[r as usize] = 0;
                }
            }
            if let Some(r) = best {
                hint(world.relays()[r].url.clone(), HintSource::SeenOn);
            }
        }
    }
    world.set_hints(hints);
}

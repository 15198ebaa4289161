//! The other half of NIP-65: the reader's own list with its read relays, people the reader does
//! not follow (with their lists), the events that tag the reader and where they are stored, and
//! the people follows' notes tag. Drawn after the world from a stream of its own, so every other
//! part of a world is as it was.
//!
//! A mention is stored where its author's client published it: the author's write relays (as a
//! note: dead relays, retention and lost writes apply, and now and then a broadcast to a hub)
//! and, with [`WorldModel::inbox_delivery_share`], the reader's read relays too.

use nostr::key::PublicKey;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::authors::{key_from, list_tags, Writes};
use super::relays::Network;
use super::{Weighted, WorldModel, DAY};
use crate::world::{PartMention, World, WorldRelayList};

/// Where follows and strangers write: relay indices into [`Network::relays`].
struct Person {
    key: PublicKey,
    current: Vec<usize>,
    old: Vec<usize>,
    moved_at: Option<u64>,
}

/// Adds the reader's list, the strangers' lists, the mentions and the notes' tags to `world`.
/// `writes` holds each follow's write relays, in follow order.
pub(super) fn assign_inbox(
    model: &WorldModel,
    seed: u64,
    net: &Network,
    writes: &[Writes],
    world: &mut World,
) {
    let mentions_on = model.mention_rate_per_day > 0.0;
    let tags_on = model.tagged_note_share > 0.0;
    if !mentions_on && !tags_on {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x696e_626f_0000 ^ (model.follows as u64) << 40);
    let now = world.now;
    let history = (model.history_days * DAY).max(2 * DAY);
    let follows: Vec<Person> = world
        .follows
        .iter()
        .zip(writes)
        .map(|(key, w)| Person {
            key: *key,
            current: w.current.clone(),
            old: w.old.clone(),
            moved_at: w.moved_at,
        })
        .collect();

    // People the reader does not follow, some with a relay list.
    let count_pick = Weighted::new(&model.write_count_weights);
    let mut strangers = Vec::with_capacity(model.strangers.min(100_000));
    for _ in 0..model.strangers.min(100_000) {
        let key = key_from(&mut rng);
        let want = model.write_count_min.max(1) + count_pick.sample(&mut rng);
        let mut current: Vec<usize> = Vec::with_capacity(want);
        for _ in 0..want * 8 {
            if current.len() == want {
                break;
            }
            let r = net.pick_existing(&mut rng);
            if !current.contains(&r) {
                current.push(r);
            }
        }
        if !rng.random_bool(model.stranger_no_list_share.clamp(0.0, 1.0)) {
            world.relay_lists.push(WorldRelayList {
                author: key,
                created_at: now - rng.random_range(DAY..=history),
                tags: list_tags(model, &current, &net.relays, &net.hub_pick, &mut rng),
            });
        }
        strangers.push(Person {
            key,
            current,
            old: Vec::new(),
            moved_at: None,
        });
    }

    if mentions_on {
        // The reader's list: its configured relays unmarked (read and write), plus read-only
        // relays.
        let mut reader_read: Vec<usize> = world
            .reader_relays
            .iter()
            .filter_map(|url| net.relays.iter().position(|r| &r.url == url))
            .collect();
        let mut tags: Vec<Vec<String>> = reader_read
            .iter()
            .map(|&r| vec!["r".to_string(), net.relays[r].url.clone()])
            .collect();
        for _ in 0..model.reader_read_only.min(32) {
            if let Some(r) = net.pick_alive_mid(&mut rng) {
                if !reader_read.contains(&r) {
                    reader_read.push(r);
                    tags.push(vec![
                        "r".to_string(),
                        net.relays[r].url.clone(),
                        "read".to_string(),
                    ]);
                }
            }
        }
        world.relay_lists.push(WorldRelayList {
            author: world.reader,
            created_at: now - rng.random_range(DAY..=history),
            tags,
        });
        let mentions = draw_mentions(
            model,
            net,
            &follows,
            &strangers,
            &reader_read,
            now,
            history,
            &mut rng,
        );
        world.set_mentions(mentions);
    }

    if tags_on && !follows.is_empty() {
        let share = model.tagged_note_share.clamp(0.0, 1.0);
        world.set_event_tags(|e| {
            if !rng.random_bool(share) {
                return Vec::new();
            }
            let k = rng.random_range(1..=3);
            (0..k)
                .map(|_| {
                    if strangers.is_empty() || rng.random_bool(0.7) {
                        follows[rng.random_range(0..follows.len())].key
                    } else {
                        strangers[rng.random_range(0..strangers.len())].key
                    }
                })
                .filter(|pk| *pk != follows[e.author as usize].key)
                .collect()
        });
    }
}

/// The events tagging the reader over the history: Poisson arrivals, each by a follow or a
/// stranger, stored on the author's write relays and sometimes on the reader's read relays.
#[allow(clippy::too_many_arguments)]
fn draw_mentions(
    model: &WorldModel,
    net: &Network,
    follows: &[Person],
    strangers: &[Person],
    reader_read: &[usize],
    now: u64,
    history: u64,
    rng: &mut ChaCha8Rng,
) -> Vec<PartMention> {
    let mut out = Vec::new();
    if follows.is_empty() && strangers.is_empty() {
        return out;
    }
    let mean_gap = DAY as f64 / model.mention_rate_per_day.max(1e-9);
    let mut t = (now - history) as f64;
    loop {
        let u: f64 = rng.random();
        t += -mean_gap * (1.0 - u).ln();
        if t >= now as f64 || out.len() >= crate::world::MAX_MENTIONS {
            break;
        }
        let created_at = t as u64;
        let from_follow = strangers.is_empty()
            || (!follows.is_empty() && rng.random_bool(model.mention_follow_share.clamp(0.0, 1.0)));
        let author = if from_follow {
            &follows[rng.random_range(0..follows.len())]
        } else {
            &strangers[rng.random_range(0..strangers.len())]
        };
        let targets = match author.moved_at {
            Some(m) if created_at < m => &author.old,
            _ => &author.current,
        };
        let age = now - created_at;
        let mut on: Vec<String> = Vec::new();
        let mut place = |r: usize, rng: &mut ChaCha8Rng| {
            let relay = &net.relays[r];
            if !relay.serves(age, model.event_drop_share, rng) {
                return;
            }
            if !on.contains(&relay.url) {
                on.push(relay.url.clone());
            }
        };
        for &r in targets {
            place(r, rng);
        }
        if rng.random_bool(model.broadcast_share.clamp(0.0, 1.0)) {
            place(net.hub_pick.sample(rng), rng);
        }
        if rng.random_bool(model.inbox_delivery_share.clamp(0.0, 1.0)) {
            for &r in reader_read {
                place(r, rng);
            }
        }
        let mut id = [0u8; 32];
        rng.fill_bytes(&mut id);
        out.push(PartMention {
            id,
            author: author.key.to_bytes(),
            created_at,
            kind: 1,
            on,
        });
    }
    out
}

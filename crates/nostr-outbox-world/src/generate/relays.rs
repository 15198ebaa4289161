//! The relay network: hubs, mid-popularity relays and tail relays created as lists need them,
//! each with its liveness, payment, reliability, retention and lossy writes; then who answers in
//! each session, the reader's relays and the per-REQ caps.

use std::collections::HashSet;

use nostr::key::PublicKey;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Weighted, WorldModel, DAY};
use crate::world::{World, WorldRelayList};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tier {
    Hub,
    Mid,
    Tail,
    /// Answers, is listed widely, keeps no notes ([`WorldModel::empty_relays`]).
    Empty,
}

#[derive(Clone, Debug)]
pub(super) struct Relay {
    pub(super) url: String,
    pub(super) tier: Tier,
    pub(super) alive: bool,
    pub(super) paid: bool,
    pub(super) reliability: f64,
    /// Seconds of history kept; `None` keeps everything.
    pub(super) retention: Option<u64>,
    /// Chance that this relay silently drops every write of a given author.
    pub(super) write_failure: f64,
}

impl Relay {
    /// Whether a write of a note now `age` seconds old is still served: the relay is alive,
    /// keeps notes that old, and did not lose the write (`drop_share`, drawn from `rng` only
    /// when the rest holds, so the draws of a world do not depend on how this is spelled).
    /// An empty relay serves nothing.
    pub(super) fn serves(&self, age: u64, drop_share: f64, rng: &mut impl Rng) -> bool {
        self.alive
            && self.tier != Tier::Empty
            && self.retention.is_none_or(|keep| age <= keep)
            && !rng.random_bool(drop_share.clamp(0.0, 1.0))
    }
}

/// The relays of a world being generated, with the popularity weights lists draw from.
pub(super) struct Network {
    /// Every relay so far; write sets hold indices into it.
    pub(super) relays: Vec<Relay>,
    /// Popularity of each hub, most popular first.
    pub(super) hub_weights: Vec<f64>,
    /// Draws a hub by popularity (read entries, broadcasts).
    pub(super) hub_pick: Weighted,
    mid_start: usize,
    mid_pick: Weighted,
}

impl Network {
    /// Hubs and mid relays. Tail relays are created later, one per list entry that draws one.
    pub(super) fn build(model: &WorldModel, rng: &mut ChaCha8Rng) -> Self {
        let mut relays: Vec<Relay> = Vec::new();
        let mut hub_states = vec![(true, false); model.hubs];
        // Dead and paid hubs are drawn among hubs 1.. so the top hub is always alive.
        let mut candidates: Vec<usize> = (1..model.hubs).collect();
        candidates.shuffle(rng);
        for &h in candidates.iter().take(model.dead_hubs) {
            hub_states[h] = (false, false);
        }
        for &h in candidates
            .iter()
            .skip(model.dead_hubs)
            .take(model.paid_hubs)
        {
            hub_states[h] = (true, true);
        }
        for (i, &(alive, paid)) in hub_states.iter().enumerate() {
            relays.push(Relay {
                url: format!("wss://hub{i}.relay.example"),
                tier: Tier::Hub,
                alive,
                paid,
                reliability: model.hub_reliability.draw(rng),
                retention: Some((model.hub_retention_days.draw(rng) * DAY as f64) as u64),
                write_failure: model.write_failure_share.draw(rng),
            });
        }
        let mid_count = model.mid_relays_base + model.follows / model.follows_per_mid_relay.max(1);
        let mid_start = relays.len();
        for i in 0..mid_count {
            let alive = rng.random_bool(model.mid_alive.clamp(0.0, 1.0));
            let prunes = rng.random_bool(model.mid_prune_share.clamp(0.0, 1.0));
            // Busier relays prune harder: retention grows with popularity rank, with noise.
            let span = model.mid_retention_days;
            let position = ((i as f64
                + rng.random::<f64>() * mid_count as f64 * model.mid_retention_noise)
                / mid_count.max(1) as f64)
                .clamp(0.0, 1.0);
            let retention =
                prunes.then_some(((span.lo + (span.hi - span.lo) * position) * DAY as f64) as u64);
            relays.push(Relay {
                url: format!("wss://mid{i}.nostr.example"),
                tier: Tier::Mid,
                alive,
                paid: alive && rng.random_bool(model.paid_share.clamp(0.0, 1.0)),
                reliability: model.relay_reliability.draw(rng),
                retention,
                write_failure: model.write_failure_share.draw(rng),
            });
        }
        let hub_weights: Vec<f64> = (0..model.hubs)
            .map(|i| model.hub_decay.powi(i as i32))
            .collect();
        let mid_weights: Vec<f64> = (0..mid_count)
            .map(|i| 1.0 / ((i + 1) as f64).powf(model.mid_zipf))
            .collect();
        let hub_pick = Weighted::new(&hub_weights);
        let mid_pick = Weighted::new(&mid_weights);
        Self {
            relays,
            hub_weights,
            hub_pick,
            mid_start,
            mid_pick,
        }
    }

    /// One write relay for a list: a mid relay by popularity, or else a new tail relay that is
    /// alive with chance `tail_alive`.
    pub(super) fn pick(
        &mut self,
        model: &WorldModel,
        tail_alive: f64,
        rng: &mut ChaCha8Rng,
    ) -> usize {
        if rng.random_bool(model.mid_slot_share.clamp(0.0, 1.0)) {
            self.mid_start + self.mid_pick.sample(rng)
        } else {
            let alive = rng.random_bool(tail_alive.clamp(0.0, 1.0));
            let paid = alive && rng.random_bool(model.paid_share.clamp(0.0, 1.0));
            let reliability = model.relay_reliability.draw(rng);
            let write_failure = model.write_failure_share.draw(rng);
            let i = self.relays.len();
            self.relays.push(Relay {
                url: format!("wss://t{i}.tail.example"),
                tier: Tier::Tail,
                alive,
                paid,
                reliability,
                retention: None,
                write_failure,
            });
            i
        }
    }

    /// A new tail relay that a hoarder ([`WorldModel::hoarder_share`]) alone lists: alive, free,
    /// reliable, keeping everything and losing no write.
    pub(super) fn own_relay(&mut self, model: &WorldModel, rng: &mut ChaCha8Rng) -> usize {
        let i = self.relays.len();
        self.relays.push(Relay {
            url: format!("wss://t{i}.tail.example"),
            tier: Tier::Tail,
            alive: true,
            paid: false,
            reliability: model.hoarder_reliability.draw(rng),
            retention: None,
            write_failure: 0.0,
        });
        i
    }

    /// The reader's relays: the most popular live, free hubs, `count` of them.
    /// An existing hub or mid relay, half and half, each tier by its weights (never a new tail
    /// relay: the network is final once the world is built): for people drawn after the world.
    pub(super) fn pick_existing(&self, rng: &mut ChaCha8Rng) -> usize {
        if self.mid_pick.cumulative.is_empty() || rng.random_bool(0.5) {
            self.hub_pick.sample(rng)
        } else {
            self.mid_start + self.mid_pick.sample(rng)
        }
    }

    /// An existing mid relay that is alive, if one is found in a few draws.
    pub(super) fn pick_alive_mid(&self, rng: &mut ChaCha8Rng) -> Option<usize> {
        if self.mid_pick.cumulative.is_empty() {
            return None;
        }
        (0..16)
            .map(|_| self.mid_start + self.mid_pick.sample(rng))
            .find(|&r| self.relays.get(r).is_some_and(|x| x.alive))
    }

    pub(super) fn reader_relays(&self, count: usize) -> Vec<String> {
        self.relays
            .iter()
            .filter(|r| r.tier == Tier::Hub && r.alive && !r.paid)
            .take(count)
            .map(|r| r.url.clone())
            .collect()
    }

    /// The live relays (the world's `relays`) with whether each answers in each session; paid
    /// relays never do.
    pub(super) fn up(&self, sessions: u32, rng: &mut ChaCha8Rng) -> Vec<(String, Vec<bool>)> {
        self.relays
            .iter()
            .filter(|r| r.alive)
            .map(|r| {
                let up = (0..sessions)
                    .map(|_| !r.paid && rng.random_bool(r.reliability.clamp(0.0, 1.0)))
                    .collect();
                (r.url.clone(), up)
            })
            .collect()
    }
}

/// Adds the [`WorldModel::empty_relays`]: each joins the network (so monitors see it) and
/// `up`, answering with [`WorldModel::empty_relay_reliability`], and is inserted at a random
/// place in its share of the follows' `lists` (that many lists exactly, picked at random),
/// never in a hoarder's (`skip`). No note is ever
/// written to one. From a stream of its own; with no such relays nothing is drawn.
pub(super) fn add_empty_relays(
    model: &WorldModel,
    seed: u64,
    net: &mut Network,
    lists: &mut [WorldRelayList],
    skip: &HashSet<PublicKey>,
    up: &mut Vec<(String, Vec<bool>)>,
    sessions: u32,
) {
    if model.empty_relays == 0 {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x656d_7074_0000 ^ (model.follows as u64) << 40);
    for i in 0..model.empty_relays.min(1_000) {
        let url = format!("wss://index{i}.relay.example");
        let share = model.empty_relay_list_share.draw(&mut rng).clamp(0.0, 1.0);
        let reliability = model.empty_relay_reliability.draw(&mut rng).clamp(0.0, 1.0);
        let open: Vec<usize> = (0..lists.len())
            .filter(|&l| !skip.contains(&lists[l].author))
            .collect();
        let count = ((share * open.len() as f64).ceil() as usize).min(open.len());
        let mut chosen: Vec<usize> = rand::seq::index::sample(&mut rng, open.len(), count)
            .into_iter()
            .map(|i| open[i])
            .collect();
        chosen.sort_unstable();
        for l in chosen {
            let tags = &mut lists[l].tags;
            let at = rng.random_range(0..=tags.len());
            tags.insert(at, vec!["r".to_string(), url.clone()]);
        }
        up.push((
            url.clone(),
            (0..sessions)
                .map(|_| rng.random_bool(reliability))
                .collect(),
        ));
        net.relays.push(Relay {
            url,
            tier: Tier::Empty,
            alive: true,
            paid: false,
            reliability,
            retention: None,
            write_failure: 0.0,
        });
    }
}

/// Draws each existing relay's cap from [`WorldModel::relay_caps`], in URL order, from a
/// stream of its own (adding caps left every other part of a world as it was).
pub(super) fn assign_caps(model: &WorldModel, seed: u64, world: &mut World) {
    let weights: Vec<f64> = model.relay_caps.iter().map(|c| c.share).collect();
    let pick = Weighted::new(&weights);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6361_7073_0000 ^ (model.follows as u64) << 40);
    let urls: Vec<String> = world
        .relays()
        .iter()
        .filter(|r| r.exists)
        .map(|r| r.url.clone())
        .collect();
    for url in urls {
        let cap = model
            .relay_caps
            .get(pick.sample(&mut rng))
            .and_then(|c| c.max_limit)
            .filter(|&m| m > 0);
        world.set_max_limit(&url, cap);
    }
}

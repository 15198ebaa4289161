//! Posting: each author's rate (log-normal: a heavy tail), active period and Poisson arrivals,
//! and which relays end up serving each note (dead relays, failed and lost writes, retention,
//! broadcasts to a hub outside the list).

use std::collections::HashSet;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use super::authors::Writes;
use super::relays::Network;
use super::{WorldModel, DAY};
use crate::world::PartEvent;

/// Most a heavier tail multiplies a follow's rate by (keeps event counts sane).
pub(super) const MAX_TAIL_FACTOR: f64 = 8.0;

/// How one follow posts, drawn once: more notes can be drawn alike later (a heavier tail).
pub(super) struct Voice {
    /// Notes per day.
    pub(super) per_day: f64,
    active_from: u64,
    active_until: u64,
    /// Relays that lose every write of this author.
    failing: HashSet<usize>,
    /// Relays that hold only this share of the author's notes ([`WorldModel::patchy_pair_share`]).
    patchy: Vec<(usize, f64)>,
    /// Relays that keep only the author's notes younger than this many seconds
    /// ([`WorldModel::pruned_pair_share`]).
    pruned: Vec<(usize, u64)>,
    /// Which notes a patchy pair holds is hashed from this, the author and the note, so that
    /// drawing it takes nothing from the world's stream (the default draws nothing).
    patch_key: u64,
    drop_share: f64,
    broadcast_share: f64,
}

/// One follow's notes being drawn: whose, where they write, the relays, the random stream they
/// are drawn from and the notes drawn so far, appended to.
pub(super) struct Drawing<'a> {
    author: u32,
    writes: &'a Writes,
    net: &'a Network,
    rng: &'a mut ChaCha8Rng,
    events: &'a mut Vec<PartEvent>,
}

impl<'a> Drawing<'a> {
    pub(super) fn new(
        author: u32,
        writes: &'a Writes,
        net: &'a Network,
        rng: &'a mut ChaCha8Rng,
        events: &'a mut Vec<PartEvent>,
    ) -> Self {
        Self {
            author,
            writes,
            net,
            rng,
            events,
        }
    }
}

/// What every author's posting shares: the rate distribution and the simulated history.
pub(super) struct Posting {
    rate: LogNormal<f64>,
    now: u64,
    history: u64,
    start_of_history: u64,
    seed: u64,
}

/// A uniform draw in `[0, 1)` hashed from `parts` (splitmix64 over each): the patchy pairs'
/// draws, kept off the world's random stream.
fn unit(parts: &[u64]) -> f64 {
    let mut h = 0x9e37_79b9_7f4a_7c15u64;
    for &p in parts {
        h ^= p;
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

impl Voice {
    /// Whether a note of age `age`, created at `created_at`, is kept by relay `r` as far as this
    /// author's patchy and pruned pairs go.
    fn patch_keeps(&self, r: usize, created_at: u64, age: u64) -> bool {
        if let Some(&(_, keep)) = self.patchy.iter().find(|p| p.0 == r) {
            if unit(&[self.patch_key, r as u64, created_at]) >= keep {
                return false;
            }
        }
        self.pruned
            .iter()
            .find(|p| p.0 == r)
            .is_none_or(|&(_, max_age)| age <= max_age)
    }
}

impl Posting {
    pub(super) fn new(model: &WorldModel, now: u64, seed: u64) -> Self {
        let rate = LogNormal::new(
            model.rate_median_per_day.max(1e-9).ln(),
            model.rate_sigma.max(0.0),
        )
        .expect("sigma is non-negative");
        let history = model.history_days * DAY;
        Self {
            rate,
            now,
            history,
            start_of_history: now - history,
            seed,
        }
    }

    /// Appends the notes of follow `author` to `events`; returns how they post, so that more
    /// notes can be drawn alike.
    pub(super) fn post(&self, model: &WorldModel, drawing: Drawing<'_>) -> Voice {
        let (now, history) = (self.now, self.history);
        let (author, writes) = (drawing.author, drawing.writes);
        let relays = &drawing.net.relays;
        let rng = &mut *drawing.rng;
        // A rate, an active period, Poisson arrivals.
        let per_day = self.rate.sample(rng).min(model.rate_cap_per_day);
        let active_from = self.start_of_history + rng.random_range(0..history - 7 * DAY);
        let active_until = if rng.random_bool(model.quit_share.clamp(0.0, 1.0)) {
            rng.random_range(active_from..now)
        } else {
            now
        };
        let failing: HashSet<usize> = writes
            .current
            .iter()
            .chain(writes.old.iter())
            .copied()
            .filter(|&r| rng.random_bool(relays[r].write_failure.clamp(0.0, 1.0)))
            .collect();
        let patch_key = unit(&[self.seed, 0x7061_7463_6879, u64::from(author)]).to_bits();
        let pair = |r: usize, what: u64| unit(&[patch_key, r as u64, what]);
        let listed = || writes.current.iter().chain(writes.old.iter()).copied();
        let patchy = listed()
            .filter(|&r| pair(r, 1) < model.patchy_pair_share)
            .map(|r| {
                let span = model.patchy_pair_keep;
                (r, span.lo + (span.hi - span.lo).max(0.0) * pair(r, 2))
            })
            .collect();
        let pruned = listed()
            .filter(|&r| pair(r, 3) < model.pruned_pair_share)
            .map(|r| {
                let span = model.pruned_pair_days;
                let days = span.lo + (span.hi - span.lo).max(0.0) * pair(r, 4);
                (r, (days.max(0.0) * DAY as f64) as u64)
            })
            .collect();
        let voice = Voice {
            per_day,
            active_from,
            active_until,
            failing,
            patchy,
            pruned,
            patch_key,
            drop_share: model.event_drop_share,
            broadcast_share: model.broadcast_share,
        };
        self.arrivals(&voice, voice.per_day, drawing);
        voice
    }

    /// Appends the notes of a hoarder ([`WorldModel::hoarder_share`]): a rate from
    /// [`WorldModel::hoarder_rate_per_day`], posting from some time at least a year back until
    /// now, every note kept on their relays and nowhere else.
    pub(super) fn post_hoarder(&self, model: &WorldModel, drawing: Drawing<'_>) -> Voice {
        let rng = &mut *drawing.rng;
        let span = self.history.saturating_sub(365 * DAY).max(1);
        let voice = Voice {
            per_day: model.hoarder_rate_per_day.draw(rng).max(0.0),
            active_from: self.start_of_history + rng.random_range(0..span),
            active_until: self.now,
            failing: HashSet::new(),
            patchy: Vec::new(),
            pruned: Vec::new(),
            patch_key: 0,
            drop_share: 0.0,
            broadcast_share: 0.0,
        };
        self.arrivals(&voice, voice.per_day, drawing);
        voice
    }

    /// The heavier tail ([`WorldModel::top_follows_year_share`]): the top follows by notes in
    /// the last year post more, at their rate times one factor (at most [`MAX_TAIL_FACTOR`]),
    /// so that they carry the target share of the year's notes. The extra notes are placed as
    /// each follow's others are, from a stream of their own; below the target nothing is drawn.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn heavier_tail(
        &self,
        model: &WorldModel,
        seed: u64,
        voices: &[Voice],
        writes: &[Writes],
        net: &Network,
        events: &mut Vec<PartEvent>,
    ) {
        let target = model.top_follows_year_share.min(0.95);
        if target.is_nan() || target <= 0.0 || model.top_follows == 0 {
            return;
        }
        let since = self.now.saturating_sub(365 * DAY);
        let mut year = vec![0u64; voices.len()];
        for e in events.iter().filter(|e| e.created_at >= since) {
            if let Some(n) = year.get_mut(e.author as usize) {
                *n += 1;
            }
        }
        let mut order: Vec<usize> = (0..voices.len()).collect();
        order.sort_by_key(|&a| (std::cmp::Reverse(year[a]), a));
        order.truncate(model.top_follows);
        let top: u64 = order.iter().map(|&a| year[a]).sum();
        let total: u64 = year.iter().sum();
        if top == 0 || top as f64 >= target * total as f64 {
            return;
        }
        let rest = (total - top) as f64;
        let factor = (target * rest / ((1.0 - target) * top as f64)).min(MAX_TAIL_FACTOR);
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ 0x7461_696c_0000 ^ (model.follows as u64) << 40);
        for &a in &order {
            let voice = &voices[a];
            let extra = voice.per_day * (factor - 1.0);
            let drawing = Drawing::new(a as u32, &writes[a], net, &mut rng, events);
            self.arrivals(voice, extra, drawing);
        }
    }

    /// Poisson arrivals at `per_day` over the voice's active period, each note placed on the
    /// relays that serve it.
    pub(super) fn arrivals(&self, voice: &Voice, per_day: f64, drawing: Drawing<'_>) {
        let Drawing {
            author,
            writes,
            net,
            rng,
            events,
        } = drawing;
        let now = self.now;
        let relays = &net.relays;
        let mut t = voice.active_from as f64;
        let mean_gap = DAY as f64 / per_day.max(1e-9);
        loop {
            let u: f64 = rng.random();
            t += -mean_gap * (1.0 - u).ln();
            if t >= voice.active_until as f64 {
                break;
            }
            let created_at = t as u64;
            let targets = match writes.moved_at {
                Some(m) if created_at < m => &writes.old,
                _ => &writes.current,
            };
            let mut on: Vec<String> = Vec::with_capacity(targets.len() + 1);
            let age = now - created_at;
            let place = |r: usize, rng: &mut ChaCha8Rng, on: &mut Vec<String>| {
                let relay = &relays[r];
                if voice.failing.contains(&r) || !relay.serves(age, voice.drop_share, rng) {
                    return;
                }
                // After the world's own draws, so a patchy world is its default world with
                // notes taken off some pairs.
                if !voice.patch_keeps(r, created_at, age) {
                    return;
                }
                if !on.contains(&relay.url) {
                    on.push(relay.url.clone());
                }
            };
            for &r in targets {
                place(r, rng, &mut on);
            }
            if rng.random_bool(voice.broadcast_share.clamp(0.0, 1.0)) {
                let h = net.hub_pick.sample(rng);
                place(h, rng, &mut on);
            }
            let mut id = [0u8; 32];
            rng.fill_bytes(&mut id);
            events.push(PartEvent {
                id,
                author,
                created_at,
                kind: 1,
                on,
            });
        }
    }
}

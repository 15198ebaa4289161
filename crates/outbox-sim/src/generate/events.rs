//! Posting: each author's rate (log-normal: a heavy tail), active period and Poisson arrivals,
//! and which relays end up serving each note (dead relays, failed and lost writes, retention,
//! broadcasts to a hub outside the list).

use std::collections::HashSet;

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use super::authors::Writes;
use super::relays::Network;
use super::{WorldModel, DAY};
use crate::world::PartEvent;

/// What every author's posting shares: the rate distribution and the simulated history.
pub(super) struct Posting {
    rate: LogNormal<f64>,
    now: u64,
    history: u64,
    start_of_history: u64,
}

impl Posting {
    pub(super) fn new(model: &WorldModel, now: u64) -> Self {
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
        }
    }

    /// Appends the notes of follow `author` to `events`.
    pub(super) fn post(
        &self,
        model: &WorldModel,
        author: u32,
        writes: &Writes,
        net: &Network,
        rng: &mut ChaCha8Rng,
        events: &mut Vec<PartEvent>,
    ) {
        let (now, history) = (self.now, self.history);
        let relays = &net.relays;
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
        let mut t = active_from as f64;
        let mean_gap = DAY as f64 / per_day.max(1e-9);
        loop {
            let u: f64 = rng.random();
            t += -mean_gap * (1.0 - u).ln();
            if t >= active_until as f64 {
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
                if failing.contains(&r) || !relay.serves(age, model.event_drop_share, rng) {
                    return;
                }
                if !on.contains(&relay.url) {
                    on.push(relay.url.clone());
                }
            };
            for &r in targets {
                place(r, rng, &mut on);
            }
            if rng.random_bool(model.broadcast_share.clamp(0.0, 1.0)) {
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

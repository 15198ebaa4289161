//! How fast each relay answers: the world's clock, drawn from a stream of its own so every other
//! part of a world is as it was.
//!
//! Calibrated to the public network (nostrability/outbox `OUTBOX-REPORT.md` §8.7, 20 relays in
//! parallel): over the relays a client queries, connect p50 605–911 ms (p95 ~1.4 s), query
//! p50 808 ms–1.3 s with a heavy tail (p95 near 14 s on one profile), and 1–3% of queried
//! relays timing out at 15 s — black holes, relays that accept a socket and never answer.
//! Medians differ between relays (log-normal across the network); about one relay in four is
//! slow, with a fatter tail of its own.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};

use crate::timing::RelayTiming;
use crate::world::World;

/// The knobs of the clock (the world model's `timing`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimingModel {
    /// Draw no timing at all: every relay keeps [`RelayTiming::default`].
    pub off: bool,
    /// Median over relays of their connect median, ms.
    pub connect_ms: f64,
    /// σ of connect medians across relays (log-normal).
    pub connect_sigma: f64,
    /// Median over relays of their query median, ms.
    pub query_ms: f64,
    /// σ of query medians across relays (log-normal).
    pub query_sigma: f64,
    /// Share of relays that are slow: their query median is [`slow_factor`](Self::slow_factor)
    /// times longer and their tail [`slow_tail`](Self::slow_tail).
    pub slow_share: f64,
    /// How much slower a slow relay's queries are.
    pub slow_factor: f64,
    /// Tail share of a slow relay's queries.
    pub slow_tail: f64,
    /// Tail share of any other relay's queries.
    pub tail: f64,
    /// σ of each relay's per-session factor.
    pub jitter: f64,
    /// σ of each request's factor.
    pub spread: f64,
    /// Share of relays that hang instead of refusing when down (black holes when never up).
    pub hang_share: f64,
}

impl Default for TimingModel {
    fn default() -> Self {
        Self {
            off: false,
            connect_ms: 700.0,
            connect_sigma: 0.4,
            query_ms: 760.0,
            query_sigma: 0.45,
            slow_share: 0.25,
            slow_factor: 2.5,
            slow_tail: 0.06,
            tail: 0.01,
            jitter: 0.25,
            spread: 0.35,
            hang_share: 0.10,
        }
    }
}

/// Draws every relay's timing by `t`, in world relay order, from a stream of its own (seeded by
/// the world's `seed` and its number of `follows`).
pub(super) fn assign_timing(t: &TimingModel, follows: usize, seed: u64, world: &mut World) {
    if t.off {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7469_6d65_0000 ^ (follows as u64) << 40);
    let log_normal = |median: f64, sigma: f64| {
        LogNormal::new(median.max(1.0).ln(), sigma.clamp(0.0, 4.0)).expect("finite parameters")
    };
    let connect = log_normal(t.connect_ms, t.connect_sigma);
    let query = log_normal(t.query_ms, t.query_sigma);
    let timings: Vec<(String, RelayTiming)> = world
        .relays()
        .iter()
        .filter(|r| r.exists)
        .map(|r| {
            let slow = rng.random_bool(t.slow_share.clamp(0.0, 1.0));
            let factor = if slow { t.slow_factor.max(1.0) } else { 1.0 };
            let ms = |x: f64| {
                x.round()
                    .clamp(1.0, f64::from(crate::timing::MAX_TIMING_MS)) as u32
            };
            let timing = RelayTiming {
                connect_ms: ms(connect.sample(&mut rng)),
                query_ms: ms(query.sample(&mut rng) * factor),
                jitter: t.jitter as f32,
                spread: t.spread as f32,
                tail: (if slow { t.slow_tail } else { t.tail }).clamp(0.0, 1.0) as f32,
                hangs: rng.random_bool(t.hang_share.clamp(0.0, 1.0)),
            };
            (r.url.clone(), timing)
        })
        .collect();
    for (url, timing) in timings {
        world.set_timing(&url, Some(timing));
    }
}

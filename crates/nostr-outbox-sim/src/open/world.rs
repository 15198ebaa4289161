//! What happens on the network while a feed is open: relays going down and coming back, notes
//! arriving, follows moving to relays they never listed. Drawn once per world and session from
//! a stream of its own, so every client is measured on the same hour and nothing the world's
//! generator draws changes.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::sim_world::SimWorld;

/// The network's behaviour while a feed is open. Estimates where no figure is published; each
/// says what it stands for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct OpenModel {
    /// Brief drops per relay and hour (restarts, load balancers, network): an estimate, no
    /// figure is published.
    pub blips_per_hour: f64,
    /// How long a brief drop lasts, seconds (log-uniform between the two).
    pub blip_secs: (f64, f64),
    /// How long a longer outage lasts, seconds (log-uniform between the two). Outages come at
    /// the rate that keeps each relay down for the share of sessions it missed in the world
    /// (of live relays 70–88% answer in a run), capped at half the time.
    pub outage_secs: (f64, f64),
    /// Share of outages that outlast the open feed (the relay does not come back in time).
    pub gone_share: f64,
    /// A relay down at the start that a NIP-66 monitor last saw online longer ago than this
    /// stays down; one seen since comes back after an outage's draw.
    pub monitor_stale_secs: u64,
    /// Chance per follow and hour of publishing a new relay list that names a relay it never
    /// listed, writing there from then on (an estimate: the published share of movers spread
    /// over years would give almost none in an hour, so this is set to see the behaviour).
    pub moves_per_follow_hour: f64,
    /// Of a mover's old write relays, the share it keeps.
    pub keep_share: f64,
    /// Days of a follow's newest notes its posting rate is read from.
    pub rate_days: u64,
    /// Notes are drawn at each follow's rate times this. A client's behaviour does not depend
    /// on how many notes arrive, only the measurement's noise does (a generated follow posts
    /// about once in twenty days, so an hour at the plain rate holds a note or two): the hour
    /// is sampled densely, each follow still weighted by its rate. Costs in events are divided
    /// back, and what a client learns sees one note in this many ([`LiveNote::sampled`]).
    pub rate_scale: f64,
    /// The reader's follow list while the feed is open: follows added per hour (a follow of
    /// the world the feed starts without, its notes counted from then on) and follows dropped
    /// per hour (notes no longer counted). Estimates: no figure is published.
    pub follows_per_hour: f64,
    /// See [`OpenModel::follows_per_hour`].
    pub unfollows_per_hour: f64,
    /// Most notes drawn for one open feed (bounds memory on hostile worlds).
    pub max_notes: usize,
    /// Most outages and drops drawn per relay.
    pub max_downs: usize,
}

impl Default for OpenModel {
    fn default() -> Self {
        Self {
            blips_per_hour: 1.0,
            blip_secs: (2.0, 30.0),
            outage_secs: (60.0, 3_600.0),
            gone_share: 0.1,
            monitor_stale_secs: 86_400,
            moves_per_follow_hour: 0.01,
            keep_share: 0.5,
            rate_days: 30,
            rate_scale: 100.0,
            follows_per_hour: 1.0,
            unfollows_per_hour: 1.0,
            max_notes: 500_000,
            max_downs: 1_000,
        }
    }
}

/// A note that arrived while the feed was open.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveNote {
    /// Seconds after the feed opened.
    pub t: f64,
    /// The author (a follow index).
    pub author: u32,
    /// World relays it landed on: those the author wrote to then that were up.
    pub on: Vec<u32>,
    /// It landed on a relay the author listed at the time, and the reader followed the author
    /// then: what live completeness counts.
    pub counted: bool,
    /// One of the notes at the plain rate ([`OpenModel::rate_scale`]): what a client learns.
    pub sampled: bool,
}

/// The reader followed or dropped a follow while the feed was open.
#[derive(Clone, Debug, PartialEq)]
pub struct FollowChange {
    /// Seconds after the feed opened.
    pub t: f64,
    /// The follow.
    pub author: u32,
    /// Followed (`true`) or dropped.
    pub follows: bool,
}

/// A follow that published a new list while the feed was open.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    /// Seconds after the feed opened.
    pub t: f64,
    /// The follow.
    pub author: u32,
    /// Its new write relays (world relay ids), the new list's entries; the first is new.
    pub relays: Vec<u32>,
}

/// The open feed's hour: every relay's downtime, every note, every move.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenWorld {
    /// How long the feed stays open, seconds.
    pub secs: f64,
    /// Per world relay, its down intervals `[from, to)` in order (`to` may be infinite).
    pub down: Vec<Vec<(f64, f64)>>,
    /// Notes in arrival order.
    pub notes: Vec<LiveNote>,
    /// Per world relay, the notes that landed on it (indexes into `notes`, in order).
    pub on_relay: Vec<Vec<u32>>,
    /// Moves in order.
    pub moves: Vec<Move>,
    /// The reader's follow-list changes in order; a follow has at most one.
    pub follow_changes: Vec<FollowChange>,
    /// [`OpenModel::rate_scale`].
    pub rate_scale: f64,
    /// The stream's seed (note ids are drawn from it).
    pub seed: u64,
}

/// A seed for the open feed of `session` of `sim`'s world: its own stream, from the world's
/// name and present, so every strategy meets the same hour.
fn stream_seed(sim: &SimWorld, session: u32) -> u64 {
    // FNV-1a over the name, then mixed with the present and session (splitmix64).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sim.world.name.bytes().chain(*b"open") {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ sim.world.now.rotate_left(17) ^ u64::from(session).rotate_left(41);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Log-uniform draw in `[lo, hi]`.
fn log_uniform(rng: &mut impl Rng, (lo, hi): (f64, f64)) -> f64 {
    let (lo, hi) = (lo.max(1e-3), hi.max(lo.max(1e-3)));
    if hi <= lo {
        return lo;
    }
    (rng.random_range(lo.ln()..=hi.ln())).exp()
}

/// Exponential draw with `rate` per second (infinite when the rate is 0).
fn exp_draw(rng: &mut impl Rng, rate: f64) -> f64 {
    if rate.is_finite() && rate > 0.0 {
        let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
        -u.ln() / rate
    } else {
        f64::INFINITY
    }
}

impl OpenWorld {
    /// Draws the open feed after `session`'s fetch, lasting `secs`.
    pub fn draw(sim: &SimWorld, session: u32, secs: f64, model: &OpenModel) -> Self {
        let seed = stream_seed(sim, session);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let secs = if secs.is_finite() { secs.max(0.0) } else { 0.0 };
        let world = &sim.world;
        let now = world.now;
        let last_seen: std::collections::HashMap<&str, u64> = (world.monitor().iter())
            .map(|m| (m.url.as_str(), m.last_seen))
            .collect();
        let outage_mean = {
            let (lo, hi) = (model.outage_secs.0.max(1e-3), model.outage_secs.1);
            if hi > lo {
                (hi - lo) / (hi / lo).ln()
            } else {
                lo
            }
        };
        let blip_rate = model.blips_per_hour.max(0.0) / 3_600.0;
        let mut down = Vec::with_capacity(world.relays().len());
        for (r, relay) in (0u32..).zip(world.relays()) {
            let sessions = relay.up.len().max(1);
            let share = relay.up.iter().filter(|&&u| u).count() as f64 / sessions as f64;
            let mut spans: Vec<(f64, f64)> = Vec::new();
            if !relay.exists || share == 0.0 {
                spans.push((0.0, f64::INFINITY));
                down.push(spans);
                continue;
            }
            let outage = |rng: &mut ChaCha8Rng| {
                if rng.random_bool(model.gone_share.clamp(0.0, 1.0)) {
                    f64::INFINITY
                } else {
                    log_uniform(rng, model.outage_secs)
                }
            };
            let mut t = 0.0;
            if !world.is_up(r, session) {
                let stale = last_seen
                    .get(relay.url.as_str())
                    .is_none_or(|&seen| now.saturating_sub(seen) > model.monitor_stale_secs);
                let back = if stale && !world.monitor().is_empty() {
                    f64::INFINITY
                } else {
                    outage(&mut rng)
                };
                spans.push((0.0, back));
                t = back;
            }
            let d = (1.0 - share).min(0.5);
            let outage_rate = d / ((1.0 - d) * outage_mean);
            while t < secs && spans.len() < model.max_downs {
                let to_outage = exp_draw(&mut rng, outage_rate);
                let to_blip = exp_draw(&mut rng, blip_rate);
                let (at, long) = if to_outage < to_blip {
                    (t + to_outage, true)
                } else {
                    (t + to_blip, false)
                };
                if at >= secs {
                    break;
                }
                let lasts = if long {
                    outage(&mut rng)
                } else {
                    log_uniform(&mut rng, model.blip_secs)
                };
                spans.push((at, at + lasts));
                t = at + lasts;
            }
            down.push(spans);
        }

        // The reader's follow-list changes: distinct follows, drawn before the notes so that
        // the notes' draws do not depend on them.
        let mut follow_changes: Vec<FollowChange> = Vec::new();
        let n_follows = world.follows.len() as u32;
        for (rate, follows) in [
            (model.follows_per_hour, true),
            (model.unfollows_per_hour, false),
        ] {
            let mut t = exp_draw(&mut rng, rate.max(0.0) / 3_600.0);
            while t < secs && n_follows > 0 && follow_changes.len() < n_follows as usize / 2 {
                let author = rng.random_range(0..n_follows);
                if !follow_changes.iter().any(|c| c.author == author) {
                    follow_changes.push(FollowChange { t, author, follows });
                }
                t += exp_draw(&mut rng, rate.max(0.0) / 3_600.0);
            }
        }
        follow_changes.sort_by(|x, y| x.t.total_cmp(&y.t).then(x.author.cmp(&y.author)));
        let scale = if model.rate_scale.is_finite() {
            model.rate_scale.max(1.0)
        } else {
            1.0
        };
        // Where each follow writes: its declared relays that hold one of its newest notes (a
        // relay that silently drops its writes holds none); a follow with no list, the relays
        // holding at least half of them.
        let since = now.saturating_sub(model.rate_days.max(1) * 86_400);
        let rate_span = (model.rate_days.max(1) * 86_400) as f64;
        let mut notes: Vec<LiveNote> = Vec::new();
        let mut moves = Vec::new();
        let live_relays: Vec<u32> = (0u32..)
            .zip(world.relays())
            .filter(|(r, rel)| {
                rel.exists
                    && rel.up.iter().filter(|&&u| u).count() * 2 >= rel.up.len().max(1)
                    && !down[*r as usize].iter().any(|&(a, _)| a == 0.0)
            })
            .map(|(r, _)| r)
            .collect();
        let move_chance = 1.0 - (-model.moves_per_follow_hour.max(0.0) * secs / 3_600.0).exp();
        for a in 0..world.follows.len() as u32 {
            let recent = world.author_events_since(a, since);
            let mut count: std::collections::BTreeMap<u32, usize> = Default::default();
            for e in recent {
                for &r in world.event_relays(e) {
                    *count.entry(r).or_default() += 1;
                }
            }
            let declared = sim.declared(a);
            let listed = !declared.is_empty();
            let mut writes: Vec<u32> = if listed {
                declared
                    .iter()
                    .copied()
                    .filter(|r| count.contains_key(r))
                    .collect()
            } else {
                (count.iter())
                    .filter(|&(_, &n)| n * 2 >= recent.len())
                    .map(|(&r, _)| r)
                    .collect()
            };
            writes.sort_unstable();
            let rate = recent.len() as f64 / rate_span * scale;
            let change = follow_changes.iter().find(|c| c.author == a);
            // A move, drawn for every follow so one follow's draw does not shift another's.
            let moving = rng.random_bool(move_chance.clamp(0.0, 1.0));
            let move_at = rng.random_range(0.0..=1.0) * secs;
            let pick = rng.random_range(0..live_relays.len().max(1));
            let mut moved: Option<Move> = None;
            if moving && listed && !live_relays.is_empty() {
                let fresh = (0..live_relays.len())
                    .map(|i| live_relays[(pick + i) % live_relays.len()])
                    .find(|r| !declared.contains(r));
                if let Some(fresh) = fresh {
                    let mut relays = vec![fresh];
                    for &r in declared {
                        if rng.random_bool(model.keep_share.clamp(0.0, 1.0)) {
                            relays.push(r);
                        }
                    }
                    moved = Some(Move {
                        t: move_at,
                        author: a,
                        relays,
                    });
                }
            }
            let mut t = exp_draw(&mut rng, rate);
            while t < secs && notes.len() < model.max_notes {
                let (set, counted_list) = match &moved {
                    Some(m) if t >= m.t => (m.relays.as_slice(), true),
                    _ => (writes.as_slice(), listed),
                };
                let on: Vec<u32> = set
                    .iter()
                    .copied()
                    .filter(|&r| is_up(&down, r, t))
                    .collect();
                let followed = match change {
                    Some(c) => (t >= c.t) == c.follows,
                    None => true,
                };
                let counted = counted_list && followed && !on.is_empty();
                let sampled = rng.random_bool(1.0 / scale);
                notes.push(LiveNote {
                    t,
                    author: a,
                    on,
                    counted,
                    sampled,
                });
                t += exp_draw(&mut rng, rate);
            }
            moves.extend(moved);
        }
        notes.sort_by(|x, y| x.t.total_cmp(&y.t).then(x.author.cmp(&y.author)));
        moves.sort_by(|x, y| x.t.total_cmp(&y.t).then(x.author.cmp(&y.author)));
        let mut on_relay = vec![Vec::new(); world.relays().len()];
        for (i, n) in (0u32..).zip(&notes) {
            for &r in &n.on {
                on_relay[r as usize].push(i);
            }
        }
        Self {
            secs,
            down,
            notes,
            on_relay,
            moves,
            follow_changes,
            rate_scale: scale,
            seed,
        }
    }

    /// Whether the reader follows follow `author` `t` seconds after the feed opened.
    pub fn follows(&self, author: u32, t: f64) -> bool {
        match self.follow_changes.iter().find(|c| c.author == author) {
            Some(c) => (t >= c.t) == c.follows,
            None => true,
        }
    }

    /// Whether world relay `relay` is up `t` seconds after the feed opened.
    pub fn is_up(&self, relay: u32, t: f64) -> bool {
        is_up(&self.down, relay, t)
    }

    /// Whether `relay` stays up from `from` to `to`.
    pub fn stays_up(&self, relay: u32, from: f64, to: f64) -> bool {
        (self.down.get(relay as usize))
            .is_some_and(|spans| spans.iter().all(|&(a, b)| b <= from || a > to))
    }

    /// When `relay`, up at `t`, next goes down (the feed's end when it does not before).
    pub fn next_down(&self, relay: u32, t: f64) -> f64 {
        (self.down.get(relay as usize))
            .and_then(|spans| spans.iter().find(|&&(a, _)| a > t).map(|&(a, _)| a))
            .unwrap_or(f64::INFINITY)
            .min(self.secs)
    }
}

fn is_up(down: &[Vec<(f64, f64)>], relay: u32, t: f64) -> bool {
    (down.get(relay as usize)).is_some_and(|spans| !spans.iter().any(|&(a, b)| a <= t && t < b))
}

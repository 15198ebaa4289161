//! The world generator: a synthetic relay network with what makes the real one hard.
//!
//! Every knob lives in [`WorldModel`], with defaults drawn from the published measurements
//! (nostrability/outbox, 2026; see the README's Results). A world is deterministic for (profile, seed).

use std::collections::HashSet;
use std::fmt;

use nostr::key::{Keys, PublicKey, SecretKey};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};
use serde::{Deserialize, Serialize};

use crate::world::{PartEvent, World, WorldError, WorldParts, WorldRelayList};

const DAY: u64 = 86_400;

/// The present of every generated world (2026-01-01T00:00:00Z): fixed so worlds are
/// reproducible.
pub const GENERATED_NOW: u64 = 1_767_225_600;

/// A named world size (by follow count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// ≈200 follows.
    Small,
    /// ≈450 follows.
    Medium,
    /// ≈1,800 follows.
    Large,
    /// ≈2,800 follows.
    Huge,
}

impl Profile {
    /// Every profile, smallest first.
    pub const ALL: [Profile; 4] = [
        Profile::Small,
        Profile::Medium,
        Profile::Large,
        Profile::Huge,
    ];

    /// The nominal follow count.
    pub fn follows(self) -> usize {
        match self {
            Profile::Small => 200,
            Profile::Medium => 450,
            Profile::Large => 1_800,
            Profile::Huge => 2_800,
        }
    }

    /// The lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Small => "small",
            Profile::Medium => "medium",
            Profile::Large => "large",
            Profile::Huge => "huge",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown profile {s:?} (small, medium, large, huge)"))
    }
}

/// An inclusive range a value is drawn uniformly from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Lowest value.
    pub lo: f64,
    /// Highest value.
    pub hi: f64,
}

impl Span {
    /// `[lo, hi]`.
    pub const fn new(lo: f64, hi: f64) -> Self {
        Self { lo, hi }
    }

    fn draw(self, rng: &mut impl Rng) -> f64 {
        if self.hi <= self.lo {
            self.lo
        } else {
            rng.random_range(self.lo..=self.hi)
        }
    }
}

/// Every knob of the generator in one place. Defaults reproduce the published network facts;
/// each field says which fact it models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorldModel {
    /// Followed authors.
    pub follows: usize,
    /// Sessions described (length of every `up` array).
    pub sessions: u32,
    /// Share of follows that publish no relay list (measured 20–44%); drawn per world.
    pub no_list_share: Span,
    /// Hubs: a few relays found in a third to half of all lists.
    pub hubs: usize,
    /// Chance that a list includes the most popular hub; hub `i` is included independently
    /// with this times `hub_decay^i` (a few hubs in a third to half of all lists).
    pub top_hub_share: f64,
    /// Popularity decay from one hub to the next.
    pub hub_decay: f64,
    /// Mid-popularity relays, as a base count plus one per this many follows.
    pub mid_relays_base: usize,
    /// See [`WorldModel::mid_relays_base`].
    pub follows_per_mid_relay: usize,
    /// Zipf exponent of mid-relay popularity.
    pub mid_zipf: f64,
    /// Share of the write slots not taken by hubs that go to mid relays; the rest go to the
    /// tail (relays found in one list each).
    pub mid_slot_share: f64,
    /// Weights of list lengths 2, 3, …, 8 write relays.
    pub write_count_weights: Vec<f64>,
    /// Share of lists that are far longer (12–40 entries).
    pub long_list_share: f64,
    /// Share of lists that also carry read-only entries.
    pub read_entry_share: f64,
    /// Per-entry chance of a messy but valid spelling (upper case, trailing slash, `:443`).
    pub messy_url_share: f64,
    /// Per-list chance of an unusable entry (`http://`, garbage, localhost, private IP).
    pub garbage_entry_share: f64,
    /// Hubs that are dead but linger in lists (formerly popular relays).
    pub dead_hubs: usize,
    /// Hubs that are paid, auth-gated or refuse reads.
    pub paid_hubs: usize,
    /// Chance that a mid relay is alive.
    pub mid_alive: f64,
    /// Chance that a tail relay of an ordinary list is alive (people's own small relays).
    pub tail_alive: f64,
    /// Chance that a tail relay of a far longer list is alive: such lists collect relays
    /// that died long ago, which is most of why only ~35–60% of distinct listed relays live.
    pub long_list_tail_alive: f64,
    /// Chance that a live non-hub relay is paid, auth-gated or refuses reads (~4% overall).
    pub paid_share: f64,
    /// Per-session answer probability of live hubs.
    pub hub_reliability: Span,
    /// Per-session answer probability of other live relays (70–88% of live relays answer in
    /// a run).
    pub relay_reliability: Span,
    /// Posting rate in notes per day: log-normal median.
    pub rate_median_per_day: f64,
    /// Posting rate: log-normal sigma (heavy tail).
    pub rate_sigma: f64,
    /// Highest posting rate, notes per day (keeps event counts sane).
    pub rate_cap_per_day: f64,
    /// History simulated, in days (events older than 3 years fall outside every window).
    pub history_days: u64,
    /// Share of authors who stopped posting at some point (silent since).
    pub quit_share: f64,
    /// Hub retention in days (hubs prune old notes: weeks to months).
    pub hub_retention_days: Span,
    /// Share of mid relays that prune; the rest keep everything.
    pub mid_prune_share: f64,
    /// Mid relay retention in days when they prune (6–24 months): the most popular mid relay
    /// keeps about `lo` days, the least popular about `hi` (busier relays prune harder).
    pub mid_retention_days: Span,
    /// Noise on the popularity-to-retention mapping, as a share of the mid-relay count.
    pub mid_retention_noise: f64,
    /// Per relay, the chance that an (author, relay) pair silently fails every write (rate
    /// limits, web-of-trust filters, spam rules); drawn once per relay, so some relays are far
    /// lossier than others.
    pub write_failure_share: Span,
    /// Chance that one write to one relay is lost.
    pub event_drop_share: f64,
    /// Share of authors who moved relays: notes before the move sit on relays missing from
    /// their current list.
    pub moved_share: f64,
    /// Of a mover's current write relays, the share that were also in the old set.
    pub moved_keep_share: f64,
    /// Chance that a note is also broadcast to one hub not in the author's list (clients that
    /// publish to their default relays too).
    pub broadcast_share: f64,
    /// The reader's own relays: the top hubs that are alive, this many.
    pub reader_relays: usize,
    /// Per-REQ caps (events per filter, the world's `max_limit`) and the share of relays with
    /// each; a `None` cap is no cap. strfry, which most public relays run, returns at most 500
    /// events per filter by default (`maxFilterLimit`); other implementations and operators
    /// publish caps from 100 to 5,000 (NIP-11 `limitation.max_limit`), and a few cap nothing.
    /// The shares are an estimate, not a measurement. Drawn per existing relay from its own
    /// random stream, so the rest of a world does not depend on them.
    pub relay_caps: Vec<CapShare>,
}

/// One per-REQ cap and the share of relays that have it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapShare {
    /// Events per filter; `None` is no cap.
    pub max_limit: Option<u32>,
    /// Relative share of relays (weights need not sum to 1).
    pub share: f64,
}

impl CapShare {
    const fn new(max_limit: Option<u32>, share: f64) -> Self {
        Self { max_limit, share }
    }
}

/// The default cap mix: most relays at strfry's 500, some lower or higher, a few uncapped.
pub const DEFAULT_RELAY_CAPS: [CapShare; 7] = [
    CapShare::new(Some(500), 0.62),
    CapShare::new(Some(100), 0.04),
    CapShare::new(Some(250), 0.06),
    CapShare::new(Some(1_000), 0.10),
    CapShare::new(Some(2_000), 0.06),
    CapShare::new(Some(5_000), 0.06),
    CapShare::new(None, 0.06),
];

impl Default for WorldModel {
    fn default() -> Self {
        Self {
            follows: Profile::Medium.follows(),
            sessions: 5,
            no_list_share: Span::new(0.20, 0.44),
            hubs: 16,
            top_hub_share: 0.45,
            hub_decay: 0.82,
            mid_relays_base: 20,
            follows_per_mid_relay: 12,
            mid_zipf: 1.0,
            mid_slot_share: 0.35,
            write_count_weights: vec![0.14, 0.18, 0.2, 0.17, 0.13, 0.1, 0.08],
            long_list_share: 0.06,
            read_entry_share: 0.3,
            messy_url_share: 0.12,
            garbage_entry_share: 0.06,
            dead_hubs: 3,
            paid_hubs: 1,
            mid_alive: 0.75,
            tail_alive: 0.7,
            long_list_tail_alive: 0.1,
            paid_share: 0.04,
            hub_reliability: Span::new(0.9, 0.99),
            relay_reliability: Span::new(0.55, 0.97),
            rate_median_per_day: 0.06,
            rate_sigma: 1.5,
            rate_cap_per_day: 8.0,
            history_days: 3 * 365 + 60,
            quit_share: 0.35,
            hub_retention_days: Span::new(10.0, 45.0),
            mid_prune_share: 1.0,
            mid_retention_days: Span::new(180.0, 730.0),
            mid_retention_noise: 0.3,
            write_failure_share: Span::new(0.0, 0.3),
            event_drop_share: 0.02,
            moved_share: 0.3,
            moved_keep_share: 0.4,
            broadcast_share: 0.25,
            reader_relays: 3,
            relay_caps: DEFAULT_RELAY_CAPS.to_vec(),
        }
    }
}

impl WorldModel {
    /// The default model for a profile.
    pub fn for_profile(profile: Profile) -> Self {
        Self {
            follows: profile.follows(),
            ..Self::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Hub,
    Mid,
    Tail,
}

#[derive(Clone, Debug)]
struct Relay {
    url: String,
    tier: Tier,
    alive: bool,
    paid: bool,
    reliability: f64,
    /// Seconds of history kept; `None` keeps everything.
    retention: Option<u64>,
    /// Chance that this relay silently drops every write of a given author.
    write_failure: f64,
}

/// Generates the world for `profile` and `seed` with the default model.
pub fn generate(profile: Profile, seed: u64) -> World {
    generate_with(
        &WorldModel::for_profile(profile),
        &format!("{profile}/seed-{seed}"),
        seed,
    )
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
    let mut relays: Vec<Relay> = Vec::new();
    let mut hub_states = vec![(true, false); model.hubs];
    // Dead and paid hubs are drawn among hubs 1.. so the top hub is always alive.
    let mut candidates: Vec<usize> = (1..model.hubs).collect();
    candidates.shuffle(&mut rng);
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
            reliability: model.hub_reliability.draw(&mut rng),
            retention: Some((model.hub_retention_days.draw(&mut rng) * DAY as f64) as u64),
            write_failure: model.write_failure_share.draw(&mut rng),
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
            reliability: model.relay_reliability.draw(&mut rng),
            retention,
            write_failure: model.write_failure_share.draw(&mut rng),
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

    // Follows.
    let reader = key_from(&mut rng);
    let follows: Vec<PublicKey> = (0..model.follows).map(|_| key_from(&mut rng)).collect();
    let no_list_share = model.no_list_share.draw(&mut rng).clamp(0.0, 1.0);

    let mut relay_lists = Vec::new();
    let mut events = Vec::new();
    let rate = LogNormal::new(
        model.rate_median_per_day.max(1e-9).ln(),
        model.rate_sigma.max(0.0),
    )
    .expect("sigma is non-negative");
    let history = model.history_days * DAY;
    let start_of_history = now - history;

    for (author_index, author) in follows.iter().enumerate() {
        // Where the author writes now (relay indices), in list order.
        let long_list = rng.random_bool(model.long_list_share.clamp(0.0, 1.0));
        let tail_alive = if long_list {
            model.long_list_tail_alive
        } else {
            model.tail_alive
        };
        let n_write = if long_list {
            rng.random_range(12..=40)
        } else {
            2 + Weighted::new(&model.write_count_weights).sample(&mut rng)
        };
        let mut current: Vec<usize> = Vec::with_capacity(n_write);
        // Hubs first, each independently, then mid and tail relays; shuffled into list order.
        for (h, w) in hub_weights.iter().enumerate() {
            if current.len() < n_write && rng.random_bool((model.top_hub_share * w).clamp(0.0, 1.0))
            {
                current.push(h);
            }
        }
        let pick = |rng: &mut ChaCha8Rng, relays: &mut Vec<Relay>| -> usize {
            if rng.random_bool(model.mid_slot_share.clamp(0.0, 1.0)) {
                mid_start + mid_pick.sample(rng)
            } else {
                let alive = rng.random_bool(tail_alive.clamp(0.0, 1.0));
                let paid = alive && rng.random_bool(model.paid_share.clamp(0.0, 1.0));
                let reliability = model.relay_reliability.draw(rng);
                let write_failure = model.write_failure_share.draw(rng);
                let i = relays.len();
                relays.push(Relay {
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
        };
        let mut tries = 0;
        while current.len() < n_write && tries < n_write * 8 {
            tries += 1;
            let r = pick(&mut rng, &mut relays);
            if !current.contains(&r) {
                current.push(r);
            }
        }
        current.shuffle(&mut rng);
        let has_list = !rng.random_bool(no_list_share);

        // Authors who moved: an older write set, partly shared with the current one.
        let moved_at = (has_list && rng.random_bool(model.moved_share.clamp(0.0, 1.0)))
            .then(|| now - rng.random_range(30 * DAY..=history.max(31 * DAY)));
        let old: Vec<usize> = if moved_at.is_some() {
            let mut old: Vec<usize> = current
                .iter()
                .copied()
                .filter(|_| rng.random_bool(model.moved_keep_share.clamp(0.0, 1.0)))
                .collect();
            let want = current.len().max(2);
            let mut tries = 0;
            while old.len() < want && tries < want * 8 {
                tries += 1;
                let r = pick(&mut rng, &mut relays);
                if !old.contains(&r) && !current.contains(&r) {
                    old.push(r);
                }
            }
            old
        } else {
            Vec::new()
        };

        if has_list {
            relay_lists.push(WorldRelayList {
                author: *author,
                created_at: moved_at.unwrap_or(now - rng.random_range(DAY..=history)),
                tags: list_tags(model, &current, &relays, &hub_pick, &mut rng),
            });
        }

        // Posting: a rate, an active period, Poisson arrivals.
        let per_day = rate.sample(&mut rng).min(model.rate_cap_per_day);
        let active_from = start_of_history + rng.random_range(0..history - 7 * DAY);
        let active_until = if rng.random_bool(model.quit_share.clamp(0.0, 1.0)) {
            rng.random_range(active_from..now)
        } else {
            now
        };
        let failing: HashSet<usize> = current
            .iter()
            .chain(old.iter())
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
            let targets = match moved_at {
                Some(m) if created_at < m => &old,
                _ => &current,
            };
            let mut on: Vec<String> = Vec::with_capacity(targets.len() + 1);
            let age = now - created_at;
            let place = |r: usize, rng: &mut ChaCha8Rng, on: &mut Vec<String>| {
                let relay = &relays[r];
                if !relay.alive
                    || failing.contains(&r)
                    || relay.retention.is_some_and(|keep| age > keep)
                    || rng.random_bool(model.event_drop_share.clamp(0.0, 1.0))
                {
                    return;
                }
                if !on.contains(&relay.url) {
                    on.push(relay.url.clone());
                }
            };
            for &r in targets {
                place(r, &mut rng, &mut on);
            }
            if rng.random_bool(model.broadcast_share.clamp(0.0, 1.0)) {
                let h = hub_pick.sample(&mut rng);
                place(h, &mut rng, &mut on);
            }
            let mut id = [0u8; 32];
            rng.fill_bytes(&mut id);
            events.push(PartEvent {
                id,
                author: author_index as u32,
                created_at,
                kind: 1,
                on,
            });
        }
    }

    // The reader's relays: the most popular live, free hubs.
    let reader_relays: Vec<String> = relays
        .iter()
        .filter(|r| r.tier == Tier::Hub && r.alive && !r.paid)
        .take(model.reader_relays)
        .map(|r| r.url.clone())
        .collect();

    let world_relays: Vec<(String, Vec<bool>)> = relays
        .iter()
        .filter(|r| r.alive)
        .map(|r| {
            let up = (0..sessions)
                .map(|_| !r.paid && rng.random_bool(r.reliability.clamp(0.0, 1.0)))
                .collect();
            (r.url.clone(), up)
        })
        .collect();

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
    assign_caps(model, seed, &mut world);
    Ok(world)
}

/// Draws each existing relay's cap from [`WorldModel::relay_caps`], in URL order, from a
/// stream of its own (adding caps left every other part of a world as it was).
fn assign_caps(model: &WorldModel, seed: u64, world: &mut World) {
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

/// The raw `r` tags of a list: the write relays in order (some spelled messily, some marked
/// `write`), plus read-only entries and garbage now and then.
fn list_tags(
    model: &WorldModel,
    current: &[usize],
    relays: &[Relay],
    hub_pick: &Weighted,
    rng: &mut ChaCha8Rng,
) -> Vec<Vec<String>> {
    let mut tags = Vec::with_capacity(current.len() + 2);
    for &r in current {
        let url = messy(&relays[r].url, model.messy_url_share, rng);
        let mut tag = vec!["r".to_string(), url];
        if rng.random_bool(0.3) {
            tag.push("write".to_string());
        }
        tags.push(tag);
    }
    if rng.random_bool(model.read_entry_share.clamp(0.0, 1.0)) {
        let h = hub_pick.sample(rng);
        if !current.contains(&h) {
            let at = rng.random_range(0..=tags.len());
            tags.insert(
                at,
                vec!["r".to_string(), relays[h].url.clone(), "read".to_string()],
            );
        }
    }
    if rng.random_bool(model.garbage_entry_share.clamp(0.0, 1.0)) {
        const GARBAGE: [&str; 6] = [
            "http://relay.example.com",
            "relay.damus",
            "ws://localhost:4869",
            "wss://192.168.1.20",
            "wss://",
            "nostr:relay",
        ];
        let g = GARBAGE[rng.random_range(0..GARBAGE.len())];
        let at = rng.random_range(0..=tags.len());
        tags.insert(at, vec!["r".to_string(), g.to_string()]);
    }
    tags
}

/// A valid but messy spelling of a canonical URL, sometimes.
fn messy(url: &str, share: f64, rng: &mut ChaCha8Rng) -> String {
    if !rng.random_bool(share.clamp(0.0, 1.0)) {
        return url.to_string();
    }
    match rng.random_range(0..4) {
        0 => format!("{url}/"),
        1 => url.to_ascii_uppercase().replacen("WSS://", "wss://", 1),
        2 => format!("  {url}"),
        _ => url.replacen("wss://", "WSS://", 1),
    }
}

fn key_from(rng: &mut ChaCha8Rng) -> PublicKey {
    loop {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        if let Ok(sk) = SecretKey::from_slice(&bytes) {
            return Keys::new(sk).public_key();
        }
    }
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

/// Headline facts about a world, to check a model against the published measurements.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorldStats {
    /// The world's name.
    pub name: String,
    /// Follows.
    pub follows: usize,
    /// Share of follows without a relay list.
    pub no_list_share: f64,
    /// Distinct canonical relays named in kept write entries.
    pub listed_relays: usize,
    /// Share of listed relays that exist (are keys of `relays`).
    pub listed_alive_share: f64,
    /// Share of listed relays that never answer although they exist (paid, auth, refusing).
    pub listed_refusing_share: f64,
    /// Mean share of live, answering relays that are up per session.
    pub live_up_share: f64,
    /// Share of lists that include the most popular relay.
    pub top_relay_list_share: f64,
    /// Median write relays per list.
    pub median_write_relays: f64,
    /// Events.
    pub events: usize,
    /// Share of follows with no event in the last 7 days.
    pub silent_7d_share: f64,
    /// Events within 7 days, 1 year, 3 years.
    pub events_by_window: [usize; 3],
    /// Size of the world as JSON, in bytes (estimated from a sample).
    pub approx_json_bytes: u64,
}

/// Computes [`WorldStats`].
pub fn world_stats(world: &World) -> WorldStats {
    let table = world.route_table(&outbox_core::UrlPolicy::default());
    let follows = world.follows.len();
    let with_list = table.authors().filter(|&a| table.has_list(a)).count();
    let listed: Vec<_> = table
        .relays()
        .filter(|&r| table.popularity(r) > 0)
        .collect();
    let alive = listed
        .iter()
        .filter(|&&r| {
            world
                .relay_id(table.url(r))
                .is_some_and(|id| world.relays()[id as usize].exists)
        })
        .count();
    let refusing = listed
        .iter()
        .filter(|&&r| {
            world.relay_id(table.url(r)).is_some_and(|id| {
                let w = &world.relays()[id as usize];
                w.exists && w.up.iter().all(|u| !u)
            })
        })
        .count();
    let answering: Vec<_> = world
        .relays()
        .iter()
        .filter(|r| r.exists && r.up.iter().any(|&u| u))
        .collect();
    let live_up_share = if answering.is_empty() || world.sessions == 0 {
        0.0
    } else {
        answering
            .iter()
            .map(|r| r.up.iter().filter(|&&u| u).count() as f64 / world.sessions as f64)
            .sum::<f64>()
            / answering.len() as f64
    };
    let top = listed
        .iter()
        .map(|&r| table.popularity(r))
        .max()
        .unwrap_or(0);
    let mut lens: Vec<usize> = table
        .authors()
        .filter(|&a| table.has_list(a))
        .map(|a| table.write_relays(a).len())
        .collect();
    lens.sort_unstable();
    let median = lens.get(lens.len() / 2).copied().unwrap_or(0) as f64;
    let windows = [7 * DAY, 365 * DAY, 3 * 365 * DAY];
    let mut by_window = [0usize; 3];
    for e in world.events() {
        for (i, w) in windows.iter().enumerate() {
            if e.created_at >= world.now.saturating_sub(*w) {
                by_window[i] += 1;
            }
        }
    }
    let silent = (0..follows as u32)
        .filter(|&a| world.author_events_since(a, world.now - 7 * DAY).is_empty())
        .count();
    let share = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
    let sample = world.events().len().min(200);
    let per_event = if sample == 0 {
        0
    } else {
        world.events()[..sample]
            .iter()
            .map(|e| 170 + world.event_relays(e).len() as u64 * 32)
            .sum::<u64>()
            / sample as u64
    };
    WorldStats {
        name: world.name.clone(),
        follows,
        no_list_share: share(follows - with_list, follows),
        listed_relays: listed.len(),
        listed_alive_share: share(alive, listed.len()),
        listed_refusing_share: share(refusing, listed.len()),
        live_up_share,
        top_relay_list_share: share(top as usize, with_list),
        median_write_relays: median,
        events: world.events().len(),
        silent_7d_share: share(silent, follows),
        events_by_window: by_window,
        approx_json_bytes: per_event * world.events().len() as u64 + follows as u64 * 300,
    }
}

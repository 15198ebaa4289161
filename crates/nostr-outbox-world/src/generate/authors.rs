//! Followed authors: where each writes now, where movers wrote before, and the kind:10002 list
//! a client fetches for them (some spellings messy, read-only entries and garbage now and then).

use std::collections::HashSet;

use nostr::key::{Keys, PublicKey, SecretKey};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;

use super::relays::{Network, Relay};
use super::{Weighted, WorldModel, DAY};
use crate::world::WorldRelayList;

/// Where one author writes, as indices into [`Network::relays`].
pub(super) struct Writes {
    /// The current write relays, in list order.
    pub(super) current: Vec<usize>,
    /// The write relays before a move: notes from before it are there (empty if no move).
    pub(super) old: Vec<usize>,
    /// When the author moved to `current`, if they did.
    pub(super) moved_at: Option<u64>,
    /// Whether the author publishes a relay list.
    pub(super) has_list: bool,
}

/// Draws one author's write relays, list or not, and move.
pub(super) fn draw_writes(
    model: &WorldModel,
    net: &mut Network,
    no_list_share: f64,
    now: u64,
    rng: &mut ChaCha8Rng,
) -> Writes {
    let history = model.history_days * DAY;
    // Where the author writes now (relay indices), in list order.
    let long_list = rng.random_bool(model.long_list_share.clamp(0.0, 1.0));
    let tail_alive = if long_list {
        model.long_list_tail_alive
    } else {
        model.tail_alive
    };
    let n_write = if long_list {
        let lo = model.long_list_min.max(1);
        rng.random_range(lo..=model.long_list_max.max(lo))
    } else {
        model.write_count_min.max(1) + Weighted::new(&model.write_count_weights).sample(rng)
    };
    let mut current: Vec<usize> = Vec::with_capacity(n_write);
    // Hubs first, each independently, then mid and tail relays; shuffled into list order.
    for (h, w) in net.hub_weights.iter().enumerate() {
        if current.len() < n_write && rng.random_bool((model.top_hub_share * w).clamp(0.0, 1.0)) {
            current.push(h);
        }
    }
    let mut tries = 0;
    while current.len() < n_write && tries < n_write * 8 {
        tries += 1;
        let r = net.pick(model, tail_alive, rng);
        if !current.contains(&r) {
            current.push(r);
        }
    }
    current.shuffle(rng);
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
            let r = net.pick(model, tail_alive, rng);
            if !old.contains(&r) && !current.contains(&r) {
                old.push(r);
            }
        }
        old
    } else {
        Vec::new()
    };
    Writes {
        current,
        old,
        moved_at,
        has_list,
    }
}

/// Which follows (indices) are hoarders: [`WorldModel::hoarder_share`] of them, at random.
/// Draws nothing when the share is 0.
pub(super) fn pick_hoarders(model: &WorldModel, rng: &mut ChaCha8Rng) -> HashSet<usize> {
    let count = (model.hoarder_share.clamp(0.0, 1.0) * model.follows as f64).round() as usize;
    if count == 0 {
        return HashSet::new();
    }
    rand::seq::index::sample(rng, model.follows, count.min(model.follows))
        .into_iter()
        .collect()
}

/// A hoarder's write set ([`WorldModel::hoarder_share`]): one new relay of their own, a list,
/// no move.
pub(super) fn hoarder_writes(
    model: &WorldModel,
    net: &mut Network,
    rng: &mut ChaCha8Rng,
) -> Writes {
    Writes {
        current: vec![net.own_relay(model, rng)],
        old: Vec::new(),
        moved_at: None,
        has_list: true,
    }
}

/// When a hoarder published their relay list: some time in the history before `now`.
pub(super) fn hoarder_list_date(model: &WorldModel, now: u64, rng: &mut ChaCha8Rng) -> u64 {
    let history = (model.history_days * DAY).max(DAY);
    now - rng.random_range(DAY..=history)
}

/// A hoarder's relay list, published at `created_at`: exactly their one relay.
pub(super) fn hoarder_list(
    author: PublicKey,
    writes: &Writes,
    net: &Network,
    created_at: u64,
) -> WorldRelayList {
    WorldRelayList {
        author,
        created_at,
        tags: writes
            .current
            .iter()
            .map(|&r| vec!["r".to_string(), net.relays[r].url.clone()])
            .collect(),
    }
}

/// The author's relay list as a client fetches it, if they publish one: dated at their move,
/// or at some point in the history.
pub(super) fn relay_list(
    model: &WorldModel,
    author: PublicKey,
    writes: &Writes,
    net: &Network,
    now: u64,
    rng: &mut ChaCha8Rng,
) -> Option<WorldRelayList> {
    if !writes.has_list {
        return None;
    }
    let history = model.history_days * DAY;
    // A date is drawn for movers too (they keep their move's): every generated world depends
    // on that draw.
    Some(WorldRelayList {
        author,
        created_at: writes
            .moved_at
            .unwrap_or(now - rng.random_range(DAY..=history)),
        tags: list_tags(model, &writes.current, &net.relays, &net.hub_pick, rng),
    })
}

/// The raw `r` tags of a list: the write relays in order (some spelled messily, some marked
/// `write`), plus read-only entries and garbage now and then.
pub(super) fn list_tags(
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
pub(super) fn messy(url: &str, share: f64, rng: &mut ChaCha8Rng) -> String {
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

/// A public key from the world's stream (secret keys are drawn until one is valid).
pub(super) fn key_from(rng: &mut ChaCha8Rng) -> PublicKey {
    loop {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        if let Ok(sk) = SecretKey::from_slice(&bytes) {
            return Keys::new(sk).public_key();
        }
    }
}

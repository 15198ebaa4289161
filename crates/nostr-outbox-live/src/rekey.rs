//! Re-keying a world for real relays: world files hold only public keys, so every author gets a
//! deterministic secret key, every world event becomes one signed kind:1 note, and every relay
//! URL becomes a loopback URL with a fixed port.
//!
//! Two orders are kept so that strategies plan the same way live as in the simulator, including
//! their tie-breaks: new public keys sort like the world's (the k-th smallest world key gets the
//! k-th smallest new key), and loopback URLs sort like the world URLs they replace (ports are
//! assigned in URL order and all have five digits).

use std::collections::{BTreeSet, HashMap};

use nostr::key::PublicKey;
use nostr_outbox_core::{RawRelayList, UrlPolicy};
use nostr_outbox_sim::World;
use nostr_relay_builder::prelude as rb;

/// Where a canonical world URL points live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// The port.
    pub port: u16,
    /// The world relay id when the URL is a relay that exists in the world; `None` for URLs
    /// that only appear in lists or `on` lists: their port stays closed (they never answer).
    pub relay: Option<u32>,
}

/// The world in live terms.
#[derive(Debug)]
pub struct Rekeyed {
    /// Per world follow (same order), its signing keys.
    pub keys: Vec<rb::Keys>,
    /// Per world follow, the new public key in the runtime's key type.
    pub follows: Vec<PublicKey>,
    /// New public key → world follow index.
    pub follow_of: HashMap<PublicKey, u32>,
    /// Canonical world URL → live URL.
    pub urls: HashMap<String, Mapped>,
    /// The reader's relays, live.
    pub reader_relays: Vec<String>,
    /// The relay lists, live: same authors (re-keyed), same `created_at`, same tag order; `r`
    /// tags the simulator's URL policy drops are left out (live they would be dropped too).
    pub relay_lists: Vec<RawRelayList>,
    /// Seconds added to every world time (`real now − world.now`).
    pub shift: i64,
}

impl Rekeyed {
    /// The live port of world relay `relay`, if it exists in the world.
    pub fn port_of(&self, world: &World, relay: u32) -> Option<u16> {
        let url = &world.relays().get(relay as usize)?.url;
        self.urls.get(url).map(|m| m.port)
    }
}

/// What went wrong re-keying.
#[derive(Debug, thiserror::Error)]
pub enum RekeyError {
    /// More distinct relay URLs than ports from `base_port`.
    #[error("{urls} relay URLs do not fit in ports {base}..65535")]
    TooManyUrls {
        /// Distinct URLs.
        urls: usize,
        /// First port.
        base: u16,
    },
    /// A relay list could not be signed.
    #[error("signing a relay list: {0}")]
    Sign(String),
}

/// `lists` (re-keyed, of `rekeyed`'s follows) as kind:10002 events signed by their authors'
/// keys, in the relay builder's types (to store on the local relays); a list by anyone else is
/// left out, and a tag that does not parse is an error naming it.
pub fn sign_relay_lists(
    rekeyed: &Rekeyed,
    lists: &[RawRelayList],
) -> Result<Vec<rb::Event>, RekeyError> {
    let mut signed = Vec::with_capacity(lists.len());
    for list in lists {
        let Some(keys) =
            (rekeyed.follow_of.get(&list.author)).and_then(|&i| rekeyed.keys.get(i as usize))
        else {
            continue;
        };
        let tags = (list.tags.iter())
            .map(rb::Tag::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RekeyError::Sign(format!("a tag of {}'s list: {e}", list.author)))?;
        let event = rb::EventBuilder::new(rb::Kind::RelayList, "")
            .tags(tags)
            .custom_created_at(rb::Timestamp::from(list.created_at))
            .sign_with_keys(keys)
            .map_err(|e| RekeyError::Sign(e.to_string()))?;
        signed.push(event);
    }
    Ok(signed)
}

/// A deterministic secret key for index `i` (not secret in any sense: a test fixture).
fn secret(i: u32) -> rb::SecretKey {
    let mut sk = [0x5au8; 32];
    sk[0] = 0x17;
    sk[28..32].copy_from_slice(&i.to_be_bytes());
    rb::SecretKey::from_slice(&sk).expect("a small 256-bit value is a valid secret key")
}

/// Re-keys `world`: keys for every follow, URLs from `base_port` upwards in world-URL order.
/// `policy` is the simulator's URL policy (what it keeps of the lists is what is kept here);
/// `now` is the real present the world's `now` is moved to.
pub fn rekey(
    world: &World,
    policy: &UrlPolicy,
    base_port: u16,
    now: u64,
) -> Result<Rekeyed, RekeyError> {
    // Keys: generate, then hand them out so the new keys sort like the world's.
    let mut fresh: Vec<rb::Keys> = (0..world.follows.len() as u32)
        .map(|i| rb::Keys::new(secret(i)))
        .collect();
    fresh.sort_by_key(|k| k.public_key().to_bytes());
    let mut order: Vec<u32> = (0..world.follows.len() as u32).collect();
    order.sort_by_key(|&i| world.follows[i as usize].to_bytes());
    let mut keys: Vec<Option<rb::Keys>> = vec![None; world.follows.len()];
    for (k, i) in fresh.into_iter().zip(order) {
        keys[i as usize] = Some(k);
    }
    let keys: Vec<rb::Keys> = keys
        .into_iter()
        .map(|k| k.expect("every follow got a key"))
        .collect();
    let follows: Vec<PublicKey> = keys
        .iter()
        .map(|k| {
            PublicKey::from_slice(&k.public_key().to_bytes())
                .expect("the same x-only key in both nostr versions")
        })
        .collect();
    let follow_of = follows
        .iter()
        .enumerate()
        .map(|(i, pk)| (*pk, i as u32))
        .collect();

    // URLs: every canonical URL the world names, in order.
    let mut all: BTreeSet<String> = world
        .relays()
        .iter()
        .filter(|r| r.exists)
        .map(|r| r.url.clone())
        .collect();
    let mut canonical_tag = |raw: &str| policy.canonicalize(raw).ok();
    for list in &world.relay_lists {
        for tag in &list.tags {
            if let Some(url) = r_tag_url(tag).and_then(&mut canonical_tag) {
                all.insert(url);
            }
        }
    }
    for raw in &world.reader_relays {
        if let Some(url) = canonical_tag(raw) {
            all.insert(url);
        }
    }
    if usize::from(u16::MAX - base_port) < all.len() || base_port < 10_000 {
        return Err(RekeyError::TooManyUrls {
            urls: all.len(),
            base: base_port,
        });
    }
    let urls: HashMap<String, Mapped> = all
        .into_iter()
        .enumerate()
        .map(|(i, url)| {
            let port = base_port + i as u16;
            let relay = world
                .relay_id(&url)
                .filter(|&r| world.relays()[r as usize].exists);
            let mapped = Mapped {
                url: format!("ws://127.0.0.1:{port}"),
                port,
                relay,
            };
            (url, mapped)
        })
        .collect();
    let live = |raw: &str| {
        policy
            .canonicalize(raw)
            .ok()
            .and_then(|c| urls.get(&c))
            .map(|m| m.url.clone())
    };
    let reader_relays = world.reader_relays.iter().filter_map(|r| live(r)).collect();
    let relay_lists = world
        .relay_lists
        .iter()
        .filter_map(|list| {
            let i = world.follows.iter().position(|f| *f == list.author)?;
            let tags = list
                .tags
                .iter()
                .filter_map(|tag| match r_tag_url(tag) {
                    None => Some(tag.clone()),
                    Some(raw) => {
                        let url = live(raw)?;
                        let mut t = tag.clone();
                        t[1] = url;
                        Some(t)
                    }
                })
                .collect();
            Some(RawRelayList {
                author: follows[i],
                created_at: list.created_at,
                tags,
            })
        })
        .collect();
    Ok(Rekeyed {
        keys,
        follows,
        follow_of,
        urls,
        reader_relays,
        relay_lists,
        shift: now as i64 - world.now as i64,
    })
}

fn r_tag_url(tag: &[String]) -> Option<&str> {
    match tag {
        [name, url, ..] if name == "r" => Some(url),
        _ => None,
    }
}

/// The content of the note for world event `index`: how a delivered note maps back.
pub fn note_content(index: usize) -> String {
    format!("nostr-outbox-live event {index}")
}

/// The world event index a delivered note's content names, if it is one of ours.
pub fn event_index(content: &str) -> Option<usize> {
    content
        .strip_prefix("nostr-outbox-live event ")?
        .parse()
        .ok()
}

/// Signs one kind:1 note per world event (indexed like [`World::events`]), `created_at` moved
/// by `shift`, on `threads` threads (signing is the cost of preparing a bench).
pub fn sign_events(world: &World, keys: &[rb::Keys], shift: i64, threads: usize) -> Vec<rb::Event> {
    let events = world.events();
    let threads = threads.clamp(1, 16);
    let chunk = events.len().div_ceil(threads).max(1);
    let mut out: Vec<rb::Event> = Vec::with_capacity(events.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = events
            .chunks(chunk)
            .enumerate()
            .map(|(c, slice)| {
                scope.spawn(move || {
                    slice
                        .iter()
                        .enumerate()
                        .map(|(j, e)| {
                            let index = c * chunk + j;
                            let at = (e.created_at as i64 + shift).max(0) as u64;
                            rb::EventBuilder::new(rb::Kind::TextNote, note_content(index))
                                .custom_created_at(rb::Timestamp::from(at))
                                .sign_with_keys(&keys[e.author as usize])
                                .expect("signing with a valid key cannot fail")
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            out.extend(h.join().expect("signing threads do not panic"));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_outbox_sim::{generate, Profile};

    #[test]
    fn keys_and_urls_keep_the_world_orders() {
        let world = generate(Profile::Small, 2);
        let r = rekey(&world, &UrlPolicy::default(), 40_000, world.now + 100).unwrap();
        assert_eq!(r.follows.len(), world.follows.len());
        for i in 1..world.follows.len() {
            for j in [0, i / 2, i - 1] {
                assert_eq!(
                    world.follows[i].cmp(&world.follows[j]),
                    r.follows[i].cmp(&r.follows[j]),
                    "key order of follows {i} and {j}"
                );
            }
        }
        let mut by_world: Vec<(&String, &Mapped)> = r.urls.iter().collect();
        by_world.sort_by(|a, b| a.0.cmp(b.0));
        assert!(by_world.windows(2).all(|w| w[0].1.url < w[1].1.url));
        assert_eq!(r.reader_relays.len(), world.reader_relays.len());
        assert_eq!(r.shift, 100);
        assert_eq!(event_index(&note_content(1234)), Some(1234));
        assert_eq!(event_index("hello"), None);
    }

    #[test]
    fn live_table_matches_the_simulated_one() {
        let world = generate(Profile::Small, 5);
        let policy = UrlPolicy::default();
        let r = rekey(&world, &policy, 40_000, world.now).unwrap();
        let sim_table = world.route_table(&policy);
        let mut b = nostr_outbox_core::RouteTableBuilder::new(UrlPolicy::allow_local())
            .follows(r.follows.iter().copied())
            .reader_relays(&r.reader_relays);
        for l in &r.relay_lists {
            b.add_list(l.clone());
        }
        let live_table = b.build();
        for a in sim_table.authors() {
            let want: Vec<&str> = sim_table
                .write_relays(a)
                .iter()
                .map(|&x| r.urls[sim_table.url(x)].url.as_str())
                .collect();
            let got: Vec<&str> = live_table
                .write_relays(a)
                .iter()
                .map(|&x| live_table.url(x))
                .collect();
            assert_eq!(want, got, "author {a:?}");
        }
    }
}

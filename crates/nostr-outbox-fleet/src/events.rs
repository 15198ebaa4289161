//! Fixed keys and signed events.

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::{Keys, PublicKey, SecretKey};
use nostr::types::Timestamp;
use nostr_outbox_core::RawRelayList;

/// The present of every test world: now, in seconds.
pub fn now() -> u64 {
    Timestamp::now().as_secs()
}

/// One day in seconds.
pub const DAY: u64 = 86_400;

/// The `n`th fixed key (the same as [`key`]`(n)`).
pub fn keys(n: u8) -> Keys {
    key(u32::from(n))
}

/// The `n`th fixed key, for worlds with more than 256 people; `key(n)` is `keys(n)` for
/// `n < 256`.
pub fn key(n: u32) -> Keys {
    let mut sk = [0x11u8; 32];
    sk[0] = 0x42;
    let [a, b, c, d] = n.to_be_bytes();
    sk[28] ^= a;
    sk[29] ^= b;
    sk[30] ^= c;
    sk[31] = d;
    Keys::new(SecretKey::from_slice(&sk).expect("valid secret key"))
}

/// A note by `author` at `created_at`.
pub fn note(author: &Keys, created_at: u64, text: &str) -> Event {
    EventBuilder::new(Kind::TextNote, text)
        .custom_created_at(Timestamp::from(created_at))
        .finalize(author)
        .expect("signs")
}

/// A kind:10002 list by `author` at `created_at`: `(url, marker)` pairs.
pub fn relay_list(author: &Keys, created_at: u64, entries: &[(&str, Option<&str>)]) -> Event {
    let tags = entries.iter().map(|(url, marker)| {
        let mut t = vec!["r".to_string(), url.to_string()];
        if let Some(m) = marker {
            t.push(m.to_string());
        }
        Tag::parse(t).expect("valid tag")
    });
    EventBuilder::new(Kind::RelayList, "")
        .tags(tags)
        .custom_created_at(Timestamp::from(created_at))
        .finalize(author)
        .expect("signs")
}

/// A signed event of `kind` by `keys` with `tags`, dated `age` seconds ago.
pub fn signed(keys: &Keys, kind: Kind, content: &str, tags: Vec<Tag>, age: u64) -> Event {
    EventBuilder::new(kind, content)
        .tags(tags)
        .custom_created_at(Timestamp::from(now() - age))
        .finalize(keys)
        .expect("signs")
}

/// A kind:10002 event as the relay list a route table takes.
pub fn raw(event: &Event) -> RawRelayList {
    RawRelayList::try_from(event).expect("a valid relay list")
}

/// A kind:10050 list by `keys` (the relays its DMs go to), dated a minute ago.
pub fn dm_list(keys: &Keys, relays: &[&str]) -> Event {
    let tags = relays
        .iter()
        .map(|url| Tag::parse(["relay", url]).expect("valid tag"))
        .collect();
    signed(keys, Kind::InboxRelays, "", tags, 60)
}

/// `rumor` sealed by `from` for `to` as an event of `kind` with `tags` (a NIP-59 seal is kind
/// 13 without tags), then wrapped for `to` by a fresh key: for seals that are not quite one.
pub fn sealed_as(
    from: &Keys,
    to: PublicKey,
    rumor: &nostr::event::UnsignedEvent,
    kind: Kind,
    tags: Vec<Tag>,
) -> Event {
    use nostr::nips::nip44;
    let version = nip44::Version::default();
    let sealed = nip44::encrypt(from.secret_key(), &to, rumor.as_json(), version).unwrap();
    let seal = EventBuilder::new(kind, sealed)
        .tags(tags)
        .finalize(from)
        .unwrap();
    let once = Keys::generate();
    let content = nip44::encrypt(once.secret_key(), &to, seal.as_json(), version).unwrap();
    EventBuilder::new(Kind::GiftWrap, content)
        .tag(Tag::public_key(to))
        .finalize(&once)
        .unwrap()
}

/// A follows file in `dir` (`follows.txt`) naming `follows`, one hex key a line.
pub fn follows_file(dir: &std::path::Path, follows: &[PublicKey]) -> std::path::PathBuf {
    let path = dir.join("follows.txt");
    let lines: Vec<String> = follows.iter().map(|pk| pk.to_hex()).collect();
    std::fs::write(&path, lines.join("\n")).expect("the follows file is written");
    path
}

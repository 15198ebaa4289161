//! Direct messages (NIP-17): where the reader takes them, the gift wraps read there, and
//! opening them.
//!
//! - [`find_dm_lists`]: the reader's kind:10050 DM inbox list (with its kind:10002 list, for
//!   the fallback, and its kind:10006 blocked relays), asked of the reader's relays first and
//!   of the indexers only when those lack the DM list. The route over what it found is
//!   [`DmQuery`](nostr_outbox_client::routes::DmQuery), which falls back to the read relays.
//! - [`read_wraps`]: one pass over a DM route plan (DM relays usually require NIP-42, which
//!   the client's signer answers), keeping the newest wraps and what each relay did.
//! - [`wrap_dm`]: a chat message sealed and gift wrapped for each recipient and the sender,
//!   to send to each one's DM relays (the publish route of a gift wrap).
//! - [`unwrap_dm`]: gift wrap → seal → rumor (NIP-59, NIP-44) with the reader's key; a wrap
//!   that does not open is an error, never a panic.

use std::collections::BTreeMap;

use nostr::event::UnsignedEvent;
use nostr::event::{Event, EventId, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::RoutePlan;
use nostr_outbox_client::{RelayDirectory, RelayDirectoryBuilder};
use nostr_outbox_core::UrlPolicy;

use crate::asks::lookup::{answered_of, lookup, LookupOutcome};
use crate::asks::route_feed::{start_route, RouteEvent};
use crate::client::Client;
use crate::config::RuntimeConfig;
use crate::connection::refusal::Refusal;
use crate::signer::{Signer, SignerError};

/// What was learned about where the reader takes direct messages.
#[derive(Clone, Debug)]
pub struct DmLists {
    /// The reader's lists (kind:10050, kind:10002), under the policy with the reader's
    /// blocked relays denied.
    pub directory: RelayDirectory,
    /// Whether the DM list came from an indexer, the reader's relays lacking it.
    pub from_indexers: bool,
    /// Every relay asked for the lists, and what it did.
    pub asked: BTreeMap<String, LookupOutcome>,
}

impl DmLists {
    /// Relays asked that answered.
    pub fn answered(&self) -> usize {
        answered_of(&self.asked)
    }
}

/// Looks up the reader's DM inbox list (kind:10050), relay list (kind:10002) and blocked
/// relays (kind:10006): on `relays` (canonical) first, then, when none of them has the DM
/// list, on the `indexers` not among them. Each lookup is bounded like any [`lookup`].
pub async fn find_dm_lists(
    reader: PublicKey,
    relays: &[String],
    indexers: &[String],
    policy: &UrlPolicy,
    client: &Client,
) -> DmLists {
    let filter = Filter::new().author(reader).kinds([
        Kind::InboxRelays,
        Kind::RelayList,
        Kind::BlockedRelays,
    ]);
    let first = lookup(relays, &filter, client).await;
    let mut asked = first.relays;
    let mut events = first.events;
    let has_dm_list = |events: &[Event]| events.iter().any(|e| e.kind == Kind::InboxRelays);
    let mut from_indexers = false;
    let rest: Vec<String> = indexers
        .iter()
        .filter(|i| !relays.contains(i))
        .cloned()
        .collect();
    if !has_dm_list(&events) && !rest.is_empty() {
        let second = lookup(&rest, &filter, client).await;
        from_indexers = has_dm_list(&second.events);
        asked.extend(second.relays);
        events.extend(second.events);
    }
    let mut policy = policy.clone();
    // Newest first across both lookups: the newest blocked-relay list is the one that counts.
    events.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    if let Some(blocked) = events.iter().find(|e| e.kind == Kind::BlockedRelays) {
        policy = policy.denying(nostr_outbox_core::blocked_relays(blocked));
    }
    let mut directory = RelayDirectoryBuilder::new(policy).max_people(1);
    // The lookups verified signatures unless the config said not to.
    for list in events.iter().filter(|e| e.pubkey == reader) {
        if matches!(list.kind, Kind::InboxRelays | Kind::RelayList) {
            directory.add_verified(list);
        }
    }
    DmLists {
        directory: directory.build(),
        from_indexers,
        asked,
    }
}

/// One gift wrap as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Wrap {
    /// The kind:1059 event (verified unless the config says not to).
    pub event: Event,
    /// The relay that delivered it first.
    pub relay: String,
}

/// What one relay of a DM read did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmRelayOutcome {
    /// It sent its stored wraps and EOSE: how many (repeats of other relays' included).
    Answered {
        /// Wraps sent before EOSE.
        wraps: usize,
    },
    /// It refused the REQ (CLOSED) and signing in or waiting did not help: the prefix read
    /// by [`Refusal::of`], and the relay's text with what was tried (not escaped).
    Refused {
        /// What the refusal says.
        refusal: Refusal,
        /// The relay's text.
        message: String,
    },
    /// It could not be asked, or did not finish in time (not escaped).
    Failed(String),
}

impl std::fmt::Display for DmRelayOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answered { wraps } => write!(f, "answered, {wraps} wraps"),
            Self::Refused { message, .. } => write!(f, "refused: {message}"),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// What a DM read found.
#[derive(Clone, Debug, Default)]
pub struct DmRead {
    /// The newest wraps, at most the `keep` asked for, newest first, each once.
    pub wraps: Vec<Wrap>,
    /// Older wraps left out to keep within `keep`.
    pub left_out: usize,
    /// Per relay of the plan, by URL.
    pub relays: BTreeMap<String, DmRelayOutcome>,
}

impl DmRead {
    /// Relays that refused for want of sign-in (NIP-42).
    pub fn need_sign_in(&self) -> impl Iterator<Item = &str> {
        self.relays.iter().filter_map(|(url, o)| match o {
            DmRelayOutcome::Refused {
                refusal: Refusal::SignIn,
                ..
            } => Some(url.as_str()),
            _ => None,
        })
    }

    /// Relays that answered.
    pub fn answered(&self) -> usize {
        self.relays
            .values()
            .filter(|o| matches!(o, DmRelayOutcome::Answered { .. }))
            .count()
    }
}

/// Reads a DM route plan once: each relay until its EOSE or failure (the client's timeouts;
/// its signer signs in where a relay asks), the newest `keep` wraps kept. Each relay sends at
/// most its filter's `limit` (else the route feed's cap), so what is held is bounded too.
pub async fn read_wraps(plan: &RoutePlan, client: &Client, keep: usize) -> DmRead {
    let keep = keep.max(1);
    let once = client.with_config(RuntimeConfig {
        once: true,
        ..client.config().clone()
    });
    let (feed, mut events) = start_route(plan, &once);
    let mut read = DmRead::default();
    let mut wraps: Vec<Wrap> = Vec::new();
    while let Some(event) = events.recv().await {
        match event {
            RouteEvent::Note { event, relay } => {
                if event.kind != Kind::GiftWrap {
                    continue;
                }
                wraps.push(Wrap {
                    event: *event,
                    relay,
                });
                // Held at most twice `keep` between cuts.
                if wraps.len() >= keep.saturating_mul(2) {
                    read.left_out += newest(&mut wraps, keep);
                }
            }
            RouteEvent::Eose { relay, events } => {
                read.relays
                    .insert(relay, DmRelayOutcome::Answered { wraps: events });
            }
            RouteEvent::Failed {
                relay,
                reason,
                refusal,
            } => {
                read.relays.insert(relay, failure(reason, refusal));
            }
        }
    }
    feed.wait().await;
    read.left_out += newest(&mut wraps, keep);
    for url in plan.urls() {
        read.relays
            .entry(url.to_string())
            .or_insert_with(|| DmRelayOutcome::Failed("no answer".into()));
    }
    read.wraps = wraps;
    read
}

/// Keeps the newest `keep` wraps, newest first; how many were dropped.
fn newest(wraps: &mut Vec<Wrap>, keep: usize) -> usize {
    wraps.sort_by(|a, b| {
        b.event
            .created_at
            .cmp(&a.event.created_at)
            .then(a.event.id.cmp(&b.event.id))
    });
    let dropped = wraps.len().saturating_sub(keep);
    wraps.truncate(keep);
    dropped
}

/// A route feed's failure as an outcome: a refusal (`CLOSED`), or anything else.
fn failure(reason: String, refusal: Option<Refusal>) -> DmRelayOutcome {
    match refusal {
        Some(refusal) => DmRelayOutcome::Refused {
            refusal,
            message: reason
                .strip_prefix("closed:")
                .unwrap_or(&reason)
                .trim_start()
                .to_string(),
        },
        None => DmRelayOutcome::Failed(reason),
    }
}

/// A direct message: the rumor a gift wrap carried, with who sealed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectMessage {
    /// The wrap it came in.
    pub wrap: EventId,
    /// The rumor's id, computed from what it holds (the id it claims is not trusted): one
    /// message delivered in several wraps, or sealed again, has one id, so it is shown once.
    pub rumor: EventId,
    /// The sender: the seal's signer, whom the rumor's author must match.
    pub sender: PublicKey,
    /// The rumor's kind: 14 for a chat message, 15 for a file (NIP-17); others are shown as
    /// they are.
    pub kind: Kind,
    /// When the sender wrote it (the rumor's time; the wrap's is backdated).
    pub created_at: Timestamp,
    /// The text (not escaped).
    pub content: String,
    /// The rumor's tags (recipients, subject, replies).
    pub tags: Vec<Vec<String>>,
}

/// Why a gift wrap did not open.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnwrapError {
    /// Not a kind:1059 event.
    #[error("not a gift wrap (kind {0})")]
    NotAWrap(u16),
    /// The wrap does not tag the key's public key: it is someone else's.
    #[error("addressed to someone else")]
    NotForKey,
    /// Decryption or a signature failed, or the seal or rumor is malformed (not escaped).
    #[error("{0}")]
    Broken(String),
    /// The signer did not answer in time: every other wrap would wait as long.
    #[error("{0}")]
    Signer(SignerError),
}

/// A decryption's failure: a signer that timed out is the signer's, anything else the wrap's.
fn opened(result: Result<String, SignerError>) -> Result<String, UnwrapError> {
    result.map_err(|e| match e {
        SignerError::TimedOut { .. } => UnwrapError::Signer(e),
        other => UnwrapError::Broken(other.to_string()),
    })
}

/// Opens a gift wrap with the recipient's `signer` (two NIP-44 decryptions): checks the wrap's signature, decrypts the
/// seal, checks its signature and that it is a seal (kind 13, no tags: NIP-59), decrypts the
/// rumor and checks its author is the seal's signer. A signed event of another kind inside a
/// wrap is not a seal: it would show whatever its signer once published as a message to the
/// reader.
pub async fn unwrap_dm(signer: &Signer, wrap: &Event) -> Result<DirectMessage, UnwrapError> {
    let broken = |e: &dyn std::fmt::Display| UnwrapError::Broken(e.to_string());
    if wrap.kind != Kind::GiftWrap {
        return Err(UnwrapError::NotAWrap(wrap.kind.as_u16()));
    }
    let me = signer.public_key();
    if !wrap.tags.public_keys().any(|pk| pk == me) {
        return Err(UnwrapError::NotForKey);
    }
    wrap.verify().map_err(|e| broken(&e))?;
    let seal = opened(signer.nip44_decrypt(&wrap.pubkey, &wrap.content).await)?;
    let seal = Event::from_json(seal).map_err(|e| broken(&e))?;
    seal.verify().map_err(|e| broken(&e))?;
    if seal.kind != Kind::Seal {
        return Err(UnwrapError::Broken(format!(
            "the seal is of kind {}, not 13",
            seal.kind.as_u16()
        )));
    }
    if !seal.tags.is_empty() {
        return Err(UnwrapError::Broken(
            "the seal has tags (a seal has none)".into(),
        ));
    }
    let rumor = opened(signer.nip44_decrypt(&seal.pubkey, &seal.content).await)?;
    let rumor = UnsignedEvent::from_json(rumor).map_err(|e| broken(&e))?;
    if rumor.pubkey != seal.pubkey {
        return Err(UnwrapError::Broken(
            "the message's author is not the seal's signer".into(),
        ));
    }
    Ok(DirectMessage {
        wrap: wrap.id,
        rumor: rumor.compute_id(),
        sender: seal.pubkey,
        kind: rumor.kind,
        created_at: rumor.created_at,
        content: rumor.content,
        tags: rumor.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
    })
}

/// Most recipients of one message ([`wrap_dm`]): each costs a wrap, a lookup and a publish.
pub const MAX_DM_RECIPIENTS: usize = 32;

/// Longest message text [`wrap_dm`] seals, in bytes: with its tags sealed and wrapped again it
/// stays well within NIP-44's 65,535-byte plaintext.
pub const MAX_DM_MESSAGE_BYTES: usize = 16 * 1024;

/// A chat message ready to send: one gift wrap per recipient, and one for the sender's own
/// inbox, all carrying the same rumor.
#[derive(Clone, Debug)]
pub struct OutgoingDm {
    /// The rumor's id (the message's id, the same in every wrap).
    pub rumor: EventId,
    /// `(recipient, wrap)`: each recipient in the order given (repeats once), then the sender
    /// (unless the sender is a recipient).
    pub wraps: Vec<(PublicKey, Event)>,
}

/// Why a message was not wrapped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WrapError {
    /// No recipient.
    #[error("no recipient")]
    NoRecipient,
    /// More than [`MAX_DM_RECIPIENTS`].
    #[error("{0} recipients; at most {MAX_DM_RECIPIENTS}")]
    TooManyRecipients(usize),
    /// Empty text.
    #[error("the message is empty")]
    Empty,
    /// Longer than [`MAX_DM_MESSAGE_BYTES`].
    #[error("the message is {0} bytes; at most {MAX_DM_MESSAGE_BYTES}")]
    TooLong(usize),
    /// Sealing or wrapping failed (not escaped).
    #[error("{0}")]
    Crypto(String),
}

/// A NIP-17 chat message from `sender` to `recipients`: a kind:14 rumor (unsigned, one `p` tag
/// per recipient), sealed for each recipient (kind:13, NIP-44, signed by the sender) and gift
/// wrapped (kind:1059, signed by a fresh key, `created_at` set back by up to two days, as NIP-59
/// asks), and the same for the sender, whose own inbox keeps the sent message.
pub async fn wrap_dm(
    sender: &Signer,
    recipients: &[PublicKey],
    text: &str,
) -> Result<OutgoingDm, WrapError> {
    use nostr::event::{EventBuilder, FinalizeEventAsync, FinalizeUnsignedEvent, Tag};
    use nostr::nips::nip59::GiftWrapBuilder;
    let mut people: Vec<PublicKey> = Vec::with_capacity(recipients.len().min(MAX_DM_RECIPIENTS));
    for pk in recipients {
        if !people.contains(pk) {
            if people.len() == MAX_DM_RECIPIENTS {
                return Err(WrapError::TooManyRecipients(recipients.len()));
            }
            people.push(*pk);
        }
    }
    if people.is_empty() {
        return Err(WrapError::NoRecipient);
    }
    if text.is_empty() {
        return Err(WrapError::Empty);
    }
    if text.len() > MAX_DM_MESSAGE_BYTES {
        return Err(WrapError::TooLong(text.len()));
    }
    let me = sender.public_key();
    let mut rumor = EventBuilder::new(Kind::PrivateDirectMessage, text)
        .tags(people.iter().map(|pk| Tag::public_key(*pk)))
        .finalize_unsigned(me);
    rumor.ensure_id();
    let id = rumor.id.unwrap_or_else(|| rumor.compute_id());
    let mut to = people;
    if !to.contains(&me) {
        to.push(me);
    }
    let mut wraps = Vec::with_capacity(to.len());
    for pk in to {
        let wrap = GiftWrapBuilder::new(pk, rumor.clone())
            .finalize_async(sender)
            .await
            .map_err(|e| WrapError::Crypto(e.to_string()))?;
        wraps.push((pk, wrap));
    }
    Ok(OutgoingDm { rumor: id, wraps })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, FinalizeUnsignedEvent, Tag};
    use nostr::key::Keys;
    use nostr::nips::nip59::GiftWrapBuilder;
    use nostr_outbox_fleet::sealed_as;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Opens `wrap` with `keys` as the signer.
    fn open(keys: &Keys, wrap: &Event) -> Result<DirectMessage, UnwrapError> {
        block_on(unwrap_dm(&Signer::from_keys(keys.clone()), wrap))
    }

    /// Wraps `text` from `keys` as the signer.
    fn send(keys: &Keys, to: &[PublicKey], text: &str) -> Result<OutgoingDm, WrapError> {
        block_on(wrap_dm(&Signer::from_keys(keys.clone()), to, text))
    }

    fn chat(from: &Keys, to: PublicKey, text: &str) -> nostr::event::UnsignedEvent {
        EventBuilder::new(Kind::PrivateDirectMessage, text)
            .tag(Tag::public_key(to))
            .finalize_unsigned(from.public_key())
    }

    #[test]
    fn a_sent_message_opens_for_every_recipient_and_the_sender() {
        let (alice, bob, carol) = (Keys::generate(), Keys::generate(), Keys::generate());
        let to = [bob.public_key(), carol.public_key(), bob.public_key()];
        let dm = send(&alice, &to, "lunch?").unwrap();
        assert_eq!(dm.wraps.len(), 3);
        let now = Timestamp::now().as_secs();
        for ((pk, wrap), keys) in dm.wraps.iter().zip([&bob, &carol, &alice]) {
            assert_eq!(*pk, keys.public_key());
            assert_eq!(wrap.kind, Kind::GiftWrap);
            assert_ne!(
                wrap.pubkey,
                alice.public_key(),
                "a fresh key signs the wrap"
            );
            assert!(wrap.created_at.as_secs() <= now + 1);
            let opened = open(keys, wrap).unwrap();
            assert_eq!(opened.sender, alice.public_key());
            assert_eq!(opened.content, "lunch?");
            assert_eq!(opened.rumor, dm.rumor);
            let tagged: Vec<&str> = opened
                .tags
                .iter()
                .filter(|t| t[0] == "p")
                .map(|t| t[1].as_str())
                .collect();
            assert_eq!(
                tagged,
                [bob.public_key().to_hex(), carol.public_key().to_hex()]
            );
        }
        assert_eq!(send(&alice, &[], "x").unwrap_err(), WrapError::NoRecipient);
        assert_eq!(send(&alice, &to, "").unwrap_err(), WrapError::Empty);
        let long = "x".repeat(MAX_DM_MESSAGE_BYTES + 1);
        assert!(matches!(
            send(&alice, &to, &long),
            Err(WrapError::TooLong(_))
        ));
        let many: Vec<PublicKey> = (0..=MAX_DM_RECIPIENTS)
            .map(|_| Keys::generate().public_key())
            .collect();
        assert!(matches!(
            send(&alice, &many, "x"),
            Err(WrapError::TooManyRecipients(_))
        ));
    }

    #[test]
    fn a_wrap_opens_for_its_recipient_alone() {
        let (alice, bob, eve) = (Keys::generate(), Keys::generate(), Keys::generate());
        let wrap = GiftWrapBuilder::new(bob.public_key(), chat(&alice, bob.public_key(), "hi"))
            .finalize(&alice)
            .unwrap();
        let dm = open(&bob, &wrap).unwrap();
        assert_eq!(dm.sender, alice.public_key());
        assert_eq!(dm.content, "hi");
        assert_eq!(dm.kind, Kind::PrivateDirectMessage);
        assert_eq!(dm.wrap, wrap.id);
        assert_eq!(open(&eve, &wrap), Err(UnwrapError::NotForKey));
    }

    #[test]
    fn a_broken_wrap_is_an_error_not_a_panic() {
        let bob = Keys::generate();
        let note = EventBuilder::new(Kind::TextNote, "x")
            .finalize(&bob)
            .unwrap();
        assert_eq!(open(&bob, &note), Err(UnwrapError::NotAWrap(1)));
        let stranger = Keys::generate();
        for content in ["", "not base64 at all", "AAAA", &"A".repeat(100_000)] {
            let bad = EventBuilder::new(Kind::GiftWrap, content)
                .tag(Tag::public_key(bob.public_key()))
                .finalize(&stranger)
                .unwrap();
            assert!(matches!(open(&bob, &bad), Err(UnwrapError::Broken(_))));
        }
        // A seal whose rumor claims another author is refused.
        let (alice, mallory) = (Keys::generate(), Keys::generate());
        let forged = GiftWrapBuilder::new(
            bob.public_key(),
            chat(&mallory, bob.public_key(), "it's alice"),
        )
        .finalize(&alice)
        .unwrap();
        assert!(matches!(open(&bob, &forged), Err(UnwrapError::Broken(_))));
    }

    #[test]
    fn only_a_seal_of_kind_13_without_tags_opens() {
        let (alice, bob) = (Keys::generate(), Keys::generate());
        let rumor = chat(&alice, bob.public_key(), "hi");
        let good = sealed_as(&alice, bob.public_key(), &rumor, Kind::Seal, vec![]);
        assert_eq!(open(&bob, &good).unwrap().content, "hi");
        let note = sealed_as(&alice, bob.public_key(), &rumor, Kind::TextNote, vec![]);
        let tagged = vec![Tag::public_key(bob.public_key())];
        let with_tags = sealed_as(&alice, bob.public_key(), &rumor, Kind::Seal, tagged);
        for bad in [note, with_tags] {
            assert!(
                matches!(open(&bob, &bad), Err(UnwrapError::Broken(_))),
                "{:?}",
                open(&bob, &bad)
            );
        }
    }

    #[test]
    fn one_message_in_several_wraps_has_one_rumor_id() {
        let (alice, bob) = (Keys::generate(), Keys::generate());
        let rumor = chat(&alice, bob.public_key(), "once");
        let ids: Vec<EventId> = (0..3)
            .map(|_| sealed_as(&alice, bob.public_key(), &rumor, Kind::Seal, vec![]))
            .map(|wrap| open(&bob, &wrap).unwrap().rumor)
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
        let other = sealed_as(
            &alice,
            bob.public_key(),
            &chat(&alice, bob.public_key(), "twice"),
            Kind::Seal,
            vec![],
        );
        assert_ne!(open(&bob, &other).unwrap().rumor, ids[0]);
    }

    #[test]
    fn refusals_are_told_from_failures() {
        assert_eq!(
            failure(
                "closed: auth-required: sign in (no key to sign in with)".into(),
                Some(Refusal::SignIn)
            ),
            DmRelayOutcome::Refused {
                refusal: Refusal::SignIn,
                message: "auth-required: sign in (no key to sign in with)".into()
            }
        );
        assert_eq!(
            failure("no EOSE in time".into(), None),
            DmRelayOutcome::Failed("no EOSE in time".into())
        );
    }
}

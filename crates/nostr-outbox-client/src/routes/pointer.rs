//! A pointer: one event, addressable event or profile, found where it is hinted to be, then
//! where its author writes.
//!
//! A `nevent`, `nprofile` or `naddr` code (NIP-19) and an `e`, `a` or `p` tag carry relay
//! hints: relays the event was seen on. They are asked first (up to the hint budget); the
//! author's write relays, when the author is known, follow (up to the per-author budget).

use nostr::event::{EventId, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::nips::nip01::Coordinate;
use nostr::nips::nip19::{FromBech32, Nip19};

use super::{Candidates, Reason, Route, RouteContext, RouteKind};
use nostr_outbox_core::hints::{Hint, HintSource};
use nostr_outbox_core::keys::{is_on_curve, public_key_from_hex};

/// The longest code [`Pointer::parse`] reads (NIP-19 codes are far shorter; hints make them
/// grow, but not past this).
pub const MAX_POINTER_LEN: usize = 5_000;

/// Why a string is not a pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// Not a hex id, `note`, `nevent`, `npub`, `nprofile` or `naddr`.
    #[error("not an event id, nevent, note, npub, nprofile or naddr")]
    Malformed,
    /// A secret key was given where a pointer was expected (it is not echoed).
    #[error("this is a secret key, not a pointer; it was not used")]
    SecretKey,
    /// Longer than [`MAX_POINTER_LEN`].
    #[error("longer than {MAX_POINTER_LEN} characters")]
    TooLong,
    /// A public key that is not a point on secp256k1.
    #[error("the public key is not a point on secp256k1")]
    NotOnCurve,
}

/// One thing to fetch, with the relays hinted for it (raw; read under the directory's policy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pointer {
    /// An event by id (`note`, `nevent`, `e` tag).
    Event {
        /// The id.
        id: EventId,
        /// Its author, when the code or tag names it.
        author: Option<PublicKey>,
        /// Its kind, when the code names it.
        kind: Option<Kind>,
        /// Relay hints.
        relays: Vec<String>,
    },
    /// A profile (`npub`, `nprofile`, `p` tag): its kind:0 metadata.
    Profile {
        /// The person.
        pubkey: PublicKey,
        /// Relay hints.
        relays: Vec<String>,
    },
    /// An addressable event (`naddr`, `a` tag).
    Address {
        /// Kind, author and `d` identifier.
        coordinate: Coordinate,
        /// Relay hints.
        relays: Vec<String>,
    },
}

impl Pointer {
    /// Reads a hex event id or a NIP-19 code (`note`, `nevent`, `npub`, `nprofile`, `naddr`),
    /// with or without a `nostr:` prefix.
    pub fn parse(raw: &str) -> Result<Self, PointerError> {
        let raw = raw.trim();
        if raw.len() > MAX_POINTER_LEN {
            return Err(PointerError::TooLong);
        }
        let code = raw.strip_prefix("nostr:").unwrap_or(raw);
        if code.len() == 64 {
            if let Ok(id) = EventId::from_hex(code) {
                return Ok(Self::Event {
                    id,
                    author: None,
                    kind: None,
                    relays: Vec::new(),
                });
            }
        }
        let checked = |pk: PublicKey| {
            if is_on_curve(&pk) {
                Ok(pk)
            } else {
                Err(PointerError::NotOnCurve)
            }
        };
        let urls =
            |relays: Vec<nostr::types::RelayUrl>| relays.iter().map(|r| r.to_string()).collect();
        match Nip19::from_bech32(code).map_err(|_| PointerError::Malformed)? {
            Nip19::Secret(_) => Err(PointerError::SecretKey),
            Nip19::EventId(id) => Ok(Self::Event {
                id,
                author: None,
                kind: None,
                relays: Vec::new(),
            }),
            Nip19::Event(e) => Ok(Self::Event {
                id: e.event_id,
                author: e.author.map(checked).transpose()?,
                kind: e.kind,
                relays: urls(e.relays),
            }),
            Nip19::Pubkey(pk) => Ok(Self::Profile {
                pubkey: checked(pk)?,
                relays: Vec::new(),
            }),
            Nip19::Profile(p) => Ok(Self::Profile {
                pubkey: checked(p.public_key)?,
                relays: urls(p.relays),
            }),
            Nip19::Coordinate(c) => {
                checked(c.coordinate.public_key)?;
                Ok(Self::Address {
                    coordinate: c.coordinate,
                    relays: urls(c.relays),
                })
            }
            #[allow(unreachable_patterns)]
            _ => Err(PointerError::Malformed),
        }
    }

    /// Reads an `e` (`["e", id, hint, marker, author]`), `a` (`["a", "kind:pubkey:d", hint]`)
    /// or `p` (`["p", pubkey, hint]`) tag; `None` for other or malformed tags.
    pub fn from_tag(tag: &[String]) -> Option<Self> {
        let hint = || {
            tag.get(2)
                .filter(|h| !h.is_empty())
                .cloned()
                .into_iter()
                .collect::<Vec<_>>()
        };
        match tag.first()?.as_str() {
            "e" => Some(Self::Event {
                id: EventId::from_hex(tag.get(1)?).ok()?,
                author: tag.get(4).and_then(|pk| public_key_from_hex(pk).ok()),
                kind: None,
                relays: hint(),
            }),
            "p" => Some(Self::Profile {
                pubkey: public_key_from_hex(tag.get(1)?).ok()?,
                relays: hint(),
            }),
            "a" => {
                let coordinate = Coordinate::from_kpi_format(tag.get(1)?).ok()?;
                is_on_curve(&coordinate.public_key).then_some(Self::Address {
                    coordinate,
                    relays: hint(),
                })
            }
            _ => None,
        }
    }

    /// The author, when known.
    pub fn author(&self) -> Option<PublicKey> {
        match self {
            Pointer::Event { author, .. } => *author,
            Pointer::Profile { pubkey, .. } => Some(*pubkey),
            Pointer::Address { coordinate, .. } => Some(coordinate.public_key),
        }
    }

    /// The relay hints, raw.
    pub fn hints(&self) -> &[String] {
        match self {
            Pointer::Event { relays, .. }
            | Pointer::Profile { relays, .. }
            | Pointer::Address { relays, .. } => relays,
        }
    }

    /// The relay hints as hints about where the author writes, for a feed's route table
    /// (`RouteTableBuilder::hint`, [`HintSource::Pointer`]): none when the author is unknown.
    /// A client offers those of the pointers it comes across (`nprofile`, `nevent`, and `e` and
    /// `p` tags of the notes it shows); the table keeps the ones about follows, a few each.
    pub fn table_hints(&self) -> Vec<Hint> {
        let Some(author) = self.author() else {
            return Vec::new();
        };
        self.hints()
            .iter()
            .map(|relay| Hint {
                author,
                relay: relay.clone(),
                source: HintSource::Pointer,
            })
            .collect()
    }
}

impl Route for Pointer {
    const KIND: RouteKind = RouteKind::Pointer;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = Candidates::default();
        candidates.push_hints(ctx.directory.policy(), self.hints(), ctx.budget.hints);
        if let Some(author) = self.author() {
            candidates.push(
                Reason::AuthorWrite(author),
                ctx.directory.write_relays(&author).iter().cloned(),
                ctx.budget.per_author,
            );
        }
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        vec![match self {
            Pointer::Event { id, .. } => Filter::new().id(*id),
            Pointer::Profile { pubkey, .. } => Filter::new().author(*pubkey).kind(Kind::Metadata),
            Pointer::Address { coordinate, .. } => {
                let filter = Filter::new()
                    .kind(coordinate.kind)
                    .author(coordinate.public_key);
                // A plain replaceable event (kind 10000–19999) has no `d` tag to match.
                if coordinate.kind.is_addressable() || !coordinate.identifier.is_empty() {
                    filter.identifier(coordinate.identifier.clone())
                } else {
                    filter
                }
            }
        }]
    }
}

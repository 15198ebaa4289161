//! Relay hints: where a follow may write besides its relay list, as a weaker kind of candidate.
//!
//! A follow's kind:10002 list is what it declares; a client also comes across relays it was
//! *told* or *shown* a follow uses:
//!
//! - [`HintSource::ContactList`]: the relay in the reader's own kind:3 `p` tag
//!   (`["p", pubkey, relay, petname]`), written when the reader followed; often stale, often a
//!   popular relay the reader's client used rather than one the follow writes to;
//! - [`HintSource::Pointer`]: a relay hint in a pointer to the follow or one of its notes
//!   (`nprofile`, `nevent`, `e` and `p` tags of notes the reader sees): where someone saw it;
//! - [`HintSource::SeenOn`]: a relay on which the follow's notes actually arrived (the reader's
//!   relays answering for the residual, a relay asked about someone else, a repost). Learned
//!   stats keep this per (follow, relay) pair; [`seen_on_hints`] turns what they saw into hints
//!   for the next plan.
//!
//! A route table keeps hints apart from declared write relays
//! ([`RouteTable::hint_relays`](crate::RouteTable::hint_relays)): a strategy that ignores them
//! plans exactly as without them. One that uses them may ask a follow's hinted relays about it
//! ([`RouteTable::candidates`](crate::RouteTable::candidates)), and the plan invariants accept
//! that ([`check_plan`](crate::check_plan)); the guidance is to prefer declared write relays and
//! turn to hints for follows with no declared list, or whose declared relays failed or keep no
//! history, valuing a hint below a declared relay ([`HintSource::prior`]) until the pair is
//! learned. Probes consider hinted relays for the follows hinted there ([`crate::probe`]).
//!
//! Every source is bounded: per follow ([`HintSource::per_author_cap`]) and in all
//! ([`MAX_HINTS_PER_SOURCE`]); every hint offered is counted ([`HintCounts`]) and its URL goes
//! through the table's [`UrlPolicy`](crate::UrlPolicy) like a list entry.

use std::collections::BTreeMap;
use std::fmt;

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;
use serde::{Deserialize, Serialize};

use crate::keys::public_key_from_hex;
use crate::stats::DeliveryStats;
use crate::url_policy::DropReason;

/// Most kind:3 hints kept per follow (a contact list names a follow once; a repeat may name a
/// second relay).
pub const MAX_CONTACT_HINTS_PER_AUTHOR: usize = 2;

/// Most pointer hints kept per follow.
pub const MAX_POINTER_HINTS_PER_AUTHOR: usize = 4;

/// Most seen-on hints kept per follow.
pub const MAX_SEEN_ON_HINTS_PER_AUTHOR: usize = 4;

/// Most hints of one source a route-table builder holds, for every author together; later
/// ones are counted and dropped ([`HintCounts::over_source_cap`]).
pub const MAX_HINTS_PER_SOURCE: usize = 100_000;

/// Where a relay hint came from, weakest first (the order decides which source a relay hinted
/// twice for one follow is kept under).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HintSource {
    /// The relay of the follow's `p` tag in the reader's kind:3 contact list.
    ContactList,
    /// A relay hint in a pointer to the follow or to one of its notes (`nprofile`, `nevent`,
    /// `e` and `p` tags).
    Pointer,
    /// A relay on which the follow's notes actually arrived.
    SeenOn,
}

impl HintSource {
    /// Every source, weakest first.
    pub const ALL: [HintSource; 3] = [
        HintSource::ContactList,
        HintSource::Pointer,
        HintSource::SeenOn,
    ];

    /// The snake_case name (as in world files).
    pub fn name(self) -> &'static str {
        match self {
            HintSource::ContactList => "contact_list",
            HintSource::Pointer => "pointer",
            HintSource::SeenOn => "seen_on",
        }
    }

    /// What a planner may believe, before anything is learned about the pair, of the chance
    /// that a relay hinted this way holds the follow's notes, where a declared write relay
    /// counts 1: an assumption, not a measurement. kind:3 hints are often stale or name a
    /// popular relay; a pointer shows one note was there; notes seen arriving were there.
    pub fn prior(self) -> f64 {
        match self {
            HintSource::ContactList => 0.25,
            HintSource::Pointer => 0.5,
            HintSource::SeenOn => 0.75,
        }
    }

    /// Most hints of this source kept per follow.
    pub fn per_author_cap(self) -> usize {
        match self {
            HintSource::ContactList => MAX_CONTACT_HINTS_PER_AUTHOR,
            HintSource::Pointer => MAX_POINTER_HINTS_PER_AUTHOR,
            HintSource::SeenOn => MAX_SEEN_ON_HINTS_PER_AUTHOR,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for HintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for HintSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HintSource::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| format!("unknown hint source {s:?} (contact_list, pointer, seen_on)"))
    }
}

/// One relay hint: `author` may write to `relay` (raw, read under the table's URL policy).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hint {
    /// The person hinted.
    pub author: PublicKey,
    /// The relay, as written.
    pub relay: String,
    /// Where the hint came from.
    pub source: HintSource,
}

/// What became of the hints of one source offered to a route table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HintCounts {
    /// Hints offered.
    pub offered: u64,
    /// Hints the table keeps.
    pub kept: u64,
    /// The relay is already one of the follow's declared write relays.
    pub declared: u64,
    /// The follow was hinted that relay already (by this source or a stronger one).
    pub duplicate: u64,
    /// The follow had [`HintSource::per_author_cap`] hints of this source already.
    pub over_author_cap: u64,
    /// The builder held [`MAX_HINTS_PER_SOURCE`] hints of this source already.
    pub over_source_cap: u64,
    /// The hinted person is not a follow when the table is built.
    pub not_followed: u64,
    /// URLs the policy refused, by reason.
    pub refused: BTreeMap<DropReason, u64>,
}

/// The relay hints of a reader's kind:3 contact list: one [`HintSource::ContactList`] hint per
/// `p` tag whose key is a valid public key and whose third entry is not empty, in tag order, at
/// most [`MAX_HINTS_PER_SOURCE`]; empty for any other kind. URLs are kept raw (a route table
/// reads them under its policy).
pub fn contact_list_hints(event: &Event) -> Vec<Hint> {
    if event.kind != Kind::ContactList {
        return Vec::new();
    }
    event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .filter(|t| t.first().map(String::as_str) == Some("p"))
        .filter_map(|t| {
            let relay = t.get(2).map(|r| r.trim()).filter(|r| !r.is_empty())?;
            let author = public_key_from_hex(t.get(1)?).ok()?;
            Some(Hint {
                author,
                relay: relay.to_string(),
                source: HintSource::ContactList,
            })
        })
        .take(MAX_HINTS_PER_SOURCE)
        .collect()
}

/// Below this many summed shares, a pair's relay is not taken to have shown the author's notes
/// (a share is what the relay returned of the author's notes in one round, see
/// [`PairStats`](crate::PairStats)).
pub const SEEN_ON_MIN_HITS: f64 = 0.1;

/// The relays on which learned stats saw each author's notes arrive, as
/// [`HintSource::SeenOn`] hints: per author, its pairs with at least [`SEEN_ON_MIN_HITS`]
/// hits, most hits first (ties by URL). Pairs of declared write relays are among them (a route
/// table counts them as [`HintCounts::declared`]), so each author offers at most
/// `max_declared + `[`MAX_SEEN_ON_HINTS_PER_AUTHOR`]; at most [`MAX_HINTS_PER_SOURCE`] in all,
/// authors in key order.
pub fn seen_on_hints(stats: &DeliveryStats, max_declared: usize) -> Vec<Hint> {
    let per_author = max_declared.saturating_add(MAX_SEEN_ON_HINTS_PER_AUTHOR);
    let mut authors: Vec<(&PublicKey, &crate::AuthorStats)> = stats.authors().collect();
    authors.sort_unstable_by_key(|(pk, _)| **pk);
    let mut out = Vec::new();
    let mut pairs: Vec<(&str, f64)> = Vec::new();
    for (author, a) in authors {
        pairs.clear();
        pairs.extend(
            a.relays
                .iter()
                .filter(|(_, p)| p.hits.is_finite() && p.hits >= SEEN_ON_MIN_HITS)
                .map(|(url, p)| (url, p.hits)),
        );
        pairs.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(y.0)));
        for &(url, _) in pairs.iter().take(per_author) {
            if out.len() == MAX_HINTS_PER_SOURCE {
                return out;
            }
            out.push(Hint {
                author: *author,
                relay: url.to_string(),
                source: HintSource::SeenOn,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{AuthorRound, RelayRound, RoundReport};
    use nostr::event::{EventBuilder, FinalizeEvent, Tag};
    use nostr::key::Keys;

    #[test]
    fn a_contact_list_gives_one_hint_per_p_tag_with_a_relay() {
        let (a, b, c) = (Keys::generate(), Keys::generate(), Keys::generate());
        let tag = |t: &[&str]| Tag::parse(t.iter().copied()).unwrap();
        let event = EventBuilder::new(Kind::ContactList, "")
            .tags([
                tag(&["p", &a.public_key().to_hex(), "wss://a.example", "alice"]),
                tag(&["p", &b.public_key().to_hex(), ""]),
                tag(&["p", &c.public_key().to_hex()]),
                tag(&["p", "not a key", "wss://x.example"]),
                tag(&["e", &a.public_key().to_hex(), "wss://e.example"]),
                tag(&["p", &c.public_key().to_hex(), " wss://c.example "]),
            ])
            .finalize(&Keys::generate())
            .unwrap();
        let hints = contact_list_hints(&event);
        assert_eq!(
            hints,
            [
                Hint {
                    author: a.public_key(),
                    relay: "wss://a.example".into(),
                    source: HintSource::ContactList
                },
                Hint {
                    author: c.public_key(),
                    relay: "wss://c.example".into(),
                    source: HintSource::ContactList
                }
            ]
        );
        let note = EventBuilder::new(Kind::TextNote, "")
            .tag(tag(&["p", &a.public_key().to_hex(), "wss://a.example"]))
            .finalize(&Keys::generate())
            .unwrap();
        assert!(contact_list_hints(&note).is_empty());
    }

    #[test]
    fn seen_on_hints_are_the_relays_that_returned_an_authors_notes() {
        let (a, b) = (Keys::generate().public_key(), Keys::generate().public_key());
        let round = |url: &str, events: u32| {
            RelayRound::new(
                url,
                true,
                vec![AuthorRound::counted(a, events), AuthorRound::counted(b, 0)],
            )
        };
        let mut stats = DeliveryStats::new();
        stats.record_round(
            &RoundReport {
                relays: vec![
                    round("wss://most.example", 10),
                    round("wss://some.example", 4),
                    round("wss://none.example", 0),
                ],
            },
            100,
        );
        let hints = seen_on_hints(&stats, 0);
        let urls: Vec<&str> = hints.iter().map(|h| h.relay.as_str()).collect();
        assert_eq!(urls, ["wss://most.example", "wss://some.example"]);
        assert!(hints
            .iter()
            .all(|h| h.author == a && h.source == HintSource::SeenOn));
        // Each author offers at most its declared relays' worth and the cap beyond them.
        let mut many = DeliveryStats::new();
        let relays: Vec<RelayRound> = (0..10)
            .map(|i| round(&format!("wss://r{i}.example"), 5))
            .collect();
        many.record_round(&RoundReport { relays }, 100);
        assert_eq!(
            seen_on_hints(&many, 2).len(),
            2 + MAX_SEEN_ON_HINTS_PER_AUTHOR
        );
    }

    #[test]
    fn sources_round_trip_by_name_weakest_first() {
        for s in HintSource::ALL {
            assert_eq!(s.name().parse::<HintSource>(), Ok(s));
            assert!(s.prior() > 0.0 && s.prior() < 1.0);
        }
        assert!(HintSource::ContactList < HintSource::SeenOn);
        assert!("rumour".parse::<HintSource>().is_err());
    }
}

//! Set reconciliation (NIP-77): what a relay holds that we lack, found by trading fingerprints
//! of the events both sides have instead of the events themselves.
//!
//! The events kept from the last run (relay lists, say) go into a negentropy store; one
//! exchange (`crate::connection::exchange`, `NEG-OPEN` / `NEG-MSG`) per relay narrows down which ids the
//! relay holds that are not kept, and only those are fetched (a `REQ` by ids, on the same link).
//! An unchanged world moves a few hundred bytes per relay where a lookup moves every event
//! again. A relay that does not speak NIP-77 (refuses, answers `NEG-ERR`, stays silent) is
//! asked with a plain [`lookup`] instead, and the outcome says so; whether to try at all, and
//! how long to wait, is the one rule of [`crate::connection::extensions`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use negentropy::{Id, Negentropy, NegentropyStorageVector};
use nostr::event::{Event, EventId, Kind, Tag, Tags};
use nostr::filter::{Filter, MatchEventOptions};
use nostr::message::SubscriptionId;
use nostr::types::Timestamp;
use nostr_outbox_core::RawRelayList;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::asks::lookup::{lookup, LookupOutcome};
use crate::client::Client;
use crate::connection::exchange::{Answer, Ask, Ended, Exchange};
use crate::connection::extensions::{Extension, Outcome, Verdict};
use crate::connection::sockets::Role;

/// Kept events put into one reconciliation; more are left out (and then fetched again if the
/// relay has them), so memory stays bounded.
pub const MAX_SYNC_ITEMS: usize = 100_000;

/// Ids fetched from one relay after reconciling; the rest are not asked.
pub const MAX_SYNC_FETCH: usize = 20_000;

/// Messages each way in one reconciliation before it is given up as not converging.
pub const MAX_SYNC_ROUNDS: usize = 64;

/// Largest negentropy message we send, in bytes (the relay splits its answer to fit too).
const FRAME_LIMIT: u64 = 60_000;

/// Ids asked per `REQ` when fetching what reconciliation found missing.
pub(crate) const IDS_PER_REQ: usize = 500;

/// One kept event as reconciliation sees it: its `created_at` and id.
pub(crate) type Item = (u64, [u8; 32]);

/// The id a kept relay list had as an event, assuming the empty content NIP-65 lists carry
/// (the tags are kept raw, in order). A list whose event had content gets another id: the
/// relay then reports it missing and it is fetched again, which costs bytes, never a list.
pub(crate) fn list_item(list: &RawRelayList) -> Option<Item> {
    let tags = list
        .tags
        .iter()
        .map(|t| Tag::parse(t.iter().map(String::as_str)))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let id = EventId::compute(
        &list.author,
        &Timestamp::from(list.created_at),
        &Kind::RelayList,
        &Tags::from_list(tags),
        "",
    );
    Some((list.created_at, id.to_bytes()))
}

/// What one relay did with a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Reconciled in `rounds` messages each way; `missing` events it held were not kept and
    /// were fetched.
    Reconciled {
        /// Events fetched.
        missing: usize,
        /// Negentropy messages received.
        rounds: usize,
    },
    /// Reconciliation did not work (why, not escaped); the relay was asked with a lookup.
    FellBack {
        /// Why reconciliation did not work.
        why: String,
        /// What the lookup did.
        lookup: LookupOutcome,
    },
}

/// What a sync found.
#[derive(Clone, Debug, Default)]
pub struct Synced {
    /// Events the relays hold that were not kept (from a fallback lookup: every event it
    /// returned), verified and matching the filter, de-duplicated, newest first.
    pub fetched: Vec<Event>,
    /// Per relay asked, by URL.
    pub relays: BTreeMap<String, SyncOutcome>,
}

impl Synced {
    /// Relays that reconciled.
    pub fn reconciled(&self) -> usize {
        self.relays
            .values()
            .filter(|o| matches!(o, SyncOutcome::Reconciled { .. }))
            .count()
    }
}

/// Reconciles `kept` with each relay in `relays` (canonical URLs) over the events matching
/// `filter`, and fetches what they hold that is not kept. See the [module docs](self).
pub async fn sync(relays: &[String], filter: &Filter, kept: &[Event], client: &Client) -> Synced {
    let kept: Arc<[Item]> = kept
        .iter()
        .filter(|e| filter.match_event(e, MatchEventOptions::new()))
        .take(MAX_SYNC_ITEMS)
        .map(|e| (e.created_at.as_secs(), e.id.to_bytes()))
        .collect();
    let mut tasks = JoinSet::new();
    for (i, url) in relays.iter().enumerate() {
        let (url, filter, kept, client) =
            (url.clone(), filter.clone(), kept.clone(), client.clone());
        tasks.spawn(async move {
            let (events, outcome) = match reconcile(&url, &filter, &kept, &client, i).await {
                Ok((events, rounds)) => {
                    let missing = events.len();
                    (events, SyncOutcome::Reconciled { missing, rounds })
                }
                Err(why) => {
                    tracing::debug!(relay = %url, %why, "no reconciliation; a lookup instead");
                    let found = lookup(std::slice::from_ref(&url), &filter, &client).await;
                    let outcome = found
                        .relays
                        .get(&url)
                        .cloned()
                        .unwrap_or(LookupOutcome::Unanswered("not asked".into()));
                    (
                        found.events,
                        SyncOutcome::FellBack {
                            why,
                            lookup: outcome,
                        },
                    )
                }
            };
            (url, events, outcome)
        });
    }
    let mut synced = Synced::default();
    let mut all: HashMap<EventId, Event> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok((url, events, outcome)) = joined else {
            continue;
        };
        for e in events {
            all.entry(e.id).or_insert(e);
        }
        synced.relays.insert(url, outcome);
    }
    synced.fetched = all.into_values().collect();
    synced
        .fetched
        .sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    synced
}

/// One relay: reconcile, then fetch the ids it holds that are not kept; the events and the
/// negentropy messages received. `Err` says why reconciliation did not work (the caller asks
/// another way).
pub(crate) async fn reconcile(
    url: &str,
    filter: &Filter,
    kept: &[Item],
    client: &Client,
    i: usize,
) -> Result<(Vec<Event>, usize), String> {
    let cfg = client.config();
    let mut storage = NegentropyStorageVector::with_capacity(kept.len());
    for (at, id) in kept {
        storage
            .insert(*at, Id::from_byte_array(*id))
            .map_err(|e| e.to_string())?;
    }
    storage.seal().map_err(|e| e.to_string())?;
    let mut negentropy = Negentropy::owned(storage, FRAME_LIMIT).map_err(|e| e.to_string())?;
    let initial = negentropy.initiate().map_err(|e| e.to_string())?;
    let wait = match client.verdict(url, Extension::Reconcile).await {
        Verdict::Ask(wait) => wait,
        Verdict::Skip(why) => return Err(format!("not asked: {why}")),
    };
    let dialled = Instant::now();
    let mut link = client
        .sockets()
        .link(url, Role::Lookup, cfg.dial())
        .await
        .map_err(|e| e.to_string())?;
    let wait = wait.bound(cfg.eose_timeout, dialled.elapsed());
    let seed = crate::asks::route_feed::relay_seed(cfg.seed, i);
    let ask = Ask::Sync {
        sub: SubscriptionId::new("outbox-sync"),
        filter: filter.clone(),
        initial,
    };
    let mut need: Vec<Id> = Vec::new();
    let mut rounds = 0usize;
    let reconciled = match Exchange::send(&mut link, ask, client, wait, seed).await {
        Err(ended) => Err(ended.to_string()),
        Ok(mut exchange) => {
            let result = loop {
                match exchange.next().await {
                    Answer::Reconcile(message) => {
                        if rounds == 0 {
                            client
                                .extensions()
                                .heard(url, Extension::Reconcile, Outcome::Answered);
                            exchange.rewait(cfg.eose_timeout);
                        }
                        rounds += 1;
                        if rounds > MAX_SYNC_ROUNDS {
                            break Err(format!("no agreement after {MAX_SYNC_ROUNDS} rounds"));
                        }
                        let mut have = Vec::new();
                        match negentropy.reconcile_with_ids(&message, &mut have, &mut need) {
                            Ok(None) => break Ok(()),
                            Ok(Some(next)) => {
                                if need.len() > MAX_SYNC_FETCH * 2 {
                                    break Err("too many missing events to fetch by id".into());
                                }
                                if let Err(ended) = exchange.reply(&next).await {
                                    break Err(ended.to_string());
                                }
                            }
                            Err(e) => break Err(format!("bad negentropy message: {e}")),
                        }
                    }
                    Answer::Ended(ended) => {
                        if rounds == 0 {
                            if let Some(outcome) = ended.outcome() {
                                client
                                    .extensions()
                                    .heard(url, Extension::Reconcile, outcome);
                            }
                        }
                        break Err(ended.to_string());
                    }
                    Answer::Event(_) | Answer::Eose | Answer::Ok { .. } | Answer::Count(_) => {}
                }
            };
            exchange.close().await;
            result
        }
    };
    if let Err(why) = reconciled {
        let _ = tokio::time::timeout(Duration::from_millis(200), link.close()).await;
        return Err(why);
    }
    need.truncate(MAX_SYNC_FETCH);
    let mut events = Vec::new();
    for (n, ids) in need.chunks(IDS_PER_REQ).enumerate() {
        let ids = ids
            .iter()
            .filter_map(|id| EventId::from_slice(id.as_bytes()).ok());
        // By id alone, so the REQ stays small; what comes must still match the filter.
        let asked = Filter::new().ids(ids).limit(IDS_PER_REQ);
        let ask = Ask::Req {
            sub: SubscriptionId::new(format!("outbox-sync-{n}")),
            filters: vec![asked],
            cap: IDS_PER_REQ,
        };
        let seed = seed.wrapping_add(n as u64 + 1);
        let mut exchange =
            match Exchange::send(&mut link, ask, client, cfg.eose_timeout, seed).await {
                Ok(exchange) => exchange,
                Err(ended) => return Err(fetch_failed(ended)),
            };
        loop {
            match exchange.next().await {
                Answer::Event(event) if filter.match_event(&event, MatchEventOptions::new()) => {
                    events.push(event)
                }
                Answer::Eose => break,
                Answer::Ended(ended) => return Err(fetch_failed(ended)),
                Answer::Event(_) | Answer::Ok { .. } | Answer::Count(_) | Answer::Reconcile(_) => {}
            }
        }
        exchange.close().await;
    }
    let _ = tokio::time::timeout(Duration::from_millis(200), link.close()).await;
    Ok((events, rounds))
}

fn fetch_failed(ended: Ended) -> String {
    format!("reconciled, but fetching what was missing failed: {ended}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent};
    use nostr::key::Keys;

    #[test]
    fn a_kept_list_has_the_id_of_the_event_it_came_from() {
        let keys = Keys::generate();
        let tags = [
            Tag::parse(["r", "wss://a.example", "write"]).unwrap(),
            Tag::parse(["r", "wss://b.example"]).unwrap(),
            Tag::parse(["alt", "relay list"]).unwrap(),
        ];
        let event = EventBuilder::new(Kind::RelayList, "")
            .tags(tags)
            .finalize(&keys)
            .unwrap();
        let list = RawRelayList::try_from(&event).unwrap();
        assert_eq!(
            list_item(&list),
            Some((event.created_at.as_secs(), event.id.to_bytes()))
        );
    }
}

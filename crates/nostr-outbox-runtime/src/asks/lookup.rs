//! One-shot lookups: ask a few relays one filter, collect until EOSE or timeout.
//!
//! Used before a feed starts, e.g. to fetch the reader's own kind:3 follow list. Each relay gets
//! its own task and its own timeouts, so one slow relay costs at most the timeouts; once one
//! relay answered, the others get [`RuntimeConfig::lookup_grace`](crate::RuntimeConfig::lookup_grace) and the lookup ends with what
//! came, so a relay that accepts a socket and never answers costs the grace. A long
//! author list is asked in chunks that fit relays' message limits (the rules of
//! `nostr_outbox_client::paging`), one after the other on one socket; each chunk reads at most its
//! `limit` events, so what a relay can make us read is bounded.
//!
//! Each chunk is one exchange (`crate::connection::exchange`, the runtime's one conversation with a relay):
//! `auth-required:` is signed in to once when keys are given, `rate-limited:` is waited out
//! within the chunk's EOSE timeout and asked again, and any other refusal ends that relay's
//! part. [`lookup`] says what each relay did ([`LookupOutcome`]), so a caller that found
//! nothing can say why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::message::SubscriptionId;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

use nostr_outbox_client::{paging, paging::RelayLimits};

use crate::client::Client;
use crate::connection::exchange::{Answer, Ask, Ended, Exchange};
use crate::connection::refusal::Refusal;

/// What one relay did with a lookup ([`lookup`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LookupOutcome {
    /// It answered every chunk (EOSE).
    Answered,
    /// It refused (CLOSED) and signing in or waiting did not help: what the refusal says, and
    /// the relay's text with how sign-in went (not escaped).
    Refused {
        /// The refusal's prefix, read by [`Refusal::of`].
        refusal: Refusal,
        /// The relay's text, with what was tried (`… (no key to sign in with)`).
        message: String,
    },
    /// The socket could not be opened (not escaped).
    Unreachable(String),
    /// No answer in time, or the socket ended before it (not escaped).
    Unanswered(String),
    /// Not asked: what is known says the relay does not speak what the ask needs (why; not
    /// escaped).
    Unsupported(String),
    /// Still answering when the lookup ended, another relay having answered
    /// ([`RuntimeConfig::lookup_grace`](crate::RuntimeConfig::lookup_grace)).
    CutOff,
}

impl std::fmt::Display for LookupOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answered => f.write_str("answered"),
            Self::Refused { message, .. } => write!(f, "relay refused: {message}"),
            Self::Unreachable(why) => write!(f, "could not connect: {why}"),
            Self::Unanswered(why) => write!(f, "no answer: {why}"),
            Self::Unsupported(why) => write!(f, "not asked: {why}"),
            Self::CutOff => f.write_str("cut off after another relay answered"),
        }
    }
}

/// What a lookup found, and what each relay did.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// Verified, matching, de-duplicated events, newest first.
    pub events: Vec<Event>,
    /// Per relay asked, by URL.
    pub relays: BTreeMap<String, LookupOutcome>,
}

/// How many of the relays asked, with what each did, answered every chunk.
pub(crate) fn answered_of(outcomes: &BTreeMap<String, LookupOutcome>) -> usize {
    outcomes
        .values()
        .filter(|o| **o == LookupOutcome::Answered)
        .count()
}

impl Lookup {
    /// Relays that answered every chunk.
    pub fn answered(&self) -> usize {
        answered_of(&self.relays)
    }

    /// Relays that did not answer, with why.
    pub fn unanswered(&self) -> impl Iterator<Item = (&str, &LookupOutcome)> {
        self.relays
            .iter()
            .filter(|(_, o)| **o != LookupOutcome::Answered)
            .map(|(url, o)| (url.as_str(), o))
    }
}

/// Asks every relay in `relays` (canonical URLs) for `filter` and returns the verified, matching,
/// de-duplicated events, newest first. Relays that fail or time out contribute what they sent
/// before. Once a relay answered every chunk, the rest get [`RuntimeConfig::lookup_grace`](crate::RuntimeConfig::lookup_grace).
/// [`lookup`] says, besides, what each relay did.
///
/// Each author chunk asks `limit` events (the filter's, else [`Paging::page_limit`]) and reads
/// no more: lookups are of replaceable events, one per author, so no older pages are asked.
///
/// [`Paging::page_limit`]: nostr_outbox_client::paging::Paging::page_limit
pub async fn fetch_events(relays: &[String], filter: &Filter, client: &Client) -> Vec<Event> {
    lookup(relays, filter, client).await.events
}

/// [`fetch_events`], with what each relay did: answered, refused (and why), unreachable, not
/// answering in time, or cut off by the grace. A relay that refuses `rate-limited:` is asked
/// again after the config's backoff, at most
/// [`MAX_RATE_LIMITED_RESENDS`](crate::connection::refusal::MAX_RATE_LIMITED_RESENDS) times and within
/// its EOSE timeout; one that refuses `auth-required:` is signed in to once when keys are
/// given. Only an answer starts the grace.
pub async fn lookup(relays: &[String], filter: &Filter, client: &Client) -> Lookup {
    let cfg = client.config();
    // Each relay's events come as they are read (at most each chunk's limit), so a relay cut
    // off by the grace keeps what it sent.
    let (found, mut events_rx) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    for (i, url) in relays.iter().enumerate() {
        let url = url.clone();
        let filter = filter.clone();
        let client = client.clone();
        let found = found.clone();
        tasks.spawn(async move {
            let outcome = ask_one(&url, &filter, &client, &found, i).await;
            tracing::debug!(relay = %url, %outcome, "lookup done");
            (url, outcome)
        });
    }
    drop(found);
    let mut outcomes: BTreeMap<String, LookupOutcome> = BTreeMap::new();
    let mut grace_until: Option<Instant> = None;
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                None => break,
                Some(Ok((url, outcome))) => {
                    if outcome == LookupOutcome::Answered && grace_until.is_none() {
                        grace_until = Some(crate::deadline::after(cfg.lookup_grace));
                    }
                    outcomes.insert(url, outcome);
                }
                Some(Err(_)) => {}
            },
            _ = sleep_until(grace_until.unwrap_or_else(Instant::now)), if grace_until.is_some() => {
                tracing::debug!(left = tasks.len(), "lookup grace over; not waiting for the rest");
                tasks.abort_all();
                break;
            }
        }
    }
    drop(tasks);
    for url in relays {
        let missing = if grace_until.is_some() {
            LookupOutcome::CutOff
        } else {
            LookupOutcome::Unanswered("the lookup task failed".into())
        };
        outcomes.entry(url.clone()).or_insert(missing);
    }
    let mut all: HashMap<EventId, Event> = HashMap::new();
    while let Ok(e) = events_rx.try_recv() {
        all.entry(e.id).or_insert(e);
    }
    let mut events: Vec<Event> = all.into_values().collect();
    events.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    Lookup {
        events,
        relays: outcomes,
    }
}

/// Asks one relay (the `i`-th of the lookup), sending what matches to `found`; what it did.
async fn ask_one(
    url: &str,
    filter: &Filter,
    client: &Client,
    found: &mpsc::UnboundedSender<Event>,
    i: usize,
) -> LookupOutcome {
    let cfg = client.config();
    let mut ws = match client
        .sockets()
        .link(url, crate::connection::sockets::Role::Lookup, cfg.dial())
        .await
    {
        Ok(ws) => ws,
        Err(why) => {
            tracing::debug!(relay = %url, error = %why, "lookup failed");
            return LookupOutcome::Unreachable(why.to_string());
        }
    };
    // No document is waited for: a lookup fits the conservative defaults.
    let limits = RelayLimits::default();
    let paging = cfg.limits.paging;
    let limit = filter
        .limit
        .unwrap_or(paging.limit_for(&limits) as usize)
        .max(1);
    let chunks: Vec<Option<BTreeSet<PublicKey>>> = match &filter.authors {
        None => vec![None],
        Some(authors) => {
            let authors: Vec<PublicKey> = authors.iter().copied().collect();
            paging::chunk(&authors, &limits, &paging)
                .into_iter()
                .map(|c| Some(c.into_iter().collect()))
                .collect()
        }
    };
    let mut outcome = LookupOutcome::Answered;
    for (n, authors) in chunks.into_iter().enumerate() {
        let mut asked = filter.clone();
        asked.authors = authors;
        asked.limit = Some(limit);
        let ask = Ask::Req {
            sub: SubscriptionId::new(format!("outbox-lookup-{n}")),
            filters: vec![asked],
            cap: limit,
        };
        let seed = crate::asks::route_feed::relay_seed(cfg.seed, i).wrapping_add(n as u64);
        let mut exchange = match Exchange::send(&mut ws, ask, client, cfg.eose_timeout, seed).await
        {
            Ok(exchange) => exchange,
            Err(ended) => {
                outcome = ended.into();
                break;
            }
        };
        let ended = loop {
            match exchange.next().await {
                // The receiver outlives every task it waits for.
                Answer::Event(event) => {
                    let _ = found.send(event);
                }
                Answer::Eose => break None,
                Answer::Ended(ended) => break Some(ended),
                Answer::Ok { .. } | Answer::Count(_) | Answer::Reconcile(_) => {}
            }
        };
        if let Some(ended) = ended {
            // Refused, timed out or lost: keep what came, ask no more of this relay.
            let ended = LookupOutcome::from(ended);
            tracing::debug!(relay = %url, outcome = %ended, "lookup not answered");
            outcome = ended;
            break;
        }
        exchange.close().await;
    }
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close()).await;
    outcome
}

impl From<Ended> for LookupOutcome {
    fn from(ended: Ended) -> Self {
        match ended {
            Ended::Refused { refusal, message } => LookupOutcome::Refused { refusal, message },
            Ended::Lost(why) | Ended::TimedOut(why) => LookupOutcome::Unanswered(why),
            ended @ Ended::Flooded(_) => LookupOutcome::Unanswered(ended.to_string()),
        }
    }
}

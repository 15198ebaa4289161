//! One-shot lookups: ask a few relays one filter, collect until EOSE or timeout.
//!
//! Used before a feed starts, e.g. to fetch the reader's own kind:3 follow list. Each relay gets
//! its own task and its own timeouts, so one slow relay costs at most the timeouts; once one
//! relay answered, the others get [`RuntimeConfig::lookup_grace`] and the lookup ends with what
//! came, so a relay that accepts a socket and never answers costs the grace. A long
//! author list is asked in chunks that fit relays' message limits (the rules of
//! `outbox_client::paging`), one after the other on one socket; each chunk reads at most its
//! `limit` events, so what a relay can make us read is bounded.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr::filter::{Filter, MatchEventOptions};
use nostr::key::PublicKey;
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use outbox_client::{paging, paging::RelayLimits};

use crate::config::RuntimeConfig;
use crate::signin::{SignIn, Step};

/// Asks every relay in `relays` (canonical URLs) for `filter` and returns the verified, matching,
/// de-duplicated events, newest first. Relays that fail or time out contribute what they sent
/// before. Once a relay answered every chunk, the rest get [`RuntimeConfig::lookup_grace`].
///
/// Each author chunk asks `limit` events (the filter's, else [`Paging::page_limit`]) and reads
/// no more: lookups are of replaceable events, one per author, so no older pages are asked.
///
/// [`Paging::page_limit`]: outbox_client::paging::Paging::page_limit
pub async fn fetch_events(relays: &[String], filter: &Filter, cfg: &RuntimeConfig) -> Vec<Event> {
    crate::tls::install_crypto_provider();
    // Each relay's events come as they are read (at most each chunk's limit), so a relay cut
    // off by the grace keeps what it sent.
    let (found, mut events_rx) = mpsc::unbounded_channel();
    let mut tasks = JoinSet::new();
    for url in relays {
        let url = url.clone();
        let filter = filter.clone();
        let cfg = cfg.clone();
        let found = found.clone();
        tasks.spawn(async move {
            let answered = ask_one(&url, &filter, &cfg, &found).await;
            tracing::debug!(relay = %url, answered, "lookup done");
            answered
        });
    }
    drop(found);
    let mut grace_until: Option<Instant> = None;
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                None => break,
                Some(Ok(true)) if grace_until.is_none() => {
                    grace_until = Some(crate::deadline::after(cfg.lookup_grace));
                }
                Some(_) => {}
            },
            _ = sleep_until(grace_until.unwrap_or_else(Instant::now)), if grace_until.is_some() => {
                tracing::debug!(left = tasks.len(), "lookup grace over; not waiting for the rest");
                tasks.abort_all();
                break;
            }
        }
    }
    drop(tasks);
    let mut all: HashMap<EventId, Event> = HashMap::new();
    while let Ok(e) = events_rx.try_recv() {
        all.entry(e.id).or_insert(e);
    }
    let mut events: Vec<Event> = all.into_values().collect();
    events.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    events
}

/// Asks one relay, sending what matches to `found`; whether every chunk was answered.
async fn ask_one(
    url: &str,
    filter: &Filter,
    cfg: &RuntimeConfig,
    found: &mpsc::UnboundedSender<Event>,
) -> bool {
    let mut ws = match cfg
        .sockets
        .link(url, crate::sockets::Role::Lookup, cfg)
        .await
    {
        Ok(ws) => ws,
        Err(why) => {
            tracing::debug!(relay = %url, error = %why, "lookup failed");
            return false;
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
    let mut answered = true;
    let mut sign_in = SignIn::new(cfg.auth.as_ref(), url);
    for (i, authors) in chunks.into_iter().enumerate() {
        let mut asked = filter.clone();
        asked.authors = authors;
        asked.limit = Some(limit);
        let sub = SubscriptionId::new(format!("outbox-lookup-{i}"));
        let req = ClientMessage::req(sub.clone(), asked.clone());
        if ws.send(Message::text(req.as_json())).await.is_err() {
            answered = false;
            break;
        }
        let mut deadline = crate::deadline::after(cfg.eose_timeout);
        let mut read = 0usize;
        let finished = loop {
            let frame = match timeout_at(deadline, ws.recv()).await {
                Ok(Some(Ok(Message::Text(text)))) => text,
                Ok(Some(Ok(_))) => continue,
                Ok(Some(Err(_)) | None) | Err(_) => break false,
            };
            if frame.len() > cfg.max_message_bytes {
                continue;
            }
            let step = match RelayMessage::from_json(frame.as_str()) {
                Ok(RelayMessage::Event {
                    subscription_id,
                    event,
                }) if *subscription_id == sub => {
                    if read >= limit {
                        // More than asked: the rest of this chunk is not read.
                        continue;
                    }
                    read += 1;
                    let event = event.into_owned();
                    let verified = !cfg.verify_signatures || event.verify().is_ok();
                    if verified && asked.match_event(&event, MatchEventOptions::new()) {
                        // The receiver outlives every task it waits for.
                        let _ = found.send(event);
                    }
                    continue;
                }
                Ok(RelayMessage::EndOfStoredEvents(id)) if *id == sub => break true,
                Ok(RelayMessage::Closed {
                    subscription_id,
                    message,
                }) if *subscription_id == sub => {
                    if !message.starts_with("auth-required:") {
                        break true;
                    }
                    sign_in.refused(&message)
                }
                Ok(RelayMessage::Auth { challenge }) => sign_in.challenge(&challenge),
                Ok(RelayMessage::Ok {
                    event_id,
                    status,
                    message,
                }) => match sign_in.ok(&event_id, status, &message) {
                    Some(step) => step,
                    None => continue,
                },
                _ => continue,
            };
            let resend = match step {
                Step::Wait => continue,
                Step::Send(auth) => auth.as_json(),
                Step::Retry => req.as_json(),
                Step::GiveUp(why) => {
                    tracing::debug!(relay = %url, reason = %why, "lookup refused");
                    break true;
                }
            };
            if ws.send(Message::text(resend)).await.is_err() {
                break false;
            }
            deadline = crate::deadline::after(cfg.eose_timeout);
        };
        if !finished {
            // A timeout or a lost socket: keep what came, ask no more of this relay.
            answered = false;
            break;
        }
        let close = ClientMessage::close(sub);
        if ws.send(Message::text(close.as_json())).await.is_err() {
            answered = false;
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close()).await;
    answered
}

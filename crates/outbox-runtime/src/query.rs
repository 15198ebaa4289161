//! One-shot lookups: ask a few relays one filter, collect until EOSE or timeout.
//!
//! Used before a feed starts, e.g. to fetch the reader's own kind:3 follow list. Each relay gets
//! its own task and its own timeouts, so one slow relay costs at most the timeouts. A long
//! author list is asked in chunks that fit relays' message limits (the rules of
//! `outbox_core::paging`), one after the other on one socket; each chunk reads at most its
//! `limit` events, so what a relay can make us read is bounded.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, EventId};
use nostr::filter::{Filter, MatchEventOptions};
use nostr::key::PublicKey;
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use outbox_core::paging::{self, RelayLimits};

use crate::config::RuntimeConfig;

/// Asks every relay in `relays` (canonical URLs) for `filter` and returns the verified, matching,
/// de-duplicated events, newest first. Relays that fail or time out just contribute nothing.
///
/// Each author chunk asks `limit` events (the filter's, else [`Paging::page_limit`]) and reads
/// no more: lookups are of replaceable events, one per author, so no older pages are asked.
///
/// [`Paging::page_limit`]: outbox_core::paging::Paging::page_limit
pub async fn fetch_events(relays: &[String], filter: &Filter, cfg: &RuntimeConfig) -> Vec<Event> {
    crate::coordinator::install_crypto_provider();
    let mut tasks = JoinSet::new();
    for url in relays {
        let url = url.clone();
        let filter = filter.clone();
        let cfg = cfg.clone();
        tasks.spawn(async move {
            let events = ask_one(&url, &filter, &cfg).await;
            tracing::debug!(relay = %url, events = events.len(), "lookup done");
            events
        });
    }
    let mut all: HashMap<EventId, Event> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        if let Ok(events) = joined {
            for e in events {
                all.entry(e.id).or_insert(e);
            }
        }
    }
    let mut events: Vec<Event> = all.into_values().collect();
    events.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
    events
}

async fn ask_one(url: &str, filter: &Filter, cfg: &RuntimeConfig) -> Vec<Event> {
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(cfg.hard_frame_limit))
        .max_frame_size(Some(cfg.hard_frame_limit));
    let connect =
        tokio_tungstenite::connect_async_tls_with_config(url, Some(ws_config), true, None);
    let mut ws = match tokio::time::timeout(cfg.connect_timeout, connect).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            tracing::debug!(relay = %url, error = %e, "lookup connect failed");
            return Vec::new();
        }
        Err(_) => return Vec::new(),
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
    let mut out = Vec::new();
    for (i, authors) in chunks.into_iter().enumerate() {
        let mut asked = filter.clone();
        asked.authors = authors;
        asked.limit = Some(limit);
        let sub = SubscriptionId::new(format!("outbox-lookup-{i}"));
        let req = ClientMessage::req(sub.clone(), asked.clone());
        if ws.send(Message::text(req.as_json())).await.is_err() {
            break;
        }
        let deadline = Instant::now() + cfg.eose_timeout;
        let mut read = 0usize;
        let finished = loop {
            let frame = match timeout_at(deadline, ws.next()).await {
                Ok(Some(Ok(Message::Text(text)))) => text,
                Ok(Some(Ok(_))) => continue,
                Ok(Some(Err(_)) | None) | Err(_) => break false,
            };
            if frame.len() > cfg.max_message_bytes {
                continue;
            }
            match RelayMessage::from_json(frame.as_str()) {
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
                        out.push(event);
                    }
                }
                Ok(RelayMessage::EndOfStoredEvents(id)) if *id == sub => break true,
                Ok(RelayMessage::Closed {
                    subscription_id, ..
                }) if *subscription_id == sub => break true,
                _ => {}
            }
        };
        if !finished {
            // A timeout or a lost socket: keep what came, ask no more of this relay.
            break;
        }
        let close = ClientMessage::close(sub);
        if ws.send(Message::text(close.as_json())).await.is_err() {
            break;
        }
    }
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(None)).await;
    out
}

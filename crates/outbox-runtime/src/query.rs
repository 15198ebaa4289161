//! One-shot lookups: ask a few relays one filter, collect until EOSE or timeout.
//!
//! Used before a feed starts, e.g. to fetch the reader's own kind:3 follow list. Each relay gets
//! its own task and its own timeouts, so one slow relay costs at most the timeout.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::event::{Event, EventId};
use nostr::filter::{Filter, MatchEventOptions};
use nostr::message::{ClientMessage, RelayMessage, SubscriptionId};
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::config::RuntimeConfig;

/// Asks every relay in `relays` (canonical URLs) for `filter` and returns the verified, matching,
/// de-duplicated events, newest first. Relays that fail or time out just contribute nothing.
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
    let deadline = Instant::now() + cfg.connect_timeout + cfg.eose_timeout;
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
    let sub = SubscriptionId::new("outbox-lookup");
    let req = ClientMessage::req(sub.clone(), filter.clone());
    if ws.send(Message::text(req.as_json())).await.is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    loop {
        let frame = match timeout_at(deadline, ws.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => text,
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(_)) | None) | Err(_) => break,
        };
        if frame.len() > cfg.max_message_bytes {
            continue;
        }
        match RelayMessage::from_json(frame.as_str()) {
            Ok(RelayMessage::Event {
                subscription_id,
                event,
            }) if *subscription_id == sub => {
                let event = event.into_owned();
                let verified = !cfg.verify_signatures || event.verify().is_ok();
                if verified && filter.match_event(&event, MatchEventOptions::new()) {
                    out.push(event);
                }
            }
            Ok(RelayMessage::EndOfStoredEvents(id)) if *id == sub => break,
            Ok(RelayMessage::Closed {
                subscription_id, ..
            }) if *subscription_id == sub => break,
            _ => {}
        }
    }
    let close = ClientMessage::close(sub);
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        let _ = ws.send(Message::text(close.as_json())).await;
        let _ = ws.close(None).await;
    })
    .await;
    out
}

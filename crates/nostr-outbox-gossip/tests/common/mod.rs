//! What the engine's tests build alike: relay lists and nostr-sdk clients of local relays.
// Each test file uses its own part of this.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use nostr::event::Event;
use nostr::key::Keys;
use nostr_gossip::GossipAllowedRelays;
use nostr_outbox_fleet::{now, relay_list};
use nostr_outbox_gossip::OutboxGossip;
use nostr_sdk::prelude::{Client, GossipConfig};

/// A kind:10002 list by `keys` naming `relays` for reading and writing, dated now.
pub fn list(keys: &Keys, relays: &[String]) -> Event {
    let entries: Vec<(&str, Option<&str>)> = relays.iter().map(|r| (r.as_str(), None)).collect();
    relay_list(keys, now(), &entries)
}

/// nostr-sdk's gossip settings for relays on 127.0.0.1 (which it leaves out by default),
/// without background refreshes.
pub fn local_config() -> GossipConfig {
    GossipConfig::default()
        .allowed(GossipAllowedRelays {
            onion: false,
            local: true,
            without_tls: true,
        })
        .no_background_refresh()
}

/// [`local_config`] with short waits for a list sync and a fetch.
pub fn quick_config() -> GossipConfig {
    local_config()
        .sync_initial_timeout(Duration::from_secs(2))
        .sync_idle_timeout(Duration::from_secs(1))
        .fetch_timeout(Duration::from_secs(3))
}

/// A nostr-sdk client routed by `gossip` with `config`, connected to `reader`.
pub async fn client(gossip: Arc<OutboxGossip>, config: GossipConfig, reader: &str) -> Client {
    let client = Client::builder()
        .gossip(gossip)
        .gossip_config(config)
        .build();
    client.add_relay(reader).await.expect("reader relay added");
    client.connect().and_wait(Duration::from_secs(5)).await;
    client
}

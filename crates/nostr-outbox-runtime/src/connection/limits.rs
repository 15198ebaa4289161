//! Knobs for relay limits: how the runtime pages ([`Paging`], shared with the simulator) and how
//! it learns a relay's published limits (NIP-11).

use std::time::Duration;

use nostr_outbox_client::paging::Paging;

/// Paging, subscription and NIP-11 settings of a feed.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitsConfig {
    /// Author chunks, page size and page budget (the rules of `nostr_outbox_client::paging`).
    pub paging: Paging,
    /// Fetching relay information documents.
    pub nip11: Nip11Config,
    /// Pages in flight at once per purpose (feed, relay lists) on one relay.
    pub concurrent_pages: usize,
    /// Open subscriptions per connection assumed for a relay that publishes none. Kept small:
    /// strict relays close the subscriptions over their limit.
    pub default_max_subscriptions: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            paging: Paging::default(),
            nip11: Nip11Config::default(),
            concurrent_pages: 3,
            default_max_subscriptions: 10,
        }
    }
}

impl LimitsConfig {
    /// For tests on loopback relays that serve no HTTP: no NIP-11 requests.
    pub fn fast_for_tests() -> Self {
        Self {
            nip11: Nip11Config {
                enabled: false,
                ..Nip11Config::default()
            },
            ..Self::default()
        }
    }
}

/// How relay information documents (NIP-11) are fetched and cached.
#[derive(Clone, Debug, PartialEq)]
pub struct Nip11Config {
    /// Ask relays for their document at all.
    pub enabled: bool,
    /// Longest a request may take, body included.
    pub timeout: Duration,
    /// Once the WebSocket is open, how much longer the first REQ waits for a document still on
    /// its way (the fetch starts with the connect). Past this the relay is asked with defaults
    /// and the document, when it comes, serves the next connection.
    pub wait: Duration,
    /// How long a fetched document is trusted.
    pub ttl: Duration,
    /// How long a failed fetch is remembered before asking again.
    pub failure_ttl: Duration,
    /// Longest body read; larger documents count as failures.
    pub max_bytes: usize,
}

impl Default for Nip11Config {
    fn default() -> Self {
        Self {
            enabled: true,
            timeout: Duration::from_secs(2),
            wait: Duration::from_millis(500),
            ttl: Duration::from_secs(3600),
            failure_ttl: Duration::from_secs(300),
            max_bytes: 64 * 1024,
        }
    }
}

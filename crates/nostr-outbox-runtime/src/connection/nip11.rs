//! Relay information documents (NIP-11): what a relay publishes about its limits.
//!
//! A document is fetched over HTTP(S) from the relay's own URL (`ws` → `http`, `wss` →
//! `https`) with `Accept: application/nostr+json`, read up to a bound, and parsed leniently:
//! only `limitation.{max_limit, max_filters, max_subscriptions, max_message_length,
//! auth_required, payment_required}` and `supported_nips` (which NIPs it says it serves, e.g.
//! 50 for search) are read, and a field of the wrong type or out of range is ignored. A relay without a document is paged with conservative defaults.
//!
//! Each fetch holds a place of the client's socket budget ([`Sockets`]) for as long as its
//! connection lasts, so documents never take a run past its budget.
//!
//! [`Nip11Cache`] keeps one answer per relay URL for a while (failures for less) and is shared
//! by every slot of a feed. Its map is behind a `std::sync::Mutex` that is a leaf: taken for a
//! lookup or an insert, never across an `.await`, never while another lock is held.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use nostr_outbox_client::paging::RelayLimits;
use serde_json::Value;
use tokio::time::Instant;
use tracing::debug;

use crate::connection::limits::Nip11Config;
use crate::connection::sockets::Sockets;

/// Relays remembered at most; beyond this, expired entries go, then everything.
const MAX_ENTRIES: usize = 4096;

/// Largest `max_limit` believed (a bigger one is treated as unpublished).
const MAX_LIMIT: u64 = 1_000_000;
/// Largest `max_filters` / `max_subscriptions` believed.
const MAX_COUNT: u64 = 100_000;
/// Shortest `max_message_length` believed: no REQ with one author fits in less.
const MIN_MESSAGE: u64 = 512;
/// Largest `max_message_length` believed.
const MAX_MESSAGE: u64 = 1 << 30;
/// Entries of `supported_nips` read; the rest are ignored.
pub const MAX_SUPPORTED_NIPS: usize = 256;

/// The HTTP(S) URL of a relay's document; `None` for URLs that are not `ws://` or `wss://`.
pub fn http_url(relay: &str) -> Option<String> {
    let (scheme, rest) = relay.split_once("://")?;
    let http = match scheme.to_ascii_lowercase().as_str() {
        "ws" => "http",
        "wss" => "https",
        _ => return None,
    };
    if rest.is_empty() {
        return None;
    }
    Some(format!("{http}://{rest}"))
}

/// The limits a document publishes. `None` when the body is not a JSON object (no document);
/// a document without a usable `limitation` gives the defaults.
pub fn parse_limits(body: &[u8]) -> Option<RelayLimits> {
    let doc: Value = serde_json::from_slice(body).ok()?;
    let doc = doc.as_object()?;
    let mut limits = RelayLimits::default();
    let Some(lim) = doc.get("limitation").and_then(Value::as_object) else {
        return Some(limits);
    };
    let count = |key: &str, min: u64, max: u64| -> Option<u32> {
        let v = lim.get(key)?;
        let n = match v.as_u64() {
            Some(n) => n,
            // Integral floats (`500.0`) are accepted; anything else is not a count.
            None => {
                let f = v.as_f64()?;
                if !(f.is_finite() && f.fract() == 0.0 && f >= 0.0 && f <= max as f64) {
                    return None;
                }
                f as u64
            }
        };
        // 0 is how some relays say "no limit".
        if n == 0 || n < min || n > max {
            return None;
        }
        u32::try_from(n).ok()
    };
    limits.max_limit = count("max_limit", 1, MAX_LIMIT);
    limits.max_filters = count("max_filters", 1, MAX_COUNT);
    limits.max_subscriptions = count("max_subscriptions", 1, MAX_COUNT);
    limits.max_message_length = count("max_message_length", MIN_MESSAGE, MAX_MESSAGE);
    let flag = |key: &str| lim.get(key).and_then(Value::as_bool).unwrap_or(false);
    limits.auth_required = flag("auth_required");
    limits.payment_required = flag("payment_required");
    Some(limits)
}

/// The NIPs a document's `supported_nips` names: numbers (or numeric strings) from 1 to 65535,
/// at most [`MAX_SUPPORTED_NIPS`] of them, sorted without repeats; anything else is skipped.
pub fn parse_supported_nips(body: &[u8]) -> Vec<u16> {
    let Ok(doc) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let Some(list) = doc.get("supported_nips").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut nips: Vec<u16> = list
        .iter()
        .take(MAX_SUPPORTED_NIPS)
        .filter_map(|v| match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .filter_map(|n| u16::try_from(n).ok())
        .filter(|n| *n > 0)
        .collect();
    nips.sort_unstable();
    nips.dedup();
    nips
}

/// What a document says: its limits and the NIPs it names.
#[derive(Clone, Debug)]
struct Document {
    limits: RelayLimits,
    nips: Vec<u16>,
}

#[derive(Clone, Debug)]
struct Entry {
    /// `None`: the last fetch failed.
    document: Option<Document>,
    expires: Instant,
}

/// Relay documents by relay URL, fetched on demand and kept for a while.
#[derive(Debug, Default)]
pub struct Nip11Cache {
    client: OnceLock<Option<reqwest::Client>>,
    /// Leaf lock: taken briefly, never across `.await`, never with another lock held.
    entries: Mutex<HashMap<String, Entry>>,
}

impl Nip11Cache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The remembered answer for `relay` if still fresh: `Some(None)` for a recent failure.
    pub fn cached(&self, relay: &str) -> Option<Option<RelayLimits>> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(relay)
            .filter(|e| e.expires > now)
            .map(|e| e.document.as_ref().map(|d| d.limits.clone()))
    }

    fn cached_document(&self, relay: &str) -> Option<Option<Document>> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(relay)
            .filter(|e| e.expires > now)
            .map(|e| e.document.clone())
    }

    fn remember(&self, relay: &str, document: Option<Document>, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(relay) {
            entries.retain(|_, e| e.expires > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            relay.to_string(),
            Entry {
                document,
                expires: crate::deadline::offset(now, ttl),
            },
        );
    }

    /// The HTTP client. Redirects are not followed: a relay's document is at the relay's own
    /// URL, and a redirect could send the request anywhere (another port, a metadata service)
    /// past the URL policy. A redirect is a failed fetch.
    fn client(&self) -> Option<&reqwest::Client> {
        self.client
            .get_or_init(|| {
                crate::connection::tls::install_crypto_provider();
                // No connection outlives its request: each holds a place of the socket
                // budget only while it runs.
                match reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .pool_max_idle_per_host(0)
                    .build()
                {
                    Ok(client) => Some(client),
                    Err(e) => {
                        tracing::warn!(error = %e, "no HTTP client; relay documents are not fetched");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The limits `relay` publishes: cached, or fetched now (and cached) on a connection that
    /// holds a place of `sockets`' budget while it lasts. `None` when it has no usable
    /// document, fetching is disabled, or no place freed within the fetch's timeout (then
    /// nothing is remembered: the relay is not to blame).
    pub async fn limits(
        &self,
        relay: &str,
        cfg: &Nip11Config,
        sockets: &Sockets,
    ) -> Option<RelayLimits> {
        self.document(relay, cfg, sockets).await.map(|d| d.limits)
    }

    /// The NIPs `relay`'s document says it supports (`supported_nips`), fetched as
    /// [`limits`](Self::limits) is and sharing its cache; `None` when it has no usable
    /// document (then nothing says it supports anything).
    pub async fn supported_nips(
        &self,
        relay: &str,
        cfg: &Nip11Config,
        sockets: &Sockets,
    ) -> Option<Vec<u16>> {
        self.document(relay, cfg, sockets).await.map(|d| d.nips)
    }

    async fn document(
        &self,
        relay: &str,
        cfg: &Nip11Config,
        sockets: &Sockets,
    ) -> Option<Document> {
        if !cfg.enabled {
            return None;
        }
        if let Some(known) = self.cached_document(relay) {
            return known;
        }
        let deadline = crate::deadline::after(cfg.timeout);
        let Ok(place) = tokio::time::timeout_at(deadline, sockets.place(relay)).await else {
            debug!(%relay, "no socket place for the relay document in time");
            return None;
        };
        let fetched = match tokio::time::timeout_at(deadline, self.fetch(relay, cfg)).await {
            Ok(Ok(limits)) => Some(limits),
            Ok(Err(why)) => {
                debug!(%relay, %why, "no relay document");
                None
            }
            Err(_) => {
                debug!(%relay, "relay document timed out");
                None
            }
        };
        drop(place);
        let ttl = if fetched.is_some() {
            cfg.ttl
        } else {
            cfg.failure_ttl
        };
        self.remember(relay, fetched.clone(), ttl);
        fetched
    }

    async fn fetch(&self, relay: &str, cfg: &Nip11Config) -> Result<Document, String> {
        let url = http_url(relay).ok_or("not a ws:// or wss:// URL")?;
        let client = self.client().ok_or("no HTTP client")?;
        let mut response = client
            .get(&url)
            .header(reqwest::header::ACCEPT, "application/nostr+json")
            .header(reqwest::header::CONNECTION, "close")
            .timeout(cfg.timeout)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > cfg.max_bytes as u64)
        {
            return Err("document too large".into());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > cfg.max_bytes {
                return Err("document too large".into());
            }
            body.extend_from_slice(&chunk);
        }
        let limits = parse_limits(&body).ok_or("not a JSON object")?;
        Ok(Document {
            limits,
            nips: parse_supported_nips(&body),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Option<RelayLimits> {
        parse_limits(s.as_bytes())
    }

    #[test]
    fn urls_map_to_http() {
        assert_eq!(
            http_url("wss://relay.example/path").as_deref(),
            Some("https://relay.example/path")
        );
        assert_eq!(
            http_url("ws://127.0.0.1:7000").as_deref(),
            Some("http://127.0.0.1:7000")
        );
        assert_eq!(http_url("https://relay.example"), None);
        assert_eq!(http_url("wss://"), None);
        assert_eq!(http_url("garbage"), None);
    }

    #[test]
    fn a_full_document_is_read() {
        let doc = r#"{"name":"r","limitation":{"max_limit":500,"max_filters":10,
            "max_subscriptions":20,"max_message_length":131072,"auth_required":true,
            "payment_required":false,"max_event_tags":100}}"#;
        assert_eq!(
            parse(doc),
            Some(RelayLimits {
                max_limit: Some(500),
                max_filters: Some(10),
                max_subscriptions: Some(20),
                max_message_length: Some(131_072),
                auth_required: true,
                payment_required: false,
            })
        );
    }

    #[test]
    fn hostile_documents_never_panic_and_bad_fields_are_ignored() {
        // Not a document at all.
        for body in ["", "null", "[1,2]", "\"x\"", "{", "42", "\u{0}\u{1}"] {
            assert_eq!(parse(body), None, "{body:?}");
        }
        assert_eq!(parse_limits(&[0xff, 0xfe, 0x00]), None);
        // A document without usable limits: defaults.
        for body in [
            "{}",
            r#"{"limitation":null}"#,
            r#"{"limitation":[500]}"#,
            r#"{"limitation":"none"}"#,
        ] {
            assert_eq!(parse(body), Some(RelayLimits::default()), "{body}");
        }
        // Wrong types, negative, zero, fractional, huge: each field ignored on its own.
        let doc = r#"{"limitation":{"max_limit":-5,"max_filters":"10","max_subscriptions":2.5,
            "max_message_length":1e300,"auth_required":"yes","payment_required":1}}"#;
        assert_eq!(parse(doc), Some(RelayLimits::default()));
        let doc = r#"{"limitation":{"max_limit":18446744073709551615,"max_filters":0,
            "max_subscriptions":99999999999,"max_message_length":10}}"#;
        assert_eq!(parse(doc), Some(RelayLimits::default()));
        let doc = r#"{"limitation":{"max_limit":300.0,"max_message_length":65536,
            "max_filters":{"a":1}}}"#;
        let l = parse(doc).unwrap();
        assert_eq!(
            (l.max_limit, l.max_message_length, l.max_filters),
            (Some(300), Some(65_536), None)
        );
        // Deep nesting hits serde_json's recursion limit: an error, not a stack overflow.
        let deep = format!(
            r#"{{"limitation":{}1{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(parse(&deep), None);
        // Duplicate keys: one of them wins, nothing breaks.
        assert!(parse(r#"{"limitation":{"max_limit":5,"max_limit":7}}"#).is_some());
    }

    #[test]
    fn supported_nips_are_read_leniently_and_bounded() {
        let nips = |s: &str| parse_supported_nips(s.as_bytes());
        assert_eq!(
            nips(r#"{"supported_nips":[1,11,50,"42",50]}"#),
            [1, 11, 42, 50]
        );
        for junk in [
            "",
            "{}",
            "[50]",
            r#"{"supported_nips":"50"}"#,
            r#"{"supported_nips":[-1,0,70000,1.5,null,{}]}"#,
        ] {
            assert!(nips(junk).is_empty(), "{junk}");
        }
        let many: Vec<String> = (1..=1000).map(|n| n.to_string()).collect();
        let doc = format!(r#"{{"supported_nips":[{}]}}"#, many.join(","));
        assert_eq!(nips(&doc).len(), MAX_SUPPORTED_NIPS);
    }

    #[tokio::test]
    async fn a_document_waits_for_a_place_and_blames_no_relay_when_none_frees() {
        let cache = Nip11Cache::new();
        let sockets = Sockets::new(crate::connection::sockets::SocketBudget {
            max_sockets: Some(1),
            reserve: 1,
            idle: Duration::from_secs(1),
        });
        let cfg = Nip11Config {
            timeout: Duration::from_millis(200),
            ..Nip11Config::default()
        };
        let held = sockets.place("ws://127.0.0.1:3").await;
        assert_eq!(sockets.stats().open, 1);
        assert_eq!(cache.limits("ws://127.0.0.1:1", &cfg, &sockets).await, None);
        assert_eq!(
            cache.cached("ws://127.0.0.1:1"),
            None,
            "no place is not the relay's failure"
        );
        drop(held);
        assert_eq!(sockets.stats().open, 0, "a dropped place is free again");
        assert_eq!(cache.limits("ws://127.0.0.1:1", &cfg, &sockets).await, None);
        assert_eq!(cache.cached("ws://127.0.0.1:1"), Some(None));
        let stats = sockets.stats();
        assert_eq!((stats.documents, stats.peak, stats.open), (2, 1, 0));
    }

    #[tokio::test]
    async fn answers_are_cached_and_failures_too() {
        let cache = Nip11Cache::new();
        let sockets = Sockets::new(crate::connection::sockets::SocketBudget::unbounded());
        let cfg = Nip11Config {
            timeout: Duration::from_millis(300),
            ..Nip11Config::default()
        };
        // Nothing listens on port 1: a failure, remembered.
        assert_eq!(cache.limits("ws://127.0.0.1:1", &cfg, &sockets).await, None);
        assert_eq!(cache.cached("ws://127.0.0.1:1"), Some(None));
        // Not a relay URL: a failure without a request.
        assert_eq!(cache.limits("ftp://x", &cfg, &sockets).await, None);
        let off = Nip11Config {
            enabled: false,
            ..cfg
        };
        assert_eq!(cache.limits("ws://127.0.0.1:2", &off, &sockets).await, None);
        // Remembered "forever".
        let forever = Nip11Config {
            ttl: Duration::MAX,
            failure_ttl: Duration::MAX,
            timeout: Duration::MAX,
            ..cfg.clone()
        };
        assert_eq!(cache.limits("ftp://y", &forever, &sockets).await, None);
        assert_eq!(cache.cached("ftp://y"), Some(None));
        assert_eq!(
            cache.cached("ws://127.0.0.1:2"),
            None,
            "disabled asks nothing"
        );
    }
}

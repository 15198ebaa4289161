//! The local relays: one nostr-relay-builder `LocalRelay` per world relay, on a fixed loopback
//! port for the whole bench, listening only in the sessions the world says it is up.
//!
//! Each relay's database is filled once (the world's `on` lists do not change between
//! sessions) and shared by the relay instances of every session. A query hook records every
//! filter a relay is asked, so the plan the runtime really sent can be scored by the
//! simulator.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostr_relay_builder::prelude as rb;

/// One filter a relay was asked, as its query hook saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenFilter {
    /// The client's address: one per connection.
    pub peer: SocketAddr,
    /// Authors (x-only keys).
    pub authors: Vec<[u8; 32]>,
    /// Kinds.
    pub kinds: Vec<u16>,
    /// The public keys its `#p` names, as hex.
    pub tagged: Vec<String>,
    /// `since`, unix seconds.
    pub since: Option<u64>,
    /// `until`, unix seconds.
    pub until: Option<u64>,
    /// `limit` after the relay applied its cap.
    pub limit: Option<usize>,
}

impl SeenFilter {
    /// What `query`, sent by the client at `peer`, asks.
    pub fn of(query: &rb::Filter, peer: SocketAddr) -> Self {
        Self {
            peer,
            authors: query
                .authors
                .as_ref()
                .map(|a| a.iter().map(|pk| pk.to_bytes()).collect())
                .unwrap_or_default(),
            kinds: query
                .kinds
                .as_ref()
                .map(|k| k.iter().map(|k| k.as_u16()).collect())
                .unwrap_or_default(),
            tagged: query
                .generic_tags
                .iter()
                .filter(|(tag, _)| tag.to_string() == "p")
                .flat_map(|(_, values)| values.iter().cloned())
                .collect(),
            since: query.since.map(|t| t.as_secs()),
            until: query.until.map(|t| t.as_secs()),
            limit: query.limit,
        }
    }
}

/// What a relay was asked, recorded by its query hook. A clone shares the record.
#[derive(Clone, Debug, Default)]
pub struct ReqLog {
    // Taken briefly in the hook, by `take` and by `seen`; never held across an await.
    seen: Arc<Mutex<Vec<SeenFilter>>>,
}

impl ReqLog {
    /// Everything recorded since the last call.
    pub fn take(&self) -> Vec<SeenFilter> {
        std::mem::take(&mut *self.lock())
    }

    /// Everything recorded since the last [`take`](Self::take), in order, kept.
    pub fn seen(&self) -> Vec<SeenFilter> {
        self.lock().clone()
    }

    /// The record; a poisoned lock only means a hook panicked holding plain data.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SeenFilter>> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl rb::QueryPolicy for ReqLog {
    fn admit_query<'a>(
        &'a self,
        query: &'a rb::Filter,
        addr: &'a SocketAddr,
    ) -> rb::BoxedFuture<'a, rb::PolicyResult> {
        let seen = SeenFilter::of(query, *addr);
        self.lock().push(seen);
        Box::pin(async { rb::PolicyResult::Accept })
    }
}

/// An in-memory relay database that keeps every event it is given.
pub fn memory_database() -> Arc<rb::MemoryDatabase> {
    Arc::new(rb::MemoryDatabase::with_opts(rb::MemoryDatabaseOptions {
        events: true,
        max_events: None,
    }))
}

/// One relay of the fleet.
pub struct FleetRelay {
    /// The world relay id.
    pub relay: u32,
    /// Its fixed port.
    pub port: u16,
    /// The per-filter cap it applies (`max_filter_limit` and `default_filter_limit`).
    pub cap: usize,
    /// What it was asked.
    pub log: ReqLog,
    db: Arc<rb::MemoryDatabase>,
    running: Option<rb::LocalRelay>,
}

/// A fleet operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A relay could not listen on its port.
    #[error("relay on port {port} could not start: {reason}")]
    Start {
        /// The port.
        port: u16,
        /// Why.
        reason: String,
    },
    /// Storing an event failed.
    #[error("storing an event: {0}")]
    Store(String),
}

impl FleetRelay {
    /// A relay with an empty database.
    pub fn new(relay: u32, port: u16, cap: usize) -> Self {
        Self {
            relay,
            port,
            cap,
            log: ReqLog::default(),
            db: memory_database(),
            running: None,
        }
    }

    /// Stores an event (served like any other).
    pub async fn store(&self, event: &rb::Event) -> Result<(), FleetError> {
        use rb::NostrDatabase;
        self.db
            .save_event(event)
            .await
            .map(|_| ())
            .map_err(|e| FleetError::Store(e.to_string()))
    }

    /// Stores an event and sends it to the subscriptions it matches, as a relay does with an
    /// `EVENT` it accepts; `false` (nothing stored) while it is not listening.
    pub async fn publish(&self, event: &rb::Event) -> Result<bool, FleetError> {
        let Some(relay) = &self.running else {
            return Ok(false);
        };
        self.store(event).await?;
        relay.notify_event(event.clone());
        Ok(true)
    }

    /// Whether it is listening.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts listening (a no-op if it already is). The port of a relay stopped a moment ago
    /// may take a little while to be free again: retried for up to two seconds.
    pub async fn start(&mut self) -> Result<(), FleetError> {
        if self.running.is_some() {
            return Ok(());
        }
        let mut last = String::new();
        for _ in 0..40 {
            let builder = rb::RelayBuilder::default()
                .addr(IpAddr::V4(Ipv4Addr::LOCALHOST))
                .port(self.port)
                .database(self.db.clone())
                .query_policy(self.log.clone())
                .max_filter_limit(self.cap)
                .default_filter_limit(self.cap)
                .rate_limit(rb::RateLimit {
                    max_reqs: 10_000,
                    notes_per_minute: 1_000_000,
                });
            let relay = rb::LocalRelay::new(builder);
            match relay.run().await {
                Ok(()) => {
                    self.running = Some(relay);
                    return Ok(());
                }
                Err(e) => {
                    last = e.to_string();
                    relay.shutdown();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        Err(FleetError::Start {
            port: self.port,
            reason: last,
        })
    }

    /// Stops listening and waits (bounded) until the port refuses connections. The relay's
    /// shutdown signal reaches only a listener that is waiting at that instant, so it is sent
    /// again until the port is closed.
    pub async fn stop(&mut self) {
        let Some(relay) = self.running.take() else {
            return;
        };
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.port);
        for _ in 0..200 {
            relay.shutdown();
            tokio::time::sleep(Duration::from_millis(5)).await;
            match tokio::net::TcpStream::connect(addr).await {
                Err(_) => return,
                Ok(stream) => drop(stream),
            }
        }
        tracing::warn!(port = self.port, "stopped relay still accepts connections");
    }
}

/// The first port the OS hands out for outgoing connections. A fixed relay port inside that
/// range can be taken by a client socket while its relay is down, and the relay then cannot
/// listen again.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A first port from which `n` consecutive ports can be bound on 127.0.0.1 right now, below the
/// ephemeral range, tried from `hint` upwards (then from 10,000). Ports have five digits, so
/// URLs sort like their ports.
pub fn free_port_range(n: usize, hint: u16) -> Option<u16> {
    let n = u16::try_from(n.max(1)).ok()?;
    let end = ephemeral_start().max(10_000 + n);
    let step = (n.div_ceil(100).max(1) * 100) as usize;
    let hint = hint.clamp(10_000, end);
    let candidates = (hint..end)
        .step_by(step)
        .chain((10_000..hint).step_by(step));
    for base in candidates {
        let Some(last) = base.checked_add(n) else {
            continue;
        };
        if last > end {
            continue;
        }
        let ok = (base..last)
            .map(|p| StdListener::bind((Ipv4Addr::LOCALHOST, p)))
            .collect::<Result<Vec<_>, _>>()
            .is_ok();
        if ok {
            return Some(base);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_relay_stops_and_starts_again_on_its_port() {
        let base = free_port_range(1, 25_000).unwrap();
        let mut r = FleetRelay::new(0, base, 10);
        for _ in 0..3 {
            r.start().await.unwrap();
            let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), base);
            assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
            tokio::time::sleep(Duration::from_millis(200)).await;
            r.stop().await;
            assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        }
    }
}

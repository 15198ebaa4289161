//! nostr-sdk's own `Client` in the live bench, three times: with nostr-sdk's default gossip
//! engine (`nostr-gossip-memory`, as `Client::builder().gossip(NostrGossipMemory::unbounded())`
//! sets it up), with `nostr_outbox_gossip::OutboxGossip` (the `outbox feed` default, `recall`,
//! at the bench's budget) answering nostr-sdk's own fetch, and with the same engine reading
//! through its routed, paged read (`OutboxGossip::read`, probing once a session, in its widest
//! read) on the same `Client`. Each reads the bench's world from the same local relays as the
//! runtime, one engine kept from session to session as an application keeps it between runs.
//!
//! Both engines are handed the follows' relay lists up front (as the bench hands the runtime
//! its lists) and each list is marked as just fetched, so neither client looks lists up. A
//! session is a fresh `Client` (no socket of an earlier session left open) reading the follows'
//! kind:1 notes once per window. The unpaged engine's rounds end by themselves as the next
//! read begins; the paged read keeps a session's reads in one round (`manual_rounds`): the
//! widest first, which probes, ended after the last.
//!
//! Linking this crate registers both rows ([`nostr_outbox_live::register_live_client!`]); the
//! `outbox-sdk-bench` binary is the `outbox` command with it linked.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_gossip::{GossipAllowedRelays, GossipListKind, NostrGossip};
use nostr_gossip_memory::prelude::NostrGossipMemory;
use nostr_outbox_gossip::{OutboxGossip, ReadOptions, DEFAULT_READ_PROBES};
use nostr_outbox_live::clients::{ClientRun, ClientSession, ClientSetup, LiveClient};
use nostr_sdk::prelude::{Client, GossipConfig};
use tokio::sync::OnceCell;

/// Which gossip engine the client runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// nostr-sdk's in-memory engine (`nostr-gossip-memory`), no budget.
    Memory,
    /// `OutboxGossip` with the `recall` strategy at the bench's budget.
    Outbox,
    /// The same engine, reading through `OutboxGossip::read` (paged past each relay's cap).
    OutboxPaged,
}

/// The engine nostr-sdk is given, and the outbox engine as itself (for its paged read).
type Engines = (Arc<dyn NostrGossip>, Option<Arc<OutboxGossip>>);

/// nostr-sdk's `Client` as a live bench row.
#[derive(Debug)]
pub struct SdkClient {
    engine: Engine,
    setup: ClientSetup,
    /// Made at the first session (the reader's relays are known then), kept after; the
    /// outbox engine also as itself, for its paged read.
    gossip: OnceCell<Engines>,
}

impl SdkClient {
    /// A row for `engine`.
    pub fn new(engine: Engine, setup: &ClientSetup) -> Self {
        Self {
            engine,
            setup: setup.clone(),
            gossip: OnceCell::new(),
        }
    }

    async fn gossip(&self, reader_relays: &[String]) -> Engines {
        let made = self.gossip.get_or_init(|| async {
            match self.engine {
                Engine::Memory => (
                    Arc::new(NostrGossipMemory::unbounded()) as Arc<dyn NostrGossip>,
                    None,
                ),
                Engine::Outbox | Engine::OutboxPaged => {
                    let toml = format!(
                        "max_connections = {}\n[url_policy]\nallow_loopback = true\n\
                         [strategy]\ntype = \"recall\"\n",
                        self.setup.budget
                    );
                    let mut builder = OutboxGossip::from_toml(&toml)
                        .expect("the recall config is valid")
                        .reader_relays(reader_relays)
                        .seed(self.setup.seed);
                    if self.engine == Engine::OutboxPaged {
                        // A session's reads are one round, ended by its widest read.
                        builder = builder.manual_rounds();
                    }
                    let gossip = builder
                        .open()
                        .await
                        .expect("an engine without a store opens");
                    let gossip = Arc::new(gossip);
                    (gossip.clone() as Arc<dyn NostrGossip>, Some(gossip))
                }
            }
        });
        made.await.clone()
    }

    async fn session(&self, s: ClientSession<'_>) -> ClientRun {
        let (gossip, outbox) = self.gossip(s.reader_relays).await;
        let paged = outbox.filter(|_| self.engine == Engine::OutboxPaged);
        for list in s.relay_lists {
            if let Err(e) = gossip.process(list, None).await {
                tracing::warn!(%e, "relay list not taken");
            }
        }
        // Every follow's list counts as fetched (those without one too): no lookups.
        for pk in s.follows {
            let _ = gossip.update_fetch_attempt(pk, GossipListKind::Nip65).await;
        }
        let config = GossipConfig::default()
            // The bench's relays are on 127.0.0.1, which nostr-sdk leaves out by default.
            .allowed(GossipAllowedRelays {
                onion: false,
                local: true,
                without_tls: true,
            })
            .no_background_refresh();
        let client = Client::builder()
            .gossip(gossip)
            .gossip_config(config)
            .build();
        for url in s.reader_relays {
            if let Err(e) = client.add_relay(url.as_str()).await {
                tracing::warn!(%url, %e, "reader relay not added");
            }
        }
        client.connect().await;
        let mut reads = vec![Vec::new(); s.reads.len()];
        let mut probed = Vec::new();
        // The paged read reads the widest window first and probes there, as the runtime probes
        // after its fetch: the session's narrower reads then ask where its probes found
        // follows. All are one round, ended after the last with every relay that answered:
        // what a week's read returns says nothing of a relay that keeps the year (results.md).
        let mut order: Vec<usize> = (0..s.reads.len()).collect();
        if paged.is_some() {
            order.sort_by_key(|&i| s.reads[i].1);
        }
        let mut reached = std::collections::HashSet::new();
        for (n, &i) in order.iter().enumerate() {
            let since = s.reads[i].1;
            let filter = Filter::new()
                .authors(s.follows.iter().copied())
                .kind(Kind::TextNote)
                .since(Timestamp::from(since));
            let notes: BTreeSet<Event> = if let Some(outbox) = &paged {
                // The runtime's connect and page timeouts; the whole read, pages in turn, four
                // times the read's bound.
                let options = ReadOptions {
                    probes: if n == 0 { DEFAULT_READ_PROBES } else { 0 },
                    end_round: false,
                    ..ReadOptions::default()
                };
                let read = outbox.read(&client, filter, options);
                match tokio::time::timeout(s.read_timeout * 4, read).await {
                    Ok(report) => {
                        // Probed relays leave the pool after their probe; they were dialled.
                        probed.extend(report.probed.iter().map(|r| r.url.clone()));
                        reached.extend(report.reached);
                        report.events.into_iter().take(s.max_events).collect()
                    }
                    Err(_) => {
                        tracing::warn!("paged read timed out");
                        BTreeSet::new()
                    }
                }
            } else {
                match client
                    .fetch_events(filter)
                    .timeout(s.read_timeout)
                    .max_events(s.max_events)
                    .await
                {
                    Ok(notes) => notes,
                    Err(e) => {
                        tracing::warn!(%e, "read failed");
                        BTreeSet::new()
                    }
                }
            };
            reads[i] = notes.into_iter().collect();
        }
        if let Some(outbox) = &paged {
            outbox.end_round(Some(&reached));
        }
        let mut dialled_urls: std::collections::HashSet<nostr::types::RelayUrl> =
            client.relays().all().await.into_keys().collect();
        dialled_urls.extend(probed);
        let dialled = dialled_urls.len();
        client.shutdown().await;
        ClientRun { reads, dialled }
    }
}

impl LiveClient for SdkClient {
    fn label(&self) -> String {
        match self.engine {
            Engine::Memory => "nostr-sdk, default gossip".to_string(),
            Engine::Outbox => format!("nostr-sdk + OutboxGossip ({})", self.setup.budget),
            Engine::OutboxPaged => format!(
                "nostr-sdk + OutboxGossip ({}), paged read",
                self.setup.budget
            ),
        }
    }

    fn run<'a>(
        &'a self,
        session: ClientSession<'a>,
    ) -> Pin<Box<dyn Future<Output = ClientRun> + Send + 'a>> {
        Box::pin(self.session(session))
    }
}

nostr_outbox_live::register_live_client!(10, |setup| Box::new(SdkClient::new(
    Engine::Memory,
    setup
)));
nostr_outbox_live::register_live_client!(20, |setup| Box::new(SdkClient::new(
    Engine::Outbox,
    setup
)));
nostr_outbox_live::register_live_client!(30, |setup| Box::new(SdkClient::new(
    Engine::OutboxPaged,
    setup
)));

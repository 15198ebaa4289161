//! Relay-list discovery: the follows' kind:10002 lists asked of the reader's relays (else the
//! fallback) and of the indexers.
//!
//! A relay's lists come by one of two ways. With lists kept from the last run for most follows
//! ([`RuntimeConfig::sync_lists`]), they are reconciled (NIP-77, `crate::asks::sync`): only lists
//! that changed since are fetched, and what came is reported to the coordinator as the slot
//! would report it, so the rest of the feed cannot tell the two apart. A relay that does not
//! reconcile, and every relay when too little was kept, pages the lists on its slot as before.
//! A continuing feed then keeps a lists subscription for new lists only (`since` now).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nostr::filter::Filter;
use nostr::types::Timestamp;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::debug;

use super::{Coordinator, Progress};
use crate::asks::sync::{list_item, reconcile, Item, IDS_PER_REQ};
use crate::client::Client;
use crate::feed::slot::{ReportKind, SlotCommand, SlotReport, SubKind};

impl Coordinator {
    /// Starts the relay-list lookup on every usable reader relay and indexer.
    pub(super) fn start_discovery(&mut self) {
        if !self.cfg.discover_lists || self.follows.is_empty() {
            return;
        }
        let now = self.now();
        let filter = self.lists_filter();
        let usable = |urls: &[String]| -> Vec<String> {
            urls.iter()
                .filter(|u| !self.penalties.is_penalised(u, now))
                .filter(|u| !(self.cfg.once && self.tally.penalised.contains(*u)))
                .cloned()
                .collect()
        };
        // Lists are looked up where the residual goes (the reader's relays, else the fallback)
        // and on the indexers, which collect lists the reader's relays may not hold.
        let mut lookup = usable(&self.reader_relays);
        if lookup.is_empty() {
            lookup = usable(&self.fallback_relays);
        }
        for url in usable(&self.indexers) {
            if !lookup.contains(&url) {
                lookup.push(url);
            }
        }
        let kept = self.kept_items();
        for (i, url) in lookup.into_iter().enumerate() {
            let (client, reports) = (self.client.clone(), self.reports_tx.clone());
            let live = self.ensure_live(&url);
            live.lists = Some(Progress::Pending);
            // Discovery's lookup asks every follow's list and stays open in a continuing feed:
            // it replaces a watch the first plan gave this relay for its own follows, and the
            // plans after leave it be (a watch would narrow it back to them).
            live.watch = false;
            match &kept {
                Some(kept) => {
                    let sync = ListSync {
                        url: url.clone(),
                        filter: filter.clone(),
                        kept: kept.clone(),
                        client,
                        reports,
                        slot: live.tx.clone(),
                        reconciled: self.tally.lists_reconciled.clone(),
                        once: self.cfg.once,
                        i,
                    };
                    self.tasks.spawn(sync.run());
                }
                None => live.send(page(filter.clone())),
            }
        }
    }

    /// The kept lists of the follows as reconciliation items, when they cover at least half
    /// the follows and the config reconciles: with less, fetching by id after reconciling
    /// would cost more round trips than paging the lists.
    fn kept_items(&self) -> Option<Arc<Vec<Item>>> {
        if !self.cfg.sync_lists {
            return None;
        }
        let items: Vec<Item> = self
            .follows
            .iter()
            .filter_map(|f| self.lists.get(f))
            .filter_map(list_item)
            .collect();
        (items.len() * 2 >= self.follows.len()).then(|| Arc::new(items))
    }
}

/// What a slot is told to page a relay's lists by `filter`.
fn page(filter: Filter) -> SlotCommand {
    SlotCommand::Req {
        sub: SubKind::Lists,
        filter: Box::new(filter),
        generation: 1,
    }
}

/// One relay's lists by reconciliation, reported as its slot would report them.
struct ListSync {
    url: String,
    filter: Filter,
    kept: Arc<Vec<Item>>,
    client: Client,
    reports: mpsc::Sender<SlotReport>,
    /// The relay's slot: pages the lists when reconciling did not work, and keeps the live
    /// subscription of a continuing feed.
    slot: mpsc::UnboundedSender<SlotCommand>,
    /// Relays reconciled so far, for the summary.
    reconciled: Arc<AtomicUsize>,
    once: bool,
    i: usize,
}

impl ListSync {
    async fn run(self) {
        let started = Instant::now();
        let (events, rounds) =
            match reconcile(&self.url, &self.filter, &self.kept, &self.client, self.i).await {
                Ok(found) => found,
                Err(why) => {
                    debug!(relay = %self.url, %why, "lists not reconciled; paging them");
                    // A slot that ended has nothing to page; ignoring is correct.
                    let _ = self.slot.send(page(self.filter));
                    return;
                }
            };
        let elapsed = started.elapsed();
        self.reconciled.fetch_add(1, Ordering::Relaxed);
        debug!(relay = %self.url, new = events.len(), rounds, "lists reconciled");
        let url: Arc<str> = Arc::from(self.url.as_str());
        let received = events.len() as u64;
        for event in events {
            let kind = ReportKind::Event {
                sub: SubKind::Lists,
                event: Box::new(event),
            };
            if !self.report(&url, kind).await {
                return;
            }
        }
        let eose = ReportKind::Eose {
            sub: SubKind::Lists,
            generation: 1,
            elapsed,
            latency: elapsed,
            // The reconciliation's messages and the fetches by id.
            pages: rounds as u64 + received.div_ceil(IDS_PER_REQ as u64),
            received,
            complete: true,
        };
        if !self.report(&url, eose).await {
            return;
        }
        if !self.once {
            // New lists from now on, as the slot's subscription would have carried them.
            let since = Timestamp::now();
            let _ = self.slot.send(page(self.filter.since(since)));
        }
    }

    /// Sends a report as the slot would; `false` once the coordinator is gone.
    async fn report(&self, url: &Arc<str>, kind: ReportKind) -> bool {
        let report = SlotReport {
            url: url.clone(),
            kind,
        };
        self.reports.send(report).await.is_ok()
    }
}

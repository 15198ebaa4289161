//! The end of a feed: the last round learned, stats saved, slots drained, and the summary.

use super::*;

impl Coordinator {
    /// Time to 90% of the notes that arrived before the run settled (or raced, or ended).
    pub(super) fn note_time_to_90(&mut self) {
        if self.tally.to_90.is_some() || self.tally.arrivals.is_empty() {
            return;
        }
        let n = self.tally.arrivals.len();
        let index = (n * 9).div_ceil(10).saturating_sub(1);
        self.tally.to_90 = self.tally.arrivals.get(index).copied();
        self.tally.arrivals = Vec::new();
    }

    /// Follows whose every listed write relay was set aside (refused, needs payment or sign-in,
    /// failed): whatever the plan asked, nothing it could reach holds what they write. Their
    /// reader's relays may stand in, which is why they still count as covered.
    fn unreadable(&self) -> Vec<PublicKey> {
        let now = self.now();
        let (table, _) = self.table_without(&HashSet::new(), now);
        let set_aside =
            |url: &str| self.tally.penalised.contains(url) || self.penalties.is_penalised(url, now);
        self.follows
            .iter()
            .filter(|pk| {
                let Some(author) = table.author_id(pk) else {
                    return false;
                };
                let writes = table.write_relays(author);
                !writes.is_empty() && writes.iter().all(|r| set_aside(table.url(*r)))
            })
            .copied()
            .collect()
    }

    pub(super) async fn finish(mut self) -> FeedSummary {
        // Relays that answered but were not recorded yet (a live feed stopped mid-round), and
        // relays that failed and never answered.
        self.record_round(true);
        self.note_time_to_90();
        let follows = self.follows.len();
        let mut covered: HashSet<PublicKey> = HashSet::new();
        for (url, authors) in self.recorder.answered() {
            covered.extend(authors.iter().copied());
            self.tally
                .relays
                .entry(url.to_string())
                .or_default()
                .answered = true;
        }
        for live in self.live.values() {
            live.send(SlotCommand::Shutdown);
        }
        self.live.clear();
        let grace = self.cfg.shutdown_grace.saturating_mul(2);
        let deadline = crate::deadline::after(grace);
        while !self.tasks.is_empty() {
            tokio::select! {
                joined = self.tasks.join_next() => {
                    if joined.is_none() {
                        break;
                    }
                }
                // Slots may be waiting to report; keep draining so they can see the shutdown.
                _ = self.reports.recv() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    warn!(left = self.tasks.len(), "slots did not close in time; aborting them");
                    self.tasks.abort_all();
                    while self.tasks.join_next().await.is_some() {}
                    break;
                }
            }
        }
        // What the run did not ask, probed now that its own sockets are closed; learned before
        // the stats are saved.
        self.probe_at_end().await;
        let stats_error = self.save_stats().await;
        let relays_asked = self.tally.relays.values().filter(|r| r.reqs > 0).count();
        let answered = self
            .tally
            .relays
            .values()
            .filter(|r| r.reqs > 0 && r.answered)
            .count();
        let relays = self.tally.relays.values();
        let round_trips = relays.clone().map(|r| r.pages + r.lookup_pages).sum();
        let events_received = relays.clone().map(|r| r.received).sum();
        let relays_incomplete = relays.clone().filter(|r| r.answered && !r.complete).count();
        let replanned_away = relays
            .filter(|r| r.reqs > 0 && !r.answered && r.replanned_away)
            .count();
        // Up, and serving only readers who pay or sign in: not failures.
        let refused = (self.tally.relays.iter())
            .filter(|(_, r)| r.reqs > 0 && !r.answered && !r.replanned_away)
            .filter(|(url, _)| {
                self.penalties
                    .get(url)
                    .is_some_and(|e| e.needs_payment || e.needs_sign_in)
            })
            .count();
        let marks = self.relay_marks();
        let unreadable = self.unreadable();
        let summary = FeedSummary {
            events: self.tally.events,
            follows,
            authors_covered: covered.len(),
            relays_asked,
            relays_answered: answered,
            relays_failed: relays_asked.saturating_sub(answered + replanned_away + refused),
            relays_replanned_away: replanned_away,
            relays_refused: refused,
            penalised: self.tally.penalised.iter().cloned().collect(),
            auth: self.tally.auth,
            relay_lists: self.lists.len(),
            lists_from_indexers: self.tally.lists_from_indexers,
            lists_reconciled: self
                .tally
                .lists_reconciled
                .load(std::sync::atomic::Ordering::Relaxed),
            plans: self.tally.plans,
            time_to_first_event: self.tally.first_event,
            time_to_90_percent: self.tally.to_90,
            time_to_full_eose: self.tally.full_eose,
            raced: self.tally.raced,
            deadline_reached: self.tally.deadline_reached,
            pending: self.tally.pending,
            seed: self.plan_seed,
            carriers: self.carriers,
            uncovered: self.tally.uncovered,
            unreadable,
            disclosure: self.tally.disclosure,
            plans_rejected: self.tally.rejected,
            marks,
            lists: self.lists.values().cloned().collect(),
            elapsed: self.started.elapsed(),
            round_trips,
            events_received,
            relays_incomplete,
            dropped: self.tally.dropped,
            relays: self.tally.relays,
            probes: self.tally.probes,
            sockets: self.client.sockets().stats(),
            places: self.tally.places,
            stats: self.stats,
            penalties: self.penalties,
            stats_error,
        };
        info!(
            events = summary.events,
            asked = summary.relays_asked,
            answered = summary.relays_answered,
            covered = summary.authors_covered,
            "feed ended"
        );
        summary
    }
}

//! Probes after the fetch (`crate::asks::probe`): planned from what the run learned, asked in a task
//! of their own, and learned through the recorder like the feed's answers.

use super::*;
use crate::asks::probe::{Ended, ProbeAnswer, PROBE_GENERATION};
use crate::feed::summary::ProbeOutcome;
use nostr_outbox_core::ProbePlan;

/// The answers of the probes in flight, when they are all in (with none in flight, never).
pub(super) async fn join(probing: &mut Option<Probing>) -> Vec<ProbeAnswer> {
    match probing {
        Some(p) => p.join().await,
        None => std::future::pending().await,
    }
}

impl Coordinator {
    /// The relays to probe now: by `nostr_outbox_core::plan_probes`, leaving out every relay this
    /// run opened a slot for (routed, residual carriers, lookups), every relay set aside and
    /// every relay probed already.
    fn probe_plan(&self) -> ProbePlan {
        let budget = self.router.probe_budget();
        if budget.connections == 0 {
            return ProbePlan::default();
        }
        let now = self.now();
        // Every relay the lists name, set-aside ones included (they are skipped below): a list
        // with a relay left out would bring forward an entry its per-list cap had dropped.
        let (table, _) = self.table_without(&HashSet::new(), now);
        let mut skip: HashSet<&str> = self.dialled.iter().map(String::as_str).collect();
        skip.extend(self.tally.penalised.iter().map(String::as_str));
        skip.extend(self.penalties.penalised(now));
        skip.extend(self.tally.probes.relays.keys().map(String::as_str));
        nostr_outbox_core::plan_probes(&table, &self.stats, &skip, &budget, now)
    }

    /// Probes the relays of a new plan, if any, within the client's socket budget.
    fn spawn_probes(&self) -> Option<Probing> {
        let plan = self.probe_plan();
        if plan.is_empty() {
            return None;
        }
        info!(
            relays = plan.probes.len(),
            follows = plan.disclosure(),
            "probing relays the plan did not ask"
        );
        Some(Probing::start(
            &plan,
            &self.client,
            &self.cfg.kinds,
            self.cfg.since.map(|t| t.as_secs()),
        ))
    }

    /// A continuing feed that settled after a new plan, with no probes in flight: probes in a
    /// task of its own, learned when its answers are in (the run loop's `probes::join`).
    pub(super) fn start_probes(&mut self) {
        if !self.probe_due || self.probing.is_some() {
            return;
        }
        self.probe_due = false;
        self.probing = self.spawn_probes();
    }

    /// The end of a feed, after its slots closed: a `--once` run that was not told to stop
    /// and did not reach its deadline probes now and waits for the answers (bounded by the
    /// probes' timeouts and the deadline); a continuing feed
    /// stops the probes in flight and learns what already came back.
    pub(super) async fn probe_at_end(&mut self) {
        let answers = if self.cfg.once {
            if self.stop_requested || self.tally.deadline_reached {
                return;
            }
            let Some(mut probing) = self.spawn_probes() else {
                return;
            };
            // The run's deadline bounds its probes too: what answered by then is learned.
            match self.deadline_at {
                None => probing.join().await,
                Some(at) => match tokio::time::timeout_at(at, probing.join()).await {
                    Ok(answers) => answers,
                    Err(_) => {
                        warn!("deadline reached while probing; stopping the probes");
                        self.tally.deadline_reached = true;
                        probing.stop(self.cfg.shutdown_grace).await
                    }
                },
            }
        } else {
            match self.probing.take() {
                Some(probing) => probing.stop(self.cfg.shutdown_grace).await,
                None => return,
            }
        };
        self.learn_probes(answers, true).await;
    }

    /// Passes every probe's answer to the recorder, as the simulator does
    /// (`RoundRecorder::probed`, the notes, EOSE or the failure), learns the round, and passes
    /// the notes no relay delivered before on to the feed ([`FeedEvent::Found`]). A relay the
    /// feed asks meanwhile (a re-plan picked it) keeps its feed filter: its probe answer is
    /// dropped (the feed delivers what it holds).
    pub(super) async fn learn_probes(&mut self, mut answers: Vec<ProbeAnswer>, ending: bool) {
        // In URL order, whatever order they finished in: the round is the simulator's.
        answers.sort_by(|a, b| a.url.cmp(&b.url));
        let mut probed = 0usize;
        let mut answered = 0usize;
        let mut returned = 0u64;
        let mut found_notes: Vec<(Event, String)> = Vec::new();
        for answer in answers {
            let ProbeAnswer {
                url,
                authors,
                notes,
                ended,
                limit,
            } = answer;
            if ended == Ended::Stopped || self.recorder.is_asked(&url) {
                continue;
            }
            let named = authors.len();
            self.recorder.probed(&url, authors, PROBE_GENERATION, limit);
            let (mut events, mut found) = (0u64, 0u64);
            for event in notes {
                let at = event.created_at.as_secs();
                if !self.recorder.returned(&url, event.pubkey, event.id, at) {
                    continue;
                }
                events += 1;
                // A follow's note of the window no relay delivered: the feed's too.
                if self.follow_set.contains(&event.pubkey) && self.seen.insert(event.id) {
                    found += 1;
                    found_notes.push((event, url.clone()));
                }
            }
            let failure = match ended {
                Ended::Answered => {
                    self.recorder.eose(&url, PROBE_GENERATION, true);
                    None
                }
                Ended::Failed(why, refusal) => {
                    // A relay that needs sign-in or payment the reader lacks, or asks us to slow
                    // down, is up: nothing is learned of its liveness.
                    if refusal.is_some_and(|r| r.is_requirement()) {
                        self.recorder.refused(&url);
                    } else {
                        self.recorder.failed(&url, &why);
                    }
                    Some(why)
                }
                Ended::Stopped => None,
            };
            // Out of the recorder's filters: its answer or failure goes to the next round, and
            // it is never a yardstick or counted as asked by the feed.
            self.recorder.closed(&url);
            probed += 1;
            answered += usize::from(failure.is_none());
            returned += events;
            debug!(relay = %url, events, ?failure, "probed");
            self.tally.probes.relays.insert(
                url,
                ProbeOutcome {
                    authors: named,
                    answered: failure.is_none(),
                    events,
                    found,
                    failure,
                },
            );
        }
        if probed == 0 {
            return;
        }
        let found = found_notes.len() as u64;
        for (event, relay) in found_notes {
            let event = Box::new(event);
            self.emit(FeedEvent::Found { event, relay }).await;
        }
        self.record_round(ending);
        info!(
            relays = probed,
            answered,
            events = returned,
            found,
            "probes learned"
        );
        self.status(Status::Probed {
            relays: probed,
            answered,
            events: returned,
            found,
        })
        .await;
    }
}

//! What slots report (connections, EOSEs, failures, events), turned into the coordinator's state:
//! the recorder's frames, set-asides, re-plans and the feed.

use super::*;
use crate::connection::refusal::Refusal;
use crate::feed::slot::{Failure, Requirement};

impl Coordinator {
    pub(super) async fn on_report(&mut self, report: SlotReport) {
        let url: &str = &report.url;
        if !self.live.contains_key(url) {
            // A slot being shut down may still report; it no longer counts.
            return;
        }
        match report.kind {
            ReportKind::Dialling => {
                if let Some(live) = self.live.get_mut(url) {
                    live.dialling = Some(Instant::now());
                }
            }
            ReportKind::Connected { handshake } => {
                if let Some(live) = self.live.get_mut(url) {
                    live.connected = true;
                    live.held_since = Some(Instant::now());
                }
                self.tally
                    .relays
                    .entry(url.to_string())
                    .or_default()
                    .connections += 1;
                self.status(Status::Connected {
                    relay: url.to_string(),
                    handshake,
                })
                .await;
            }
            ReportKind::Requires(lacking) => {
                // The relay is up and wants what the reader lacks: set aside as needing it,
                // nothing learned of its liveness.
                let now = self.now();
                let reason = lacking.reason("NIP-11");
                let until = match lacking {
                    Requirement::SignIn => {
                        self.tally.auth.insert(url.to_string(), AuthOutcome::NoKeys);
                        self.penalties
                            .needs_sign_in(url, &reason, now, &self.cfg.penalty)
                    }
                    Requirement::Payment => {
                        self.penalties
                            .needs_payment(url, &reason, now, &self.cfg.penalty)
                    }
                };
                self.penalise(url, until, reason, Learned::Refusal).await;
            }
            ReportKind::Event { sub, event } => self.on_event(url, sub, event).await,
            ReportKind::Eose {
                sub: SubKind::Feed,
                generation,
                elapsed,
                latency,
                pages,
                received,
                complete,
            } => {
                let mut resumed = false;
                let mut current = false;
                if let Some(live) = self.live.get_mut(url) {
                    if live.feed_pending == Some(generation) {
                        live.feed_pending = None;
                        live.quiet();
                        current = true;
                    }
                    resumed = live.resume == Some(generation);
                }
                let outcome = self.tally.relays.entry(url.to_string()).or_default();
                outcome.pages += pages;
                outcome.received += received;
                // An answer asked only since the relay's mark is a part of the window: learned
                // compare-only, and never taken for an empty one.
                if !self.recorder.eose(url, generation, complete && !resumed) {
                    // An answer to a filter that was replaced since: the new one is awaited. A
                    // tail's answer teaches nothing but that the relay answers (and, for a
                    // relay that was down, that it is back).
                    if generation == open::TAIL && current {
                        self.penalties.succeed(url);
                        self.tail_answered(url);
                    }
                    return;
                }
                outcome.complete = complete;
                // Answered, whatever comes next: a relay a re-plan dropped while it answered
                // is closed at this EOSE, and its feed then leaves the recorder.
                outcome.answered = true;
                if self.cfg.once && self.race_at.is_none() {
                    if let Some(race) = self.cfg.eose_race {
                        self.race_at = Some(crate::deadline::after(race));
                    }
                }
                self.stats
                    .record_latency(url, latency.as_secs_f64() * 1000.0, self.now());
                if current {
                    self.mark_answered(url);
                }
                let closing = self.live.get(url).is_some_and(|l| l.closing);
                self.penalties.succeed(url);
                self.status(Status::Eose {
                    relay: url.to_string(),
                    generation,
                    elapsed,
                })
                .await;
                if closing {
                    // A re-plan dropped it while it was answering; the answer is in, close now.
                    self.close_feed(url);
                }
                // This answer may be empty, or show another relay's empty answer up.
                if self.set_aside_empty_answers() {
                    self.replan_after_set_aside();
                }
            }
            ReportKind::Eose {
                sub: SubKind::Lists,
                pages,
                ..
            } => {
                self.tally
                    .relays
                    .entry(url.to_string())
                    .or_default()
                    .lookup_pages += pages;
                let once = self.cfg.once;
                if once && self.lists_race_at.is_none() {
                    self.lists_race_at = Some(crate::deadline::after(self.cfg.lookup_grace));
                }
                if let Some(live) = self.live.get_mut(url) {
                    if once {
                        live.lists = None;
                        live.send(SlotCommand::Close {
                            sub: SubKind::Lists,
                        });
                    } else {
                        live.lists = Some(Progress::Eose);
                        live.quiet();
                    }
                }
                self.penalties.succeed(url);
                self.close_live_if_idle(url);
                let lookups_done = self
                    .live
                    .values()
                    .all(|l| l.lists.is_none_or(|p| p == Progress::Eose));
                if lookups_done && self.lists_changed {
                    self.schedule_replan(Duration::ZERO);
                }
                self.status(Status::ListsEose {
                    relay: url.to_string(),
                })
                .await;
            }
            ReportKind::Authenticated => {
                info!(relay = %url, "signed in (NIP-42)");
                self.tally
                    .auth
                    .insert(url.to_string(), AuthOutcome::SignedIn);
                self.status(Status::Authenticated {
                    relay: url.to_string(),
                })
                .await;
            }
            ReportKind::Refused { sub, message } => {
                let now = self.now();
                let refusal = Refusal::of(&message);
                let signed_in = self.tally.auth.contains_key(url);
                if signed_in || refusal == Refusal::SignIn {
                    let outcome = if self.client.signer().is_some() {
                        AuthOutcome::Failed(message.clone())
                    } else {
                        AuthOutcome::NoKeys
                    };
                    self.tally.auth.insert(url.to_string(), outcome);
                }
                self.tally
                    .relays
                    .entry(url.to_string())
                    .or_default()
                    .failures += 1;
                self.status(Status::Refused {
                    relay: url.to_string(),
                    reason: message.clone(),
                })
                .await;
                // Needing sign-in without a key, or payment, is its own state and no failure of
                // the relay (a run with a key asks at once). A relay that will not serve this
                // reader (restricted, blocked, still refused after signing in) is learned as
                // not answering: it delivers nothing to us.
                let (until, learned) = match refusal {
                    Refusal::SignIn if self.client.signer().is_none() => (
                        self.penalties
                            .needs_sign_in(url, &message, now, &self.cfg.penalty),
                        Learned::Refusal,
                    ),
                    Refusal::Payment => (
                        self.penalties
                            .needs_payment(url, &message, now, &self.cfg.penalty),
                        Learned::Refusal,
                    ),
                    _ => (
                        self.penalties
                            .penalise(url, &message, now, &self.cfg.penalty),
                        Learned::Failure,
                    ),
                };
                debug!(relay = %url, sub = sub.id(), %refusal, "refused");
                self.penalise(url, until, message, learned).await;
            }
            ReportKind::Dropped { reason } => {
                *self.tally.dropped.entry(reason).or_default() += 1;
                self.status(Status::Dropped {
                    relay: url.to_string(),
                    reason,
                })
                .await;
            }
            ReportKind::Failed { failure } => {
                let now = self.now();
                let reason = failure.to_string();
                if let Some(live) = self.live.get_mut(url) {
                    // The slot asks its filters again on the next connection.
                    live.connected = false;
                    live.feed_pending = live.feed_gen;
                    live.quiet_since = None;
                    live.held_since = None;
                }
                if self.down.contains_key(url) {
                    // Set aside already, its tail waiting: the slot dials it again with
                    // backoff, which lengthens with each failure. Nothing more to learn.
                    let outcome = self.tally.relays.entry(url.to_string()).or_default();
                    outcome.failures += 1;
                    let strikes = self.penalties.get(url).map_or(0, |e| e.strikes);
                    self.status(Status::Failed {
                        relay: url.to_string(),
                        reason: failure,
                        strikes,
                    })
                    .await;
                    return;
                }
                // A continuing feed asks it again, on the next connection, since its mark.
                self.resume_after_loss(url);
                self.tally
                    .relays
                    .entry(url.to_string())
                    .or_default()
                    .failures += 1;
                // The slot re-sends the REQ after reconnecting; the recorder waits for that EOSE
                // and counts what the new connection returns. A lookup-only relay's liveness
                // still learns. A relay that keeps asking us to slow down is up: its strikes
                // may set it aside for a while, but it is never learned as down.
                let rate_limited = matches!(failure, Failure::RateLimited(_));
                if !rate_limited {
                    self.recorder.failed(url, &reason);
                }
                let penalised = if rate_limited {
                    self.penalties
                        .strike_rate_limited(url, &reason, now, &self.cfg.penalty)
                } else if failure.is_misbehaviour() {
                    self.penalties
                        .strike_misbehaving(url, &reason, now, &self.cfg.penalty)
                } else {
                    let policy = self.strike_policy();
                    self.penalties.strike(url, &reason, now, &policy)
                };
                let strikes = self.penalties.get(url).map_or(0, |e| e.strikes);
                let timed_out = matches!(failure, Failure::ConnectTimeout);
                self.status(Status::Failed {
                    relay: url.to_string(),
                    reason: failure,
                    strikes,
                })
                .await;
                // A `once` run gives a relay that accepts no socket one connect timeout, not
                // three: it is left out for the rest of the run (the box keeps only the strike).
                let aside_now =
                    self.cfg.once && self.cfg.schedule.aside_on_connect_timeout && timed_out;
                let penalised = penalised.or(aside_now.then_some(now));
                if let Some(until) = penalised {
                    let learned = if rate_limited {
                        Learned::Refusal
                    } else {
                        Learned::Failure
                    };
                    self.penalise(url, until, reason, learned).await;
                }
            }
        }
    }

    async fn on_event(&mut self, url: &str, sub: SubKind, event: Box<Event>) {
        match sub {
            SubKind::Lists => {
                // The slot verified it (when configured); only the kind is checked here.
                if let Ok(list) = RawRelayList::from_verified(&event) {
                    if self.add_list(list) {
                        debug!(author = %event.pubkey, "new relay list");
                        if self.indexers.iter().any(|i| i == url)
                            && !self.reader_relays.iter().any(|r| r == url)
                        {
                            self.tally.lists_from_indexers += 1;
                        }
                        self.schedule_replan(self.cfg.replan_debounce);
                    }
                }
            }
            SubKind::Feed => {
                if !self.follow_set.contains(&event.pubkey) {
                    return;
                }
                // Counted per relay before de-duplication: every relay that returned a note gets
                // credit for it, not only the fastest.
                self.recorder.event(url, &event);
                self.mark_note(url, event.created_at.as_secs());
                if !self.seen.insert(event.id) {
                    return;
                }
                self.tally.events += 1;
                let at = self.started.elapsed();
                self.tally.first_event.get_or_insert(at);
                if self.tally.full_eose.is_none() {
                    // Bounded: only the stored history before the first settle is timed.
                    self.tally.arrivals.push(at);
                }
                self.tally.relays.entry(url.to_string()).or_default().events += 1;
                self.emit(FeedEvent::Note {
                    event,
                    relay: url.to_string(),
                })
                .await;
            }
        }
    }
}

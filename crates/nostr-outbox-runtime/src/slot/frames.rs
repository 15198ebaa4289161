//! Relay frames on the open socket: parsed, bounded, matched to our subscriptions, and turned
//! into reports (events, EOSE, CLOSED refusals, dropped frames).

use super::*;

impl Slot {
    pub(super) async fn drop_frame(&self, reason: FrameDrop) -> Handled {
        trace!(?reason, "dropping frame");
        if self.report(ReportKind::Dropped { reason }).await {
            Handled::Bad
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    /// Which open subscription an id names: `Err(true)` for one of ours that is closed (a late
    /// answer), `Err(false)` for an id we never issued.
    pub(super) fn lookup(&self, id: &SubscriptionId) -> Result<u64, bool> {
        match parse_sub_id(id) {
            Some((kind, n)) if self.open.get(&n).is_some_and(|s| s.kind == kind) => Ok(n),
            Some((_, n)) => Err(n < self.next_sub),
            None => Err(false),
        }
    }

    pub(super) async fn handle_text(
        &mut self,
        ws: &mut Socket,
        text: &str,
        attempt: &mut u32,
    ) -> Handled {
        let msg = match crate::exchange::parse(text, &self.cfg) {
            Ok(msg) => msg,
            Err(reason) => return self.drop_frame(reason).await,
        };
        match msg {
            RelayMessage::Event {
                subscription_id,
                event,
            } => {
                let n = match self.lookup(&subscription_id) {
                    Ok(n) => n,
                    // Arrived after our CLOSE: harmless, not the relay's fault, unless it keeps
                    // coming long after.
                    Err(true) => {
                        if self.flood.in_grace(Instant::now()) {
                            return Handled::Ok;
                        }
                        return match self.flood.count(self.cfg.max_unrequested) {
                            Some(failure) => Handled::End(Ended::Failed(failure)),
                            None => Handled::Ok,
                        };
                    }
                    Err(false) => return self.drop_frame(FrameDrop::Unrequested).await,
                };
                if self
                    .open
                    .get(&n)
                    .is_some_and(|s| s.seen.contains(&event.id))
                {
                    // Sent already on this subscription: a replay or a duplicate costs parsing
                    // and counts as unrequested; it is not verified again.
                    trace!(id = %event.id, "event sent again on its subscription");
                    return match self.flood.count(self.cfg.max_unrequested) {
                        Some(failure) => Handled::End(Ended::Failed(failure)),
                        None => Handled::Ok,
                    };
                }
                let Some(open) = self.open.get(&n) else {
                    return Handled::Ok;
                };
                let admitted = crate::exchange::admit(
                    event.into_owned(),
                    std::slice::from_ref(&open.filter),
                    &self.cfg,
                );
                match admitted {
                    Ok(event) => self.on_event(n, event).await,
                    // Not what this subscription asked: not counted as bad, but not passed on
                    // either.
                    Err(FrameDrop::Unrequested) => self.unrequested().await,
                    Err(reason) => self.drop_frame(reason).await,
                }
            }
            RelayMessage::EndOfStoredEvents(subscription_id) => {
                let Ok(n) = self.lookup(&subscription_id) else {
                    return Handled::Ok;
                };
                *attempt = 0;
                match self.on_eose(ws, n).await {
                    Ok(true) => Handled::Ok,
                    Ok(false) => Handled::End(Ended::Shutdown),
                    Err(f) => Handled::End(Ended::Failed(f)),
                }
            }
            RelayMessage::Closed {
                subscription_id,
                message,
            } => {
                let Ok(n) = self.lookup(&subscription_id) else {
                    return Handled::Ok;
                };
                let message = message.into_owned();
                let Some(open) = self.open.remove(&n) else {
                    return Handled::Ok;
                };
                info!(sub = %subscription_id, reason = %truncate(&message), "CLOSED");
                let refusal = Refusal::of(&message);
                if refusal == Refusal::RateLimited {
                    if self.rate_limited < MAX_RATE_LIMITED_RESENDS {
                        return self.slow_down(&open);
                    }
                    return Handled::End(Ended::Failed(Failure::RateLimited(message)));
                }
                if !refusal.is_definitive() {
                    return Handled::End(Ended::Failed(Failure::Refused(message)));
                }
                let message = if refusal == Refusal::SignIn && self.client.signer().is_some() {
                    match self.auth_required(ws, &open, &message).await {
                        // Asked again once signed in.
                        Ok(None) => return Handled::Ok,
                        Ok(Some(why)) => why,
                        Err(f) => return Handled::End(Ended::Failed(f)),
                    }
                } else {
                    message
                };
                self.refuse(ws, open.kind, message).await
            }
            RelayMessage::Notice(notice) => {
                let refusal = Refusal::of(&notice);
                debug!(notice = %truncate(&notice), %refusal, "NOTICE");
                Handled::Ok
            }
            // Challenges and the OK to the AUTH event are the socket's (`sockets::auth`); the
            // slot publishes nothing.
            _ => Handled::Ok,
        }
    }

    /// Sets a purpose aside for this slot's life: a refusal retrying cannot fix (the
    /// coordinator sets the relay aside).
    /// A page refused with `rate-limited:`: asked again after the config's backoff, no page
    /// sent meanwhile. Not a failure: the relay is up and answers, it only asks us to wait.
    fn slow_down(&mut self, open: &OpenSub) -> Handled {
        if let Some(chunk) = self
            .purposes
            .get_mut(&open.kind)
            .and_then(|p| p.chunks.get_mut(open.chunk))
        {
            if chunk.state == ChunkState::Asking {
                chunk.state = ChunkState::Ready;
            }
        }
        let delay = self.cfg.backoff.delay(self.rate_limited, &mut self.rng);
        self.rate_limited += 1;
        info!(
            delay_ms = delay.as_millis() as u64,
            times = self.rate_limited,
            "rate-limited: asking again later"
        );
        self.paused = Some(crate::deadline::after(delay));
        Handled::Ok
    }

    pub(super) async fn refuse(
        &mut self,
        ws: &mut Socket,
        kind: SubKind,
        message: String,
    ) -> Handled {
        if let Err(f) = self.close_purpose(ws, kind).await {
            return Handled::End(Ended::Failed(f));
        }
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Handled::Ok;
        };
        purpose.refused = true;
        purpose.chunks.clear();
        if self
            .report(ReportKind::Refused { sub: kind, message })
            .await
        {
            Handled::Ok
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    /// A valid event outside its subscription's filter: counted toward a flood and reported.
    async fn unrequested(&mut self) -> Handled {
        if let Some(failure) = self.flood.count(self.cfg.max_unrequested) {
            return Handled::End(Ended::Failed(failure));
        }
        let reason = FrameDrop::Unrequested;
        if self.report(ReportKind::Dropped { reason }).await {
            Handled::Ok
        } else {
            Handled::End(Ended::Shutdown)
        }
    }

    /// An [admitted](crate::exchange::admit) event on open subscription `n`: counted for its
    /// page, passed on the first time its chunk sees it (live notes always).
    pub(super) async fn on_event(&mut self, n: u64, event: Event) -> Handled {
        let Some(open) = self.open.get_mut(&n) else {
            return Handled::Ok;
        };
        open.seen.insert(event.id);
        let kind = open.kind;
        let fresh = match open.page.as_mut() {
            Some(page) => {
                let Some(purpose) = self.purposes.get_mut(&kind) else {
                    return Handled::Ok;
                };
                let Some(chunk) = purpose.chunks.get_mut(open.chunk) else {
                    return Handled::Ok;
                };
                purpose.received += 1;
                let answer = &mut page.answer;
                answer.returned = answer.returned.saturating_add(1);
                let at = event.created_at.as_secs();
                answer.oldest = Some(answer.oldest.map_or(at, |o| o.min(at)));
                let fresh = chunk.seen.insert(event.id);
                if fresh {
                    answer.new = answer.new.saturating_add(1);
                }
                fresh
            }
            None => true,
        };
        if !fresh {
            return Handled::Ok;
        }
        let report = ReportKind::Event {
            sub: kind,
            event: Box::new(event),
        };
        if self.report(report).await {
            Handled::Ok
        } else {
            Handled::End(Ended::Shutdown)
        }
    }
}

//! The session's answers into reports: events counted for their page and passed on the first
//! time their chunk sees them, EOSE into the next page, and what a page's end means for the
//! purpose or the connection.

use super::*;
use crate::connection::exchange::{Answer, Ended as AskEnded, Heard};

impl Slot {
    /// What the session heard, applied. `attempt` (the reconnect backoff) starts over at an
    /// EOSE: the relay answers.
    pub(super) async fn heard(
        &mut self,
        s: &mut Session<'_>,
        heard: Heard,
        attempt: &mut u32,
    ) -> Handled {
        match heard {
            Heard::Answer(id, Answer::Event(event)) => self.on_event(id, event).await,
            Heard::Answer(id, Answer::Eose) => {
                *attempt = 0;
                match self.on_eose(s, id).await {
                    Ok(true) => Handled::Ok,
                    Ok(false) => Handled::End(Ended::Shutdown),
                    Err(f) => Handled::End(Ended::Failed(f)),
                }
            }
            Heard::Answer(id, Answer::Ended(ended)) => self.page_ended(s, id, ended).await,
            // A page asks no OK, count or reconciliation.
            Heard::Answer(_, Answer::Ok { .. } | Answer::Count(_) | Answer::Reconcile(_)) => {
                Handled::Ok
            }
            Heard::Dropped(reason) => {
                if self.report(ReportKind::Dropped { reason }).await {
                    Handled::Ok
                } else {
                    Handled::End(Ended::Shutdown)
                }
            }
            Heard::SignedIn => {
                if self.report(ReportKind::Authenticated).await {
                    Handled::Ok
                } else {
                    Handled::End(Ended::Shutdown)
                }
            }
            Heard::Broken(broken) => Handled::End(Ended::Failed(broken.into())),
        }
    }

    /// Page `id` ended without its EOSE (or, kept open for live notes, ended later).
    async fn page_ended(&mut self, s: &mut Session<'_>, id: AskId, ended: AskEnded) -> Handled {
        let Some(open) = self.open.get(&id) else {
            // Closed by us already (a purpose refused with it).
            return Handled::Ok;
        };
        let (kind, live) = (open.kind, open.page.is_none());
        match ended {
            AskEnded::TimedOut(_) => Handled::End(Ended::Failed(Failure::EoseTimeout(kind))),
            AskEnded::Lost(why) => Handled::End(Ended::Failed(Failure::Lost(why))),
            AskEnded::Flooded(n) => Handled::End(Ended::Failed(Failure::Flooded(n))),
            AskEnded::Refused { refusal, message } => {
                info!(sub = kind.id(), reason = %truncate(&message), "refused");
                self.open.remove(&id);
                if refusal == Refusal::RateLimited {
                    if live {
                        // Its stored notes are in: only this chunk's live notes stop.
                        debug!(sub = kind.id(), "a live subscription was rate-limited");
                        return Handled::Ok;
                    }
                    return Handled::End(Ended::Failed(Failure::RateLimited(message)));
                }
                if !refusal.is_definitive() {
                    return Handled::End(Ended::Failed(Failure::Refused(message)));
                }
                self.refuse(s, kind, message).await
            }
        }
    }

    /// Sets a purpose aside for this slot's life: a refusal retrying cannot fix (the
    /// coordinator sets the relay aside).
    pub(super) async fn refuse(
        &mut self,
        s: &mut Session<'_>,
        kind: SubKind,
        message: String,
    ) -> Handled {
        if let Err(f) = self.close_purpose(s, kind).await {
            return Handled::End(Ended::Failed(f));
        }
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Handled::Ok;
        };
        purpose.refused = true;
        purpose.chunks.clear();
        if !self
            .report(ReportKind::Refused { sub: kind, message })
            .await
        {
            return Handled::End(Ended::Shutdown);
        }
        // The other purpose may use the freed subscriptions.
        match self.pump(s, kind.other()).await {
            Ok(()) => Handled::Ok,
            Err(f) => Handled::End(Ended::Failed(f)),
        }
    }

    /// An [admitted](crate::connection::exchange::admit) event on page `id`: counted for its page, passed
    /// on the first time its chunk sees it (live notes always).
    pub(super) async fn on_event(&mut self, id: AskId, event: Event) -> Handled {
        let Some(open) = self.open.get_mut(&id) else {
            return Handled::Ok;
        };
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

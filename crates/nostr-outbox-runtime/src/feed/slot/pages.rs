//! Paging on the open socket: a purpose split into author chunks, pages sent within the relay's
//! subscription budget, each EOSE answered by the next page or the chunk's end, and the
//! purpose's EOSE reported once every chunk ended.

use super::*;
use crate::connection::exchange::Ask;

impl Slot {
    /// Splits a purpose's filter into chunks for this connection and marks every first page due.
    pub(super) fn start_run(&mut self, kind: SubKind) {
        let paging = self.cfg.limits.paging;
        let limit = paging.limit_for(&self.limits);
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return;
        };
        let since = purpose.filter.since.map(|t| t.as_secs());
        let groups: Vec<Option<BTreeSet<PublicKey>>> = match &purpose.filter.authors {
            None => vec![None],
            Some(authors) => {
                let authors: Vec<PublicKey> = authors.iter().copied().collect();
                paging::chunk(&authors, &self.limits, &paging)
                    .into_iter()
                    .map(|c| Some(c.into_iter().collect()))
                    .collect()
            }
        };
        purpose.chunks = groups
            .into_iter()
            .map(|authors| Chunk {
                authors,
                cursor: Cursor::new(limit, since),
                seen: HashSet::new(),
                state: ChunkState::Ready,
            })
            .collect();
        purpose.started = None;
        purpose.latency = None;
        purpose.reported = false;
        debug!(
            sub = kind.id(),
            chunks = purpose.chunks.len(),
            limit,
            "paging"
        );
    }

    /// Most subscriptions the relay keeps open per connection.
    pub(super) fn sub_budget(&self) -> usize {
        let n = self
            .limits
            .max_subscriptions
            .unwrap_or(self.cfg.limits.default_max_subscriptions);
        usize::try_from(n).unwrap_or(usize::MAX).max(1)
    }

    /// Whether `kind` may open one more page: within the relay's subscription budget, leaving
    /// one for the other purpose while it is active, and within the pages-in-flight bound.
    pub(super) fn may_open(&self, kind: SubKind) -> bool {
        let budget = self.sub_budget();
        let own = self.open.values().filter(|s| s.kind == kind).count();
        let in_flight = self
            .open
            .values()
            .filter(|s| s.kind == kind && s.page.is_some())
            .count();
        let other_active = self.purposes.get(&kind.other()).is_some_and(|p| !p.refused);
        let own_cap = if other_active {
            budget.saturating_sub(1).max(1)
        } else {
            budget
        };
        self.open.len() < budget
            && own < own_cap
            && in_flight < self.cfg.limits.concurrent_pages.max(1)
    }

    /// Whether an answered first page may stay open for live notes: live subscriptions leave
    /// two of the budget to paging (one per purpose).
    pub(super) fn may_keep_live(&self) -> bool {
        let live = self.open.values().filter(|s| s.page.is_none()).count();
        !self.cfg.once && live + 2 < self.sub_budget()
    }

    /// Asks every due page of `kind` the budget allows. (The session holds them while a
    /// sign-in or a rate limit is under way: the relay would refuse them.)
    pub(super) async fn pump(&mut self, s: &mut Session<'_>, kind: SubKind) -> Result<(), Failure> {
        while self.may_open(kind) {
            let Some(purpose) = self.purposes.get(&kind) else {
                return Ok(());
            };
            if purpose.refused {
                return Ok(());
            }
            let Some(index) = purpose
                .chunks
                .iter()
                .position(|c| c.state == ChunkState::Ready)
            else {
                return Ok(());
            };
            self.send_page(s, kind, index).await?;
        }
        Ok(())
    }

    /// Asks the next page of chunk `index` of `kind`, as a subscription of its own.
    pub(super) async fn send_page(
        &mut self,
        s: &mut Session<'_>,
        kind: SubKind,
        index: usize,
    ) -> Result<(), Failure> {
        let n = self.next_sub;
        self.next_sub += 1;
        let eose_timeout = self.cfg.eose_timeout;
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Ok(());
        };
        let generation = purpose.generation;
        let Some(chunk) = purpose.chunks.get_mut(index) else {
            return Ok(());
        };
        let mut filter = purpose.filter.clone();
        filter.authors = chunk.authors.clone();
        filter.limit = Some(chunk.cursor.limit() as usize);
        if let Some(until) = chunk.cursor.until() {
            filter.until = Some(Timestamp::from(until));
        }
        let first = chunk.cursor.pages() == 0;
        chunk.state = ChunkState::Asking;
        purpose.started.get_or_insert_with(Instant::now);
        purpose.pages += 1;
        debug!(
            sub = n,
            purpose = kind.id(),
            generation,
            chunk = index,
            until = ?filter.until.map(|t| t.as_secs()),
            "REQ"
        );
        // Pages are bounded by their limit, not by a cap: the flood guard counts beyond it.
        let ask = Ask::Req {
            sub: sub_id(kind, n),
            filters: vec![filter],
            cap: usize::MAX,
        };
        let id = s.ask(ask, eose_timeout).await.map_err(Failure::from)?;
        self.open.insert(
            id,
            OpenSub {
                kind,
                chunk: index,
                page: Some(PageInFlight {
                    first,
                    answer: Page::default(),
                }),
            },
        );
        Ok(())
    }

    pub(super) async fn close_sub(
        &mut self,
        s: &mut Session<'_>,
        id: AskId,
    ) -> Result<(), Failure> {
        if self.open.remove(&id).is_none() {
            return Ok(());
        }
        s.close(id).await.map_err(Failure::from)
    }

    /// Closes every open subscription of `kind`.
    pub(super) async fn close_purpose(
        &mut self,
        s: &mut Session<'_>,
        kind: SubKind,
    ) -> Result<(), Failure> {
        let mut subs: Vec<AskId> = self
            .open
            .iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(n, _)| *n)
            .collect();
        subs.sort_unstable();
        for id in subs {
            self.close_sub(s, id).await?;
        }
        Ok(())
    }

    /// Reports the purpose's EOSE once every chunk's paging ended. Returns false when the
    /// coordinator is gone.
    pub(super) async fn report_if_done(&mut self, kind: SubKind) -> bool {
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return true;
        };
        let done = purpose
            .chunks
            .iter()
            .all(|c| matches!(c.state, ChunkState::Done(_)));
        if !done || purpose.reported || purpose.refused {
            return true;
        }
        purpose.reported = true;
        let complete = purpose.chunks.iter().all(|c| match c.state {
            ChunkState::Done(why) => why.is_complete(),
            _ => false,
        });
        let elapsed = purpose.started.map(|t| t.elapsed()).unwrap_or_default();
        let latency = purpose.latency.unwrap_or(elapsed);
        let (pages, received) = (
            std::mem::take(&mut purpose.pages),
            std::mem::take(&mut purpose.received),
        );
        let generation = purpose.generation;
        debug!(
            sub = kind.id(),
            generation,
            pages,
            received,
            complete,
            elapsed_ms = elapsed.as_millis() as u64,
            "EOSE"
        );
        if !complete {
            warn!(
                sub = kind.id(),
                pages, "page budget ran out: older events may remain on the relay"
            );
        }
        self.report(ReportKind::Eose {
            sub: kind,
            generation,
            elapsed,
            latency,
            pages,
            received,
            complete,
        })
        .await
    }

    /// Starts paging `kind` on this socket and reports at once if there is nothing to ask.
    pub(super) async fn begin(
        &mut self,
        s: &mut Session<'_>,
        kind: SubKind,
    ) -> Result<bool, Failure> {
        self.start_run(kind);
        self.pump(s, kind).await?;
        Ok(self.report_if_done(kind).await)
    }

    /// EOSE of page `id`: the page is answered; the chunk asks again or ends, and the
    /// subscription is closed or (a first page of a continuing feed) kept for live notes.
    pub(super) async fn on_eose(
        &mut self,
        s: &mut Session<'_>,
        id: AskId,
    ) -> Result<bool, Failure> {
        let paging = self.cfg.limits.paging;
        let keep_live = self.may_keep_live();
        let Some(open) = self.open.get_mut(&id) else {
            return Ok(true);
        };
        let Some(page) = open.page.take() else {
            // A live subscription's EOSE was long ago; a repeat means nothing.
            return Ok(true);
        };
        let (kind, index) = (open.kind, open.chunk);
        let Some(purpose) = self.purposes.get_mut(&kind) else {
            return Ok(true);
        };
        if purpose.latency.is_none() {
            purpose.latency = purpose.started.map(|t| t.elapsed());
        }
        let Some(chunk) = purpose.chunks.get_mut(index) else {
            return Ok(true);
        };
        match chunk.cursor.answer(page.answer, &mut self.cap, &paging) {
            Next::Page { until } => {
                trace!(
                    chunk = index,
                    until,
                    returned = page.answer.returned,
                    "next page"
                );
                chunk.state = ChunkState::Ready;
            }
            Next::Done(why) => {
                trace!(
                    chunk = index,
                    ?why,
                    pages = chunk.cursor.pages(),
                    "chunk done"
                );
                chunk.state = ChunkState::Done(why);
                chunk.seen = HashSet::new();
            }
        }
        if page.first && !keep_live && !self.cfg.once {
            warn!(
                sub = kind.id(),
                chunk = index,
                "subscription limit reached: this chunk's authors are not followed live"
            );
        }
        if !(page.first && keep_live) {
            self.close_sub(s, id).await?;
        }
        self.pump(s, kind).await?;
        if !self.report_if_done(kind).await {
            return Ok(false);
        }
        // A finished purpose frees subscriptions for the other.
        self.pump(s, kind.other()).await?;
        Ok(true)
    }
}

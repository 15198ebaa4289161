//! The slot's connection: dialling with backoff, one session per socket (commands and the
//! session's answers), and closing politely.

use rand::RngCore;

use super::*;
use crate::connection::sockets::{DialError, Role};

impl Slot {
    /// The relay's document if it comes in time: the fetch runs alongside the connect, and the
    /// first REQ waits for it at most [`Nip11Config::wait`](crate::connection::limits::Nip11Config::wait)
    /// after the socket opened. A late document is cached for the next connection.
    pub(super) fn start_nip11(&self) -> Option<tokio::task::JoinHandle<Option<RelayLimits>>> {
        let cfg = &self.cfg.limits.nip11;
        if !cfg.enabled {
            return None;
        }
        let (client, url, cfg) = (self.client.clone(), self.url.clone(), cfg.clone());
        Some(tokio::spawn(async move {
            client
                .documents()
                .limits(&url, &cfg, client.sockets())
                .await
        }))
    }

    pub(super) async fn run(&mut self, commands: &mut mpsc::UnboundedReceiver<SlotCommand>) {
        let mut attempt: u32 = 0;
        loop {
            // Nothing to ask: wait for work instead of holding a socket open.
            while self.purposes.values().all(|p| p.refused || p.settled) {
                if !self.apply_offline(commands.recv().await) {
                    return;
                }
            }
            let mut document = self.start_nip11();
            let (client, url) = (self.client.clone(), self.url.clone());
            let (placed_tx, mut placed) = oneshot::channel();
            let connect = async move {
                let dial = client.config().dial();
                (client.sockets())
                    .link_placed(&url, Role::Feed, dial, Some(placed_tx))
                    .await
            };
            tokio::pin!(connect);
            // The handshake counts from the place: time spent waiting for one is the budget's.
            let mut started = Instant::now();
            let mut waiting = true;
            let connected = loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    _ = &mut placed, if waiting => {
                        waiting = false;
                        started = Instant::now();
                        if !self.report(ReportKind::Dialling).await {
                            return;
                        }
                    }
                    res = &mut connect => break res,
                }
            };
            let outcome = match connected {
                Err(DialError::TimedOut) => Ended::Failed(Failure::ConnectTimeout),
                Err(DialError::Failed(e)) => Ended::Failed(Failure::Connect(e)),
                Ok(mut ws) => {
                    let handshake = started.elapsed();
                    info!(handshake_ms = handshake.as_millis() as u64, "connected");
                    if !self.report(ReportKind::Connected { handshake }).await {
                        return;
                    }
                    // A relay never heard from is asked nothing before its document's
                    // verdict (it may require payment or sign-in), within the fetch's timeout.
                    let nip11 = &self.cfg.limits.nip11;
                    let wait = if self.patient {
                        nip11.wait.max(nip11.timeout)
                    } else {
                        nip11.wait
                    };
                    self.patient = false;
                    self.limits = match document.as_mut() {
                        Some(task) => match timeout(wait, task).await {
                            Ok(Ok(Some(limits))) => limits,
                            _ => RelayLimits::default(),
                        },
                        None => RelayLimits::default(),
                    };
                    debug!(limits = ?self.limits, "relay limits");
                    if let Some(max) = self.limits.max_subscriptions {
                        // Every purpose on the socket shares the relay's limit.
                        ws.limit_subscriptions(usize::try_from(max).unwrap_or(usize::MAX));
                    }
                    if let Some(lacking) = Requirement::unmet(&self.limits, &self.url, &self.client)
                    {
                        // The coordinator leaves it out of the plan and closes this slot;
                        // nothing is asked of it meanwhile.
                        if !self.report(ReportKind::Requires(lacking)).await {
                            return;
                        }
                        for purpose in self.purposes.values_mut() {
                            purpose.refused = true;
                        }
                        let _ = timeout(Duration::from_millis(200), ws.close()).await;
                        continue;
                    }
                    let ended = self.session(&mut ws, commands, &mut attempt).await;
                    // A relay that stalls or misbehaves is dropped for every purpose on it.
                    if let Ended::Failed(
                        f @ (Failure::EoseTimeout(_) | Failure::BadFrames(_) | Failure::Flooded(_)),
                    ) = &ended
                    {
                        ws.abandon(f.to_string());
                    }
                    ended
                }
            };
            // A fetch still running is left to finish into the cache.
            drop(document);
            match outcome {
                Ended::Shutdown => return,
                Ended::Parked => {
                    debug!("answered; the socket's place is given to a waiting link");
                    for purpose in self.purposes.values_mut() {
                        purpose.settled = !purpose.refused;
                    }
                    attempt = 0;
                    continue;
                }
                Ended::Failed(failure) => {
                    warn!(%failure, attempt, "relay attempt failed");
                    if !self.report(ReportKind::Failed { failure }).await {
                        return;
                    }
                }
            }
            let delay = self.cfg.backoff.redial(attempt, &mut self.rng);
            attempt = attempt.saturating_add(1);
            debug!(delay_ms = delay.as_millis() as u64, "backing off");
            let wake = crate::deadline::after(delay);
            loop {
                tokio::select! {
                    cmd = commands.recv() => {
                        if !self.apply_offline(cmd) {
                            return;
                        }
                    }
                    _ = sleep_until(wake) => break,
                }
            }
        }
    }

    /// One connection: every purpose paged on one session over the link, until a command or
    /// the session ends it.
    pub(super) async fn session(
        &mut self,
        ws: &mut Socket,
        commands: &mut mpsc::UnboundedReceiver<SlotCommand>,
        attempt: &mut u32,
    ) -> Ended {
        // A fresh socket knows no subscriptions: page every purpose from the start.
        self.open.clear();
        self.cap = CapEstimate::new(&self.limits);
        let mut s = Session::new(ws, &self.client, self.rng.next_u64()).policed();
        let kinds: Vec<SubKind> = self
            .purposes
            .iter()
            .filter(|(_, p)| !p.refused && !p.settled)
            .map(|(k, _)| *k)
            .collect();
        let mut contention = self.client.sockets().contention();
        for kind in kinds {
            match self.begin(&mut s, kind).await {
                Ok(true) => {}
                Ok(false) => return Ended::Shutdown,
                Err(f) => return Ended::Failed(f),
            }
        }
        loop {
            let answered = self.answered(&s);
            if answered && *contention.borrow_and_update() > 0 {
                return Ended::Parked;
            }
            let handled = tokio::select! {
                cmd = commands.recv() => self.command(&mut s, cmd).await,
                heard = s.next() => self.heard(&mut s, heard, attempt).await,
                // Someone waits for a place: the loop's top gives this one up if it is done.
                // The sender lives as long as the sockets this slot's client holds.
                _ = contention.changed(), if answered => Handled::Ok,
            };
            if let Handled::End(ended) = handled {
                return ended;
            }
        }
    }

    /// A command of the coordinator while connected.
    async fn command(&mut self, s: &mut Session<'_>, cmd: Option<SlotCommand>) -> Handled {
        let failed = |f| Handled::End(Ended::Failed(f));
        match cmd {
            Some(SlotCommand::Req {
                sub,
                filter,
                generation,
            }) => {
                if let Err(f) = self.close_purpose(s, sub).await {
                    return failed(f);
                }
                self.set_purpose(sub, *filter, generation);
                match self.begin(s, sub).await {
                    Ok(true) => Handled::Ok,
                    Ok(false) => Handled::End(Ended::Shutdown),
                    Err(f) => failed(f),
                }
            }
            Some(SlotCommand::Close { sub }) => {
                if let Err(f) = self.close_purpose(s, sub).await {
                    return failed(f);
                }
                self.purposes.remove(&sub);
                // The other purpose may use the freed subscriptions.
                match self.pump(s, sub.other()).await {
                    Ok(()) => Handled::Ok,
                    Err(f) => failed(f),
                }
            }
            Some(SlotCommand::Shutdown) | None => {
                self.close_socket(s).await;
                Handled::End(Ended::Shutdown)
            }
        }
    }

    /// A one-shot slot with every purpose answered (or refused) and nothing in flight: its
    /// socket's place may go to a link waiting for one. A continuing feed never is, as its
    /// subscriptions stay open for live notes.
    fn answered(&self, s: &Session<'_>) -> bool {
        self.cfg.once
            && self.open.is_empty()
            && s.is_idle()
            && self.purposes.values().all(|p| p.refused || p.reported)
    }

    /// Closes every open subscription, then leaves the socket, within the shutdown grace.
    async fn close_socket(&mut self, s: &mut Session<'_>) {
        let grace = self.cfg.shutdown_grace;
        let mut subs: Vec<AskId> = self.open.keys().copied().collect();
        subs.sort_unstable();
        self.open.clear();
        let polite = async {
            for id in subs {
                if let Err(e) = s.close(id).await {
                    return Err(e.to_string());
                }
            }
            s.link().close().await.map_err(|e| e.to_string())
        };
        match timeout(grace, polite).await {
            Ok(Ok(())) => debug!("closed"),
            Ok(Err(e)) => debug!(error = %e, "close failed; dropping the socket"),
            Err(_) => debug!("close timed out; dropping the socket"),
        }
    }
}

//! Probes after the fetch: short questions to relays the run did not ask
//! ([`nostr_outbox_core::probe`]).
//!
//! Each relay of a [`ProbePlan`] gets one socket and one REQ, a filter per follow asking its
//! newest notes of the feed's window, through the route feed's relay task
//! ([`crate::asks::route_feed`]: dial, REQ, verified events that match until EOSE, with `once`). The
//! client's socket budget is the one cap on probe sockets, as on everything else: a relay waits
//! for a place of it before it dials ([`Sockets`](crate::Sockets)). A probe gives up connecting
//! after the schedule's `probe_connect_timeout`, but a
//! [patient](nostr_outbox_core::Probe::patient) one (the relay failed before) waits the whole
//! connect timeout. Nothing is de-duplicated across relays:
//! every relay's own answer is what is learned from, so each comes back whole, as one
//! [`ProbeAnswer`], for the coordinator to pass to its recorder
//! ([`nostr_outbox_client::RoundRecorder::probed`]). The coordinator passes on to the feed the
//! notes no relay delivered before ([`FeedEvent::Found`](crate::FeedEvent::Found)): they are
//! verified notes of follows within the feed's window, found where the plan did not look.
//!
//! Bounded: every relay by the connect and EOSE timeouts, the whole run by its waves of those
//! (as many waves as the budget's places take to probe every relay),
//! the notes kept per relay by the filters' limits (at most
//! [`MAX_STORED_EVENTS`](crate::asks::route_feed::MAX_STORED_EVENTS)).

use std::time::Duration;

use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_core::ProbePlan;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, trace, warn};

use crate::asks::route_feed::{relay_seed, Relay, RouteEvent, MAX_STORED_EVENTS};
use crate::client::Client;
use crate::connection::refusal::Refusal;

/// The filter generation probes are recorded with: a probed relay was not asked in the run, so
/// there is no earlier filter to tell its answer apart from (the simulator records the same).
pub(crate) const PROBE_GENERATION: u64 = 1;

/// The subscription id of every probe REQ (one per socket).
const PROBE_SUB: &str = "outbox-probe";

/// Added to the bound of a whole probe run for closing sockets and scheduling.
const RUN_SLACK: Duration = Duration::from_secs(1);

/// How a probed relay's question ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// EOSE.
    Answered,
    /// The socket failed, timed out, or the relay refused (its words, not escaped; and what
    /// its refusal's prefix says).
    Failed(String, Option<Refusal>),
    /// Stopped before it answered or failed (the feed ended): nothing to learn.
    Stopped,
}

/// One probed relay's answer, with every note it returned (no de-duplication across relays).
#[derive(Debug)]
pub(crate) struct ProbeAnswer {
    /// Canonical relay URL.
    pub(crate) url: String,
    /// The follows it was asked about.
    pub(crate) authors: Vec<PublicKey>,
    /// Verified notes matching the probe's filters, not dated in the future.
    pub(crate) notes: Vec<Event>,
    /// How it ended.
    pub(crate) ended: Ended,
    /// Notes asked per follow ([`ProbePlan::limit`]).
    pub(crate) limit: u32,
}

/// A probe run in its own task: every answer comes back together when the last relay is done.
pub(crate) struct Probing {
    stop: watch::Sender<bool>,
    handle: JoinHandle<Vec<ProbeAnswer>>,
}

impl Probing {
    /// Starts probing every relay of `plan` for notes of `kinds` since `since`, within the
    /// client's socket budget.
    pub(crate) fn start(
        plan: &ProbePlan,
        client: &Client,
        kinds: &[Kind],
        since: Option<u64>,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        // The places short work may take: the whole budget (an unbounded one: every probe).
        let places = client
            .sockets()
            .budget()
            .max_sockets
            .unwrap_or(usize::MAX)
            .min(plan.probes.len())
            .max(1);
        let mut patient_cfg = client.config().clone();
        patient_cfg.once = true;
        let mut cfg = patient_cfg.clone();
        cfg.connect_timeout = cfg.connect_timeout.min(cfg.schedule.probe_connect_timeout);
        // A relay that failed before waits the whole connect timeout (`Probe::patient`).
        let longest = if plan.probes.iter().any(|p| p.patient) {
            patient_cfg.connect_timeout
        } else {
            cfg.connect_timeout
        };
        let per_relay = longest
            .saturating_add(cfg.eose_timeout)
            .saturating_add(RUN_SLACK);
        let waves = plan.probes.len().div_ceil(places).max(1);
        let bound = per_relay.saturating_mul(u32::try_from(waves).unwrap_or(u32::MAX));
        let deadline = crate::deadline::after(bound);
        let (tx, rx) = mpsc::channel(plan.probes.len().max(1));
        let mut tasks = JoinSet::new();
        let patient = client.with_config(patient_cfg);
        let client = client.with_config(cfg);
        let cfg = client.config();
        for (i, probe) in plan.probes.iter().enumerate() {
            let target = Target {
                limit: plan.limit,
                url: probe.url.clone(),
                filters: plan.filters(probe, kinds, since),
                authors: probe.authors.clone(),
                seed: relay_seed(cfg.seed, i),
            };
            tasks.spawn(probe_one(
                target,
                if probe.patient { &patient } else { &client }.clone(),
                stop_rx.clone(),
                tx.clone(),
            ));
        }
        drop(tx);
        debug!(relays = plan.probes.len(), places, "probing");
        let handle = tokio::spawn(collect(tasks, rx, stop.clone(), deadline));
        Self { stop, handle }
    }

    /// Waits for every answer.
    pub(crate) async fn join(&mut self) -> Vec<ProbeAnswer> {
        match (&mut self.handle).await {
            Ok(answers) => answers,
            Err(e) => {
                warn!(error = %e, "the probe task failed; nothing learned from it");
                Vec::new()
            }
        }
    }

    /// Stops every relay still probing and returns what came back, waiting at most `grace`.
    pub(crate) async fn stop(mut self, grace: Duration) -> Vec<ProbeAnswer> {
        let _ = self.stop.send(true);
        match tokio::time::timeout(grace, self.join()).await {
            Ok(answers) => answers,
            Err(_) => {
                self.handle.abort();
                Vec::new()
            }
        }
    }
}

/// Gathers the answers until every relay task is done, or stops them all at `deadline`.
async fn collect(
    mut tasks: JoinSet<()>,
    mut rx: mpsc::Receiver<ProbeAnswer>,
    stop: watch::Sender<bool>,
    deadline: Instant,
) -> Vec<ProbeAnswer> {
    let mut answers = Vec::new();
    loop {
        tokio::select! {
            answer = rx.recv() => match answer {
                Some(answer) => answers.push(answer),
                None => break,
            },
            _ = tokio::time::sleep_until(deadline) => {
                warn!(left = tasks.len(), "probes did not end in time; stopping them");
                let _ = stop.send(true);
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                while let Ok(answer) = rx.try_recv() {
                    answers.push(answer);
                }
                break;
            }
        }
    }
    answers
}

/// One relay to probe.
struct Target {
    limit: u32,
    url: String,
    filters: Vec<Filter>,
    authors: Vec<PublicKey>,
    seed: u64,
}

/// One probed relay: asks (its link waiting for a place of the socket budget), and sends back
/// its whole answer.
async fn probe_one(
    target: Target,
    client: Client,
    stop: watch::Receiver<bool>,
    out: mpsc::Sender<ProbeAnswer>,
) {
    let Target {
        limit,
        url,
        filters,
        authors,
        seed,
    } = target;
    let future_tolerance = client.config().future_tolerance;
    let stopped = *stop.borrow();
    let (notes, ended) = if stopped {
        (Vec::new(), Ended::Stopped)
    } else {
        let (tx, mut rx) = mpsc::channel(64);
        let cap = filters
            .iter()
            .map(|f| f.limit.unwrap_or(MAX_STORED_EVENTS))
            .sum::<usize>()
            .min(MAX_STORED_EVENTS);
        let gather = async move {
            let mut notes = Vec::new();
            let mut ended = Ended::Stopped;
            while let Some(event) = rx.recv().await {
                match event {
                    RouteEvent::Note { event, .. } => {
                        let horizon = Timestamp::now()
                            .as_secs()
                            .saturating_add(future_tolerance.as_secs());
                        let at = event.created_at.as_secs();
                        if at > horizon {
                            trace!(id = %event.id, at, "future-dated probe note dropped");
                            continue;
                        }
                        if notes.len() < cap {
                            notes.push(*event);
                        }
                    }
                    RouteEvent::Eose { .. } => ended = Ended::Answered,
                    RouteEvent::Failed {
                        reason, refusal, ..
                    } => ended = Ended::Failed(reason, refusal),
                }
            }
            (notes, ended)
        };
        let relay = Relay {
            url: url.clone(),
            filters,
            client,
            tx,
            stop,
            seed,
            sub: PROBE_SUB,
            role: crate::connection::sockets::Role::Probe,
        };
        let ((), gathered) = tokio::join!(relay.run(), gather);
        gathered
    };
    let _ = out
        .send(ProbeAnswer {
            url,
            authors,
            notes,
            ended,
            limit,
        })
        .await;
}

//! A routed, paged read on nostr-sdk's own `Client`.
//!
//! As a gossip engine, [`OutboxGossip`] only says which relays to ask about each author;
//! nostr-sdk then sends one REQ per relay and takes what comes before EOSE. Real relays cap
//! each REQ (strfry returns 500 events, others 100–5,000), so a window longer than a few days
//! of a busy follow set loses everything past the first page, on every relay. [`read`] asks
//! each relay of the engine's plan about its own follows and pages backwards past the relay's
//! cap, the way the project's runtime and simulator page (`nostr_outbox_client::paging`: author
//! chunks, `until` = the oldest `created_at` seen, a cap learned from the pages' sizes), on the
//! caller's `Client`: its pool, its signer (NIP-42), its database. The notes reach the engine
//! as they arrive (nostr-sdk hands every event to the client's gossip engine), and the read
//! ends the engine's round with the relays that answered, so failures are learned too.
//!
//! A relay of the plan that does not answer, or answers with none of its follows' notes where
//! another relay had some, has its follows asked elsewhere in the same read, from a plan made
//! without it, as the runtime re-plans around a relay it sets aside; later reads of the round
//! leave a relay that did not answer out from the start. A round dials at most its plan's
//! relays, [`ReadOptions::fallback`] more to ask elsewhere and [`ReadOptions::probes`] more to
//! learn (probes that ask around a failure instead of learning set the next sessions back:
//! docs/results.md).
//!
//! A probe whose page for a follow is full and holds notes the read lacks has found where that
//! follow's notes are (a prolific follow whose plan relay was down or never had them): the
//! follow is paged back to the window's start on that relay, on the probe's connection, and its
//! notes join the read's. The round's later reads ask it there too. No relay is dialled for it.
//!
//! [`read`]: OutboxGossip::read

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use nostr::event::{Event, EventId, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::{RelayUrl, Timestamp};
use nostr_outbox_client::paging::{self, CapEstimate, Cursor, Next, Page, Paging, RelayLimits};
use nostr_sdk::prelude::{Client, ReqTarget};
use tokio::task::JoinSet;

use crate::engine::Route;
use crate::OutboxGossip;

/// Events one read keeps at most, over every relay: a bound on memory whatever the relays send.
pub const MAX_READ_EVENTS: usize = 200_000;

/// How a [`read`](OutboxGossip::read) pages and how long it waits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadOptions {
    /// How pages are sized and how many a chunk may take (the runtime's defaults).
    pub paging: Paging,
    /// The wait for a relay's socket to open (the client's own dial).
    pub connect_timeout: Duration,
    /// The wait for one page's EOSE; a page cut off by it counts with what it brought.
    pub page_timeout: Duration,
    /// End the engine's round when the read is done (learning from it at once), and end the
    /// open one before it starts. A caller that reads several windows of one feed in a row may
    /// keep them in one round and end it itself after the last
    /// ([`OutboxGossip::end_round`] with the reads' [`ReadReport::reached`]), so a short
    /// window's silence is not learned alone; reading the widest first lets the others ask
    /// where its probes found follows (see [`probes`](Self::probes)).
    pub end_round: bool,
    /// Relays outside the plan asked after the read, each about the follows who list it, for
    /// their newest notes ([`nostr_outbox_core::probe`]): what the engine learns about a relay
    /// its plan never asks (a follow's own relay holding its history) comes only from these.
    /// Each is one more relay dialled; 0 learns from the plan's relays alone. A follow whose
    /// probe page is full and holds notes the read lacks is read whole there (see the module
    /// doc). A caller reading several windows in a row probes in the widest, read first.
    pub probes: usize,
    /// Relays beyond the plan a round may add to ask the follows of relays that failed or
    /// answered with none of their notes where another relay had some: a read re-plans around
    /// those, as the runtime does, at most [`MAX_READ_WAVES`] times, and later reads of the
    /// round plan around the ones that failed from the start. Each is one more relay dialled;
    /// 0 asks no relay the plan left out.
    pub fallback: usize,
    /// The wait for a probed relay's socket: most never-answered relays are dead, and a read
    /// should not wait on them (one that failed before gets `connect_timeout`).
    pub probe_connect_timeout: Duration,
}

/// Relays probed after a read when the options name no other number: on the simulator's
/// held-out worlds, 16 a session lift the year from a plateau near 66% to 85–91% by the third
/// session, where none leave it there; with the read asking around relays that fail, 12–16 do
/// alike (docs/results.md).
pub const DEFAULT_READ_PROBES: usize = 14;

/// Relays a round may add to ask elsewhere when the options name no other number. With the
/// default probes, a round dials at most 16 relays beyond its plan: at a budget of 20, under a
/// quarter of what nostr-sdk's default engine dials on the live bench's worlds (docs/results.md).
pub const DEFAULT_READ_FALLBACK: usize = 2;

/// Waves of asking elsewhere after a read's first, at most: a relay a re-plan adds may fail too.
pub const MAX_READ_WAVES: usize = 2;

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            paging: Paging::default(),
            connect_timeout: Duration::from_secs(10),
            page_timeout: Duration::from_secs(15),
            end_round: true,
            probes: DEFAULT_READ_PROBES,
            fallback: DEFAULT_READ_FALLBACK,
            probe_connect_timeout: Duration::from_secs(2),
        }
    }
}

/// What a read did on one relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayRead {
    /// The relay.
    pub url: RelayUrl,
    /// Of the filter's authors, those asked of it.
    pub authors: usize,
    /// REQs sent (pages over every chunk).
    pub pages: u32,
    /// Events it returned that matched, repeats at page edges included.
    pub events: usize,
    /// How it ended.
    pub outcome: RelayOutcome,
}

/// How a relay's part of a read ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelayOutcome {
    /// Every chunk paged to its end: the relay returned all it holds in the window.
    Complete,
    /// A chunk ran out of pages ([`Paging::max_pages`]): older notes may remain.
    PageBudget,
    /// No connection, or a page failed: what came before is kept.
    Failed(String),
}

/// What a [`read`](OutboxGossip::read) brought.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    /// Every event, once.
    pub events: BTreeSet<Event>,
    /// Per relay asked, in URL order: once per wave that asked it (see
    /// [`ReadOptions::fallback`]).
    pub relays: Vec<RelayRead>,
    /// Authors of the filter with nowhere to be asked (no relay list and no reader relay).
    pub unrouted: usize,
    /// The relays that answered (for [`OutboxGossip::end_round`] when the caller ends it).
    pub reached: HashSet<RelayUrl>,
    /// Per relay probed after the read, in URL order ([`ReadOptions::probes`]). A probed relay
    /// the client's pool did not hold is removed from it after its probe.
    pub probed: Vec<RelayRead>,
    /// Notes only the probes' pages returned, not in `events`: what a client may show as
    /// found. (What a probe's relay returned when a follow was read whole there is in
    /// `events`.)
    pub found: BTreeSet<Event>,
}

impl ReadReport {
    /// Relays asked (a relay asked again in a later wave counts once).
    pub fn asked(&self) -> usize {
        self.relays
            .iter()
            .map(|r| &r.url)
            .collect::<HashSet<_>>()
            .len()
    }
}

impl OutboxGossip {
    /// Reads `filter` (which must name `authors`) from the relays the engine's plan asks about
    /// each author, on `client` (built with this engine as its gossip, so what arrives is
    /// learned), paging past each relay's cap; then ends the engine's round with the relays
    /// that answered. Relays are added to the client's pool as needed and asked at once, each
    /// its own chunks in turn. A filter without authors is read from the client's own relays,
    /// unrouted and in one page (nothing to route by).
    pub async fn read(&self, client: &Client, filter: Filter, options: ReadOptions) -> ReadReport {
        let authors: Vec<PublicKey> = filter
            .authors
            .as_ref()
            .map(|a| a.iter().copied().collect())
            .unwrap_or_default();
        if authors.is_empty() {
            let events = match (client.fetch_events(filter))
                .timeout(options.page_timeout)
                .await
            {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(%e, "the unrouted read failed");
                    Default::default()
                }
            };
            return ReadReport {
                events: events.into_iter().take(MAX_READ_EVENTS).collect(),
                ..ReadReport::default()
            };
        }
        if options.end_round {
            self.end_round_if_over(true);
        }
        // Follows an earlier read of the round found only on relays that do not answer are
        // asked elsewhere at once, with the plan's other asks.
        let (mut routes, displaced) = self.plan_routes(&authors);
        if !displaced.is_empty() && options.fallback > 0 {
            let asked = HashMap::new();
            let planned = self.routes_around(&displaced, std::iter::empty());
            for (url, keys) in self.fallback_wave(planned, &asked, &options) {
                match routes.iter_mut().find(|(u, _)| *u == url) {
                    Some((_, known)) => known.extend(keys),
                    None => routes.push((url, keys)),
                }
            }
        }
        let routed: HashSet<&PublicKey> = routes.iter().flat_map(|(_, a)| a).collect();
        let unrouted = authors.iter().filter(|a| !routed.contains(a)).count();
        let mut report = ReadReport {
            unrouted,
            ..ReadReport::default()
        };
        let mut reached = HashSet::new();
        let mut asked: HashMap<RelayUrl, HashSet<PublicKey>> = HashMap::new();
        // Relays left out of this read's re-plans: those that answered with nothing (a
        // relay that failed is set aside for the whole round).
        let mut empty: HashSet<String> = HashSet::new();
        let mut wave = routes;
        for wave_no in 0..=MAX_READ_WAVES {
            for (url, authors) in &wave {
                asked.entry(url.clone()).or_default().extend(authors);
            }
            let answers = self
                .ask_wave(client, &filter, &options, wave, &mut report)
                .await;
            let mut elsewhere: BTreeSet<PublicKey> = BTreeSet::new();
            let with_notes: HashSet<PublicKey> = report.events.iter().map(|e| e.pubkey).collect();
            for (relay, authors) in &answers {
                let answered = !matches!(relay.outcome, RelayOutcome::Failed(_)) || relay.pages > 0;
                if answered {
                    reached.insert(relay.url.clone());
                }
                if !answered {
                    self.set_aside(&relay.url);
                    elsewhere.extend(authors);
                } else if relay.events == 0 && authors.iter().any(|a| with_notes.contains(a)) {
                    // Answered with none of its follows' notes where another relay had some:
                    // what it holds of them is gone, or never came.
                    if let Some(canonical) = self.canonical(&relay.url) {
                        empty.insert(canonical);
                    }
                    elsewhere.extend(authors.iter().filter(|a| !with_notes.contains(a)));
                }
            }
            if wave_no == MAX_READ_WAVES || elsewhere.is_empty() || options.fallback == 0 {
                break;
            }
            let keys: Vec<PublicKey> = elsewhere.into_iter().collect();
            let planned = self.routes_around(&keys, empty.iter().map(String::as_str));
            wave = self.fallback_wave(planned, &asked, &options);
            if wave.is_empty() {
                break;
            }
        }
        report.relays.sort_by(|a, b| a.url.cmp(&b.url));
        self.probe(client, &filter, &options, &mut report, &mut reached)
            .await;
        if options.end_round {
            self.end_round(Some(&reached));
        }
        report.reached = reached;
        report
    }
}

impl OutboxGossip {
    /// Asks each relay of `wave` about its authors, all at once; their notes go to `report`
    /// (and each relay's part to `report.relays`). Returns each relay's part with the authors
    /// it was asked about.
    async fn ask_wave(
        &self,
        client: &Client,
        filter: &Filter,
        options: &ReadOptions,
        wave: Vec<(RelayUrl, Vec<PublicKey>)>,
        report: &mut ReadReport,
    ) -> Vec<(RelayRead, Vec<PublicKey>)> {
        let mut tasks = JoinSet::new();
        for (url, asked) in wave {
            let (client, filter, options) = (client.clone(), filter.clone(), *options);
            tasks.spawn(async move {
                let (relay, events) =
                    read_relay(&client, url, asked.clone(), filter, options).await;
                (relay, events, asked)
            });
        }
        let mut answers = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let Ok((relay, events, asked)) = joined else {
                continue;
            };
            for event in events {
                if report.events.len() >= MAX_READ_EVENTS {
                    break;
                }
                report.events.insert(event);
            }
            report.relays.push(relay.clone());
            answers.push((relay, asked));
        }
        answers
    }

    /// The asks of a wave after the first, from `planned` (a plan around the relays that did
    /// not answer): the pairs this read has not asked yet, as far as the round may add relays
    /// ([`admit`](OutboxGossip::admit) with [`ReadOptions::fallback`]).
    fn fallback_wave(
        &self,
        planned: Vec<Route>,
        asked: &HashMap<RelayUrl, HashSet<PublicKey>>,
        options: &ReadOptions,
    ) -> Vec<(RelayUrl, Vec<PublicKey>)> {
        let fresh: Vec<Route> = planned
            .into_iter()
            .filter_map(|mut route| {
                let before = asked.get(&route.url);
                route
                    .authors
                    .retain(|a| before.is_none_or(|b| !b.contains(a)));
                (!route.authors.is_empty()).then_some(route)
            })
            .collect();
        let admitted = self.admit(fresh, options.fallback);
        admitted.into_iter().map(|r| (r.url, r.authors)).collect()
    }

    /// Asks up to `options.probes` relays outside the round's asks about the follows who list
    /// them (newest notes of `filter`'s kinds and window), in the open round; relays that
    /// answer join `reached`, notes not read already go to `report.found`.
    async fn probe(
        &self,
        client: &Client,
        filter: &Filter,
        options: &ReadOptions,
        report: &mut ReadReport,
        reached: &mut HashSet<RelayUrl>,
    ) {
        let plan = self.probe_plan(options.probes);
        let kinds: Vec<Kind> = filter
            .kinds
            .as_ref()
            .map(|k| k.iter().copied().collect())
            .unwrap_or_default();
        let since = filter.since.map(|t| t.as_secs());
        // What the read has: a probe's page with notes outside it is read whole on the spot.
        let had: Arc<HashSet<EventId>> = Arc::new(report.events.iter().map(|e| e.id).collect());
        let mut tasks = JoinSet::new();
        for probe in &plan.probes {
            let Ok(url) = RelayUrl::parse(&probe.url) else {
                continue;
            };
            if !self.note_probe(&probe.url, &probe.authors, plan.limit) {
                continue;
            }
            let filters = plan.filters(probe, &kinds, since);
            let connect = if probe.patient {
                options.connect_timeout
            } else {
                options.probe_connect_timeout
            };
            let (client, filter, options, had) =
                (client.clone(), filter.clone(), *options, had.clone());
            let (authors, limit) = (probe.authors.len(), plan.limit as usize);
            tasks.spawn(async move {
                let mut relay = RelayRead {
                    url: url.clone(),
                    authors,
                    pages: 0,
                    events: 0,
                    outcome: RelayOutcome::Complete,
                };
                // A relay the pool did not hold leaves it after its probe: a client that
                // reads for days would otherwise keep a socket to every relay it ever probed.
                let known = matches!(client.relay(&url).await, Ok(Some(_)));
                let _ = client.add_relay(&url).await;
                let answer = match client.try_connect_relay(&url, connect).await {
                    Err(e) => Err(e.to_string()),
                    Ok(_) => {
                        relay.pages = 1;
                        client
                            .fetch_events(ReqTarget::single(&url, filters))
                            .timeout(options.page_timeout)
                            .await
                            .map_err(|e| e.to_string())
                    }
                };
                let mut probe = Probed::default();
                match answer {
                    Ok(events) => {
                        probe.answered = true;
                        probe.sample = events.into_iter().collect();
                        relay.events = probe.sample.len();
                        probe.hits = hits(&probe.sample, limit, &had);
                    }
                    Err(e) => relay.outcome = RelayOutcome::Failed(e),
                }
                if !probe.hits.is_empty() {
                    probe.read =
                        page_all(&client, &url, &probe.hits, &filter, &options, &mut relay).await;
                }
                if !known {
                    let _ = client.remove_relay(&url).await;
                }
                (relay, probe)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            let Ok((relay, probe)) = joined else {
                continue;
            };
            if probe.answered {
                reached.insert(relay.url.clone());
            }
            if !probe.hits.is_empty() {
                tracing::debug!(
                    relay = %relay.url,
                    follows = probe.hits.len(),
                    pages = relay.pages,
                    notes = probe.read.len(),
                    "a probe found notes the read lacked: read those follows whole there"
                );
                self.note_hits(&relay.url, &probe.hits);
            }
            for event in probe.read {
                if report.events.len() + report.found.len() >= MAX_READ_EVENTS {
                    break;
                }
                report.found.remove(&event);
                report.events.insert(event);
            }
            for event in probe.sample {
                if report.events.len() + report.found.len() >= MAX_READ_EVENTS {
                    break;
                }
                if !report.events.contains(&event) {
                    report.found.insert(event);
                }
            }
            tracing::debug!(relay = %relay.url, answered = probe.answered, notes = relay.events, "probed");
            report.probed.push(relay);
        }
        report.probed.sort_by(|a, b| a.url.cmp(&b.url));
    }
}

/// What one probe brought.
#[derive(Default)]
struct Probed {
    /// The relay answered the probe.
    answered: bool,
    /// Its page: each asked follow's newest notes.
    sample: Vec<Event>,
    /// Follows whose page was full and held notes the read lacked: read whole on the relay.
    hits: Vec<PublicKey>,
    /// Their notes, paged back to the window's start.
    read: Vec<Event>,
}

/// The follows of a probe's page whose notes filled it (`limit` or more: the relay holds more)
/// and include some the read lacks (`had`): the relay holds notes of theirs the plan's relays
/// did not return, more than the probe asked for.
fn hits(page: &[Event], limit: usize, had: &HashSet<EventId>) -> Vec<PublicKey> {
    let mut per_author: BTreeMap<PublicKey, (usize, bool)> = BTreeMap::new();
    for event in page {
        let (count, new) = per_author.entry(event.pubkey).or_default();
        *count += 1;
        *new |= !had.contains(&event.id);
    }
    per_author
        .into_iter()
        .filter(|&(_, (count, new))| count >= limit.max(1) && new)
        .map(|(author, _)| author)
        .collect()
}

/// One relay's part: its authors in chunks, each paged back to the window's start.
async fn read_relay(
    client: &Client,
    url: RelayUrl,
    authors: Vec<PublicKey>,
    filter: Filter,
    options: ReadOptions,
) -> (RelayRead, Vec<Event>) {
    let mut relay = RelayRead {
        url: url.clone(),
        authors: authors.len(),
        pages: 0,
        events: 0,
        outcome: RelayOutcome::Complete,
    };
    // Already in the pool (a reader relay, an earlier read): added again is an error to ignore.
    let _ = client.add_relay(&url).await;
    if let Err(e) = client
        .try_connect_relay(&url, options.connect_timeout)
        .await
    {
        relay.outcome = RelayOutcome::Failed(e.to_string());
        return (relay, Vec::new());
    }
    let events = page_all(client, &url, &authors, &filter, &options, &mut relay).await;
    (relay, events)
}

/// Asks `url` (connected) about `authors` in chunks, each paged back to the window's start;
/// the pages and events are added to `relay`'s, and how they ended is set there. Returns the events, each once per chunk.
async fn page_all(
    client: &Client,
    url: &RelayUrl,
    authors: &[PublicKey],
    filter: &Filter,
    options: &ReadOptions,
    relay: &mut RelayRead,
) -> Vec<Event> {
    let mut events = Vec::new();
    // nostr-sdk does not read relay documents: the cap is learned from the pages.
    let limits = RelayLimits::default();
    let paging = options.paging;
    let mut cap = CapEstimate::new(&limits);
    let since = filter.since.map(|t| t.as_secs());
    for chunk in paging::chunk(authors, &limits, &paging) {
        let mut cursor = Cursor::new(paging.limit_for(&limits), since);
        let mut seen: HashSet<EventId> = HashSet::new();
        loop {
            let mut page_filter = filter.clone().authors(chunk.iter().copied());
            page_filter = page_filter.limit(cursor.limit() as usize);
            if let Some(until) = cursor.until() {
                page_filter = page_filter.until(Timestamp::from(until));
            }
            relay.pages += 1;
            let page = match client
                .fetch_events(ReqTarget::single(url, [page_filter]))
                .timeout(options.page_timeout)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    relay.outcome = RelayOutcome::Failed(e.to_string());
                    return events;
                }
            };
            let returned = page.len();
            let oldest = page.iter().map(|e| e.created_at.as_secs()).min();
            let mut new = 0u32;
            for event in page {
                if seen.insert(event.id) {
                    new += 1;
                    if events.len() < MAX_READ_EVENTS {
                        events.push(event);
                    }
                }
            }
            relay.events += returned;
            let answer = Page {
                returned: u32::try_from(returned).unwrap_or(u32::MAX),
                new,
                oldest,
            };
            match cursor.answer(answer, &mut cap, &paging) {
                Next::Page { .. } => {}
                Next::Done(ended) => {
                    if !ended.is_complete() {
                        relay.outcome = RelayOutcome::PageBudget;
                    }
                    break;
                }
            }
        }
    }
    events
}

//! Scoring a plan against a world, exactly as `docs/formats.md` defines it, from what its paged
//! REQs return ([`mod@crate::fetch`]).

use std::fmt;

use outbox_core::stats::{AuthorRound, RelayRound, RoundReport};
use outbox_core::{DeliveryStats, Plan, RouteTable, UrlPolicy};
use serde::{Deserialize, Serialize};

use crate::fetch::{fetch, FetchCost, Fetched, WindowCost};
use crate::planfile::PlanFile;
use crate::world::World;

const DAY: u64 = 86_400;

/// A time window reports are computed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Window {
    /// 7 days (604,800 s).
    #[serde(rename = "7d")]
    D7,
    /// 1 year (31,536,000 s).
    #[serde(rename = "1yr")]
    Y1,
    /// 3 years (94,608,000 s).
    #[serde(rename = "3yr")]
    Y3,
}

impl Window {
    /// Every window, shortest first.
    pub const ALL: [Window; 3] = [Window::D7, Window::Y1, Window::Y3];

    /// The window's length in seconds.
    pub fn secs(self) -> u64 {
        match self {
            Window::D7 => 7 * DAY,
            Window::Y1 => 365 * DAY,
            Window::Y3 => 3 * 365 * DAY,
        }
    }

    /// The short label (`7d`, `1yr`, `3yr`).
    pub fn label(self) -> &'static str {
        match self {
            Window::D7 => "7d",
            Window::Y1 => "1yr",
            Window::Y3 => "3yr",
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl std::str::FromStr for Window {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Window::ALL
            .into_iter()
            .find(|w| w.label() == s)
            .ok_or_else(|| format!("unknown window {s:?} (7d, 1yr, 3yr)"))
    }
}

/// A world prepared for scoring: the client's route table and each follow's declared write
/// relays as world relay ids.
#[derive(Debug)]
pub struct SimWorld {
    /// The world.
    pub world: World,
    /// How the world's relay URLs were read (as a live client would).
    pub policy: UrlPolicy,
    /// The route table a client builds from the world's lists (`AuthorId(i)` is follow `i`).
    pub table: RouteTable,
    /// Per follow, the declared write relays (newest list, no marker counts as write) that
    /// exist in the world, as world relay ids.
    declared: Vec<Vec<u32>>,
    /// Per route-table relay, its world relay id (`None`: not in the world, never answers).
    table_to_world: Vec<Option<u32>>,
    /// Per world relay, the events it stores as (`created_at`, event index), newest first and
    /// by id within a second: the order a relay answers in, sorted once.
    relay_events: Vec<Vec<(u64, u32)>>,
    /// Per follow, its rank in public-key order (the order a REQ filter lists authors in).
    key_rank: Vec<u32>,
}

impl SimWorld {
    /// Whether world relay `relay` is one of follow `author`'s declared write relays.
    pub fn is_declared(&self, author: u32, relay: u32) -> bool {
        self.declared
            .get(author as usize)
            .is_some_and(|d| d.contains(&relay))
    }

    /// Prepares a world with the default URL policy.
    pub fn new(world: World) -> Self {
        Self::with_policy(world, &UrlPolicy::default())
    }

    /// Prepares a world; lists go through `policy` exactly as live. Declared write relays are
    /// read with the same policy but without its list-length cap (the cap is a client choice,
    /// not what the author declared).
    pub fn with_policy(world: World, policy: &UrlPolicy) -> Self {
        let table = world.route_table(policy);
        let uncapped = UrlPolicy {
            max_write_relays: usize::MAX,
            ..policy.clone()
        };
        let full = world.route_table(&uncapped);
        let declared = full
            .authors()
            .map(|a| {
                full.write_relays(a)
                    .iter()
                    .filter_map(|&r| world.relay_id(full.url(r)))
                    .collect()
            })
            .collect();
        let table_to_world = table
            .relays()
            .map(|r| world.relay_id(table.url(r)))
            .collect();
        let mut relay_events: Vec<Vec<(u64, u32)>> = vec![Vec::new(); world.relays().len()];
        for (i, e) in world.events().iter().enumerate() {
            for &r in world.event_relays(e) {
                if world.relays()[r as usize].exists {
                    relay_events[r as usize].push((e.created_at, i as u32));
                }
            }
        }
        let events = world.events();
        for list in &mut relay_events {
            list.sort_unstable_by(|a, b| {
                b.0.cmp(&a.0)
                    .then_with(|| events[a.1 as usize].id.cmp(&events[b.1 as usize].id))
            });
        }
        let mut by_key: Vec<u32> = (0..world.follows.len() as u32).collect();
        by_key.sort_unstable_by_key(|&a| world.follows[a as usize]);
        let mut key_rank = vec![0u32; by_key.len()];
        for (rank, &a) in by_key.iter().enumerate() {
            key_rank[a as usize] = rank as u32;
        }
        Self {
            policy: policy.clone(),
            world,
            table,
            declared,
            table_to_world,
            relay_events,
            key_rank,
        }
    }

    /// The events world relay `relay` stores, as (`created_at`, index into
    /// [`World::events`]), newest first and by id ascending within a second.
    pub fn relay_events(&self, relay: u32) -> &[(u64, u32)] {
        self.relay_events
            .get(relay as usize)
            .map_or(&[], |v| v.as_slice())
    }

    /// A follow's rank in public-key order (how a REQ filter orders its authors).
    pub fn key_rank(&self, author: u32) -> u32 {
        self.key_rank
            .get(author as usize)
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// A follow's declared write relays that exist in the world.
    pub fn declared(&self, author: u32) -> &[u32] {
        &self.declared[author as usize]
    }
}

/// One connection of a plan in world terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    /// The relay URL as planned.
    pub url: String,
    /// The world relay, if the URL is one (otherwise it never answers).
    pub relay: Option<u32>,
    /// Follows named in the filter (indices into [`World::follows`]), sorted.
    pub authors: Vec<u32>,
}

/// A plan in world terms: what every metric is computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Asks {
    /// One entry per connection.
    pub entries: Vec<Ask>,
    /// Follows no routed relay covered before the residual, when known (plans made here).
    pub orphans: Option<usize>,
    /// Authors named in a plan file that are not follows (ignored for recall, counted in
    /// disclosure).
    pub foreign_authors: usize,
}

/// A plan file that cannot be scored against a world.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    /// An author is not a valid public key.
    #[error("plan: field `relays[{entry}].authors[{index}]`: not a hex public key")]
    BadAuthor {
        /// Entry index.
        entry: usize,
        /// Author index.
        index: usize,
    },
}

impl Asks {
    /// The asks of a plan made on another table of the same world (same follows, e.g. with
    /// some relays set aside): relays are matched by URL.
    pub fn from_table_plan(sim: &SimWorld, table: &RouteTable, plan: &Plan) -> Self {
        let entries = plan
            .entries(table)
            .into_iter()
            .map(|e| Ask {
                url: table.url(e.relay).to_string(),
                relay: sim.world.relay_id(table.url(e.relay)),
                authors: e.authors.iter().map(|a| a.0).collect(),
            })
            .collect();
        Self {
            entries,
            orphans: Some(plan.residual().len()),
            foreign_authors: 0,
        }
    }

    /// Adds `later`'s asks: a relay asked in both is asked about both author sets; the
    /// orphans are the later plan's.
    pub fn merge(&mut self, later: Asks) {
        for ask in later.entries {
            match self.entries.iter_mut().find(|a| a.url == ask.url) {
                Some(known) => {
                    known.authors.extend(ask.authors);
                    known.authors.sort_unstable();
                    known.authors.dedup();
                }
                None => self.entries.push(ask),
            }
        }
        self.orphans = later.orphans;
        self.foreign_authors += later.foreign_authors;
    }

    /// The asks of a plan made from `sim.table`.
    pub fn from_plan(sim: &SimWorld, plan: &Plan) -> Self {
        let entries = plan
            .entries(&sim.table)
            .into_iter()
            .map(|e| Ask {
                url: sim.table.url(e.relay).to_string(),
                relay: sim.table_to_world[e.relay.index()],
                authors: e.authors.iter().map(|a| a.0).collect(),
            })
            .collect();
        Self {
            entries,
            orphans: Some(plan.residual().len()),
            foreign_authors: 0,
        }
    }

    /// The asks of an `outbox-plan/1` file. URLs are looked up as given, then canonicalised.
    pub fn from_plan_file(sim: &SimWorld, file: &PlanFile) -> Result<Self, ScoreError> {
        let policy = UrlPolicy::default();
        let mut foreign = 0;
        let mut entries = Vec::with_capacity(file.relays.len());
        for (i, e) in file.relays.iter().enumerate() {
            let relay = sim.world.relay_id(&e.url).or_else(|| {
                policy
                    .canonicalize(&e.url)
                    .ok()
                    .and_then(|c| sim.world.relay_id(&c))
            });
            let mut authors = Vec::with_capacity(e.authors.len());
            for (j, hex) in e.authors.iter().enumerate() {
                let pk = outbox_core::public_key_from_hex(hex)
                    .map_err(|_| ScoreError::BadAuthor { entry: i, index: j })?;
                match sim.table.author_id(&pk) {
                    Some(a) => authors.push(a.0),
                    None => foreign += 1,
                }
            }
            authors.sort_unstable();
            authors.dedup();
            entries.push(Ask {
                url: e.url.clone(),
                relay,
                authors,
            });
        }
        Ok(Self {
            entries,
            orphans: None,
            foreign_authors: foreign,
        })
    }
}

/// Recall in one window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowScore {
    /// The window.
    pub window: Window,
    /// Events some relay would return in this session (the total-recall denominator).
    pub available: u64,
    /// Events some declared write relay would return (the declared-recall denominator).
    pub declared_available: u64,
    /// Fetched events.
    pub fetched: u64,
    /// Fetched events among `declared_available`.
    pub declared_fetched: u64,
    /// `declared_fetched / declared_available` (1 when nothing was available: use
    /// [`WindowScore::declared`] to tell that case apart).
    pub declared_recall: f64,
    /// `fetched / available` (1 when nothing was available: use [`WindowScore::total`] to tell
    /// that case apart).
    pub total_recall: f64,
}

impl WindowScore {
    /// Declared recall, or `None` when no event was declared-available (0 of 0 is no
    /// evidence of anything, and reports show it as `-`).
    pub fn declared(&self) -> Option<f64> {
        (self.declared_available > 0).then_some(self.declared_recall)
    }

    /// Total recall, or `None` when no event was available.
    pub fn total(&self) -> Option<f64> {
        (self.available > 0).then_some(self.total_recall)
    }
}

/// Every metric of one plan in one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanScore {
    /// The session.
    pub session: u32,
    /// Plan entries (connections opened, the reader's relays included).
    pub connections: usize,
    /// Sum of author-list lengths over all entries.
    pub disclosure: usize,
    /// Share of follows in at least one filter.
    pub author_coverage: f64,
    /// Follows no routed relay covered, before the residual (when known).
    pub orphans: Option<usize>,
    /// The largest entry's author count divided by the disclosure: how much of what the
    /// relays learn goes to one relay.
    pub load_concentration: f64,
    /// Recall per window.
    pub windows: Vec<WindowScore>,
    /// What fetching each window cost (each window is its own paged fetch).
    pub cost: Vec<WindowCost>,
    /// What the session's probes cost after the fetch (none for a plan scored alone).
    #[serde(default)]
    pub probe: crate::probe::ProbeCost,
}

impl PlanScore {
    /// The score for one window, if computed.
    pub fn window(&self, w: Window) -> Option<&WindowScore> {
        self.windows.iter().find(|s| s.window == w)
    }

    /// What fetching one window cost, if computed.
    pub fn cost(&self, w: Window) -> Option<&FetchCost> {
        self.cost.iter().find(|c| c.window == w).map(|c| &c.cost)
    }

    /// Takes the windows `other` (another plan's score of the same session) scored: their
    /// recall and cost replace any this score has for them, in window order; connections,
    /// disclosure and coverage stay this plan's.
    pub fn add_windows(&mut self, other: PlanScore) {
        self.windows
            .retain(|w| other.windows.iter().all(|o| o.window != w.window));
        self.cost
            .retain(|c| other.cost.iter().all(|o| o.window != c.window));
        self.windows.extend(other.windows);
        self.cost.extend(other.cost);
        self.windows.sort_by_key(|w| w.window);
        self.cost.sort_by_key(|c| c.window);
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        1.0
    } else {
        n as f64 / d as f64
    }
}

/// Scores `asks` in `session` for each window (definitions in `docs/formats.md`).
///
/// Each window is fetched as the runtime would ([`fetch`]): every page of every author chunk
/// on every asked relay that answers. An event counts as fetched when some page returned it.
/// Declared recall's numerator counts only fetched events inside its denominator (events some
/// declared write relay would return), so it never exceeds 1.
pub fn score(sim: &SimWorld, asks: &Asks, session: u32, windows: &[Window]) -> PlanScore {
    let windows = sorted_windows(windows);
    let fetched: Vec<Fetched> = windows
        .iter()
        .map(|w| fetch(sim, asks, session, since_of(sim, *w), false))
        .collect();
    score_fetched(sim, asks, session, &windows, &fetched)
}

/// Scores each window with the plan made for it (`plans`); connections, disclosure and
/// coverage are `base`'s plan's.
pub(crate) fn score_each_window(
    sim: &SimWorld,
    base: &Asks,
    plans: &[(Window, &Asks)],
    session: u32,
) -> PlanScore {
    let mut total = score(sim, base, session, &[]);
    for &(w, asks) in plans {
        total.add_windows(score(sim, asks, session, &[w]));
    }
    total
}

/// Scores `asks` and observes what its REQs returned with `since`, fetching each window once
/// (the observation reuses the window that starts at `since`, if any).
pub fn score_and_observe(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    windows: &[Window],
    since: u64,
) -> (PlanScore, Observation) {
    let windows = sorted_windows(windows);
    let mut observed = None;
    let fetched: Vec<Fetched> = windows
        .iter()
        .map(|w| {
            let start = since_of(sim, *w);
            let reuse = observed.is_none() && start == since;
            let f = fetch(sim, asks, session, start, reuse);
            if reuse {
                observed = Some(observation_of(asks, session, &f));
            }
            f
        })
        .collect();
    let observation = observed
        .unwrap_or_else(|| observation_of(asks, session, &fetch(sim, asks, session, since, true)));
    (
        score_fetched(sim, asks, session, &windows, &fetched),
        observation,
    )
}

pub(crate) fn sorted_windows(windows: &[Window]) -> Vec<Window> {
    let mut windows = windows.to_vec();
    windows.sort();
    windows.dedup();
    windows
}

fn since_of(sim: &SimWorld, w: Window) -> u64 {
    sim.world.now.saturating_sub(w.secs())
}

/// Recall per window in `session` (`windows` sorted, no duplicates) when `got(w, i)` says
/// whether event `i` of [`World::events`](crate::World::events) was fetched for window `w`:
/// the one place the recall definitions are counted, for plans and for delivered sets alike.
pub(crate) fn window_scores(
    sim: &SimWorld,
    session: u32,
    windows: &[Window],
    got: impl Fn(usize, usize) -> bool,
) -> Vec<WindowScore> {
    let world = &sim.world;
    let since_of: Vec<u64> = windows.iter().map(|&w| since_of(sim, w)).collect();
    let earliest = since_of.iter().copied().min().unwrap_or(u64::MAX);
    let mut counts = vec![[0u64; 4]; windows.len()];
    let mut declared_up = Vec::new();
    let mut author = u32::MAX;
    for (i, e) in world.events().iter().enumerate() {
        if e.created_at < earliest {
            continue;
        }
        if e.author != author {
            author = e.author;
            declared_up.clear();
            declared_up.extend(
                sim.declared(author)
                    .iter()
                    .copied()
                    .filter(|&r| world.is_up(r, session)),
            );
        }
        let on = world.event_relays(e);
        if !on.iter().any(|&r| world.is_up(r, session)) {
            continue;
        }
        let declared = on.iter().any(|r| declared_up.contains(r));
        for (w, &since) in since_of.iter().enumerate() {
            if e.created_at >= since {
                let got = got(w, i);
                let c = &mut counts[w];
                c[0] += 1;
                c[1] += u64::from(declared);
                c[2] += u64::from(got);
                c[3] += u64::from(declared && got);
            }
        }
    }
    windows
        .iter()
        .zip(&counts)
        .map(|(&window, c)| WindowScore {
            window,
            available: c[0],
            declared_available: c[1],
            fetched: c[2],
            declared_fetched: c[3],
            declared_recall: ratio(c[3], c[1]),
            total_recall: ratio(c[2], c[0]),
        })
        .collect()
}

/// Every metric of `asks` from one fetch per window (`fetched[i]` is `windows[i]`'s).
fn score_fetched(
    sim: &SimWorld,
    asks: &Asks,
    session: u32,
    windows: &[Window],
    fetched: &[Fetched],
) -> PlanScore {
    let world = &sim.world;
    let disclosure: usize =
        asks.entries.iter().map(|e| e.authors.len()).sum::<usize>() + asks.foreign_authors;
    let mut covered = vec![false; world.follows.len()];
    for e in &asks.entries {
        for &a in &e.authors {
            if let Some(c) = covered.get_mut(a as usize) {
                *c = true;
            }
        }
    }
    let largest = asks
        .entries
        .iter()
        .map(|e| e.authors.len())
        .max()
        .unwrap_or(0);
    PlanScore {
        session,
        connections: asks.entries.len(),
        disclosure,
        author_coverage: ratio(
            covered.iter().filter(|&&c| c).count() as u64,
            covered.len() as u64,
        ),
        orphans: asks.orphans,
        load_concentration: if disclosure == 0 {
            0.0
        } else {
            largest as f64 / disclosure as f64
        },
        windows: window_scores(sim, session, windows, |w, i| fetched[w].delivered[i]),
        cost: windows
            .iter()
            .zip(fetched)
            .map(|(&window, f)| WindowCost {
                window,
                cost: f.cost.clone(),
            })
            .collect(),
        probe: Default::default(),
    }
}

/// What one author's events from one relay looked like.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuthorReturn {
    /// The follow.
    pub author: u32,
    /// Events returned.
    pub events: u32,
    /// `created_at` of the newest event returned.
    pub newest: u64,
    /// `created_at` of the oldest event returned.
    pub oldest: u64,
}

/// What one asked relay did in one session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RelayObservation {
    /// The relay URL as planned.
    pub url: String,
    /// Whether it answered (connected and served the REQ).
    pub up: bool,
    /// The follows it was asked about.
    pub asked: Vec<u32>,
    /// The follows it returned at least one event for, with what it returned (distinct
    /// events over all pages), sorted by follow.
    pub returned: Vec<AuthorReturn>,
    /// What its pages cost.
    pub cost: FetchCost,
}

/// Everything a client could observe from one session's REQs: per asked relay, whether it
/// answered and what it returned per author (counts and time depth).
///
/// [`DeliveryStats`] is fed from it ([`Observation::record`]) with exactly what a live client
/// reports; the per-author time depth (`newest`/`oldest`) is kept for diagnostics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// The session.
    pub session: u32,
    /// The `since` of every REQ.
    pub since: u64,
    /// One entry per plan connection.
    pub relays: Vec<RelayObservation>,
}

/// Simulates the REQs of `asks` in `session` with `since`, paged as the runtime pages
/// ([`fetch`]): what each asked relay returned per author over all its pages.
pub fn observe(sim: &SimWorld, asks: &Asks, session: u32, since: u64) -> Observation {
    observation_of(asks, session, &fetch(sim, asks, session, since, true))
}

fn observation_of(asks: &Asks, session: u32, fetched: &Fetched) -> Observation {
    let relays = asks
        .entries
        .iter()
        .zip(&fetched.relays)
        .map(|(e, f)| RelayObservation {
            url: e.url.clone(),
            up: f.up,
            asked: e.authors.clone(),
            returned: f.returned.clone(),
            cost: f.cost.clone(),
        })
        .collect();
    Observation {
        session,
        since: fetched.since,
        relays,
    }
}

impl Observation {
    /// What a live client would report after every asked relay sent EOSE or failed: per asked
    /// relay, whether it answered and how many events it returned for each asked author.
    pub fn round_report(&self, sim: &SimWorld) -> RoundReport {
        RoundReport {
            relays: self
                .relays
                .iter()
                .map(|r| RelayRound {
                    url: r.url.clone(),
                    answered: r.up,
                    authors: r
                        .asked
                        .iter()
                        .map(|&a| {
                            let got = r.returned.iter().find(|x| x.author == a);
                            AuthorRound {
                                author: sim.world.follows[a as usize],
                                events: got.map_or(0, |x| x.events),
                                oldest: got.map_or(0, |x| x.oldest),
                                newest: got.map_or(0, |x| x.newest),
                                capped: false,
                            }
                        })
                        .collect(),
                    compare_only: false,
                })
                .collect(),
        }
    }

    /// Feeds the observation into delivery statistics through the same call the live runtime
    /// makes ([`DeliveryStats::record_round`]).
    pub fn record(&self, sim: &SimWorld, stats: &mut DeliveryStats, now: u64) {
        stats.record_round(&self.round_report(sim), now);
    }
}

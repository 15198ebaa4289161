//! [`OutboxGossip`]: the engine, its builder and nostr-sdk's trait.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nostr::event::{Event, Kind};
use nostr::key::PublicKey;
use nostr::types::{RelayUrl, Timestamp};
use nostr_gossip::{
    BestRelaySelection, GossipAllowedRelays, GossipListKind, GossipPublicKeyStatus, NostrGossip,
    OutdatedPublicKey,
};
use nostr_outbox_client::directory::RelayDirectory;
use nostr_outbox_client::store::{StateStore, StatsStoreError};
use nostr_outbox_client::Network;
use nostr_outbox_core::{
    plan_probes, session_seed, ConfigError, DeliveryStats, PlanContext, ProbeBudget, ProbePlan,
    RawRelayList, RouteTable, Router, RouterConfig, UrlPolicy,
};

use crate::state::{PlanView, State, DEFAULT_LIST_TTL, DEFAULT_ROUND_IDLE, MAX_KEPT_LISTS};

/// The router config used when none is given: the `outbox feed` default (the `recall`
/// strategy, 20 routed relays).
pub const DEFAULT_CONFIG: &str = "max_connections = 20\n[strategy]\ntype = \"recall\"\n";

/// How many of the follows' list relays carry the residual when the reader has no relays.
const ROUTED_CARRIERS: usize = 2;

/// Why an engine could not be made or could not save.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The router config is not valid.
    #[error("router config: {0}")]
    Config(#[from] ConfigError),
    /// The store failed or refused.
    #[error("store: {0}")]
    Store(#[from] StatsStoreError),
}

/// Sets up an [`OutboxGossip`]: router config, the reader, the store.
#[derive(Debug)]
pub struct OutboxGossipBuilder {
    config: RouterConfig,
    settings: Settings,
}

/// What the builder sets and the engine keeps, besides the router.
#[derive(Debug)]
struct Settings {
    reader: Option<PublicKey>,
    /// As given to the builder; canonical in the engine.
    reader_relays: Vec<String>,
    list_ttl: Duration,
    learn_kinds: Vec<Kind>,
    /// Given to the builder; else the store's kept base, else drawn at random at `open`.
    seed: Option<u64>,
    window_secs: Option<u64>,
    store: Option<Arc<dyn StateStore>>,
    /// Rounds end by themselves (a new read after notes came in, or `round_idle`); off, only
    /// `end_round` ends them.
    auto_rounds: bool,
    round_idle: Duration,
}

impl OutboxGossipBuilder {
    /// The reader's public key: its own kind:10002 list, when nostr-sdk hands it over, adds its
    /// read relays to the residual's carriers.
    pub fn reader(mut self, reader: PublicKey) -> Self {
        self.settings.reader = Some(reader);
        self
    }

    /// The reader's own relays (where nostr-sdk reads when nothing better is known): they
    /// carry the residual, the planned keys no routed relay covers. URLs the router's policy
    /// refuses are dropped.
    pub fn reader_relays<S: AsRef<str>>(mut self, relays: impl IntoIterator<Item = S>) -> Self {
        (self.settings.reader_relays).extend(relays.into_iter().map(|r| r.as_ref().to_string()));
        self
    }

    /// How long a fetched list counts as up to date ([`DEFAULT_LIST_TTL`] unless set).
    pub fn list_ttl(mut self, ttl: Duration) -> Self {
        self.settings.list_ttl = ttl;
        self
    }

    /// The event kinds delivery is learned from (text notes unless set): the feed's kinds, so
    /// relays are compared on the same notes.
    pub fn learn_kinds(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        self.settings.learn_kinds = kinds.into_iter().collect();
        self
    }

    /// The base seed of the plans' draws; each round draws with its own
    /// [`session_seed`](nostr_outbox_core::session_seed). Without it the store's kept base is
    /// used, or one drawn at random and kept there, so no two installations draw alike.
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = Some(seed);
        self
    }

    /// Plans for a fetch that asks for notes up to `secs` old (a strategy that reads the window
    /// plans for it; see `nostr_outbox_core::PlanContext::window`).
    pub fn window(mut self, secs: u64) -> Self {
        self.settings.window_secs = Some(secs);
        self
    }

    /// How long a round may go without a new note or ask before it ends by itself
    /// ([`DEFAULT_ROUND_IDLE`](crate::DEFAULT_ROUND_IDLE) unless set). See
    /// [`OutboxGossip::end_round`] for when rounds end.
    pub fn round_idle(mut self, idle: Duration) -> Self {
        self.settings.round_idle = idle;
        self
    }

    /// Rounds end only when the caller says so ([`OutboxGossip::end_round`]): for a client that
    /// knows when each read is done and which relays it reached.
    pub fn manual_rounds(mut self) -> Self {
        self.settings.auto_rounds = false;
        self
    }

    /// Keeps learning in `store` (loaded by [`open`](Self::open), written by
    /// [`OutboxGossip::save`]).
    pub fn store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.settings.store = Some(store);
        self
    }

    /// Keeps learning in a JSON file (`nostr_outbox_stats::FileStore`, its lists beside it).
    pub fn json_store(self, path: impl Into<PathBuf>) -> Self {
        self.store(Arc::new(nostr_outbox_stats::FileStore::new(path)))
    }

    /// Keeps learning in an SQLite database (`nostr_outbox_stats::SqliteStore`).
    pub fn sqlite_store(self, path: impl Into<PathBuf>) -> Self {
        self.store(Arc::new(nostr_outbox_stats::SqliteStore::new(path)))
    }

    /// Builds the engine, loading the store's stats and lists when there is a store.
    pub async fn open(self) -> Result<OutboxGossip, Error> {
        let mut state = State::default();
        let drawn = self.settings.seed.unwrap_or_else(rand::random);
        let mut seed = drawn;
        if let Some(store) = &self.settings.store {
            if self.settings.seed.is_none() {
                seed = store.base_seed(drawn).await?;
            }
            state.stats = store.load().await?.stats;
            let mut lists = store.load_lists().await?.value;
            // Whatever the store: a list dated ahead would outrank every real one for good.
            let dropped = nostr_outbox_stats::kept::drop_future_lists(
                &mut lists,
                OutboxGossip::now().as_secs(),
            );
            if !dropped.is_empty() {
                tracing::warn!(
                    count = dropped.len(),
                    "kept relay lists dated in the future dropped"
                );
            }
            for list in lists.into_iter().take(MAX_KEPT_LISTS) {
                state.keep_list(list, None);
            }
        }
        state.stats.begin_session();
        let router = Router::from_config(&self.config);
        let policy = router.policy().clone();
        let mut settings = self.settings;
        settings.reader_relays = (settings.reader_relays.iter())
            .filter_map(|raw| policy.canonicalize(raw).ok())
            .fold(Vec::new(), |mut acc: Vec<String>, url| {
                if !acc.contains(&url) {
                    acc.push(url);
                }
                acc
            });
        Ok(OutboxGossip {
            state: Mutex::new(state),
            router: Mutex::new(router),
            policy,
            seed,
            settings,
        })
    }
}

/// What the current plan is, for a client to show or check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanSummary {
    /// The strategy's label.
    pub strategy: String,
    /// The routed relays (at most the budget), canonical URLs.
    pub routed: Vec<String>,
    /// The residual's carriers, canonical URLs.
    pub carriers: Vec<String>,
    /// Keys planned for.
    pub keys: usize,
    /// Planned keys no routed relay covers (asked of the carriers).
    pub residual: usize,
}

/// nostr-sdk's gossip engine, answering from a budgeted, learned outbox plan.
///
/// Every public key nostr-sdk asks about (its `status` before a REQ, or `get_best_relays`) is
/// planned for, up to [`MAX_PLANNED_KEYS`](crate::MAX_PLANNED_KEYS). The plan is made lazily:
/// when a kept list of a planned key changes, a key is added or a round was learned, the next
/// `get_best_relays` plans once with the router (which applies its strategy's own rules, such
/// as a hysteresis strategy's settle window), and every answer until the next change comes from
/// that one plan.
///
/// Each read stays within the plan; across re-plans the relays nostr-sdk keeps in its pool may
/// add up to more (it does not drop gossip relays it stops using): bound the pool with
/// nostr-sdk's own `ClientBuilder::max_relays` when that matters.
///
/// Locks: one for the state, one for the router; never both at once, neither across an
/// `.await`. Planning runs on the calling task (a plan over thousands of keys takes
/// milliseconds).
#[derive(Debug)]
pub struct OutboxGossip {
    state: Mutex<State>,
    router: Mutex<Router>,
    policy: UrlPolicy,
    /// The base seed of the plans' draws.
    seed: u64,
    settings: Settings,
}

/// What a plan is made from, copied out of the state so planning holds no state lock.
struct Snapshot {
    version: u64,
    keys: Vec<PublicKey>,
    lists: Vec<RawRelayList>,
    reader_list: Option<RawRelayList>,
    stats: DeliveryStats,
}

/// One relay of a plan and the keys it is asked about.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    /// The relay as plans and rounds name it.
    pub canonical: String,
    /// The relay as nostr-sdk takes it.
    pub url: RelayUrl,
    /// The keys asked of it.
    pub authors: Vec<PublicKey>,
    /// One of the residual's carriers (the reader's relays): held by the client anyway.
    pub carrier: bool,
}

/// Per relay of `plan`, those of `keys` it asks about, in URL order; a key the plan does not
/// cover is asked of the residual's carriers, as `writes` does.
fn routes_of(plan: &PlanView, keys: &[PublicKey]) -> Vec<Route> {
    let mut by_relay: BTreeMap<&str, Route> = BTreeMap::new();
    let unique: BTreeSet<&PublicKey> = keys.iter().collect();
    for key in unique {
        let urls = plan.asked.get(key).unwrap_or(&plan.carriers);
        for (canonical, parsed) in urls {
            by_relay
                .entry(canonical)
                .or_insert_with(|| Route {
                    canonical: canonical.clone(),
                    url: parsed.clone(),
                    authors: Vec::new(),
                    carrier: plan.carriers.iter().any(|(c, _)| c == canonical),
                })
                .authors
                .push(*key);
        }
    }
    by_relay.into_values().collect()
}

/// Adds to `routes` the round's `hits` (relays a probe found holding notes of follows the
/// round's reads missed) for those of `keys` they name, in URL order.
fn add_hits(
    routes: &mut Vec<Route>,
    hits: &BTreeMap<String, BTreeSet<PublicKey>>,
    keys: &[PublicKey],
) {
    let wanted: HashSet<&PublicKey> = keys.iter().collect();
    for (canonical, authors) in hits {
        let authors = authors.iter().filter(|a| wanted.contains(a));
        match routes.iter_mut().find(|r| r.canonical == *canonical) {
            Some(route) => {
                for &author in authors {
                    if !route.authors.contains(&author) {
                        route.authors.push(author);
                    }
                }
            }
            None => {
                let authors: Vec<PublicKey> = authors.copied().collect();
                let Ok(url) = RelayUrl::parse(canonical) else {
                    continue;
                };
                if !authors.is_empty() {
                    routes.push(Route {
                        canonical: canonical.clone(),
                        url,
                        authors,
                        carrier: false,
                    });
                }
            }
        }
    }
}

/// Relay URLs for nostr-sdk: allowed ones, in order, at most `limit`.
fn take_allowed<'a>(
    urls: impl IntoIterator<Item = &'a RelayUrl>,
    allowed: GossipAllowedRelays,
    limit: u8,
    into: &mut HashSet<RelayUrl>,
) {
    into.extend(
        urls.into_iter()
            .filter(|u| allowed.is_allowed(u))
            .take(usize::from(limit))
            .cloned(),
    );
}

fn parse_all(urls: &[String]) -> Vec<RelayUrl> {
    urls.iter()
        .filter_map(|u| RelayUrl::parse(u).ok())
        .collect()
}

impl OutboxGossip {
    /// A builder for `config`.
    pub fn builder(config: RouterConfig) -> OutboxGossipBuilder {
        OutboxGossipBuilder {
            config,
            settings: Settings {
                reader: None,
                reader_relays: Vec::new(),
                list_ttl: DEFAULT_LIST_TTL,
                learn_kinds: vec![Kind::TextNote],
                seed: None,
                window_secs: None,
                store: None,
                auto_rounds: true,
                round_idle: DEFAULT_ROUND_IDLE,
            },
        }
    }

    /// A builder for a TOML router config (as `outbox feed --config` reads; every built-in
    /// strategy can be named).
    pub fn from_toml(text: &str) -> Result<OutboxGossipBuilder, Error> {
        nostr_outbox_strategies::link();
        Ok(Self::builder(RouterConfig::from_toml(text)?))
    }

    /// A builder for [`DEFAULT_CONFIG`].
    pub fn default_builder() -> OutboxGossipBuilder {
        Self::from_toml(DEFAULT_CONFIG).expect("the default config is valid")
    }

    /// The base seed of the plans' draws: the builder's, else the store's kept one, else
    /// drawn at `open` (and kept by the store from its next save).
    pub fn base_seed(&self) -> u64 {
        self.seed
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now() -> Timestamp {
        Timestamp::now()
    }

    /// Ends the open round if it is over by the engine's own rules (see
    /// [`end_round`](Self::end_round)); `new_read`: nostr-sdk is starting a read. Called first
    /// by every entry point, so an idle round is learned before anything reads the state.
    pub(crate) fn end_round_if_over(&self, new_read: bool) {
        if !self.settings.auto_rounds {
            return;
        }
        let mut state = self.lock();
        if state.round_over(new_read, Some(self.settings.round_idle)) {
            let learned = state.end_round(None, Self::now().as_secs());
            tracing::debug!(learned, new_read, "round ended by itself");
        }
    }

    /// What a plan is made from, copied out of `state`.
    fn snapshot(&self, state: &State) -> Snapshot {
        let mut lists: Vec<RawRelayList> = state
            .keys
            .iter()
            .filter_map(|k| state.lists.get(k).cloned())
            .collect();
        let reader_list = self
            .settings
            .reader
            .and_then(|r| state.lists.get(&r).cloned());
        if let Some(list) = reader_list
            .as_ref()
            .filter(|l| !state.key_set.contains(&l.author))
        {
            lists.push(list.clone());
        }
        Snapshot {
            version: state.version,
            keys: state.keys.clone(),
            lists,
            reader_list,
            stats: state.stats.clone(),
        }
    }

    /// Plans when what plans are made from changed since the current plan; returns the plan.
    fn ensure_plan(&self) -> Option<Arc<PlanView>> {
        // Two tries at most: another caller may change the state while this one plans.
        for _ in 0..2 {
            let snapshot = {
                let state = self.lock();
                if let Some(plan) = state.plan.as_ref().filter(|p| p.version == state.version) {
                    return Some(plan.clone());
                }
                self.snapshot(&state)
            };
            let view = self.plan(&snapshot, &HashSet::new());
            let mut state = self.lock();
            if let Some(view) = view {
                if state.plan.as_ref().is_none_or(|p| p.version < view.version) {
                    state.plan = Some(Arc::new(view));
                }
            }
            if let Some(plan) = state.plan.as_ref().filter(|p| p.version == state.version) {
                return Some(plan.clone());
            }
        }
        self.lock().plan.clone()
    }

    /// The route table of `snapshot` at `now` without the relays of `left_out`, with the
    /// relay hints learned stats saw notes on when `hints`.
    fn table(
        &self,
        snapshot: &Snapshot,
        left_out: &HashSet<&str>,
        hints: bool,
        now: u64,
    ) -> RouteTable {
        let mut readers = self.settings.reader_relays.clone();
        if let Some(list) = snapshot.reader_list.clone() {
            let author = list.author;
            let directory = RelayDirectory::from_relay_lists(self.policy.clone(), [list]);
            for url in directory.read_relays(&author) {
                if !readers.contains(url) {
                    readers.push(url.clone());
                }
            }
        }
        let list_refs: Vec<&RawRelayList> = snapshot.lists.iter().collect();
        let network = Network {
            policy: &self.policy,
            follows: &snapshot.keys,
            readers: &readers,
            fallback: &[],
            lists: &list_refs,
            routed_carriers: ROUTED_CARRIERS,
        };
        let stats = &snapshot.stats;
        let (table, _carriers) = if hints {
            let hints = nostr_outbox_core::seen_on_hints(stats, self.policy.max_write_relays);
            network.table_with_hints(left_out, stats, now, &hints)
        } else {
            network.table(left_out, stats, now)
        };
        table
    }

    /// The relays to probe after a read, at most `count`: relays the follows list that the
    /// open round did not ask and that never answered, most worth learning first
    /// ([`plan_probes`]), each with the follows to ask it about. None when the strategy does
    /// not learn.
    #[cfg(feature = "sdk")]
    pub(crate) fn probe_plan(&self, count: usize) -> ProbePlan {
        // Checked before the snapshot, which copies every list and the stats.
        let (budget, hints) = {
            let router = self.router.lock().unwrap_or_else(|e| e.into_inner());
            (router.probe_budget(), router.hints())
        };
        if budget.connections == 0 || count == 0 {
            return ProbePlan::default();
        }
        let (snapshot, asked) = {
            let state = self.lock();
            let asked: Vec<String> = state.round.keys().cloned().collect();
            (self.snapshot(&state), asked)
        };
        let now = Self::now().as_secs();
        let table = self.table(&snapshot, &HashSet::new(), hints, now);
        let skip: HashSet<&str> = asked.iter().map(String::as_str).collect();
        let budget = ProbeBudget {
            connections: count.min(budget.connections),
            ..budget
        };
        plan_probes(&table, &snapshot.stats, &skip, &budget, now)
    }

    /// Notes in the open round that `url` is probed about `authors` (see [`State::probe`]);
    /// false for a relay the round already asked, or a URL the policy refuses.
    #[cfg(feature = "sdk")]
    pub(crate) fn note_probe(&self, url: &str, authors: &[PublicKey], limit: u32) -> bool {
        let Ok(canonical) = self.policy.canonicalize(url) else {
            return false;
        };
        self.lock().probe(&canonical, authors, limit)
    }

    /// One plan from a snapshot, without the relays of `left_out`; takes only the router's
    /// lock.
    fn plan(&self, snapshot: &Snapshot, left_out: &HashSet<&str>) -> Option<PlanView> {
        let now = Self::now().as_secs();
        let (version, stats) = (snapshot.version, &snapshot.stats);
        let mut router = self.router.lock().unwrap_or_else(|e| e.into_inner());
        let table = self.table(snapshot, left_out, router.hints(), now);
        let mut ctx = PlanContext::at(now).seed(session_seed(self.seed, stats.session()));
        if let Some(secs) = self.settings.window_secs {
            ctx = ctx.window(secs);
        }
        let plan = match router.try_plan_with(&table, stats, ctx) {
            Ok(plan) => plan,
            Err(broken) => {
                tracing::warn!(%broken, "the router made a broken plan; keeping the previous one");
                return None;
            }
        };
        drop(router);
        let url = |id| table.url(id).to_string();
        let carriers: Vec<String> = plan.pool().iter().map(|&r| url(r)).collect();
        let carrier_urls: Vec<(String, RelayUrl)> = carriers
            .iter()
            .filter_map(|u| Some((u.clone(), RelayUrl::parse(u).ok()?)))
            .collect();
        let mut asked: HashMap<PublicKey, Vec<(String, RelayUrl)>> = HashMap::new();
        let mut hinted: HashMap<PublicKey, Vec<String>> = HashMap::new();
        let mut routed = Vec::with_capacity(plan.routed().len());
        for assignment in plan.routed() {
            let canonical = url(assignment.relay);
            let Ok(parsed) = RelayUrl::parse(&canonical) else {
                continue;
            };
            for &author in &assignment.authors {
                let pk = *table.pubkey(author);
                asked
                    .entry(pk)
                    .or_default()
                    .push((canonical.clone(), parsed.clone()));
                if table.hint_relays(author).contains(&assignment.relay) {
                    hinted.entry(pk).or_default().push(canonical.clone());
                }
            }
            routed.push(canonical);
        }
        for &author in plan.residual() {
            asked
                .entry(*table.pubkey(author))
                .or_default()
                .extend(carrier_urls.iter().cloned());
        }
        tracing::debug!(
            strategy = plan.strategy(),
            routed = routed.len(),
            residual = plan.residual().len(),
            "planned"
        );
        Some(PlanView {
            version,
            strategy: plan.strategy().to_string(),
            asked,
            hinted,
            routed,
            carriers: carrier_urls,
            residual: plan.residual().len(),
        })
    }

    /// The current plan, made first if anything changed since the last one; `None` while no
    /// plan could be made (no keys asked about yet count as an empty plan).
    pub fn plan_summary(&self) -> Option<PlanSummary> {
        self.end_round_if_over(false);
        let plan = self.ensure_plan()?;
        Some(PlanSummary {
            strategy: plan.strategy.clone(),
            routed: plan.routed.clone(),
            carriers: plan.carriers.iter().map(|(u, _)| u.clone()).collect(),
            keys: plan.asked.len(),
            residual: plan.residual,
        })
    }

    /// Per relay of the current plan, those of `keys` it is asked about (routed relays, and the
    /// residual's carriers for keys no routed relay covers), in URL order; keys not seen
    /// before are planned for first. A key with nowhere to be asked is in no entry. Starts a
    /// new read: the open round ends if notes came in for it, and the new round notes each
    /// relay as asked about its keys (the caller then asks them).
    pub fn routes(&self, keys: &[PublicKey]) -> Vec<(RelayUrl, Vec<PublicKey>)> {
        self.end_round_if_over(true);
        self.routes_in_round(keys)
    }

    /// [`routes`](Self::routes) within the open round: it is not ended first (the caller ends
    /// it, after several reads).
    pub(crate) fn routes_in_round(&self, keys: &[PublicKey]) -> Vec<(RelayUrl, Vec<PublicKey>)> {
        let (routes, _) = self.plan_routes(keys);
        routes
    }

    /// The current plan's routes for `keys` within the open round, without the relays the
    /// round set aside; their asks are noted in the round. Also returns the keys the plan
    /// asks only of set-aside relays (to be asked elsewhere).
    pub(crate) fn plan_routes(
        &self,
        keys: &[PublicKey],
    ) -> (Vec<(RelayUrl, Vec<PublicKey>)>, Vec<PublicKey>) {
        self.follow(keys.iter().copied());
        let Some(plan) = self.ensure_plan() else {
            return (Vec::new(), Vec::new());
        };
        let (set_aside, hits) = {
            let state = self.lock();
            (state.set_aside.clone(), state.hits.clone())
        };
        let mut routes = routes_of(&plan, keys);
        // Before the set-asides go: a relay a probe found that failed since is left out too.
        add_hits(&mut routes, &hits, keys);
        let mut displaced: BTreeSet<PublicKey> = BTreeSet::new();
        routes.retain(|r| {
            let kept = !set_aside.contains(&r.canonical);
            if !kept {
                displaced.extend(&r.authors);
            }
            kept
        });
        let asked: HashSet<&PublicKey> = routes.iter().flat_map(|r| &r.authors).collect();
        displaced.retain(|k| !asked.contains(k));
        self.note_asks(&routes);
        let routes = routes.into_iter().map(|r| (r.url, r.authors)).collect();
        (routes, displaced.into_iter().collect())
    }

    /// Per relay, those of `keys` a plan made without the relays of `left_out` (canonical
    /// URLs) and the round's set-asides asks about: where the follows of relays that failed or
    /// answered with nothing are asked instead. The plan is made for this call and not kept;
    /// nothing is noted in the round ([`note_asks`](Self::note_asks) notes what is asked).
    #[cfg(feature = "sdk")]
    pub(crate) fn routes_around<'a>(
        &self,
        keys: &[PublicKey],
        left_out: impl IntoIterator<Item = &'a str>,
    ) -> Vec<Route> {
        self.follow(keys.iter().copied());
        let (snapshot, set_aside) = {
            let state = self.lock();
            (self.snapshot(&state), state.set_aside.clone())
        };
        let mut left_out: HashSet<&str> = left_out.into_iter().collect();
        left_out.extend(set_aside.iter().map(String::as_str));
        let Some(plan) = self.plan(&snapshot, &left_out) else {
            return Vec::new();
        };
        routes_of(&plan, keys)
    }

    /// Notes in the open round that each relay of `routes` is asked about its authors (the
    /// caller then asks them).
    pub(crate) fn note_asks(&self, routes: &[Route]) {
        let mut state = self.lock();
        for route in routes {
            for &author in &route.authors {
                state.ask(&route.canonical, author);
            }
        }
    }

    /// Of `routes` (from [`routes_around`](Self::routes_around)), those the open round may
    /// ask: on relays it asked already or the reader's, or on relays new to it while it has
    /// added fewer than `cap` (those asked about the most keys first). Their asks are noted
    /// in the round.
    #[cfg(feature = "sdk")]
    pub(crate) fn admit(&self, mut routes: Vec<Route>, cap: usize) -> Vec<Route> {
        let mut state = self.lock();
        let known = |state: &State, r: &Route| r.carrier || state.round.contains_key(&r.canonical);
        routes.sort_by_key(|r| (known(&state, r), r.authors.len()));
        routes.reverse();
        let mut admitted = Vec::with_capacity(routes.len());
        for route in routes {
            if !known(&state, &route) {
                if state.added >= cap {
                    continue;
                }
                state.added += 1;
            }
            for &author in &route.authors {
                state.ask(&route.canonical, author);
            }
            admitted.push(route);
        }
        admitted
    }

    /// Notes in the open round that a probe found `authors` on `url` with notes its reads
    /// had missed: the round's later reads ask them there too ([`plan_routes`](Self::plan_routes)).
    #[cfg(feature = "sdk")]
    pub(crate) fn note_hits(&self, url: &RelayUrl, authors: &[PublicKey]) {
        let Some(canonical) = self.canonical(url) else {
            return;
        };
        let mut state = self.lock();
        state.hits.entry(canonical).or_default().extend(authors);
    }

    /// Sets `url` aside for the rest of the open round: it did not answer, so the round's
    /// later reads ask its follows elsewhere ([`routes_around`](Self::routes_around)).
    #[cfg(feature = "sdk")]
    pub(crate) fn set_aside(&self, url: &RelayUrl) {
        if let Some(canonical) = self.canonical(url) {
            self.lock().set_aside.insert(canonical);
        }
    }

    /// `url` as the engine's plans and round name it; `None` for a URL the policy refuses.
    #[cfg(feature = "sdk")]
    pub(crate) fn canonical(&self, url: &RelayUrl) -> Option<String> {
        self.policy.canonicalize(url.as_str()).ok()
    }

    /// Plans for `keys` too (e.g. the reader's follows, before the first fetch), as if
    /// nostr-sdk had asked about them.
    pub fn follow(&self, keys: impl IntoIterator<Item = PublicKey>) {
        let mut state = self.lock();
        for key in keys {
            state.note_key(key);
        }
    }

    /// Ends the current round (one fetch) and learns from it: a relay that sent a note, or
    /// that `reached` names (the relays the client was connected to), answered; a relay
    /// `reached` leaves out failed. Without `reached`, a relay that sent nothing is left out of
    /// the round. The next plan is made with what was learned. Returns whether anything was
    /// learned.
    ///
    /// Calling it is optional. Unless the engine was built with
    /// [`manual_rounds`](OutboxGossipBuilder::manual_rounds), a round also ends by itself (as
    /// `end_round(None)`):
    ///
    /// - when nostr-sdk starts a new read (asks the status of a key's relay list, or a key's
    ///   write relays) after notes came in for the round's asks: the previous read was
    ///   answered, and the new one is planned with what it taught;
    /// - when the round has seen no new note and no new ask for
    ///   [`round_idle`](OutboxGossipBuilder::round_idle), at the engine's next call (nostr-sdk's
    ///   or the caller's: [`stats`](Self::stats), [`plan_summary`](Self::plan_summary));
    /// - at [`save`](Self::save), when a note was counted in it.
    ///
    /// nostr-sdk does not tell a gossip engine when a relay sent EOSE, so these are the
    /// engine's signals. Call `end_round` with the relays the client reached to also learn
    /// which relays failed.
    pub fn end_round(&self, reached: Option<&HashSet<RelayUrl>>) -> bool {
        let reached: Option<HashSet<String>> = reached.map(|r| {
            r.iter()
                .filter_map(|u| self.policy.canonicalize(u.as_str()).ok())
                .collect()
        });
        self.lock()
            .end_round(reached.as_ref(), Self::now().as_secs())
    }

    /// A copy of the learned stats.
    pub fn stats(&self) -> DeliveryStats {
        self.end_round_if_over(false);
        self.lock().stats.clone()
    }

    /// Writes the learned stats and the kept kind:10002 lists to the store (nothing without
    /// one). An open round in which a note was counted is ended first (unless rounds are
    /// [manual](OutboxGossipBuilder::manual_rounds)), so what the last read taught is kept.
    pub async fn save(&self) -> Result<(), Error> {
        let Some(store) = &self.settings.store else {
            return Ok(());
        };
        let (stats, lists) = {
            let mut state = self.lock();
            if self.settings.auto_rounds && state.round_events > 0 {
                state.end_round(None, Self::now().as_secs());
            }
            let lists: Vec<RawRelayList> = state.lists.values().cloned().collect();
            (state.stats.clone(), lists)
        };
        store.save(&stats).await?;
        store.save_lists(&lists).await?;
        Ok(())
    }

    fn process_event(&self, event: &Event, relay_url: Option<&RelayUrl>) {
        match event.kind {
            Kind::RelayList => match RawRelayList::try_from(event) {
                Ok(list) => {
                    self.lock().keep_list(list, self.settings.reader.as_ref());
                }
                Err(why) => tracing::debug!(id = %event.id, %why, "relay list ignored"),
            },
            Kind::InboxRelays if event.verify().is_ok() => {
                self.lock().keep_dm_list(RawRelayList {
                    author: event.pubkey,
                    created_at: event.created_at.as_secs(),
                    tags: event.tags.iter().map(|t| t.as_slice().to_vec()).collect(),
                });
            }
            Kind::InboxRelays => tracing::debug!(id = %event.id, "DM inbox list does not verify"),
            kind if self.settings.learn_kinds.contains(&kind) => {
                let Some(url) = relay_url else {
                    return;
                };
                let Ok(canonical) = self.policy.canonicalize(url.as_str()) else {
                    return;
                };
                self.lock().delivered(&canonical, event);
            }
            _ => {}
        }
    }

    fn best_relays(
        &self,
        key: &PublicKey,
        selection: BestRelaySelection,
        allowed: GossipAllowedRelays,
    ) -> HashSet<RelayUrl> {
        let planned = self.lock().note_key(*key);
        let mut out = HashSet::new();
        let reads = |limit: u8, out: &mut HashSet<RelayUrl>| {
            let list = self.lock().lists.get(key).cloned();
            if let Some(list) = list {
                let dir = RelayDirectory::from_relay_lists(self.policy.clone(), [list]);
                take_allowed(&parse_all(dir.read_relays(key)), allowed, limit, out);
            }
        };
        let dms = |limit: u8, out: &mut HashSet<RelayUrl>| {
            let list = self.lock().dm_lists.get(key).cloned();
            if let Some(list) = list {
                let mut b =
                    nostr_outbox_client::directory::RelayDirectoryBuilder::new(self.policy.clone());
                b.add_dm_list(list);
                let dir = b.build();
                take_allowed(&parse_all(dir.dm_relays(key)), allowed, limit, out);
            }
        };
        match selection {
            BestRelaySelection::Read { limit } => reads(limit, &mut out),
            BestRelaySelection::PrivateMessage { limit } => dms(limit, &mut out),
            BestRelaySelection::Write { limit } => {
                self.writes(key, planned, limit, allowed, &mut out)
            }
            BestRelaySelection::Hints { limit } => self.hints(key, limit, allowed, &mut out),
            BestRelaySelection::MostReceived { limit } => {
                self.most_received(key, limit, allowed, &mut out)
            }
            BestRelaySelection::All {
                read,
                write,
                hints,
                most_received,
            } => {
                self.writes(key, planned, write, allowed, &mut out);
                self.hints(key, hints, allowed, &mut out);
                self.most_received(key, most_received, allowed, &mut out);
                reads(read, &mut out);
            }
        }
        out
    }

    /// The relays the plan asks about `key` (routed, or the carriers when it is residual or not
    /// planned for), at most `limit`; nostr-sdk will ask each about `key`, which the round
    /// notes.
    fn writes(
        &self,
        key: &PublicKey,
        planned: bool,
        limit: u8,
        allowed: GossipAllowedRelays,
        out: &mut HashSet<RelayUrl>,
    ) {
        let plan = self.ensure_plan();
        let mut chosen: Vec<(String, RelayUrl)> = Vec::new();
        let from = |urls: &[(String, RelayUrl)], chosen: &mut Vec<(String, RelayUrl)>| {
            chosen.extend(
                urls.iter()
                    .filter(|(_, u)| allowed.is_allowed(u))
                    .take(usize::from(limit))
                    .cloned(),
            );
        };
        match plan
            .as_ref()
            .filter(|_| planned)
            .and_then(|p| p.asked.get(key))
        {
            Some(urls) => from(urls, &mut chosen),
            None => {
                if let Some(plan) = &plan {
                    from(&plan.carriers, &mut chosen);
                } else {
                    let carriers: Vec<(String, RelayUrl)> = (self.settings.reader_relays.iter())
                        .filter_map(|u| Some((u.clone(), RelayUrl::parse(u).ok()?)))
                        .collect();
                    from(&carriers, &mut chosen);
                }
            }
        }
        if chosen.is_empty() {
            return;
        }
        let mut state = self.lock();
        for (canonical, _) in &chosen {
            state.ask(canonical, *key);
        }
        drop(state);
        out.extend(chosen.into_iter().map(|(_, u)| u));
    }

    /// Hinted relays the plan already routes `key` to (a router configured with `hints =
    /// true`); never a relay the plan does not ask about `key`, so hints add no connection.
    fn hints(
        &self,
        key: &PublicKey,
        limit: u8,
        allowed: GossipAllowedRelays,
        out: &mut HashSet<RelayUrl>,
    ) {
        let Some(plan) = self.lock().plan.clone() else {
            return;
        };
        let (Some(hinted), Some(asked)) = (plan.hinted.get(key), plan.asked.get(key)) else {
            return;
        };
        let urls: Vec<&RelayUrl> = asked
            .iter()
            .filter(|(c, _)| hinted.contains(c))
            .map(|(_, u)| u)
            .collect();
        take_allowed(urls, allowed, limit, out);
    }

    /// Among the relays the plan asks about `key`, those learning saw deliver `key`'s notes,
    /// most delivered first; never a relay outside the plan.
    fn most_received(
        &self,
        key: &PublicKey,
        limit: u8,
        allowed: GossipAllowedRelays,
        out: &mut HashSet<RelayUrl>,
    ) {
        let state = self.lock();
        let Some(plan) = state.plan.clone() else {
            return;
        };
        let Some(asked) = plan.asked.get(key) else {
            return;
        };
        let Some(author) = state.stats.author(key) else {
            return;
        };
        let mut ranked: Vec<(f64, &RelayUrl)> = asked
            .iter()
            .filter_map(|(c, u)| {
                let hits = author.relays.get(c)?.hits;
                (hits > 0.0).then_some((hits, u))
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        take_allowed(ranked.into_iter().map(|(_, u)| u), allowed, limit, out);
    }
}

type BoxFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, nostr_gossip::error::Error>> + Send + 'a>>;

impl NostrGossip for OutboxGossip {
    /// Keeps kind:10002 and kind:10050 lists (verified; newest per author), and learns from
    /// notes of the learned kinds that `relay_url` sent while the round asked it about their
    /// author.
    fn process<'a>(
        &'a self,
        event: &'a Event,
        relay_url: Option<&'a RelayUrl>,
    ) -> BoxFuture<'a, ()> {
        self.end_round_if_over(false);
        self.process_event(event, relay_url);
        Box::pin(async { Ok(()) })
    }

    /// `Updated` when a fetch of the list was attempted within the list TTL; `Outdated` when the
    /// attempt is older or a list is kept without a tracked attempt (one loaded from the
    /// store); `Missing` otherwise. A key asked about for kind:10002 is planned for.
    fn status<'a>(
        &'a self,
        public_key: &'a PublicKey,
        list: GossipListKind,
    ) -> BoxFuture<'a, GossipPublicKeyStatus> {
        self.end_round_if_over(list == GossipListKind::Nip65);
        let mut state = self.lock();
        if list == GossipListKind::Nip65 {
            state.note_key(*public_key);
        }
        let status = state.status(public_key, list, Self::now(), self.settings.list_ttl);
        drop(state);
        Box::pin(async move { Ok(status) })
    }

    /// Notes now as the last fetch attempt of the key's list.
    fn update_fetch_attempt<'a>(
        &'a self,
        public_key: &'a PublicKey,
        list: GossipListKind,
    ) -> BoxFuture<'a, ()> {
        self.end_round_if_over(false);
        self.lock()
            .attempted(*public_key, list, Self::now(), self.settings.list_ttl);
        Box::pin(async { Ok(()) })
    }

    /// Keys whose last attempt is older than the list TTL, oldest first, at most `limit`.
    fn outdated_public_keys(
        &self,
        list: GossipListKind,
        limit: NonZeroUsize,
    ) -> BoxFuture<'_, BTreeSet<OutdatedPublicKey>> {
        self.end_round_if_over(false);
        let outdated = self
            .lock()
            .outdated(list, limit.get(), Self::now(), self.settings.list_ttl);
        Box::pin(async move { Ok(outdated) })
    }

    /// Per selection:
    ///
    /// - `Write`: the relays the current plan asks about the key: its routed relays, or the
    ///   residual's carriers (the reader's relays) when no routed relay covers it or it is not
    ///   planned for. This is what a feed read asks, so the relays it opens stay within the
    ///   budget plus the carriers.
    /// - `Hints`: hinted relays the plan routes the key to (none unless the router takes hints).
    /// - `MostReceived`: the plan's relays for the key that delivered its notes, most first.
    /// - `Read`: the key's declared read relays (for `#p` reads: where mentions of it go; not
    ///   part of the feed's plan).
    /// - `PrivateMessage`: the key's kind:10050 relays.
    /// - `All`: the union of the above with their limits.
    ///
    /// Each list is cut at its limit and to the `allowed` relays.
    fn get_best_relays<'a>(
        &'a self,
        public_key: &'a PublicKey,
        selection: BestRelaySelection,
        allowed: GossipAllowedRelays,
    ) -> BoxFuture<'a, HashSet<RelayUrl>> {
        let new_read = matches!(
            selection,
            BestRelaySelection::Write { .. } | BestRelaySelection::All { .. }
        );
        self.end_round_if_over(new_read);
        let relays = self.best_relays(public_key, selection, allowed);
        Box::pin(async move { Ok(relays) })
    }
}

//! The coordinator: the one task that owns the relay lists, route table, slots, stats and
//! penalty box. Slots report to it; it plans, applies diffs, learns and emits the feed.
//!
//! Channels, and why they never deadlock: commands to slots are unbounded (they are few, one per
//! plan change), so the coordinator never waits on a slot; reports from slots are bounded, so a
//! flooding relay is slowed down by the coordinator and the consumer, not buffered without end.
//! During shutdown the coordinator keeps draining reports while it waits for the slots to end.
//!
//! # Learning: one place
//!
//! Everything learned from delivery goes through a [`RoundRecorder`], the recorder any client
//! with its own relay pool uses, and [`DeliveryStats::record_round`], the call the simulator
//! makes. Report handlers only pass frames on: a feed REQ is `asked`, an event `event`, an EOSE
//! `eose` (its latency is recorded at once), a failure `failed`, a set-aside `set_aside`, a
//! closed subscription `closed`. None of them touches the delivery priors, so a failure is
//! counted exactly once, in the round that follows it. The rules of what a round holds are the
//! recorder's (see its docs). The coordinator takes a round when the plan settles, when an
//! EOSE race ends, and a final one when the feed ends.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::{FilterQuery, Route, RouteBudget, RouteContext, RoutePlan};
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_client::Slots;
use nostr_outbox_client::{Carriers, Network, RelayDirectory, StatsStore};
use nostr_outbox_core::{DeliveryStats, PlanContext, RawRelayList, RouteTable, Router};
use nostr_outbox_core::{UrlPolicy, Violation};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::asks::probe::Probing;
use crate::client::Client;
use crate::config::RuntimeConfig;
use crate::connection::sockets::Kept;
use crate::feed::control::{Control, SubscribeError};
use crate::feed::event::{FeedEvent, Status};
use crate::feed::input::FeedInput;
use crate::feed::places::Places;
use crate::feed::slot::{run_slot, FrameDrop, ReportKind, SlotCommand, SlotReport, SubKind};
use crate::feed::summary::{AuthOutcome, FeedSummary, ProbeSummary, RelayOutcome};
use crate::penalty::PenaltyBox;

mod discovery;
mod frames;
mod open;
mod probes;
mod summary;

use open::{Aside, Mark, Turns};

use crate::dedup::Dedup;

/// What setting a relay aside teaches the stats ([`RoundRecorder`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Learned {
    /// It failed, or will not serve this reader: learned as not answering.
    Failure,
    /// It is up and wants what the reader lacks (sign-in, payment) or asks us to slow down:
    /// nothing is learned of its liveness.
    Refusal,
}

/// Reports buffered from all slots before slots wait (backpressure on flooding relays).
const REPORT_CAPACITY: usize = 1024;

/// Spawns the feed's task: the control channel into it, the task (its summary) and the feed
/// channel out of it.
pub(crate) fn spawn(
    input: FeedInput,
    client: Client,
    stats: DeliveryStats,
    places: Places,
) -> (
    mpsc::UnboundedSender<Control>,
    JoinHandle<FeedSummary>,
    mpsc::Receiver<FeedEvent>,
) {
    let (out_tx, out_rx) = mpsc::channel(client.config().channel_capacity.max(1));
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let mut coordinator = Coordinator::new(input, client, stats, out_tx);
    if let Places::Turns { .. } = places {
        coordinator.turns = Some(Turns::default());
    }
    coordinator.tally.places = places;
    if let Places::Shared { .. } = places {
        let discovers = coordinator.cfg.discover_lists;
        let fixed = (coordinator.reader_relays.iter())
            .chain(coordinator.indexers.iter().filter(|_| discovers))
            .cloned()
            .collect::<BTreeSet<_>>();
        for url in fixed {
            let kept = coordinator.client.sockets().keep(&url);
            coordinator.kept.insert(url, kept);
        }
    }
    let task = tokio::spawn(coordinator.run(control_rx));
    (control_tx, task, out_rx)
}

fn system_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    Pending,
    Eose,
}

#[derive(Debug)]
struct Live {
    tx: mpsc::UnboundedSender<SlotCommand>,
    lists: Option<Progress>,
    /// A re-plan dropped the feed while it was answering (`--once`): closed at its EOSE.
    closing: bool,
    /// Its feed filter asks only for new notes ([`open::TAIL`]): a continuing feed left the
    /// relay out of the window's plan but still hears it.
    tail: bool,
    /// Its lists purpose watches the feed's authors for new relay lists (a continuing feed),
    /// rather than discovery's lookup: it ends with the feed filter.
    watch: bool,
    /// The socket is open (a `Connected` report and no failure since).
    connected: bool,
    /// When its slot's dial began (it had a place of the socket budget), while it dials.
    dialling: Option<Instant>,
    /// The generation of the feed filter last sent.
    feed_gen: Option<u64>,
    /// That generation, while its EOSE on the current connection has not come.
    feed_pending: Option<u64>,
    /// Since when everything it was asked has answered (turns give the oldest place up).
    quiet_since: Option<Instant>,
    /// Since when its socket has been open (turns bound how long a place is held).
    held_since: Option<Instant>,
    /// The feed generation last sent asks only since the relay's mark (a continuing feed):
    /// its answer is a part of the window, learned compare-only and never taken as empty.
    resume: Option<u64>,
    /// The place kept for it until its socket opened ([`Coordinator::kept`]).
    _kept: Option<Kept>,
}

impl Live {
    fn send(&self, cmd: SlotCommand) {
        // A slot that already ended has nothing to close; ignoring is correct.
        let _ = self.tx.send(cmd);
    }

    /// Sends a feed filter as `generation`, awaited until its EOSE.
    fn send_feed(&mut self, filter: Filter, generation: u64) {
        self.feed_gen = Some(generation);
        self.feed_pending = Some(generation);
        self.quiet_since = None;
        self.resume = None;
        self.send(SlotCommand::Req {
            sub: SubKind::Feed,
            filter: Box::new(filter),
            generation,
        });
    }

    /// Everything it was asked has answered: from now on it may give its place up.
    fn quiet(&mut self) {
        let lists = self.lists.is_none_or(|p| p == Progress::Eose);
        if self.feed_pending.is_none() && lists && self.quiet_since.is_none() {
            self.quiet_since = Some(Instant::now());
        }
    }

    /// Watches `filter` for new relay lists, unless its lists purpose is discovery's (which
    /// watches every follow already).
    fn watch_lists(&mut self, filter: Filter) {
        if self.lists.is_some() && !self.watch {
            return;
        }
        self.watch = true;
        self.lists = Some(Progress::Pending);
        self.quiet_since = None;
        self.send(SlotCommand::Req {
            sub: SubKind::Lists,
            filter: Box::new(filter),
            generation: 1,
        });
    }
}

#[derive(Debug, Default)]
struct Tally {
    /// How the feed's relays fit the socket budget, decided before the start.
    places: Places,
    events: u64,
    first_event: Option<Duration>,
    full_eose: Option<Duration>,
    plans: u64,
    /// Plans that broke an invariant and were not applied.
    rejected: u64,
    /// Follows in no filter of the applied plan (only when no plan could be applied).
    uncovered: usize,
    /// How many relays the last applied plan told about each follow.
    disclosure: nostr_outbox_core::Disclosure,
    /// When each new note arrived, until the first settle (for time to 90%).
    arrivals: Vec<Duration>,
    to_90: Option<Duration>,
    dropped: BTreeMap<FrameDrop, u64>,
    /// A `once` run stopped at the end of its EOSE race.
    raced: bool,
    /// A `once` run stopped at its deadline.
    deadline_reached: bool,
    /// Relays still awaited (feed or lookup) when a `once` run stopped early.
    pending: Vec<String>,
    relays: BTreeMap<String, RelayOutcome>,
    penalised: BTreeSet<String>,
    /// Relay lists an indexer delivered first (none of the reader's relays had sent them).
    lists_from_indexers: usize,
    /// Discovery relays whose lists were reconciled (NIP-77); counted by their sync tasks.
    lists_reconciled: Arc<std::sync::atomic::AtomicUsize>,
    /// Relays that asked for NIP-42 sign-in, and how it went the last time.
    auth: BTreeMap<String, AuthOutcome>,
    /// Relays probed after the fetch.
    probes: ProbeSummary,
}

struct Coordinator {
    /// The client's knobs (`client.config()`, kept at hand).
    cfg: Arc<RuntimeConfig>,
    /// Its sockets, signer and relay documents, lent to every slot.
    client: Client,
    /// The strategy, with the URL policy every URL of the feed goes through.
    router: Router,
    follows: Vec<PublicKey>,
    follow_set: HashSet<PublicKey>,
    reader_relays: Vec<String>,
    lists: HashMap<PublicKey, RawRelayList>,
    lists_changed: bool,
    slots: Slots,
    stats: DeliveryStats,
    store: Arc<dyn StatsStore>,
    penalties: PenaltyBox,
    /// What each feed was asked and returned, until it is learned (see the module docs).
    recorder: RoundRecorder,
    live: BTreeMap<String, Live>,
    tasks: JoinSet<()>,
    reports_tx: mpsc::Sender<SlotReport>,
    reports: mpsc::Receiver<SlotReport>,
    out: mpsc::Sender<FeedEvent>,
    seen: Dedup,
    replan_at: Option<Instant>,
    started: Instant,
    tally: Tally,
    /// Who carried the residual in the last plan.
    carriers: Carriers,
    /// The canonical fallback relays (see [`RuntimeConfig::fallback_relays`]).
    fallback_relays: Vec<String>,
    /// Relay hints the client was given ([`FeedInput::hints`]).
    hints: Vec<nostr_outbox_core::Hint>,
    /// The canonical indexer relays (see [`RuntimeConfig::indexers`]).
    indexers: Vec<String>,
    /// This run's planning seed.
    plan_seed: u64,
    /// With `once` and an EOSE race: when to stop waiting for stragglers.
    race_at: Option<Instant>,
    /// With `once`: when the relay-list lookup stops waiting for relays that have not answered
    /// (set by the first lookup answer, see [`RuntimeConfig::lookup_grace`]).
    lists_race_at: Option<Instant>,
    /// With `once` and a deadline: when the run ends, whatever is still pending.
    deadline_at: Option<Instant>,
    /// A `--once` run waits for the current plan's relays before re-planning (see `penalise`).
    wave_replan: bool,
    /// Every relay a slot was opened for in this run (feed or lookup): never probed.
    dialled: HashSet<String>,
    /// A continuing feed's probes in flight.
    probing: Option<Probing>,
    /// A plan was applied since the last probes: probe at the next settle (continuing feed).
    probe_due: bool,
    /// The feed was told to stop: a `--once` run ends without probing.
    stop_requested: bool,
    /// Relays that answered with none of their follows' notes where other relays returned
    /// some ([`RoundRecorder::empty_answers`]): left out of this feed's plans (a continuing
    /// feed's for [`OpenFeed::empty_for`](crate::OpenFeed::empty_for), hearing their new notes
    /// meanwhile), so their follows are asked elsewhere before the run ends instead of at the
    /// next one.
    empty: BTreeMap<String, Aside>,
    /// A continuing feed's relays set aside for failing: left out of the plans until their
    /// tail answers (see `open`).
    down: BTreeMap<String, Aside>,
    /// Per relay, up to when what it holds was delivered (a continuing feed; see `open`).
    marks: BTreeMap<String, Mark>,
    /// A continuing feed's next set-aside deadline: a re-plan then brings the relay back.
    expiry_at: Option<Instant>,
    /// A continuing feed with fewer socket places than relays: who rests, and until when.
    turns: Option<Turns>,
    /// Relays of a `--once` run still dialling past their bound ([`Schedule::slow_dial`]):
    /// their follows asked elsewhere while the dial goes on. At most the run's relays.
    ///
    /// [`Schedule::slow_dial`]: crate::Schedule::slow_dial
    slow: BTreeSet<String>,
    /// Where the relays time-share the places ([`Places::Shared`]): a place kept for each
    /// reader relay and indexer until its slot opens (the slot's [`Live`] then holds it), so
    /// they never wait behind a routed relay's dial. Those the first plan does not open are
    /// let go after it.
    kept: HashMap<String, Kept>,
    /// The relays carrying the residual in the current plan: never set aside as empty.
    carrier_urls: HashSet<String>,
    /// The current plan's answers were checked for empty ones (once per plan).
    empty_checked: bool,
}

impl Coordinator {
    /// The present: the configured clock, else the system's (see [`RuntimeConfig::clock`]).
    fn now(&self) -> u64 {
        self.cfg.clock.unwrap_or_else(system_now)
    }

    fn new(
        input: FeedInput,
        client: Client,
        mut stats: DeliveryStats,
        out: mpsc::Sender<FeedEvent>,
    ) -> Self {
        let FeedInput {
            router,
            follows,
            reader_relays,
            relay_lists,
            store,
            penalties,
            monitor_relays: _,
            hints,
            marks,
        } = input;
        let cfg = client.config_arc();
        let policy = router.policy();
        let canonical_readers = canonical_list(policy, &reader_relays, "reader relay");
        let fallback_relays = canonical_list(policy, &cfg.fallback_relays, "fallback relay");
        let indexers = canonical_list(policy, &cfg.indexers, "indexer relay");
        let session = stats.begin_session();
        let plan_seed = nostr_outbox_core::session_seed(cfg.seed, session.saturating_sub(1));
        let (reports_tx, reports) = mpsc::channel(REPORT_CAPACITY);
        let mut me = Self {
            seen: Dedup::new(cfg.dedup_capacity),
            cfg,
            client,
            router,
            follow_set: follows.iter().copied().collect(),
            follows,
            reader_relays: canonical_readers,
            lists: HashMap::new(),
            lists_changed: false,
            slots: Slots::new(),
            stats,
            store,
            penalties,
            recorder: RoundRecorder::new(),
            live: BTreeMap::new(),
            tasks: JoinSet::new(),
            reports_tx,
            reports,
            out,
            replan_at: None,
            started: Instant::now(),
            tally: Tally::default(),
            carriers: Carriers::Reader,
            fallback_relays,
            hints,
            indexers,
            plan_seed,
            race_at: None,
            lists_race_at: None,
            deadline_at: None,
            wave_replan: false,
            dialled: HashSet::new(),
            probing: None,
            probe_due: false,
            stop_requested: false,
            empty: BTreeMap::new(),
            down: BTreeMap::new(),
            marks: BTreeMap::new(),
            expiry_at: None,
            turns: None,
            carrier_urls: HashSet::new(),
            empty_checked: false,
            slow: BTreeSet::new(),
            kept: HashMap::new(),
        };
        for list in relay_lists {
            me.add_list(list);
        }
        me.seed_marks(marks);
        me
    }

    async fn emit(&mut self, event: FeedEvent) {
        // A consumer that went away does not stop the feed (stats are still learned).
        let _ = self.out.send(event).await;
    }

    async fn status(&mut self, status: Status) {
        self.emit(FeedEvent::Status(status)).await;
    }

    fn add_list(&mut self, list: RawRelayList) -> bool {
        if !self.follow_set.contains(&list.author) {
            return false;
        }
        let kept = nostr_outbox_core::keep_newest_list(&mut self.lists, list);
        self.lists_changed |= kept;
        kept
    }

    fn schedule_replan(&mut self, after: Duration) {
        let at = crate::deadline::after(after);
        self.replan_at = Some(self.replan_at.map_or(at, |t| t.min(at)));
    }

    /// The route table from the known lists, leaving out relays in the penalty box, with the
    /// residual's carriers as its reader relays (see [`Network`]). A `--once` run also leaves
    /// out every relay it set aside itself, for the rest of the run: a first set-aside lasts a
    /// minute, and a run still re-planning when it expires would dial again relays it already
    /// gave up on (the box keeps its deadlines for later runs).
    fn build_table(&self, now: u64) -> (RouteTable, Carriers) {
        let mut left_out: HashSet<&str> = self.penalties.penalised(now).collect();
        if self.cfg.once {
            left_out.extend(self.tally.penalised.iter().map(String::as_str));
        }
        let at = Instant::now();
        left_out.extend(
            (self.empty.iter())
                .filter(|(_, e)| e.until.is_none_or(|u| u > at))
                .map(|(url, _)| url.as_str()),
        );
        left_out.extend(self.down.keys().map(String::as_str));
        left_out.extend(self.slow.iter().map(String::as_str));
        self.table_without(&left_out, now)
    }

    /// The route table from the known lists without the relays of `left_out` (see
    /// [`Network::table`]).
    fn table_without(&self, left_out: &HashSet<&str>, now: u64) -> (RouteTable, Carriers) {
        let lists: Vec<&RawRelayList> = self.lists.values().collect();
        let network = Network {
            policy: self.router.policy(),
            follows: &self.follows,
            readers: &self.reader_relays,
            fallback: &self.fallback_relays,
            lists: &lists,
            routed_carriers: self.cfg.routed_carriers,
        };
        if !self.router.hints() {
            return network.table(left_out, &self.stats, now);
        }
        // What the client was told, and where learning saw each follow's notes: the
        // simulator's client offers the same (`SimWorld::client_hints`).
        let mut hints = self.hints.clone();
        let policy = self.router.policy();
        hints.extend(nostr_outbox_core::seen_on_hints(
            &self.stats,
            policy.max_write_relays,
        ));
        network.table_with_hints(left_out, &self.stats, now, &hints)
    }

    fn lists_filter(&self) -> Filter {
        Filter::new()
            .authors(self.follows.iter().copied())
            .kind(Kind::RelayList)
    }

    /// The live slot for `url`, spawning its task if needed.
    fn ensure_live(&mut self, url: &str) -> &mut Live {
        if !self.live.contains_key(url) {
            self.dialled.insert(url.to_string());
            let kept = self.kept.remove(url);
            let (tx, rx) = mpsc::unbounded_channel();
            let seed = self.cfg.seed ^ fnv1a(url.as_bytes());
            // Never heard from: its document may say it serves no one this run can be.
            let patient = self.stats.get(url).latency_ms.is_none();
            self.tasks.spawn(run_slot(
                Arc::from(url),
                self.client.clone(),
                rx,
                self.reports_tx.clone(),
                seed,
                patient,
            ));
            self.live.insert(
                url.to_string(),
                Live {
                    tx,
                    lists: None,
                    closing: false,
                    tail: false,
                    watch: false,
                    connected: false,
                    dialling: None,
                    feed_gen: None,
                    feed_pending: None,
                    quiet_since: None,
                    held_since: None,
                    resume: None,
                    _kept: kept,
                },
            );
        }
        self.live.get_mut(url).expect("inserted above")
    }

    fn close_live_if_idle(&mut self, url: &str) {
        let idle = self
            .live
            .get(url)
            .is_some_and(|l| l.lists.is_none() && !l.tail && !self.recorder.is_asked(url));
        if idle {
            if let Some(live) = self.live.remove(url) {
                live.send(SlotCommand::Shutdown);
            }
        }
    }

    /// Plans from the current lists and stats, applies the diff to the slots, and says so.
    async fn replan(&mut self) {
        self.replan_at = None;
        self.wave_replan = false;
        self.lists_changed = false;
        self.empty_checked = false;
        self.expiry_at = None;
        let now = self.now();
        self.penalties.expire(now, &self.cfg.penalty);
        self.expire_empty();
        let (table, carriers) = self.build_table(now);
        self.carrier_urls = (table.reader_relays().iter())
            .map(|&r| table.url(r).to_string())
            .collect();
        if carriers != self.carriers {
            self.carriers = carriers;
            if carriers != Carriers::Reader {
                let relays = table
                    .reader_relays()
                    .iter()
                    .map(|r| table.url(*r).to_string())
                    .collect::<Vec<_>>();
                warn!(
                    ?carriers,
                    ?relays,
                    "no reader relay is usable; the residual moves"
                );
                self.status(Status::Carriers { carriers, relays }).await;
            }
        }
        let mut ctx = PlanContext::at(now).seed(self.plan_seed);
        if let Some(since) = self.cfg.since {
            // The feed asks for notes since then: the plan is for those.
            ctx = ctx.window(now.saturating_sub(since.as_secs()));
        }
        let plan = match self.router.try_plan_with(&table, &self.stats, ctx) {
            Ok(plan) => plan,
            Err(broken) => {
                // Nobody to ask is the network's doing; any other violation is a bug in the
                // strategy. Either way the plan is never applied: the last good one stays.
                let environmental = carriers == Carriers::Nobody
                    && broken
                        .violations
                        .iter()
                        .all(|v| matches!(v, Violation::Uncovered(_)));
                if !environmental && cfg!(debug_assertions) {
                    panic!("{broken}");
                }
                warn!(error = %broken, "plan rejected; keeping the last good plan");
                self.tally.rejected += 1;
                self.tally.uncovered = broken
                    .violations
                    .iter()
                    .filter(|v| matches!(v, Violation::Uncovered(_)))
                    .count();
                self.status(Status::PlanRejected {
                    reason: broken.to_string(),
                })
                .await;
                return;
            }
        };
        self.tally.uncovered = 0;
        self.tally.disclosure = plan.disclosure_per_follow(&table);
        let diff = self.slots.apply(&plan, &table);
        self.tally.plans += 1;
        self.probe_due = true;
        info!(
            plan = self.tally.plans,
            strategy = plan.strategy(),
            lists = self.lists.len(),
            dial = diff.dial.len(),
            replace = diff.replace.len(),
            close = diff.close.len(),
            unchanged = diff.unchanged.len(),
            "applying plan"
        );
        for url in diff.close.iter().chain(&diff.dial).chain(&diff.replace) {
            // A new filter asks the whole window: a turn's rest ends.
            if let Some(turns) = self.turns.as_mut() {
                turns.resting.remove(url);
            }
        }
        for url in &diff.close {
            if self.slow.contains(url) && !self.time_shared() {
                // Still dialling: what it answers before the run ends is still used. (Where
                // relays time-share the places, its dial gives its place to one waiting.)
                if let Some(outcome) = self.tally.relays.get_mut(url) {
                    outcome.replanned_away = true;
                }
                continue;
            }
            // In a `--once` run a relay still answering is let finish: its answer costs
            // nothing more, and cutting it off would lose notes the run already asked for.
            if self.cfg.once && self.recorder.is_answering(url) {
                if let Some(live) = self.live.get_mut(url) {
                    live.closing = true;
                    continue;
                }
            }
            if let Some(outcome) = self.tally.relays.get_mut(url) {
                if self.recorder.has_answered(url) {
                    outcome.answered = true;
                } else if self.recorder.is_answering(url) {
                    outcome.replanned_away = true;
                }
            }
            if self.tails_for(url).is_some() {
                // Left out for an empty answer or for failing: still heard for its follows'
                // new notes.
                self.recorder.closed(url);
                if !self.live.get(url).is_some_and(|l| l.tail) {
                    self.send_tail(url);
                }
                continue;
            }
            self.close_feed(url);
        }
        for url in diff.dial.iter().chain(&diff.replace) {
            let Some(slot) = self.slots.get(url) else {
                continue;
            };
            let (authors, generation) = (slot.authors.clone(), slot.generation);
            // Asked before about the same follows, and everything it held delivered: only
            // what is new since (a continuing feed).
            let resume = self.resume_from(url, &authors);
            let since = resume.map(Timestamp::from).or(self.cfg.since);
            let filter = slot.filter(&self.cfg.kinds, since);
            let outcome = self.tally.relays.entry(url.clone()).or_default();
            outcome.reqs += 1;
            outcome.replanned_away = false;
            outcome.authors = authors.len();
            let watch = (!self.cfg.once).then(|| self.watch_filter(&authors));
            let live = self.ensure_live(url);
            live.closing = false;
            live.tail = false;
            live.send_feed(filter, generation);
            live.resume = resume.map(|_| generation);
            if let Some(watch) = watch {
                live.watch_lists(watch);
            }
            self.recorder.asked(url, authors, generation);
        }
        // A reader relay or indexer this plan did not open has no use for a kept place.
        self.kept.clear();
        if !self.cfg.once {
            self.keep_tails();
            self.schedule_expiry();
        }
        self.status(Status::Planned {
            plan: self.tally.plans,
            strategy: plan.strategy().to_string(),
            connections: self.slots.len(),
            relay_lists: self.lists.len(),
            dial: diff.dial.len(),
            replace: diff.replace.len(),
            close: diff.close.len(),
            unchanged: diff.unchanged.len(),
        })
        .await;
    }

    /// Every relay of the current plan answered (or was set aside and so is gone).
    fn feeds_resolved(&self) -> bool {
        self.recorder.all_answered()
    }

    /// Every slot of the current plan answered or was set aside, every lookup finished, and no
    /// re-plan is pending.
    fn settled(&self) -> bool {
        self.replan_at.is_none()
            && !self.wave_replan
            && self.recorder.all_answered()
            && self
                .live
                .values()
                .all(|l| l.lists.is_none_or(|p| p == Progress::Eose))
    }

    /// Relays still awaited: a feed filter not answered, or a lookup not finished.
    fn pending(&self) -> Vec<String> {
        let answered: HashSet<&str> = self.recorder.answered().map(|(url, _)| url).collect();
        self.live
            .iter()
            .filter(|(url, live)| {
                let feed = self.recorder.is_asked(url) && !answered.contains(url.as_str());
                feed || live.lists == Some(Progress::Pending)
            })
            .map(|(url, _)| url.clone())
            .collect()
    }

    /// The lookup's grace is over (`--once`): relays that have not answered it are not waited
    /// for; what they sent is kept.
    fn end_lookups(&mut self) {
        self.lists_race_at = None;
        let waiting: Vec<String> = self
            .live
            .iter()
            .filter(|(_, l)| l.lists == Some(Progress::Pending))
            .map(|(url, _)| url.clone())
            .collect();
        for url in &waiting {
            debug!(relay = %url, "relay-list lookup not answered in its grace; not waiting");
            if let Some(live) = self.live.get_mut(url) {
                live.lists = None;
                live.send(SlotCommand::Close {
                    sub: SubKind::Lists,
                });
            }
            self.close_live_if_idle(url);
        }
        if !waiting.is_empty() && self.lists_changed {
            self.schedule_replan(Duration::ZERO);
        }
    }

    /// Ends the feed subscription on `url` (and its socket, if nothing else uses it). An answer
    /// not learned yet stays with the recorder for the next round.
    fn close_feed(&mut self, url: &str) {
        if let Some(live) = self.live.get_mut(url) {
            live.send(SlotCommand::Close { sub: SubKind::Feed });
            live.closing = false;
            live.tail = false;
            live.feed_gen = None;
            live.feed_pending = None;
            if live.watch {
                live.watch = false;
                live.lists = None;
                live.send(SlotCommand::Close {
                    sub: SubKind::Lists,
                });
            }
        }
        self.recorder.closed(url);
        self.close_live_if_idle(url);
    }

    /// Schedules the re-plan that moves the follows of a relay set aside (failed, refused or
    /// answered empty) elsewhere. Relays that fail together (a dead batch at start) are set
    /// aside within moments of each other: one re-plan moves them all, instead of one each
    /// churning the relays that are still answering. A `--once` run re-plans in waves: when
    /// every relay of the plan has answered or been set aside (or at the latest after one EOSE
    /// timeout), so which relays share a re-plan does not depend on timing; with early waves
    /// ([`Schedule::early_waves`](crate::Schedule)) it goes out after the debounce, as a
    /// continuing feed's does.
    fn replan_after_set_aside(&mut self) {
        if self.cfg.once && !self.cfg.schedule.early_waves {
            self.wave_replan = true;
            self.schedule_replan(self.cfg.eose_timeout);
        } else {
            self.schedule_replan(self.cfg.replan_debounce);
        }
    }

    /// At each EOSE, and once the plan settled (an answer closed since may show one up):
    /// leaves out of the next plans every relay that answered with none of its follows' notes
    /// where another relay returned some (the residual's carriers excepted), as the
    /// simulator's re-planned sessions do. Its answer is still learned, in the next round.
    /// Returns whether any was found (the caller re-plans).
    fn set_aside_empty_answers(&mut self) -> bool {
        let at = Instant::now();
        let found: Vec<String> = (self.recorder.empty_answers().into_iter())
            .filter(|url| !self.carrier_urls.contains(*url))
            .filter(|url| {
                self.empty
                    .get(*url)
                    .is_none_or(|e| e.until.is_some_and(|u| u <= at))
            })
            .map(str::to_string)
            .collect();
        for url in &found {
            info!(relay = %url, "answered with none of its follows' notes that others returned; asking elsewhere");
            self.tally.relays.entry(url.clone()).or_default().empty = true;
            let authors = self
                .slots
                .get(url)
                .map(|s| s.authors.clone())
                .unwrap_or_default();
            let empty = self.empty_entry(url, authors);
            self.empty.insert(url.clone(), empty);
        }
        !found.is_empty()
    }

    /// How long a `--once` run waits for `url`'s socket before asking elsewhere (see
    /// [`Schedule::slow_dial`](crate::Schedule::slow_dial)).
    fn slow_after(&self, url: &str) -> Duration {
        let learned = self
            .stats
            .get(url)
            .latency_ms
            .map(|ms| Duration::from_secs_f64((3.0 * ms / 1000.0).clamp(0.0, 3600.0)));
        learned.map_or(self.cfg.schedule.slow_dial, |l| {
            l.max(self.cfg.schedule.slow_dial)
        })
    }

    /// Whether the feed's relays take turns at the socket places (a relay kept dialling
    /// holds one another is waiting for).
    fn time_shared(&self) -> bool {
        matches!(self.tally.places, Places::Shared { .. })
    }

    /// A `--once` run: the follows of each relay of the plan whose socket is still not open
    /// past [`slow_after`](Self::slow_after) are asked elsewhere (learned as a failure of this
    /// run), while its dial goes on; a late answer before the run ends is still delivered.
    fn ask_around_slow_dials(&mut self) {
        let bound = self.cfg.connect_timeout;
        let slow: Vec<String> = (self.live.iter())
            .filter(|(url, live)| {
                !live.connected && self.recorder.is_answering(url) && !self.slow.contains(*url) && {
                    let after = self.slow_after(url);
                    after < bound && live.dialling.is_some_and(|at| at.elapsed() >= after)
                }
            })
            .map(|(url, _)| url.clone())
            .collect();
        for url in &slow {
            info!(relay = %url, "no connection yet; its follows are asked elsewhere while the dial goes on");
            self.slow.insert(url.clone());
            self.recorder.set_aside(url);
        }
        if !slow.is_empty() {
            self.replan_after_set_aside();
        }
    }

    /// Learns from the recorder's round, if there is anything new (see the module docs). When
    /// `ending`, relays still waiting that failed since their REQ count as not answered.
    fn record_round(&mut self, ending: bool) {
        let round = if ending {
            self.recorder.take_final_round()
        } else {
            self.recorder.take_round()
        };
        let Some(report) = round else {
            return;
        };
        for relay in &report.relays {
            let events: u64 = relay.authors.iter().map(|a| u64::from(a.events)).sum();
            debug!(
                relay = %relay.url,
                answered = relay.answered,
                compare_only = relay.compare_only,
                authors = relay.authors.len(),
                events,
                "learning from the round"
            );
        }
        self.stats.record_round(&report, self.now());
    }

    async fn save_stats(&mut self) -> Option<String> {
        let store = self.store.clone();
        let snapshot = self.stats.clone();
        // A task of its own: a store that panics costs this save, not the feed.
        match tokio::spawn(async move { store.save(&snapshot).await }).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => {
                warn!(error = %e, "saving stats failed");
                Some(e.to_string())
            }
            Err(e) => Some(e.to_string()),
        }
    }

    async fn penalise(&mut self, url: &str, until: u64, reason: String, learned: Learned) {
        warn!(relay = %url, until, %reason, "relay set aside");
        self.tally.penalised.insert(url.to_string());
        if learned == Learned::Failure && self.keep_down(url) {
            // A continuing feed: dialled again with backoff, its follows' notes asked since
            // its mark, out of the plans until it answers. Learned as a failure.
            self.recorder.set_aside(url);
        } else if let Some(live) = self.live.remove(url) {
            live.send(SlotCommand::Shutdown);
            match learned {
                // Set aside is a failure of this run, whatever the relay answered before.
                Learned::Failure => self.recorder.set_aside(url),
                // It is up and declined: nothing is learned of its liveness.
                Learned::Refusal => self.recorder.refused(url),
            }
        }
        self.replan_after_set_aside();
        self.status(Status::Penalised {
            relay: url.to_string(),
            until,
            reason,
        })
        .await;
    }

    /// Routes a client's filter over the relay lists known now and what was learned.
    fn route(&self, query: &FilterQuery, budget: RouteBudget) -> Result<RoutePlan, SubscribeError> {
        let directory = RelayDirectory::from_relay_lists(
            self.router.policy().clone(),
            self.lists.values().cloned(),
        );
        let ctx = RouteContext {
            directory: &directory,
            stats: &self.stats,
            now: self.now(),
            budget,
        };
        let (plan, violations) = query.plan_checked(&ctx);
        if !violations.is_empty() {
            let why = violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>();
            return Err(SubscribeError::Broken(why.join("; ")));
        }
        if plan.targets.is_empty() {
            return Err(SubscribeError::NoRelay);
        }
        Ok(plan)
    }

    async fn on_control(&mut self, control: Control) -> bool {
        match control {
            Control::AddLists(lists) => {
                let mut changed = false;
                for list in lists {
                    changed |= self.add_list(list);
                }
                if changed {
                    self.schedule_replan(self.cfg.replan_debounce);
                }
                true
            }
            Control::SetFollows(follows) => {
                self.follow_set = follows.iter().copied().collect();
                self.follows = follows;
                let follow_set = &self.follow_set;
                self.lists.retain(|pk, _| follow_set.contains(pk));
                if self.cfg.discover_lists && !self.cfg.once {
                    self.start_discovery();
                }
                self.schedule_replan(Duration::ZERO);
                true
            }
            Control::Route {
                query,
                budget,
                reply,
            } => {
                let _ = reply.send(self.route(&query, budget));
                true
            }
            Control::Shutdown => {
                self.stop_requested = true;
                false
            }
        }
    }

    async fn run(mut self, mut control: mpsc::UnboundedReceiver<Control>) -> FeedSummary {
        // The first subscription goes out now, whatever is known: with no lists, everyone is
        // the residual on the reader's relays.
        self.replan().await;
        self.start_discovery();
        if self.cfg.once {
            self.deadline_at = self
                .cfg
                .deadline
                .map(|d| crate::deadline::offset(self.started, d));
        }
        // An interval of zero would panic, and one of a few nanoseconds would save in a loop.
        let every = self.cfg.stats_flush_interval.max(Duration::from_secs(1));
        let mut flush = tokio::time::interval(every);
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        flush.tick().await;
        // How often turns are looked at: a small part of the interval, at most a second.
        let every =
            (self.cfg.open.turn_every / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut turn_tick = tokio::time::interval(every);
        turn_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // How often a `--once` run looks for dials past their bound.
        let mut slow_tick = tokio::time::interval(Duration::from_millis(250));
        slow_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut control_open = true;
        loop {
            if self.wave_replan && self.feeds_resolved() {
                self.replan().await;
            }
            if self.settled() && !self.empty_checked {
                self.empty_checked = true;
                if self.set_aside_empty_answers() {
                    self.replan().await;
                    continue;
                }
            }
            if self.settled() {
                self.record_round(false);
                if self.tally.full_eose.is_none() {
                    self.tally.full_eose = Some(self.started.elapsed());
                    self.note_time_to_90();
                    self.status(Status::Settled).await;
                }
                if self.cfg.once {
                    break;
                }
                self.start_probes();
            }
            let replan_at = self.replan_at;
            let race_at = self.race_at;
            let lists_race_at = self.lists_race_at;
            let deadline_at = self.deadline_at;
            let expiry_at = self.expiry_at;
            tokio::select! {
                _ = tokio::time::sleep_until(deadline_at.unwrap_or_else(Instant::now)), if deadline_at.is_some() => {
                    // The run ends with what it has; the rest is named in the summary.
                    self.tally.pending = self.pending();
                    warn!(pending = self.tally.pending.len(), "deadline reached; ending the run");
                    self.tally.deadline_reached = true;
                    self.record_round(false);
                    self.note_time_to_90();
                    break;
                }
                _ = tokio::time::sleep_until(lists_race_at.unwrap_or_else(Instant::now)), if lists_race_at.is_some() => {
                    self.end_lookups();
                }
                _ = tokio::time::sleep_until(race_at.unwrap_or_else(Instant::now)), if race_at.is_some() && self.tally.full_eose.is_none() => {
                    // The EOSE race is over: learn from who answered, stop waiting for the rest.
                    debug!("EOSE race over; not waiting for the remaining relays");
                    self.tally.pending = self.pending();
                    self.record_round(false);
                    self.tally.raced = true;
                    self.note_time_to_90();
                    break;
                }
                report = self.reports.recv() => {
                    // The coordinator holds a sender, so the channel never closes here.
                    if let Some(report) = report {
                        self.on_report(report).await;
                    }
                }
                cmd = control.recv(), if control_open => match cmd {
                    Some(cmd) => {
                        if !self.on_control(cmd).await {
                            break;
                        }
                    }
                    // Handle dropped without `shutdown`: keep going until done (once) or
                    // forever; only an explicit shutdown stops a live feed.
                    None => control_open = false,
                },
                _ = tokio::time::sleep_until(replan_at.unwrap_or_else(Instant::now)), if replan_at.is_some() => {
                    self.replan().await;
                }
                _ = tokio::time::sleep_until(expiry_at.unwrap_or_else(Instant::now)), if expiry_at.is_some() => {
                    // A set-aside ended: its relay's follows come back to it.
                    self.replan().await;
                }
                _ = turn_tick.tick(), if self.turns.is_some() => {
                    self.take_turns();
                }
                _ = slow_tick.tick(), if self.cfg.once => {
                    self.ask_around_slow_dials();
                }
                _ = flush.tick() => {
                    let _ = self.save_stats().await;
                    if !self.cfg.once {
                        self.trim_tallies();
                    }
                }
                answers = probes::join(&mut self.probing), if self.probing.is_some() => {
                    self.probing = None;
                    self.learn_probes(answers, false).await;
                }
                Some(joined) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    if let Err(e) = joined {
                        if e.is_panic() {
                            warn!(error = %e, "a slot task panicked");
                        }
                    }
                }
            }
        }
        self.finish().await
    }
}

/// A small stable hash for per-slot jitter seeds (not for security).
/// `raw` URLs in canonical form, duplicates and unusable ones left out (with a warning).
fn canonical_list(policy: &UrlPolicy, raw: &[String], what: &str) -> Vec<String> {
    let mut urls = Vec::new();
    for raw in raw {
        match policy.canonicalize(raw) {
            Ok(url) if !urls.contains(&url) => urls.push(url),
            Ok(_) => {}
            Err(reason) => warn!(url = %raw, %reason, "{what} not usable"),
        }
    }
    urls
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

//! Scoring the other half of NIP-65 against a world: does the reader find the events that tag
//! it (**inbox recall**), and do the people a note tags get it where they read (**publish
//! reach**)? Each is measured for the routes library's plans ([`InboxQuery`], [`PublishQuery`]
//! over a [`RelayDirectory`] built from the world's lists) and for a naive client that ignores
//! NIP-65's read markers: it asks only its configured relays for its inbox and publishes only
//! to the author's write relays.
//!
//! Per session `s` (at `now + s · interval`), with the stats the route loop learned so far: the
//! loop starts with fresh stats, as a new client does, and after each session records, for
//! every relay its routes asked, whether it answered — the liveness half of what a client
//! learns; relays asked nothing about authors learn nothing about delivery. The feed's stats
//! are not used, so route scores do not depend on which feed strategy ran.
//!
//! Definitions (`docs/formats.md`, "Scoring the inbox and publish routes"):
//! - a mention is **available** in `s` when a relay that stores it answers in `s`, and **found**
//!   when such a relay is one the plan asks (fetching is assumed complete: an inbox holds few
//!   events per relay);
//! - a tagged person is **reached** by a note when one of the note's publish targets is among
//!   the person's read relays and answers in `s`. People with no known read relay are counted
//!   apart ([`PublishScore::no_read_relays`]): no client can reach them by NIP-65.

use std::collections::{HashMap, HashSet};

use nostr::key::PublicKey;

use nostr_outbox_client::routes::publish::publish_candidates;
use nostr_outbox_client::routes::{check_route, select, Candidates, RouteKind, RoutePlan};
use nostr_outbox_client::RoundRecorder;
use nostr_outbox_client::{
    InboxQuery, PublishQuery, RelayDirectory, Route, RouteBudget, RouteContext,
};
use nostr_outbox_core::{DeliveryStats, UrlPolicy};
use serde::Serialize;

use crate::window::Window;
use nostr_outbox_world::World;

/// The label of the routes library's scores in reports.
pub const ROUTES_LABEL: &str = "routes";

/// The label of the naive client's scores: inbox from the configured relays only, publishing
/// to the author's write relays only.
pub const NAIVE_LABEL: &str = "naive";

/// How route scores are taken.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteLoopConfig {
    /// Sessions to score (each at `now + s · session_interval_secs`).
    pub sessions: u32,
    /// Windows of the inbox (mentions with `created_at ≥ now − W`).
    pub windows: Vec<Window>,
    /// Seconds between sessions, for decaying the stats.
    pub session_interval_secs: u64,
    /// The routes' budget.
    pub budget: RouteBudget,
}

impl Default for RouteLoopConfig {
    /// Five sessions an hour apart, every window, the default route budget.
    fn default() -> Self {
        Self {
            sessions: 5,
            windows: Window::ALL.to_vec(),
            session_interval_secs: 3_600,
            budget: RouteBudget::default(),
        }
    }
}

/// The inbox in one window of one session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct InboxScore {
    /// The window.
    pub window: Window,
    /// Mentions in the window that some answering relay stores.
    pub available: u64,
    /// Of those, found by the inbox route's plan.
    pub routed: u64,
    /// Of those, found by asking only the reader's configured relays.
    pub naive: u64,
}

impl InboxScore {
    /// Inbox recall of the route; `None` when no mention was available.
    pub fn recall(&self) -> Option<f64> {
        ratio(self.routed, self.available)
    }

    /// Inbox recall of the naive client; `None` when no mention was available.
    pub fn naive_recall(&self) -> Option<f64> {
        ratio(self.naive, self.available)
    }
}

/// Publishing every tagged note in one session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PublishScore {
    /// Notes that tag someone.
    pub notes: u64,
    /// (note, tagged person) pairs whose person declares at least one read relay.
    pub tagged: u64,
    /// Pairs whose person declares no read relay (not in `tagged`).
    pub no_read_relays: u64,
    /// Pairs reached by the publish route.
    pub routed: u64,
    /// Pairs reached by publishing only to the author's write relays.
    pub naive: u64,
    /// Relays the publish route sent to, summed over notes.
    pub routed_targets: u64,
    /// Relays the naive client sent to, summed over notes.
    pub naive_targets: u64,
}

impl PublishScore {
    /// Publish reach of the route; `None` when no pair counts.
    pub fn reach(&self) -> Option<f64> {
        ratio(self.routed, self.tagged)
    }

    /// Publish reach of the naive client; `None` when no pair counts.
    pub fn naive_reach(&self) -> Option<f64> {
        ratio(self.naive, self.tagged)
    }
}

/// Both routes in one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteSessionScore {
    /// 0-based session.
    pub session: u32,
    /// Per window, shortest first.
    pub inbox: Vec<InboxScore>,
    /// Every tagged note.
    pub publish: PublishScore,
    /// Relays the inbox route asked.
    pub inbox_relays: usize,
    /// Relays the naive inbox asked.
    pub naive_inbox_relays: usize,
    /// Route invariants broken by any plan (`check_route`); 0 for a sound library.
    pub violations: u64,
}

impl RouteSessionScore {
    /// The inbox score of window `w`, if scored.
    pub fn inbox(&self, w: Window) -> Option<&InboxScore> {
        self.inbox.iter().find(|x| x.window == w)
    }
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// Scores the inbox and publish routes on `world` in every session of `cfg`, URLs read under
/// `policy`.
pub fn score_routes(
    world: &World,
    policy: &UrlPolicy,
    cfg: &RouteLoopConfig,
) -> Vec<RouteSessionScore> {
    let directory = RelayDirectory::from_relay_lists(policy.clone(), world.raw_lists());
    let mut windows = cfg.windows.clone();
    windows.sort();
    windows.dedup();
    let widest = windows.iter().map(|w| w.secs()).max().unwrap_or(0);
    let inbox = InboxQuery {
        since: Some(world.now.saturating_sub(widest)),
        reader_relays: world.reader_relays.clone(),
        ..InboxQuery::new(world.reader)
    };
    let naive_inbox: Vec<u32> = world
        .reader_relays
        .iter()
        .filter_map(|raw| policy.canonicalize(raw).ok())
        .filter_map(|u| world.relay_id(&u))
        .collect();
    // The notes to publish, with everything that does not change between sessions worked out
    // once: the route's candidates (a publish route's candidates are read from the directory
    // and the budget alone, never from the stats), the naive client's targets and each tagged
    // person's read relays. Only the selection, which ranks by what was learned, runs per
    // session, exactly as `Route::plan_checked` runs it.
    let candidate_ctx = RouteContext {
        directory: &directory,
        stats: &DeliveryStats::new(),
        now: world.now,
        budget: cfg.budget,
    };
    let mut checked = HashMap::new();
    let notes: Vec<Note> = world
        .events()
        .iter()
        .filter(|e| !world.event_tags(e).is_empty())
        .map(|e| {
            let people = on_curve(world.event_tags(e), &mut checked);
            Note::new(world, &candidate_ctx, e, people)
        })
        .collect();
    // A publish route asks no filters ([`Route::filters`]).
    let filters = PublishQuery {
        author: world.reader,
        kind: nostr::event::Kind::TextNote,
        tags: Vec::new(),
    }
    .filters();
    let mut stats = DeliveryStats::new();
    let mut out = Vec::with_capacity(cfg.sessions.min(nostr_outbox_world::MAX_SESSIONS) as usize);
    for s in 0..cfg.sessions {
        let now = world.now + u64::from(s) * cfg.session_interval_secs;
        stats.begin_session();
        let ctx = RouteContext {
            directory: &directory,
            stats: &stats,
            now,
            budget: cfg.budget,
        };
        let up = |id: u32| world.is_up(id, s);
        let mut asked: HashSet<String> = HashSet::new();
        let mut violations = 0u64;

        let (plan, broken) = inbox.plan_checked(&ctx);
        violations += broken.len() as u64;
        note_asked(&mut asked, &plan);
        let routed_inbox = ids(world, plan.urls());
        let inbox_scores = windows
            .iter()
            .map(|&w| {
                let since = world.now.saturating_sub(w.secs());
                let mut score = InboxScore {
                    window: w,
                    available: 0,
                    routed: 0,
                    naive: 0,
                };
                for m in world.mentions().iter().filter(|m| m.created_at >= since) {
                    let serving: Vec<u32> = world
                        .mention_relays(m)
                        .iter()
                        .copied()
                        .filter(|&r| up(r))
                        .collect();
                    if serving.is_empty() {
                        continue;
                    }
                    score.available += 1;
                    score.routed += u64::from(serving.iter().any(|r| routed_inbox.contains(r)));
                    score.naive += u64::from(serving.iter().any(|r| naive_inbox.contains(r)));
                }
                score
            })
            .collect();

        let mut publish = PublishScore::default();
        let mut routed: Vec<u32> = Vec::new();
        let mut naive: Vec<u32> = Vec::new();
        for note in &notes {
            let plan = select(RouteKind::Publish, &note.candidates, filters.clone(), &ctx);
            violations += check_route(&plan, &note.candidates, &ctx.budget).len() as u64;
            note_asked(&mut asked, &plan);
            routed.clear();
            routed.extend(
                plan.urls()
                    .filter_map(|u| world.relay_id(u))
                    .filter(|&r| up(r)),
            );
            naive.clear();
            naive.extend(note.naive.iter().copied().filter(|&r| up(r)));
            publish.notes += 1;
            publish.routed_targets += plan.targets.len() as u64;
            publish.naive_targets += note.naive_targets;
            for reads in &note.reads {
                let Some(reads) = reads else {
                    publish.no_read_relays += 1;
                    continue;
                };
                publish.tagged += 1;
                publish.routed += u64::from(routed.iter().any(|r| reads.contains(r)));
                publish.naive += u64::from(naive.iter().any(|r| reads.contains(r)));
            }
        }

        out.push(RouteSessionScore {
            session: s,
            inbox: inbox_scores,
            publish,
            inbox_relays: plan.targets.len(),
            naive_inbox_relays: naive_inbox.len(),
            violations,
        });
        learn_liveness(world, s, &asked, &mut stats, now);
    }
    out
}

/// One tagged note to publish, as far as it is the same in every session.
struct Note {
    /// The publish route's candidates ([`Route::candidates`]).
    candidates: Candidates,
    /// World relay ids of the author's write relays: the naive client's targets.
    naive: Vec<u32>,
    /// How many write relays the author declares (the naive client sends to each).
    naive_targets: u64,
    /// Per tagged person other than the author (repeats included), the world relay ids of
    /// their read relays; `None` for a person who declares none.
    reads: Vec<Option<Vec<u32>>>,
}

impl Note {
    /// The note of world event `e`, tagging the people of `people` (the event's tags that are
    /// keys on the curve; a world's tags hold each person once).
    fn new(
        world: &World,
        ctx: &RouteContext<'_>,
        e: &nostr_outbox_world::WorldEvent,
        people: Vec<PublicKey>,
    ) -> Self {
        let author = world.follows[e.author as usize];
        let directory = ctx.directory;
        let kind = nostr::event::Kind::TextNote;
        let writes = directory.write_relays(&author);
        let reads = world
            .event_tags(e)
            .iter()
            .filter(|p| **p != author)
            .map(|p| {
                let reads = directory.read_relays(p);
                (!reads.is_empty()).then(|| ids(world, reads.iter().map(String::as_str)))
            })
            .collect();
        Self {
            candidates: publish_candidates(author, kind, people, ctx),
            naive: ids(world, writes.iter().map(String::as_str)),
            naive_targets: writes.len() as u64,
            reads,
        }
    }
}

/// The keys among `tags` that a `p` tag's reader accepts (on the curve), each key checked once
/// over the whole world (`known`).
fn on_curve(tags: &[PublicKey], known: &mut HashMap<PublicKey, bool>) -> Vec<PublicKey> {
    tags.iter()
        .copied()
        .filter(|pk| {
            *known
                .entry(*pk)
                .or_insert_with(|| nostr_outbox_core::keys::is_on_curve(pk))
        })
        .collect()
}

/// Adds the URLs `plan` asks to `asked` (allocating only for a URL not seen yet).
fn note_asked(asked: &mut HashSet<String>, plan: &RoutePlan) {
    for url in plan.urls() {
        if !asked.contains(url) {
            asked.insert(url.to_string());
        }
    }
}

/// World relay ids of canonical URLs (URLs the world does not know are left out: they never
/// answer).
fn ids<'a>(world: &World, urls: impl IntoIterator<Item = &'a str>) -> Vec<u32> {
    urls.into_iter().filter_map(|u| world.relay_id(u)).collect()
}

/// Records, as the runtime's recorder would, whether each asked relay answered in `session`.
fn learn_liveness(
    world: &World,
    session: u32,
    asked: &HashSet<String>,
    stats: &mut DeliveryStats,
    now: u64,
) {
    let mut urls: Vec<&String> = asked.iter().collect();
    urls.sort();
    let mut recorder = RoundRecorder::new();
    for url in urls {
        recorder.asked(url, std::iter::empty(), 0);
        let answers = world
            .relay_id(url)
            .is_some_and(|id| world.is_up(id, session));
        if answers {
            recorder.eose(url, 0, true);
        } else {
            recorder.failed(url, "does not answer in this session");
        }
    }
    if let Some(round) = recorder.take_final_round() {
        stats.record_round(&round, now);
    }
}

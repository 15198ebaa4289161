//! `outbox get` and `outbox thread`: the live reads `outbox route pointer` and `outbox route
//! thread` plan. A pointer is asked of its hints, then its author's write relays. A thread is
//! asked of its author's write and read relays (NIP-65: what answers someone is sent to where
//! they read), the read relays of the people the event tags and every relay its code and tags
//! hint at; then, in a second pass, of the write relays of the people who replied that the
//! first did not ask. Each event found is labelled by what it is to the thread (a reply, a
//! quote, a reaction, a repost, a zap, a mention). An event known by its id alone is asked of
//! the reader's relays.

use std::collections::HashSet;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use nostr::event::{Event, EventId};
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::filter::MAX_ROUTED_PEOPLE;
use nostr_outbox_client::routes::{relation, Route, RouteContext, RoutePlan};
use nostr_outbox_client::{Pointer, PointerError, Relation, RepliersQuery, ThreadQuery};

use super::{
    budget, describe, describe_plan, on_reader_relays, on_runtime, plan_checked, read_with,
    runtime_config, Show,
};
use crate::reader::{Lists, Reader, ReaderArgs, ReaderHelp};

/// What the reader options do for `outbox get`.
const GET_HELP: ReaderHelp = ReaderHelp {
    relays: "Relays to ask when the pointer carries no relay hint and its author's relays are \
        unknown (comma-separated or repeated); also where its author's relay list is looked \
        up. Not needed when the pointer carries relay hints",
    npub: "The reader: when nothing says where the event is, its read relays (kind:10002) are \
        asked in place of --relays; no relay its blocked list (kind:10006) names is asked",
    indexers: "Relays that collect relay lists (comma-separated or repeated), asked beside \
        --relays for the kind:10002 list of the pointer's author",
    json: "Print the event as a JSON line (the plan then goes to stderr)",
};

/// What the reader options do for `outbox thread`.
const THREAD_HELP: ReaderHelp = ReaderHelp {
    relays: "Relays to ask when nothing else says where the event and its replies are (no \
        relay hint; the author's and tagged people's relays unknown), comma-separated or \
        repeated; also where their relay lists are looked up. Not needed when the event's \
        code carries relay hints",
    npub: "The reader: when nothing says where the event or its replies are, its read relays \
        (kind:10002) are asked in place of --relays; no relay its blocked list (kind:10006) \
        names is asked",
    indexers: "Relays that collect relay lists (comma-separated or repeated), asked beside \
        --relays for the kind:10002 lists of the event's author, the people it tags and the \
        repliers",
    json: "Print each event as a JSON line, with a field `relation` (`root`, `reply`, `quote`, \
        `reaction`, `repost`, `zap`, `mention`); the plans then go to stderr",
};

/// Options of `outbox get`.
#[derive(Debug, clap::Args)]
#[command(
    mut_args(crate::reader::help(&GET_HELP)),
    mut_arg("relays", |a| a.required(false)),
)]
pub struct GetArgs {
    /// What to get: `nevent`, `note`, `naddr`, `nprofile`, `npub` or a hex event id.
    code: String,
    #[command(flatten)]
    reader: ReaderArgs,
}

/// Options of `outbox thread`. The reader options shared with the other reads are described
/// here in the thread's own terms.
#[derive(Debug, clap::Args)]
#[command(
    mut_args(crate::reader::help(&THREAD_HELP)),
    mut_arg("relays", |a| a.required(false)),
)]
pub struct ThreadArgs {
    /// The event whose thread to read: `nevent`, `note` or a hex id. A `nevent` with its
    /// author's key and relays is found even when nothing else says where.
    code: String,
    /// After both passes, keep every relay asked subscribed until Ctrl-C or SIGTERM, printing
    /// what comes (default: the two passes only).
    #[arg(long)]
    stream: bool,
    #[command(flatten)]
    reader: ReaderArgs,
}

/// A pointer from the command line, with errors that say what was expected.
fn parse(code: &str) -> anyhow::Result<Pointer> {
    match Pointer::parse(code) {
        Ok(pointer) => Ok(pointer),
        Err(PointerError::SecretKey) => {
            bail!("that is a secret key, not a pointer; it was not used")
        }
        Err(e) => Err(e).context("reading the pointer"),
    }
}

/// The relays to ask for `route`: its plan, else (nothing says where) the reader's relays.
/// `--relays` may be left out when hints or known relay lists say where; when nothing does, it
/// is required.
fn plan_or_reader<R: Route>(
    route: &R,
    reader: &Reader,
    lists: &Lists,
    stats: &nostr_outbox_core::DeliveryStats,
) -> anyhow::Result<(RoutePlan, bool)> {
    let ctx = RouteContext {
        directory: &lists.directory,
        stats,
        now: Timestamp::now().as_secs(),
        budget: budget(),
    };
    let plan = plan_checked(route, &ctx)?;
    if !plan.targets.is_empty() {
        return Ok((plan, false));
    }
    let plan = on_reader_relays(reader, route.filters(), &ctx)?;
    if plan.targets.is_empty() && reader.relays.is_empty() {
        bail!(
            "--relays is required here: nothing says where it is (no relay hint, and no relay \
             list of its author is known)"
        );
    }
    if plan.targets.is_empty() {
        bail!("no relay to ask: nothing says where it is and no --relays entry is usable");
    }
    Ok((plan, true))
}

/// What a pointer's read found.
enum Got {
    Found(Box<Event>),
    NotFound,
    /// A stop signal ended the read: the exit code to end with.
    Stopped(ExitCode),
}

/// Reads one pointer: prints what came (labelled `label`, if given) and returns the first.
async fn get(
    pointer: &Pointer,
    reader: &mut Reader,
    what: &str,
    label: Option<&'static str>,
) -> anyhow::Result<Got> {
    let people: Vec<_> = pointer.author().into_iter().collect();
    let lists = reader.lists(&people, &[]).await;
    reader.require_answer(&lists)?;
    let stats = reader.stats().await;
    let (plan, fallback) = plan_or_reader(pointer, reader, &lists, &stats)?;
    if fallback {
        describe(
            &[format!(
                "{what}: no hint or author relay known for it; asking the reader's relays"
            )],
            reader.json,
        )?;
    }
    describe_plan(what, &plan, reader.json)?;
    let show = |_: &Event| label.map_or(Show::Plain, Show::Labelled);
    let pass = read_with(&plan, &reader.client, reader.json, 1, show).await?;
    if let Some(code) = pass.stopped {
        return Ok(Got::Stopped(code));
    }
    match pass.kept.into_iter().next() {
        Some(event) => Ok(Got::Found(Box::new(event))),
        None => {
            eprintln!("not found on the {} relays asked", plan.targets.len());
            Ok(Got::NotFound)
        }
    }
}

pub fn run_get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let pointer = parse(&args.code)?;
    let named: Vec<_> = pointer.author().into_iter().collect();
    on_runtime(async {
        let known = [("the pointer's author's", named.as_slice())];
        let mut reader = args.reader.open(runtime_config(false), &known).await?;
        Ok(match get(&pointer, &mut reader, "get", None).await? {
            Got::Found(_) => ExitCode::SUCCESS,
            Got::NotFound => ExitCode::FAILURE,
            Got::Stopped(code) => code,
        })
    })
}

pub fn run_thread(args: ThreadArgs) -> anyhow::Result<ExitCode> {
    let pointer = parse(&args.code)?;
    let Pointer::Event {
        id, author, relays, ..
    } = &pointer
    else {
        bail!("a thread starts at an event (nevent, note or hex id), not a profile or address");
    };
    let mut query = ThreadQuery {
        id: *id,
        author: *author,
        tags: Vec::new(),
        hints: relays.clone(),
        quotes: true,
    };
    on_runtime(async {
        // The event first: its author and tags say where its replies are.
        let named: Vec<_> = pointer.author().into_iter().collect();
        let known = [("the event author's", named.as_slice())];
        let mut reader = args.reader.open(runtime_config(false), &known).await?;
        let root = match get(&pointer, &mut reader, "event", Some("root")).await? {
            Got::Found(root) => Some(root),
            Got::NotFound => None,
            Got::Stopped(code) => return Ok(code),
        };
        if let Some(root) = &root {
            query = ThreadQuery::of_event(root);
            query.hints.clone_from(relays);
        }
        let mut people: Vec<_> = query.author.into_iter().collect();
        people.extend(root.iter().flat_map(|r| tagged(r)));
        let lists = reader.lists(&people, &[]).await;
        let stats = reader.stats().await;
        let (plan, _) = plan_or_reader(&query, &reader, &lists, &stats)?;
        describe_plan("thread", &plan, reader.json)?;
        let mut found = Found::new(query.id);
        let pass = read_with(&plan, &reader.client, reader.json, 0, |e| found.show(e)).await?;
        if let Some(code) = pass.stopped {
            return Ok(code);
        }
        if pass.halted {
            found.summary();
            return Ok(ExitCode::SUCCESS);
        }

        // Replies are sent to their authors' write relays too: ask those the first pass did
        // not, for more of the thread.
        let mut streamed = plan.targets.clone();
        if !found.repliers.is_empty() {
            let lists = reader.lists(&found.repliers, &[]).await;
            let ctx = RouteContext {
                directory: &lists.directory,
                stats: &stats,
                now: Timestamp::now().as_secs(),
                budget: budget(),
            };
            let second = RepliersQuery {
                thread: query.clone(),
                repliers: found.repliers.clone(),
                asked: plan.urls().map(str::to_string).collect(),
            };
            let plan = plan_checked(&second, &ctx)?;
            if !plan.targets.is_empty() {
                describe_plan("thread, the repliers' relays", &plan, reader.json)?;
                let pass =
                    read_with(&plan, &reader.client, reader.json, 0, |e| found.show(e)).await?;
                if let Some(code) = pass.stopped {
                    return Ok(code);
                }
                if pass.halted {
                    found.summary();
                    return Ok(ExitCode::SUCCESS);
                }
                streamed.extend(plan.targets);
            }
        }
        found.summary();
        if !args.stream {
            return Ok(ExitCode::SUCCESS);
        }

        // Every relay asked, kept open: only what was not printed yet is printed.
        streamed.sort_by(|a, b| a.url.cmp(&b.url));
        let open = RoutePlan {
            targets: streamed,
            ..plan
        };
        reader.client = reader.client.with_config(runtime_config(true));
        let pass = read_with(&open, &reader.client, reader.json, 0, |e| found.show(e)).await?;
        if pass.stopped.is_none() {
            found.summary();
        }
        Ok(pass.stopped.unwrap_or(ExitCode::SUCCESS))
    })
}

/// What a thread's reads found: the events seen (each printed once), the thread's events
/// (what replies may answer), who replied, and how many of each relation.
struct Found {
    root: EventId,
    /// Events printed, at most [`MAX_THREAD_EVENTS`]; past it repeats may print again.
    seen: HashSet<EventId>,
    /// Replies found, at most [`MAX_THREAD_EVENTS`]: a reply to one is in the thread.
    thread: HashSet<EventId>,
    /// The authors of the replies, in the order found, at most [`MAX_ROUTED_PEOPLE`].
    repliers: Vec<PublicKey>,
    /// Per relation (in [`Relation::ALL`]'s order), how many were printed.
    counts: [usize; Relation::ALL.len()],
}

/// Event ids a thread read remembers, to print each once and to know what a reply answers.
pub const MAX_THREAD_EVENTS: usize = 100_000;

impl Found {
    fn new(root: EventId) -> Self {
        Self {
            root,
            seen: HashSet::new(),
            thread: HashSet::new(),
            repliers: Vec::new(),
            counts: [0; Relation::ALL.len()],
        }
    }

    /// How `event` is printed: labelled by its relation, or skipped when printed before (or
    /// when it is the root itself).
    fn show(&mut self, event: &Event) -> Show {
        if event.id == self.root || self.seen.contains(&event.id) {
            return Show::Skip;
        }
        if self.seen.len() < MAX_THREAD_EVENTS {
            self.seen.insert(event.id);
        }
        let relation = relation(event, &self.root, &self.thread);
        if relation == Relation::Reply {
            if self.thread.len() < MAX_THREAD_EVENTS {
                self.thread.insert(event.id);
            }
            if self.repliers.len() < MAX_ROUTED_PEOPLE && !self.repliers.contains(&event.pubkey) {
                self.repliers.push(event.pubkey);
            }
        }
        if let Some(i) = Relation::ALL.iter().position(|r| *r == relation) {
            self.counts[i] += 1;
        }
        Show::Labelled(relation.label())
    }

    /// Says on stderr how many of each relation were found.
    fn summary(&self) {
        let parts: Vec<String> = Relation::ALL
            .iter()
            .zip(self.counts)
            .map(|(r, n)| format!("{n} {}", if n == 1 { r.label() } else { r.plural() }))
            .collect();
        let _ = writeln!(std::io::stderr(), "thread: {}", parts.join(", "));
    }
}

/// The people an event tags (`p`), at most as many as a route reaches one by one.
fn tagged(event: &Event) -> Vec<nostr::key::PublicKey> {
    event
        .tags
        .iter()
        .filter(|t| t.kind() == "p")
        .filter_map(|t| t.content())
        .filter_map(|hex| nostr_outbox_core::parse_public_key(hex).ok())
        .take(nostr_outbox_client::routes::filter::MAX_ROUTED_PEOPLE)
        .collect()
}

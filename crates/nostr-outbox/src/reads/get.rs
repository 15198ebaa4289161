//! `outbox get` and `outbox thread`: the live reads `outbox route pointer` and `outbox route
//! thread` plan. A pointer is asked of its hints, then its author's write relays; a thread of
//! its author's write relays, the read relays of the people the event tags and every relay its
//! code and tags hint at. An event known by its id alone is asked of the reader's relays.

use std::process::ExitCode;

use anyhow::{bail, Context};
use nostr::event::Event;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::{Route, RouteContext, RoutePlan};
use nostr_outbox_client::{Pointer, PointerError, ThreadQuery};

use super::{
    budget, describe, describe_plan, on_reader_relays, on_runtime, plan_checked, read,
    runtime_config,
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
        --relays for the kind:10002 lists of the event's author and of the people it tags",
    json: "Print the event and its replies as JSON lines (the plans then go to stderr)",
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

/// Options of `outbox thread`.
#[derive(Debug, clap::Args)]
#[command(
    mut_args(crate::reader::help(&THREAD_HELP)),
    mut_arg("relays", |a| a.required(false)),
)]
pub struct ThreadArgs {
    /// The event whose replies and quotes to read: `nevent`, `note` or a hex id.
    code: String,
    /// Keep the replies' subscriptions open until Ctrl-C or SIGTERM (default: one pass).
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

/// Reads one pointer: prints what came and returns the first.
async fn get(pointer: &Pointer, reader: &mut Reader, what: &str) -> anyhow::Result<Got> {
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
    let pass = read(&plan, &reader.client, reader.json, 1).await?;
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
        let mut reader = args.reader.open(runtime_config(false), &known)?;
        Ok(match get(&pointer, &mut reader, "get").await? {
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
        let mut reader = args.reader.open(runtime_config(false), &known)?;
        let root = match get(&pointer, &mut reader, "event").await? {
            Got::Found(root) => Some(root),
            Got::NotFound => None,
            Got::Stopped(code) => return Ok(code),
        };
        if let Some(root) = &root {
            query = ThreadQuery::of_event(root);
            query.hints.clone_from(relays);
        }
        let client = reader.client.with_config(runtime_config(args.stream));
        reader.client = client;
        let mut people: Vec<_> = query.author.into_iter().collect();
        people.extend(root.iter().flat_map(|r| tagged(r)));
        let lists = reader.lists(&people, &[]).await;
        let stats = reader.stats().await;
        let (plan, _) = plan_or_reader(&query, &reader, &lists, &stats)?;
        describe_plan("thread", &plan, reader.json)?;
        let pass = read(&plan, &reader.client, reader.json, 0).await?;
        Ok(pass.stopped.unwrap_or(ExitCode::SUCCESS))
    })
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

//! `outbox route`: where to publish an event, where the reader's inbox is, where a thread or
//! one event is — from a world file or relay-list events, without the network.

pub(crate) mod input;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr_outbox_client::routes::Route;
use nostr_outbox_client::{
    check_route, InboxQuery, Pointer, PublishQuery, RouteBudget, RouteContext, ThreadQuery,
};
use nostr_outbox_core::parse_public_key;

/// Options of `outbox route`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    route: RouteCommand,
    #[command(flatten)]
    common: Common,
    /// Accept loopback relays (ws://127.0.0.1, ws://localhost) in the relay lists, hints and
    /// `--reader-relay`, for local testing.
    #[arg(long, global = true)]
    allow_local: bool,
}

/// Which route.
#[derive(Debug, clap::Subcommand)]
enum RouteCommand {
    /// Where to send an event: the author's write relays and the read relays of everyone it
    /// tags; a private message (kind 14, 1059) only to the recipients' DM inbox relays.
    Publish {
        /// The event (JSON: `pubkey`, `kind`, `tags`; signed or not).
        #[arg(long)]
        event: PathBuf,
    },
    /// Where to read what tags the reader (`#p`): the reader's read relays.
    Inbox {
        /// The reader (hex, npub or nprofile); default: the world's reader.
        #[arg(long)]
        reader: Option<String>,
        /// Only events of this kind (repeatable).
        #[arg(long = "kind")]
        kinds: Vec<u16>,
        /// Only events at or after this time (unix seconds).
        #[arg(long)]
        since: Option<u64>,
    },
    /// Where replies to and quotes of an event are: its author's write relays, the read
    /// relays of the people it tags, and the relays its tags hint at.
    Thread {
        /// The event: a hex id, `note`, `nevent`, or a file holding the event (JSON).
        #[arg(long)]
        event: String,
    },
    /// Where one event, address or profile is: its hints, then its author's write relays.
    Pointer {
        /// A hex event id, `note`, `nevent`, `npub`, `nprofile` or `naddr`.
        code: String,
    },
}

/// Where the relay lists come from, the budget and the output.
#[derive(Debug, clap::Args)]
pub(crate) struct Common {
    /// World file (`outbox-world/1`): its reader, reader relays and relay lists.
    #[arg(long, global = true)]
    world: Option<PathBuf>,
    /// Relay-list events (a JSON array of signed kind:10002 and kind:10050 events).
    #[arg(long, global = true)]
    lists: Option<PathBuf>,
    /// Learned relay stats (the JSON file `outbox feed --stats` keeps), read to rank relays;
    /// written only by `outbox publish --learn`.
    #[arg(long, global = true)]
    stats: Option<PathBuf>,
    /// Router config (TOML), as `outbox feed --config` takes it; only its `url_policy` is
    /// used, and the `[strategy]` table a feed needs may be left out.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// The reader's configured relays, asked for the inbox when its list names no read
    /// relay (repeatable; added to the world's reader relays when the reader is the world's).
    #[arg(long = "reader-relay", global = true)]
    reader_relays: Vec<String>,
    /// Relays in total.
    #[arg(long, global = true, default_value_t = RouteBudget::default().max_relays)]
    max_relays: usize,
    /// Relays per tagged person or recipient.
    #[arg(long, global = true, default_value_t = RouteBudget::default().per_person)]
    per_person: usize,
    /// Write relays of the author (for a thread, as many of their read relays too).
    #[arg(long, global = true, default_value_t = RouteBudget::default().per_author)]
    per_author: usize,
    /// Relay hints taken.
    #[arg(long, global = true, default_value_t = RouteBudget::default().hints)]
    hints: usize,
    /// The present (unix seconds) the stats are decayed to; default: the world's, else now.
    #[arg(long, global = true)]
    now: Option<u64>,
    /// Print the plan as JSON.
    #[arg(long, global = true)]
    json: bool,
}

impl Common {
    /// Whether output is JSON.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// The `--stats` file, if given.
    pub(crate) fn stats_path(&self) -> Option<&std::path::Path> {
        self.stats.as_deref()
    }

    /// Whether relay lists were given (a world or a lists file).
    pub(crate) fn has_lists(&self) -> bool {
        self.world.is_some() || self.lists.is_some()
    }

    fn budget(&self) -> RouteBudget {
        RouteBudget {
            max_relays: self.max_relays,
            per_person: self.per_person,
            per_author: self.per_author,
            hints: self.hints,
        }
    }
}

/// The relays `outbox route publish` names for `event`, from the lists `common` gives;
/// `allow_loopback` keeps loopback relays. Nothing is printed.
pub(crate) fn publish_targets(
    common: &Common,
    allow_loopback: bool,
    event: &nostr::event::Event,
) -> anyhow::Result<Vec<String>> {
    let inputs = input::Inputs::load_with(common, allow_loopback)?;
    let ctx = RouteContext {
        directory: &inputs.directory,
        stats: &inputs.stats,
        now: inputs.now,
        budget: common.budget(),
    };
    let plan = PublishQuery::of_event(event).plan(&ctx);
    Ok(plan.targets.into_iter().map(|t| t.url).collect())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let common = &args.common;
    let inputs = input::Inputs::load_with(common, args.allow_local)?;
    let ctx = RouteContext {
        directory: &inputs.directory,
        stats: &inputs.stats,
        now: inputs.now,
        budget: common.budget(),
    };
    match args.route {
        RouteCommand::Publish { event } => {
            let event = input::read_event(&event)?;
            let query = PublishQuery {
                author: event.pubkey,
                kind: Kind::from_u16(event.kind),
                tags: event.tags,
            };
            finish(&query, &ctx, &inputs, common.json)
        }
        RouteCommand::Inbox {
            reader,
            kinds,
            since,
        } => {
            let reader = match reader {
                Some(raw) => parse_public_key(&raw).context("--reader")?,
                None => match inputs.reader {
                    Some(reader) => reader,
                    None => bail!("no reader: give --reader or a --world"),
                },
            };
            let mut reader_relays = if inputs.reader == Some(reader) {
                inputs.world_reader_relays.clone()
            } else {
                Vec::new()
            };
            reader_relays.extend(common.reader_relays.iter().cloned());
            let query = InboxQuery {
                reader,
                reader_relays,
                kinds: kinds.into_iter().map(Kind::from_u16).collect(),
                since,
                limit: None,
            };
            finish(&query, &ctx, &inputs, common.json)
        }
        RouteCommand::Thread { event } => {
            let query = thread_query(&event)?;
            if query.author.is_none() && query.tags.is_empty() && query.hints.is_empty() {
                eprintln!("{}", only_the_id(&query.id, "--event", "its replies"));
            }
            finish(&query, &ctx, &inputs, common.json)
        }
        RouteCommand::Pointer { code } => {
            let pointer = Pointer::parse(&code).context("reading the pointer")?;
            if let Pointer::Event {
                id,
                author: None,
                relays,
                ..
            } = &pointer
            {
                if relays.is_empty() {
                    eprintln!("{}", only_the_id(id, "the pointer", "it"));
                }
            }
            finish(&pointer, &ctx, &inputs, common.json)
        }
    }
}

/// Why an event known by its id alone is asked of no relay, and what to give instead: an id
/// says nothing of where the event or its replies are (its author's relays, or hints do).
fn only_the_id(id: &nostr::event::EventId, given: &str, what: &str) -> String {
    format!(
        "note: {given} is event {} known by its id alone (no author, tags or relay hints), so \
         nothing says where {what} may be and no relay is asked; give a nevent with its author \
         or relays (nevent1...), or the event itself as a JSON file",
        id.to_hex()
    )
}

/// The thread of `raw`: a pointer to an event, or a file holding the event.
fn thread_query(raw: &str) -> anyhow::Result<ThreadQuery> {
    match Pointer::parse(raw) {
        Ok(Pointer::Event {
            id, author, relays, ..
        }) => Ok(ThreadQuery {
            id,
            author,
            tags: Vec::new(),
            hints: relays,
            quotes: true,
        }),
        Ok(_) => bail!("--event points at a profile or an address, not an event"),
        Err(nostr_outbox_client::PointerError::SecretKey) => {
            bail!("--event is a secret key, not an event; it was not used")
        }
        Err(why) => {
            let path = std::path::Path::new(raw);
            if !path.exists() {
                bail!("--event is neither an event id, note or nevent ({why}) nor a file");
            }
            let event = input::read_event(path)?;
            let Some(id) = event.id else {
                bail!("{}: the event has no `id`", path.display());
            };
            Ok(ThreadQuery {
                id,
                author: Some(event.pubkey),
                tags: event.tags,
                hints: Vec::new(),
                quotes: true,
            })
        }
    }
}

/// Plans, checks and prints a route; a plan that breaks an invariant fails the command.
fn finish<R: Route>(
    route: &R,
    ctx: &RouteContext<'_>,
    inputs: &input::Inputs,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let candidates = route.candidates(ctx);
    let plan = route.plan(ctx);
    let violations = check_route(&plan, &candidates, &ctx.budget);
    if json {
        output::json(&plan, &candidates, &violations)?;
    } else {
        output::text(&plan, &candidates, &ctx.budget, inputs)?;
    }
    output::dropped(inputs);
    for v in &violations {
        eprintln!(
            "invariant violated: {}",
            crate::text::escape(&v.to_string())
        );
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

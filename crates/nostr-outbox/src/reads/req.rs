//! `outbox req`: any filter, from flags or JSON, routed by what it names — its authors to their
//! write relays, its `#p` people to their read relays, hints from `nevent`/`nprofile` values,
//! and always the reader's relays — and read once to EOSE or kept open (`--stream`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr::filter::{Filter, SingleLetterTag};
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::{
    check_route, select, Candidates, FilterQuery, Reason, Route, RouteContext, RouteKind,
    RoutePlan, RouteViolation,
};
use nostr_outbox_client::Pointer;

use crate::reader::Reader;
use crate::text::quoted_arg;

use super::{
    budget, describe_plan, on_runtime, plan_checked, read, runtime_config, DEFAULT_LIMIT, MAX_LIMIT,
};

/// The largest `--filter` read (text or file): a filter naming a thousand authors is ~70 KiB.
pub const MAX_FILTER_BYTES: u64 = 1 << 20;

/// What the reader options do for `outbox req`.
const HELP: crate::reader::ReaderHelp = crate::reader::ReaderHelp {
    relays: "The reader's own relays (comma-separated or repeated): always asked the filter \
        (unless the reader's relay list names read relays: those are asked instead), and \
        asked, with --indexers, for the relay lists of the people the filter names",
    npub: "The reader: its read relays (kind:10002) are asked the filter in place of \
        --relays, and no relay its blocked list (kind:10006) names is asked",
    indexers: "Relays that collect relay lists (comma-separated or repeated), asked beside \
        --relays for the kind:10002 lists of the authors and tagged people the filter names",
    json: "Print events as JSON lines (the plan then goes to stderr)",
};

/// Options of `outbox req`.
#[derive(Debug, clap::Args)]
#[command(mut_args(crate::reader::help(&HELP)))]
pub struct Args {
    #[command(flatten)]
    filter: FilterArgs,
    /// Keep the subscriptions open for new events until Ctrl-C or SIGTERM (default: one pass,
    /// ending at every relay's EOSE).
    #[arg(long)]
    stream: bool,
    #[command(flatten)]
    reader: crate::reader::ReaderArgs,
}

/// A filter from flags or JSON (`outbox req`, `outbox count`).
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// Event kind (repeatable or comma-separated).
    #[arg(short = 'k', long = "kind", value_delimiter = ',')]
    kinds: Vec<u16>,
    /// Author: npub, nprofile (its relays are hints) or hex (repeatable).
    #[arg(short = 'a', long = "author")]
    authors: Vec<String>,
    /// Event id: note, nevent (its relays are hints) or hex (repeatable).
    #[arg(short = 'e', long = "event")]
    events: Vec<String>,
    /// A tagged person (`#p`): npub, nprofile or hex (repeatable); read on their read relays.
    #[arg(short = 'p', long = "pubkey")]
    pubkeys: Vec<String>,
    /// Hashtag (`#t`, repeatable; a leading `#` is dropped).
    #[arg(short = 't', long = "tag")]
    hashtags: Vec<String>,
    /// Only events at or after this: a duration ago (`7d`, `12h`) or unix seconds.
    #[arg(long, value_parser = parse_time)]
    since: Option<Timestamp>,
    /// Only events at or before this: a duration ago or unix seconds.
    #[arg(long, value_parser = parse_time)]
    until: Option<Timestamp>,
    /// Events asked of each relay (default 100, at most 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_LIMIT as u64))]
    limit: Option<u64>,
    /// A NIP-01 filter as JSON (`'{"kinds":[1],"authors":[...]}'`) or a file holding one;
    /// the flags above add to it.
    #[arg(long)]
    filter: Option<String>,
}

/// A `--since`/`--until` value: unix seconds, or a duration before now.
fn parse_time(text: &str) -> Result<Timestamp, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<u64>()
            .map(Timestamp::from_secs)
            .map_err(|e| e.to_string());
    }
    let ago: Duration = crate::duration::parse(text)
        .map_err(|e| format!("neither unix seconds nor a duration ago (`7d`): {e}"))?;
    Ok(Timestamp::from_secs(
        Timestamp::now().as_secs().saturating_sub(ago.as_secs()),
    ))
}

/// The filter `--filter` gives: JSON text when it starts with `{`, else a file's.
fn read_filter(raw: &str) -> anyhow::Result<Filter> {
    let text = if raw.trim_start().starts_with('{') {
        if raw.len() as u64 > MAX_FILTER_BYTES {
            bail!("--filter is longer than {MAX_FILTER_BYTES} bytes");
        }
        raw.to_string()
    } else {
        crate::text::read_bounded(Path::new(raw), MAX_FILTER_BYTES)
            .context("--filter is neither JSON (starting with `{`) nor a readable file")?
    };
    Filter::from_json(text.trim())
        .map_err(|e| anyhow::anyhow!("--filter is not a NIP-01 filter: {e}"))
}

/// A person given as npub, nprofile or hex, and the relays an nprofile names.
fn person(raw: &str, flag: &str) -> anyhow::Result<(PublicKey, Vec<String>)> {
    // 64 hex characters read as an event id to `Pointer`; here they are a public key.
    let trimmed = raw.trim();
    if trimmed.len() == 64 && trimmed.bytes().all(|b| b.is_ascii_hexdigit()) {
        return match nostr_outbox_core::parse_public_key(trimmed) {
            Ok(pubkey) => Ok((pubkey, Vec::new())),
            Err(_) => bail!(
                "{flag} {} is not a person: not a valid public key",
                quoted_arg(raw)
            ),
        };
    }
    match Pointer::parse(raw) {
        Ok(Pointer::Profile { pubkey, relays }) => Ok((pubkey, relays)),
        Ok(_) => bail!(
            "{flag} {} is not a person (npub, nprofile or hex public key)",
            quoted_arg(raw)
        ),
        Err(e) => bail!("{flag} {} is not a person: {e}", quoted_arg(raw)),
    }
}

/// What the flags ask and where they say to look.
pub struct Built {
    /// The filter.
    pub filter: Filter,
    /// Relay hints of `nevent` and `nprofile` values.
    pub hints: Vec<String>,
    /// The authors `nevent` values name: their write relays are asked too.
    pub event_authors: Vec<PublicKey>,
}

/// The filter, the relay hints and the events' authors the flags give; a filter without a
/// `limit` gets `default_limit`.
pub fn build(args: &FilterArgs, default_limit: Option<usize>) -> anyhow::Result<Built> {
    let mut filter = match &args.filter {
        Some(raw) => read_filter(raw)?,
        None => Filter::new(),
    };
    let mut hints = Vec::new();
    let mut event_authors = Vec::new();
    if !args.kinds.is_empty() {
        filter = filter.kinds(args.kinds.iter().map(|k| Kind::from(*k)));
    }
    for raw in &args.authors {
        let (pk, relays) = person(raw, "-a")?;
        filter = filter.author(pk);
        hints.extend(relays);
    }
    for raw in &args.pubkeys {
        let (pk, relays) = person(raw, "-p")?;
        filter = filter.pubkey(pk);
        hints.extend(relays);
    }
    for raw in &args.events {
        match Pointer::parse(raw) {
            Ok(Pointer::Event {
                id, relays, author, ..
            }) => {
                filter = filter.id(id);
                hints.extend(relays);
                event_authors.extend(author.filter(|a| !event_authors.contains(a)));
            }
            Ok(_) => bail!(
                "-e {} is not an event (note, nevent or hex id)",
                quoted_arg(raw)
            ),
            Err(e) => bail!("-e {} is not an event: {e}", quoted_arg(raw)),
        }
    }
    for tag in &args.hashtags {
        let tag = tag.trim().trim_start_matches('#');
        if tag.is_empty() {
            bail!("-t needs a hashtag");
        }
        filter = filter.hashtag(tag);
    }
    if let Some(since) = args.since {
        filter = filter.since(since);
    }
    if let Some(until) = args.until {
        filter = filter.until(until);
    }
    match (args.limit, filter.limit) {
        (Some(limit), _) => filter = filter.limit(limit as usize),
        (None, None) => {
            if let Some(limit) = default_limit {
                filter = filter.limit(limit);
            }
        }
        (None, Some(limit)) if limit > MAX_LIMIT => {
            bail!("the filter's limit {limit} is above {MAX_LIMIT}, the most a relay is read for")
        }
        (None, Some(_)) => {}
    }
    if let (Some(since), Some(until)) = (filter.since, filter.until) {
        if since > until {
            bail!("since ({since}) is after until ({until}): nothing can match");
        }
    }
    Ok(Built {
        filter,
        hints,
        event_authors,
    })
}

/// The route of what `built` asks for `reader`: the lists of the people it names learned,
/// then its authors and the authors of its `nevent` values to their write relays, its `#p`
/// people to their read relays, its hints, and the reader's relays ([`EventsQuery`]). An
/// error when no relay answered the lists lookup or none is left to ask.
pub async fn route(reader: &mut Reader, built: Built) -> anyhow::Result<RoutePlan> {
    let Built {
        filter,
        hints,
        event_authors,
    } = built;
    let mut named = people(&filter);
    named.extend(event_authors.iter().copied());
    let lists = reader.lists(&named, &[]).await;
    reader.require_answer(&lists)?;
    let stats = reader.stats().await;
    let ctx = RouteContext {
        directory: &lists.directory,
        stats: &stats,
        now: Timestamp::now().as_secs(),
        budget: budget(),
    };
    let mut query = FilterQuery::new(filter, &reader.relays);
    query.reader = reader.pubkey;
    query.hints = hints;
    let query = EventsQuery {
        query,
        event_authors,
    };
    let plan = plan_checked(&query, &ctx)?;
    if plan.targets.is_empty() {
        bail!("no relay to ask: no --relays entry is usable and the filter names nobody with a known relay");
    }
    Ok(plan)
}

/// A filter's route ([`FilterQuery`]) with the authors of its `nevent` values: their write
/// relays are asked too, as `get` asks them, so an event is found where its author writes
/// when its hints are gone or missing.
struct EventsQuery {
    query: FilterQuery,
    event_authors: Vec<PublicKey>,
}

impl Route for EventsQuery {
    const KIND: RouteKind = RouteKind::Subscription;

    fn candidates(&self, ctx: &RouteContext<'_>) -> Candidates {
        let mut candidates = self.query.candidates(ctx);
        for author in &self.event_authors {
            candidates.push(
                Reason::AuthorWrite(*author),
                ctx.directory.write_relays(author).iter().cloned(),
                ctx.budget.per_author,
            );
        }
        candidates
    }

    fn filters(&self) -> Vec<Filter> {
        self.query.filters()
    }

    fn plan(&self, ctx: &RouteContext<'_>) -> RoutePlan {
        self.plan_checked(ctx).0
    }

    fn plan_checked(&self, ctx: &RouteContext<'_>) -> (RoutePlan, Vec<RouteViolation>) {
        if self.event_authors.is_empty() {
            return self.query.plan_checked(ctx);
        }
        let candidates = self.candidates(ctx);
        let mut plan = select(Self::KIND, &candidates, self.filters(), ctx);
        // As `FilterQuery` narrows: a relay chosen only for some of the filter's authors is
        // asked about those alone; one chosen for an event's author, the whole filter.
        let asked = self.query.filter.authors.clone().unwrap_or_default();
        plan.narrow_to_authors(|pk| asked.contains(pk));
        let violations = check_route(&plan, &candidates, &ctx.budget);
        (plan, violations)
    }
}

/// The people a filter names: its authors and its `#p` people.
pub(super) fn people(filter: &Filter) -> Vec<PublicKey> {
    let mut out: Vec<PublicKey> = filter.authors.iter().flatten().copied().collect();
    let p = SingleLetterTag::LOWERCASE_P;
    out.extend(
        filter
            .generic_tags
            .get(&p)
            .into_iter()
            .flatten()
            .filter_map(|hex| nostr_outbox_core::parse_public_key(hex).ok()),
    );
    out
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let built = build(&args.filter, Some(DEFAULT_LIMIT))?;
    on_runtime(async {
        let mut named = people(&built.filter);
        named.extend(built.event_authors.iter().copied());
        let known = [("a person the filter names", named.as_slice())];
        let mut reader = args
            .reader
            .open(runtime_config(args.stream), &known)
            .await?;
        let plan = route(&mut reader, built).await?;
        describe_plan("req", &plan, reader.json)?;
        let pass = read(&plan, &reader.client, reader.json, 0).await?;
        Ok(pass.exit(args.stream))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_unix_seconds_or_a_duration_ago() {
        assert_eq!(
            parse_time("1700000000"),
            Ok(Timestamp::from_secs(1_700_000_000))
        );
        let day_ago = parse_time("1d").unwrap().as_secs();
        assert!(Timestamp::now().as_secs() - day_ago >= 86_400);
        assert!(parse_time("soon").is_err());
        assert!(parse_time("").is_err());
    }

    #[test]
    fn bad_json_filters_are_clear_errors() {
        for bad in ["{", "{\"kinds\":\"x\"}", "{\"authors\":[\"zz\"]}"] {
            assert!(read_filter(bad).is_err(), "{bad}");
        }
        let f = read_filter(r#"{"kinds":[1],"limit":5}"#).unwrap();
        assert_eq!(f.limit, Some(5));
    }
}

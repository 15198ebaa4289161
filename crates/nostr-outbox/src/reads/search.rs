//! `outbox search` (NIP-50): a `search` filter asked of the reader's search relays (their
//! kind:10007 list), else of the relays whose NIP-11 document lists NIP 50 among those the
//! reader knows (`--relays`, `--indexers`, the reader's own relay list), else of
//! `--search-relays`; the answers merged, each event once. A chosen relay whose document does
//! not list NIP-50 is not searched, and said; when none is left the search fails.

use std::process::ExitCode;

use anyhow::bail;
use nostr::event::Kind;
use nostr::filter::Filter;
use nostr_outbox_client::routes::{RouteKind, RoutePlan, RouteTarget};
use nostr_outbox_runtime::connection::extensions::{Extension, Verdict, Wait};

use super::{describe, on_runtime, read, runtime_config, DEFAULT_LIMIT, MAX_LIMIT};
use crate::reader::{Reader, ReaderArgs};
use crate::text::escape;

/// Relays searched at most (the routes' total budget).
pub const MAX_SEARCH_RELAYS: usize = 16;

/// The longest search text sent.
pub const MAX_SEARCH_CHARS: usize = 1_000;

/// What the reader options do for `outbox search`.
const HELP: crate::reader::ReaderHelp = crate::reader::ReaderHelp {
    relays: "The reader's own relays (comma-separated or repeated): where the reader's search \
        relay list (kind:10007) is looked up, and checked, with --indexers, for NIP-50 search \
        in their NIP-11 documents. Not needed with --search-relays",
    npub: "The reader: the relays of its search relay list (kind:10007) are searched first, \
        and its own relays (kind:10002) are checked for NIP-50 search too",
    indexers: "Relays that collect relay lists (comma-separated or repeated): asked beside \
        --relays for the reader's search relay list, and checked for NIP-50 search",
    json: "Print results as JSON lines (the relays searched then go to stderr)",
};

/// Options of `outbox search`.
#[derive(Debug, clap::Args)]
#[command(
    mut_args(crate::reader::help(&HELP)),
    mut_arg("relays", |a| a.required(false).required_unless_present("search_relays")),
)]
pub struct Args {
    /// What to search for (NIP-50 `search`).
    words: String,
    /// Event kind (repeatable or comma-separated).
    #[arg(short = 'k', long = "kind", value_delimiter = ',')]
    kinds: Vec<u16>,
    /// Results asked of each relay (default 100, at most 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_LIMIT as u64))]
    limit: Option<u64>,
    /// Relays to search when the reader names no search relays (kind:10007) and no known
    /// relay's NIP-11 document lists NIP 50 (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    search_relays: Vec<String>,
    #[command(flatten)]
    reader: ReaderArgs,
}

/// Where the searched relays came from, said with the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// The reader's kind:10007 search relays.
    SearchList,
    /// Relays whose NIP-11 document lists NIP 50.
    Nip11,
    /// `--search-relays`.
    Configured,
}

impl Source {
    fn why(self) -> &'static str {
        match self {
            Source::SearchList => "the reader's search relays (kind:10007)",
            Source::Nip11 => "their NIP-11 documents list NIP 50",
            Source::Configured => {
                "--search-relays (no search relay list, no relay known to support NIP 50)"
            }
        }
    }
}

/// The relays of the reader's kind:10007 list (`relay` tags), canonical.
fn search_list(reader: &Reader, lists: &crate::reader::Lists) -> Vec<String> {
    let Some(pk) = reader.pubkey else {
        return Vec::new();
    };
    let Some(list) = lists.newest(&pk, Kind::SearchRelays) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for tag in list.tags.iter() {
        let tag = tag.as_slice();
        if tag.first().map(String::as_str) != Some("relay") {
            continue;
        }
        if let Some(url) = tag.get(1).and_then(|u| reader.policy.canonicalize(u).ok()) {
            if !out.contains(&url) && out.len() < MAX_SEARCH_RELAYS {
                out.push(url);
            }
        }
    }
    out
}

/// What is known of each relay's support of NIP-50 ([`nostr_outbox_runtime::extensions`]),
/// asked at once (a document fetch holds a place of the client's socket budget and has its own
/// timeout), in the order given.
async fn verdicts(reader: &Reader, relays: Vec<String>) -> Vec<(String, Verdict)> {
    let mut asks = tokio::task::JoinSet::new();
    for (i, url) in relays.into_iter().enumerate() {
        let client = reader.client.clone();
        asks.spawn(async move {
            let verdict = client.verdict(&url, Extension::Search).await;
            (i, url, verdict)
        });
    }
    let mut found = Vec::new();
    while let Some(done) = asks.join_next().await {
        found.extend(done.ok());
    }
    found.sort_by_key(|(i, _, _)| *i);
    found.into_iter().map(|(_, url, v)| (url, v)).collect()
}

/// The relays the reader knows that are known to search: their document lists NIP-50.
async fn nip50_relays(reader: &Reader, known: Vec<String>) -> Vec<String> {
    verdicts(reader, known)
        .await
        .into_iter()
        .filter(|(_, v)| *v == Verdict::Ask(Wait::Full))
        .map(|(url, _)| url)
        .collect()
}

/// The chosen relays that may search (those known not to are said, and left out), or an
/// error when none may.
async fn searching(reader: &Reader, relays: Vec<String>) -> anyhow::Result<Vec<String>> {
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for (url, verdict) in verdicts(reader, relays).await {
        match verdict {
            Verdict::Ask(_) => kept.push(url),
            Verdict::Skip(why) => left_out.push(format!(
                "  {}: not searched: {}",
                escape(&url),
                escape(&why)
            )),
        }
    }
    if kept.is_empty() {
        bail!(
            "no relay to search: none of the chosen relays supports NIP-50\n{}",
            left_out.join("\n")
        );
    }
    describe(&left_out, reader.json)?;
    Ok(kept)
}

/// The relays to search and why: the first of the three sources that names any.
async fn choose(
    reader: &mut Reader,
    configured: Vec<String>,
) -> anyhow::Result<(Vec<String>, Source)> {
    let wanted = if reader.pubkey.is_some() {
        vec![Kind::SearchRelays]
    } else {
        Vec::new()
    };
    let lists = reader.lists(&[], &wanted).await;
    reader.require_answer(&lists)?;
    let listed = search_list(reader, &lists);
    if !listed.is_empty() {
        return Ok((listed, Source::SearchList));
    }
    let mut known = reader.lookup_relays();
    if let Some(pk) = reader.pubkey {
        let own = lists.directory.person(&pk);
        for url in own.into_iter().flat_map(|p| p.write.iter().chain(&p.read)) {
            if !known.contains(url) {
                known.push(url.clone());
            }
        }
    }
    known.truncate(MAX_SEARCH_RELAYS);
    let supported = nip50_relays(reader, known).await;
    if !supported.is_empty() {
        return Ok((supported, Source::Nip11));
    }
    if !configured.is_empty() {
        return Ok((configured, Source::Configured));
    }
    bail!(
        "no relay to search: the reader names no search relays (kind:10007), no known relay's \
         NIP-11 document lists NIP 50, and no --search-relays were given"
    )
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let words = args.words.trim();
    if words.is_empty() {
        bail!("nothing to search for: give some words");
    }
    if words.chars().count() > MAX_SEARCH_CHARS {
        bail!("the search is longer than {MAX_SEARCH_CHARS} characters");
    }
    let mut filter = Filter::new()
        .search(words)
        .limit(args.limit.map_or(DEFAULT_LIMIT, |l| l as usize));
    if !args.kinds.is_empty() {
        filter = filter.kinds(args.kinds.iter().map(|k| Kind::from(*k)));
    }
    on_runtime(async {
        let mut reader = args.reader.open(runtime_config(false), &[]).await?;
        let configured = crate::reader::canonical_relays(
            &reader.policy,
            args.search_relays.iter().take(MAX_SEARCH_RELAYS),
            "search relay",
        )?;
        let (relays, source) = choose(&mut reader, configured).await?;
        let relays = searching(&reader, relays).await?;
        let plan = RoutePlan {
            kind: RouteKind::Subscription,
            targets: relays
                .iter()
                .map(|url| RouteTarget {
                    url: url.clone(),
                    reasons: Vec::new(),
                    quality: 0.0,
                    filters: vec![filter.clone()],
                })
                .collect(),
            cut_off: Vec::new(),
            left_out: Vec::new(),
            unknown: Vec::new(),
        };
        let mut lines = vec![format!(
            "search: {} relays, as {}",
            relays.len(),
            source.why()
        )];
        lines.extend(relays.iter().map(|url| format!("  {}", escape(url))));
        lines.push(format!(
            "    {}",
            escape(&serde_json::to_string(&filter).unwrap_or_default())
        ));
        describe(&lines, reader.json)?;
        let pass = read(&plan, &reader.client, reader.json, 0).await?;
        Ok(pass.exit(false))
    })
}

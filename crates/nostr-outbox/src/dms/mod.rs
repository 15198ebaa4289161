//! `outbox dms`: the reader's direct messages (NIP-17). The gift wraps addressed to the reader,
//! read from its kind:10050 DM relays (else its read relays, else `--relays`), signing in where
//! asked; with `--decrypt`, opened with the reader's key. `outbox dms send` ([`send`]) sends one.
//!
//! Messages go to stdout, oldest first; which relays were asked and what each did goes to
//! stderr. Everything from the network is escaped on its way to the terminal.

mod send;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr::nips::nip19::ToBech32;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::dms::MAX_DM_RELAYS;
use nostr_outbox_client::routes::{DmQuery, DmSource, Route, RouteBudget, RouteContext};
use nostr_outbox_runtime::Signer;
use nostr_outbox_runtime::{
    DmLists, DmRead, DmRelayOutcome, LookupOutcome, Refusal, UnwrapError, Wrap,
};

use crate::reader::ReaderArgs;
use crate::text::{escape, json_safe};

/// Options of `outbox dms`: reading, unless a subcommand (`send`) is given. Reading is the
/// command as it always was, so `outbox dms --relays …` keeps working; `send` takes no reading
/// option before it.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    read: ReadArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Send a direct message (NIP-17): sealed and gift wrapped for each recipient, sent to each
    /// one's DM relays (kind:10050), and a copy to the sender's own.
    Send(send::Args),
}

/// Options of reading `outbox dms`. The reader options are `outbox feed`'s; their help says
/// what they mean here.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("relays", |a| a.help(
        "The reader's own relays (comma-separated or repeated): where its DM relay list \
         (kind:10050) is looked up first, and asked for messages when the reader lists \
         neither DM nor read relays"
    )),
    mut_arg("secret_key_file", |a| a.help(
        "Sign in (NIP-42) as the reader with the secret key in this file (an nsec or 64 hex \
         characters, `chmod 600`), and open wraps with it (--decrypt). DM relays serve wraps \
         only to the reader signed in: without a key, such a relay is an error. The key may \
         instead come from OUTBOX_SECRET_KEY; the two conflict"
    )),
    mut_arg("npub", |a| a.help(
        "The reader (default: the key's, with --secret-key-file)"
    )),
    mut_arg("indexers", |a| a.help(
        "Relays that collect relay lists (comma-separated or repeated), asked for the \
         reader's DM relay list when --relays lack it"
    )),
    mut_arg("json", |a| a.help("Print messages as JSON lines instead of text")),
)]
pub struct ReadArgs {
    #[command(flatten)]
    reader: ReaderArgs,
    /// Open each wrap with the reader's key (`--secret-key-file` or `OUTBOX_SECRET_KEY`) and
    /// print its sender, time and text instead of the wrap.
    #[arg(long)]
    decrypt: bool,
    /// Only messages from this long ago on (e.g. `30d`, `12h`; at most 3650 days). Wraps are
    /// asked from two days earlier, as senders backdate them by up to two days (NIP-59).
    #[arg(long, value_parser = crate::duration::parse, default_value = "30d")]
    since: Duration,
    /// At most this many wraps asked of each relay, and the newest this many shown (1–5000).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=5000), default_value = "100")]
    limit: u16,
    /// Longest wait for a connection (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "10s")]
    connect_timeout: Duration,
    /// Longest wait from REQ to EOSE (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "15s")]
    eose_timeout: Duration,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::Send(send)) = args.action {
        return send::run(send);
    }
    let args = args.read;
    crate::reads::on_runtime(dms(args))
}

async fn dms(args: ReadArgs) -> anyhow::Result<ExitCode> {
    let runtime_config = crate::reader::one_pass(args.connect_timeout, args.eose_timeout);
    let reader = args.reader.open(runtime_config, &[]).await?;
    let client = &reader.client;
    let (pubkey, keys) = reader.owner(
        "messages",
        "DM relays serve a reader's wraps only to the reader signed in, and only the reader's \
         key opens them",
    )?;
    if args.decrypt && keys.is_none() {
        bail!(
            "--decrypt needs the reader's secret key: give --secret-key-file (or \
             OUTBOX_SECRET_KEY), or a remote signer (--bunker)"
        );
    }
    let npub = pubkey.to_bech32().context("encoding the reader's npub")?;
    let stats = reader.stats().await;

    let lists = nostr_outbox_runtime::find_dm_lists(
        pubkey,
        &reader.relays,
        &reader.indexers,
        &reader.policy,
        client,
    )
    .await;
    let now = Timestamp::now().as_secs();
    let mut query = DmQuery::new(pubkey);
    query.reader_relays = reader.relays.clone();
    query.since = Some(now.saturating_sub(args.since.as_secs()));
    query.limit = Some(usize::from(args.limit));
    let source = query.source(&lists.directory);
    if source != DmSource::DmList && lists.answered() == 0 {
        bail!(
            "could not learn where {npub} takes direct messages (kind:10050): no relay \
             answered: {}",
            lookup_failures(&lists, keys.is_some()).join("; ")
        );
    }
    let ctx = RouteContext {
        directory: &lists.directory,
        stats: &stats,
        now,
        budget: RouteBudget {
            max_relays: MAX_DM_RELAYS,
            ..RouteBudget::default()
        },
    };
    let (plan, violations) = query.plan_checked(&ctx);
    if !violations.is_empty() {
        let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
        bail!("the DM route is unsound: {}", list.join("; "));
    }
    let urls: Vec<String> = plan.urls().map(escape).collect();
    describe_lists(&lists, &npub, source, &urls, keys.is_some());
    if plan.targets.is_empty() {
        bail!(
            "no relay to ask for direct messages: {npub} has no DM relay list (kind:10050) or \
             read relays, and no --relays entry is usable"
        );
    }

    let read = nostr_outbox_runtime::read_wraps(&plan, client, usize::from(args.limit)).await;
    let shown = print_messages(&read, keys.as_ref().filter(|_| args.decrypt), reader.json).await?;
    describe_read(&read, &shown);

    let need: Vec<String> = read.need_sign_in().map(escape).collect();
    if !need.is_empty() && keys.is_none() {
        bail!(
            "{} refused to serve direct messages without sign-in (NIP-42): give \
             --secret-key-file (or OUTBOX_SECRET_KEY) to sign in as the reader",
            need.join(", ")
        );
    }
    if read.answered() == 0 {
        bail!("no DM relay answered ({})", urls.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// The lookup's relays that did not answer, one line each, with what would help. Not
/// escaped: errors are shown escaped, and [`describe_lists`] escapes what it prints.
fn lookup_failures(lists: &DmLists, keys: bool) -> Vec<String> {
    lists
        .asked
        .iter()
        .filter(|(_, o)| **o != LookupOutcome::Answered)
        .map(|(url, outcome)| crate::feed::unanswered_why(url, outcome, keys))
        .collect()
}

/// On stderr: the relays asked for the reader's lists, and where the DMs are asked and why.
fn describe_lists(lists: &DmLists, npub: &str, source: DmSource, urls: &[String], keys: bool) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "lists:               {} relays asked, {} answered",
        lists.asked.len(),
        lists.answered()
    );
    for line in lookup_failures(lists, keys) {
        let _ = writeln!(err, "  {}", escape(&line));
    }
    let line = match source {
        DmSource::DmList => format!(
            "dm relays:           {} (kind:10050, from {})",
            urls.join(", "),
            if lists.from_indexers {
                "the indexers"
            } else {
                "the reader's relays"
            }
        ),
        DmSource::ReadRelays => format!(
            "dm relays:           none listed: no DM relay list (kind:10050) for {npub}; asking \
             the read relays of its relay list (kind:10002) instead: {}",
            urls.join(", ")
        ),
        DmSource::ReaderRelays => format!(
            "dm relays:           none listed: no DM relay list (kind:10050) or read relays for \
             {npub}; asking --relays instead: {}",
            urls.join(", ")
        ),
    };
    let _ = writeln!(err, "{line}");
}

/// What was printed: messages, and how many wraps did not open.
#[derive(Default)]
struct Shown {
    messages: usize,
    unopened: usize,
    /// Wraps carrying a message already shown (one message sent in several wraps).
    repeated: usize,
}

/// One line to print, with the time it sorts by.
struct Line {
    at: u64,
    text: String,
}

/// Prints the wraps (opened with `signer` when given) to stdout, oldest first; a closed stdout
/// is the error returned.
async fn print_messages(
    read: &DmRead,
    signer: Option<&Signer>,
    json: bool,
) -> anyhow::Result<Shown> {
    let mut shown = Shown::default();
    let mut lines: Vec<Line> = Vec::with_capacity(read.wraps.len());
    // A message is shown once however many wraps carried it.
    let mut seen = std::collections::HashSet::new();
    for wrap in &read.wraps {
        let line = match signer {
            None => wrap_line(wrap, None, json),
            Some(signer) => match nostr_outbox_runtime::unwrap_dm(signer, &wrap.event).await {
                Ok(dm) if !seen.insert(dm.rumor) => {
                    shown.repeated += 1;
                    continue;
                }
                Ok(dm) => message_line(wrap, &dm, json),
                // A signer that did not answer would keep every other wrap waiting as long.
                Err(nostr_outbox_runtime::UnwrapError::Signer(e)) => {
                    return Err(anyhow::anyhow!(e).context("opening the messages"))
                }
                Err(e) => {
                    shown.unopened += 1;
                    wrap_line(wrap, Some(&e), json)
                }
            },
        };
        shown.messages += 1;
        lines.push(line);
    }
    lines.sort_by_key(|l| l.at);
    for line in lines {
        out!("{}", line.text)?;
    }
    Ok(shown)
}

/// A wrap as it came (time, id, relay) and, when it did not open, why.
fn wrap_line(wrap: &Wrap, unopened: Option<&UnwrapError>, json: bool) -> Line {
    let e = &wrap.event;
    let at = e.created_at.as_secs();
    let text = if json {
        let mut doc = serde_json::json!({
            "wrap": e.id.to_hex(),
            "relay": wrap.relay,
            "created_at": at,
        });
        match unopened {
            Some(why) => doc["error"] = why.to_string().into(),
            None => doc["event"] = serde_json::json!(e),
        }
        json_safe(&doc.to_string())
    } else {
        let why = unopened
            .map(|why| format!(" not opened: {}", escape(&why.to_string())))
            .unwrap_or_default();
        format!("{} wrap {} [{}]{why}", when(at), e.id, escape(&wrap.relay))
    };
    Line { at, text }
}

/// An opened message: its time, sender, relay and text.
fn message_line(wrap: &Wrap, dm: &nostr_outbox_runtime::DirectMessage, json: bool) -> Line {
    let at = dm.created_at.as_secs();
    // A key always encodes; the hex is the fallback that cannot fail.
    let sender = dm.sender.to_bech32().unwrap_or_else(|_| dm.sender.to_hex());
    let text = if json {
        let doc = serde_json::json!({
            "wrap": dm.wrap.to_hex(),
            "relay": wrap.relay,
            "created_at": at,
            "sender": sender,
            "kind": dm.kind.as_u16(),
            "content": dm.content,
            "tags": dm.tags,
        });
        json_safe(&doc.to_string())
    } else {
        let kind = if dm.kind == Kind::PrivateDirectMessage {
            String::new()
        } else {
            format!("(kind:{}) ", dm.kind.as_u16())
        };
        format!(
            "{} {sender} [{}] {kind}{}",
            when(at),
            escape(&wrap.relay),
            escape(&dm.content)
        )
    };
    Line { at, text }
}

/// On stderr: what each DM relay did, and what was shown.
fn describe_read(read: &DmRead, shown: &Shown) {
    let mut err = std::io::stderr().lock();
    for (url, outcome) in &read.relays {
        let what = match outcome {
            DmRelayOutcome::Refused {
                refusal: Refusal::SignIn,
                message,
            } => format!("needs sign-in (NIP-42): {}", escape(message)),
            other => escape(&other.to_string()),
        };
        let _ = writeln!(err, "  {}: {what}", escape(url));
    }
    let mut line = format!("messages:            {}", shown.messages);
    if shown.unopened > 0 {
        line.push_str(&format!(", {} did not open", shown.unopened));
    }
    if shown.repeated > 0 {
        line.push_str(&format!(
            ", {} more wraps carried a message already shown",
            shown.repeated
        ));
    }
    if read.left_out > 0 {
        line.push_str(&format!(" ({} older left out: --limit)", read.left_out));
    }
    let _ = writeln!(err, "{line}");
}

/// Unix seconds as an RFC 3339 time (UTC); beyond what it can show, the number.
fn when(secs: u64) -> String {
    match std::time::UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(t) if secs < 253_402_300_800 => humantime::format_rfc3339_seconds(t).to_string(),
        _ => format!("unix time {secs}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr::event::{EventBuilder, FinalizeEvent, Tag};
    use nostr::key::Keys;

    #[tokio::test]
    async fn a_wrap_that_does_not_open_is_one_escaped_line() {
        let (reader, stranger) = (Keys::generate(), Keys::generate());
        let bad = EventBuilder::new(Kind::GiftWrap, "garbage")
            .tag(Tag::public_key(reader.public_key()))
            .finalize(&stranger)
            .unwrap();
        let wrap = Wrap {
            event: bad,
            relay: "wss://r.example/\u{1b}[2J".into(),
        };
        let reader = Signer::from_keys(reader);
        let why = nostr_outbox_runtime::unwrap_dm(&reader, &wrap.event)
            .await
            .unwrap_err();
        for json in [false, true] {
            let line = wrap_line(&wrap, Some(&why), json).text;
            assert!(!line.contains('\n'), "{line}");
            assert!(!line.chars().any(char::is_control), "{line:?}");
        }
        assert!(wrap_line(&wrap, Some(&why), false)
            .text
            .contains("not opened:"));
        assert_eq!(when(u64::MAX), format!("unix time {}", u64::MAX));
    }
}

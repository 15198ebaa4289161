//! `outbox lists`: the reader's own relay lists — kind:10002 (NIP-65), kind:10050 (NIP-17 DM
//! inbox) and kind:10007 (search relays) — as the reader's relays and the indexers have them;
//! with `--add-relay` or `--remove-relay`, one of them changed, signed with the reader's key
//! and published where readers of the old or the new list will look
//! (`nostr_outbox_client::routes::lists::list_targets`): the reader's write relays, the
//! indexers, and every relay the old list named.
//!
//! The lists (or the new list and what each relay did with it) go to stdout; what came from
//! the network is escaped.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::{Event, EventBuilder, Kind, Tag};
use nostr::key::PublicKey;
use nostr::nips::nip19::ToBech32;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::lists::{
    edit_list, list_targets, relay_tag_name, ListChange, ListEdit, ListTargets, Marker,
};
use nostr_outbox_core::RouterConfig;
use nostr_outbox_runtime::{PublishConfig, PublishReport};

use crate::reader::{canonical_relays, ReaderArgs};
use crate::text::{escape, json_safe};

/// The lists shown, in order, with their names.
const LISTS: [(Kind, &str); 3] = [
    (Kind::RelayList, "relay list"),
    (Kind::InboxRelays, "dm relays"),
    (Kind::SearchRelays, "search relays"),
];

/// Options of `outbox lists`.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("relays", |a| a.help(
        "The reader's own relays (comma-separated or repeated): where its lists are looked up, \
         with --indexers"
    )),
    mut_arg("secret_key_file", |a| a.help(
        "The reader's secret key, in this file (an nsec or 64 hex characters, `chmod 600`): it \
         signs the new list, and signs in (NIP-42) where a relay asks. May instead come from \
         OUTBOX_SECRET_KEY; the two conflict. Needed to change a list"
    )),
    mut_arg("npub", |a| a.help(
        "Whose lists (default: the key's); with a key, it must be the key's"
    )),
    mut_arg("indexers", |a| a.help(
        "Relays that collect relay lists (comma-separated or repeated): asked for the lists \
         beside --relays, and sent a changed list; added to --config's `indexers`"
    )),
    mut_arg("json", |a| a.help("Print one JSON document instead of text")),
)]
pub struct Args {
    #[command(flatten)]
    reader: ReaderArgs,
    /// Router config (TOML) whose `indexers` are asked and sent the new list, as `outbox feed
    /// --config` reads them (the default config names none).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Add this relay to the list (`--kind`), or change how a listed one is used.
    #[arg(long, value_name = "URL", conflicts_with = "remove_relay")]
    add_relay: Option<String>,
    /// With `--add-relay` to the relay list: the reader reads there only (NIP-65 `read`).
    #[arg(long, requires = "add_relay", conflicts_with = "write")]
    read: bool,
    /// With `--add-relay` to the relay list: the reader writes there only (NIP-65 `write`).
    /// Without `--read` or `--write`, both.
    #[arg(long, requires = "add_relay")]
    write: bool,
    /// Remove this relay from the list (`--kind`).
    #[arg(long, value_name = "URL")]
    remove_relay: Option<String>,
    /// Which list to change: 10002 (relay list), 10050 (DM relays), 10007 (search relays).
    #[arg(long, default_value = "10002", value_parser = ["10002", "10050", "10007"])]
    kind: String,
    /// Show the new list and where it would go, and send nothing.
    #[arg(long)]
    dry_run: bool,
    /// Longest wait for a connection (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "10s")]
    connect_timeout: Duration,
    /// Longest wait from REQ to EOSE while looking the lists up (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "15s")]
    eose_timeout: Duration,
    /// The publishing ends after this many seconds (at most 315360000, ten years).
    #[arg(long, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(..=crate::duration::MAX_SECS))]
    timeout: u64,
}

impl Args {
    /// The change asked for, if any.
    fn edit(&self) -> Option<ListEdit> {
        let marker = match (self.read, self.write) {
            (true, _) => Marker::Read,
            (_, true) => Marker::Write,
            _ => Marker::Both,
        };
        match (&self.add_relay, &self.remove_relay) {
            (Some(url), _) => Some(ListEdit::Add {
                url: url.clone(),
                marker,
            }),
            (None, Some(url)) => Some(ListEdit::Remove { url: url.clone() }),
            (None, None) => None,
        }
    }

    /// The list `--kind` names.
    fn kind(&self) -> Kind {
        Kind::from(self.kind.parse::<u16>().unwrap_or(10002))
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    crate::reads::on_runtime(lists(args))
}

async fn lists(args: Args) -> anyhow::Result<ExitCode> {
    let edit = args.edit();
    let kind = args.kind();
    if kind != Kind::RelayList && (args.read || args.write) {
        bail!("--read and --write mark relays of the relay list (--kind 10002) only");
    }
    let config_indexers = match &args.config {
        Some(path) => {
            let text = crate::text::read_bounded(path, crate::text::MAX_CONFIG_BYTES)
                .context("reading config")?;
            RouterConfig::from_toml(&text)
                .context("in router config")?
                .indexers
        }
        None => {
            RouterConfig::from_toml(crate::feed::DEFAULT_CONFIG)
                .context("in the default router config")?
                .indexers
        }
    };
    let runtime_config = crate::reader::one_pass(args.connect_timeout, args.eose_timeout);
    let mut reader = args.reader.open(runtime_config, &[]).await?;
    let (pubkey, keys) = reader.owner("lists", "only the reader's key signs its lists")?;
    if edit.is_some() && keys.is_none() {
        bail!(
            "changing a list needs the reader's secret key, which signs it: give \
             --secret-key-file (or OUTBOX_SECRET_KEY), or a remote signer (--bunker)"
        );
    }
    reader.pubkey = Some(pubkey);
    for url in canonical_relays(&reader.policy, &config_indexers, "indexer")? {
        if !reader.indexers.contains(&url) {
            reader.indexers.push(url);
        }
    }
    let found = reader
        .lists(&[], &[Kind::InboxRelays, Kind::SearchRelays])
        .await;
    // Nothing learned is not the same as no list: a list built from nothing would replace the
    // one the relays did not say they have.
    reader.require_answer(&found)?;
    let newest = |kind: Kind| found.newest(&pubkey, kind).cloned();

    let (Some(edit), Some(keys)) = (edit, keys) else {
        let shown: Vec<(Kind, &str, Option<Event>)> = LISTS
            .iter()
            .map(|(kind, name)| (*kind, *name, newest(*kind)))
            .collect();
        show(&pubkey, &shown, reader.json)?;
        return Ok(ExitCode::SUCCESS);
    };

    let old = newest(kind);
    let old_tags: Vec<Vec<String>> = old.as_ref().map(tags_of).unwrap_or_default();
    let edited = edit_list(kind, &old_tags, &edit, &reader.policy)
        .map_err(|e| anyhow::anyhow!("{} not changed: {e}", list_name(kind)))?;
    if !edited.changed {
        out!(
            "{} unchanged: {} is already listed so; nothing sent",
            list_name(kind),
            escape(&edited.url)
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut tags = Vec::with_capacity(edited.tags.len());
    for tag in &edited.tags {
        tags.push(Tag::parse(tag.clone()).with_context(|| {
            format!(
                "the {} found holds a malformed tag; nothing sent",
                list_name(kind)
            )
        })?);
    }
    // Newer than the list it replaces, whatever the clocks say.
    let now = Timestamp::now().as_secs();
    let created_at = old
        .as_ref()
        .map_or(now, |o| now.max(o.created_at.as_secs().saturating_add(1)));
    let content = old.as_ref().map(|o| o.content.clone()).unwrap_or_default();
    let unsigned = EventBuilder::new(kind, content)
        .tags(tags)
        .custom_created_at(Timestamp::from_secs(created_at));
    let event = keys
        .sign_builder(unsigned)
        .await
        .context("signing the new list")?;

    let relay_list = newest(Kind::RelayList).map(|e| tags_of(&e));
    let targets = list_targets(
        &ListChange {
            kind,
            old: old.is_some().then_some(old_tags.as_slice()),
            new: &edited.tags,
            relay_list: relay_list.as_deref(),
            indexers: &reader.indexers,
        },
        &reader.policy,
    );
    if targets.targets.is_empty() {
        bail!(
            "nowhere to send the new {}: no write relay, indexer or old list's relay is known \
             (give --indexers)",
            list_name(kind)
        );
    }
    let report = if args.dry_run {
        None
    } else {
        let cfg = PublishConfig {
            deadline: Duration::from_secs(args.timeout.max(1)),
            ..PublishConfig::default()
        };
        Some(nostr_outbox_runtime::publish(&event, &targets.urls(), &reader.client, &cfg).await)
    };
    let change = Change {
        kind,
        event: &event,
        edit: &edit,
        url: &edited.url,
        had_old: old.is_some(),
    };
    print_change(&change, &targets, report.as_ref(), reader.json)?;
    Ok(match report {
        Some(report) if report.successes() == 0 => {
            eprintln!("error: no relay accepted the new {}", list_name(kind));
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    })
}

fn tags_of(event: &Event) -> Vec<Vec<String>> {
    event.tags.iter().map(|t| t.as_slice().to_vec()).collect()
}

fn list_name(kind: Kind) -> String {
    let name = LISTS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("list", |(_, name)| name);
    format!("{name} (kind:{})", kind.as_u16())
}

/// The relay entries of a list, one `url [marker]` line each, escaped.
fn entries(kind: Kind, event: &Event) -> Vec<String> {
    let name = relay_tag_name(kind);
    event
        .tags
        .iter()
        .map(|t| t.as_slice())
        .filter(|t| t.first().map(String::as_str) == Some(name))
        .filter_map(|t| {
            let url = escape(t.get(1)?);
            Some(match t.get(2).filter(|m| !m.is_empty()) {
                Some(marker) => format!("{url}  {}", escape(marker)),
                None => url,
            })
        })
        .collect()
}

/// Unix seconds as an RFC 3339 time (UTC); beyond what it can show, the number.
fn when(secs: u64) -> String {
    match std::time::UNIX_EPOCH.checked_add(Duration::from_secs(secs)) {
        Some(t) if secs < 253_402_300_800 => humantime::format_rfc3339_seconds(t).to_string(),
        _ => format!("unix time {secs}"),
    }
}

/// The lists found; a closed stdout is the error returned.
fn show(
    pubkey: &PublicKey,
    lists: &[(Kind, &str, Option<Event>)],
    json: bool,
) -> anyhow::Result<()> {
    let npub = pubkey.to_bech32().unwrap_or_else(|_| pubkey.to_hex());
    if json {
        let found: Vec<serde_json::Value> = lists
            .iter()
            .map(|(kind, _, event)| serde_json::json!({ "kind": kind.as_u16(), "event": event }))
            .collect();
        let doc = serde_json::json!({ "reader": npub, "lists": found });
        out!("{}", json_safe(&serde_json::to_string_pretty(&doc)?))?;
        return Ok(());
    }
    for (kind, _, event) in lists {
        let Some(event) = event else {
            out!("{}: none found", list_name(*kind))?;
            continue;
        };
        let lines = entries(*kind, event);
        out!(
            "{}: {} relays, {}, id {}",
            list_name(*kind),
            lines.len(),
            when(event.created_at.as_secs()),
            event.id
        )?;
        for line in lines {
            out!("  {line}")?;
        }
    }
    Ok(())
}

/// What was changed, for printing.
struct Change<'a> {
    kind: Kind,
    event: &'a Event,
    edit: &'a ListEdit,
    url: &'a str,
    had_old: bool,
}

/// The new list, and each target with why and (unless a dry run) what it did.
fn print_change(
    change: &Change<'_>,
    targets: &ListTargets,
    report: Option<&PublishReport>,
    json: bool,
) -> anyhow::Result<()> {
    let outcome = |url: &str| report.and_then(|r| r.relays.iter().find(|r| r.url == url));
    if json {
        let sent: Vec<serde_json::Value> = targets
            .targets
            .iter()
            .map(|t| {
                let r = outcome(&t.url);
                serde_json::json!({
                    "url": t.url,
                    "reasons": t.reasons,
                    "outcome": r.map(|r| r.outcome.as_str()),
                    "message": r.map(|r| r.message.as_str()),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "kind": change.kind.as_u16(),
            "event": change.event,
            "dry_run": report.is_none(),
            "accepted": report.map_or(0, PublishReport::successes),
            "targets": sent,
            "left_out": targets.left_out,
        });
        out!("{}", json_safe(&serde_json::to_string_pretty(&doc)?))?;
        return Ok(());
    }
    let what = match change.edit {
        ListEdit::Add { .. } => "added",
        ListEdit::Remove { .. } => "removed",
    };
    let from = if change.had_old {
        ""
    } else {
        " (none was found: a new list)"
    };
    out!(
        "new {}{from}: {what} {}",
        list_name(change.kind),
        escape(change.url)
    )?;
    for line in entries(change.kind, change.event) {
        out!("  {line}")?;
    }
    for t in &targets.targets {
        let why: Vec<&str> = t.reasons.iter().map(|r| r.as_str()).collect();
        let (done, message) = match outcome(&t.url) {
            Some(r) if !r.message.is_empty() => {
                (r.outcome.as_str(), format!("  {}", escape(&r.message)))
            }
            Some(r) => (r.outcome.as_str(), String::new()),
            None => ("not sent (dry run)", String::new()),
        };
        out!("{}  {done}  ({}){message}", escape(&t.url), why.join(", "))?;
    }
    if targets.left_out > 0 {
        out!(
            "{} more relays left out (at most {})",
            targets.left_out,
            nostr_outbox_client::routes::lists::MAX_LIST_TARGETS
        )?;
    }
    if let Some(report) = report {
        out!(
            "sent: {} of {} relays accepted",
            report.successes(),
            report.relays.len()
        )?;
    }
    Ok(())
}

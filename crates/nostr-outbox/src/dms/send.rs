//! `outbox dms send`: one NIP-17 chat message, sealed and gift wrapped for each recipient
//! (`nostr_outbox_runtime::wrap_dm`) and sent to each recipient's kind:10050 DM relays — the
//! publish route of a gift wrap — with a copy to the sender's own DM relays, signing in where
//! a relay asks. A recipient without a DM relay list gets nothing (NIP-17: no other relays).
//!
//! One block per recipient on stdout: which relays took the wrap. The text is never printed.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::{Event, Kind};
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::nips::nip19::ToBech32;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::dms::MAX_DM_RELAYS;
use nostr_outbox_client::routes::{PublishQuery, Route, RouteBudget, RouteContext};
use nostr_outbox_client::{RelayDirectory, RelayDirectoryBuilder};
use nostr_outbox_runtime::asks::dms::MAX_DM_RECIPIENTS;
use nostr_outbox_runtime::{PublishConfig, PublishReport};
use tokio::task::JoinSet;

use crate::reader::{parse_key, ReaderArgs};
use crate::text::{escape, json_safe};

/// Options of `outbox dms send`.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("relays", |a| a.help(
        "The sender's own relays (comma-separated or repeated): where the recipients' and the \
         sender's DM relay lists (kind:10050) are looked up, with --indexers"
    )),
    mut_arg("secret_key_file", |a| a.help(
        "The sender's secret key, in this file (an nsec or 64 hex characters, `chmod 600`): it \
         signs the seals and signs in (NIP-42) where a relay asks. May instead come from \
         OUTBOX_SECRET_KEY; the two conflict. Required"
    )),
    mut_arg("npub", |a| a.help(
        "The sender, checked against the key (default: the key's)"
    )),
    mut_arg("indexers", |a| a.help(
        "Relays that collect relay lists (comma-separated or repeated), asked for the DM \
         relay lists beside --relays"
    )),
    mut_arg("json", |a| a.help("Print what each relay did as one JSON document")),
)]
pub struct Args {
    #[command(flatten)]
    reader: ReaderArgs,
    /// A recipient: an npub or hex public key (comma-separated or repeated; at most 32).
    #[arg(long = "to", value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// The message's text (kind:14).
    #[arg(long)]
    message: String,
    /// Longest wait for a connection (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "10s")]
    connect_timeout: Duration,
    /// Longest wait from REQ to EOSE while looking up DM relay lists (at most 3650 days).
    #[arg(long, value_parser = crate::duration::parse, default_value = "15s")]
    eose_timeout: Duration,
    /// The sending ends after this many seconds (at most 315360000, ten years).
    #[arg(long, default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(..=crate::duration::MAX_SECS))]
    timeout: u64,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    crate::reads::on_runtime(send(args))
}

/// What became of one wrap.
struct Sent {
    to: PublicKey,
    /// The sender's own copy.
    own: bool,
    wrap: Event,
    /// The DM relays it went to (none: no DM relay list known).
    report: PublishReport,
}

async fn send(args: Args) -> anyhow::Result<ExitCode> {
    if args.to.len() > MAX_DM_RECIPIENTS * 4 {
        bail!(
            "{} --to given; a message has at most {MAX_DM_RECIPIENTS} recipients",
            args.to.len()
        );
    }
    let recipients: Vec<PublicKey> = args
        .to
        .iter()
        .map(|raw| parse_key(raw))
        .collect::<anyhow::Result<_>>()?;
    let runtime_config = crate::reader::one_pass(args.connect_timeout, args.eose_timeout);
    let mut reader = args
        .reader
        .open(runtime_config, &[("a recipient's", recipients.as_slice())])
        .await?;
    let Some(keys) = reader.client.signer().cloned() else {
        bail!(
            "sending needs the sender's secret key: give --secret-key-file (or \
             OUTBOX_SECRET_KEY), or a remote signer (--bunker)"
        );
    };
    let me = keys.public_key();
    if reader.pubkey.is_some_and(|pk| pk != me) {
        bail!("the secret key is not the sender's (--npub)");
    }
    reader.pubkey = Some(me);
    let dm = nostr_outbox_runtime::wrap_dm(&keys, &recipients, &args.message)
        .await
        .map_err(|e| anyhow::anyhow!("the message was not sent: {e}"))?;

    let people: Vec<PublicKey> = dm.wraps.iter().map(|(pk, _)| *pk).collect();
    let lists = reader.lists(&people, &[Kind::InboxRelays]).await;
    reader.require_answer(&lists)?;
    let directory = with_lists_from_write_relays(&reader, &people, lists).await;
    let stats = reader.stats().await;
    let ctx = RouteContext {
        directory: &directory,
        stats: &stats,
        now: Timestamp::now().as_secs(),
        budget: RouteBudget {
            max_relays: MAX_DM_RELAYS,
            per_person: MAX_DM_RELAYS,
            ..RouteBudget::default()
        },
    };
    let cfg = PublishConfig {
        deadline: Duration::from_secs(args.timeout.max(1)),
        ..PublishConfig::default()
    };
    let mut tasks = JoinSet::new();
    for (i, (to, wrap)) in dm.wraps.iter().enumerate() {
        // The publish route of a gift wrap: the DM relays of the person it tags, nothing else.
        let (plan, violations) = PublishQuery::of_event(wrap).plan_checked(&ctx);
        if !violations.is_empty() {
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            bail!("the DM route is unsound: {}", list.join("; "));
        }
        let targets: Vec<String> = plan.urls().map(str::to_string).collect();
        // The sender's own copy, unless the sender is also a recipient.
        let own = *to == me && !recipients.contains(&me);
        let (client, wrap, cfg, to) = (reader.client.clone(), wrap.clone(), cfg.clone(), *to);
        tasks.spawn(async move {
            let report = if targets.is_empty() {
                PublishReport::default()
            } else {
                nostr_outbox_runtime::publish(&wrap, &targets, &client, &cfg).await
            };
            (
                i,
                Sent {
                    to,
                    own,
                    wrap,
                    report,
                },
            )
        });
    }
    let mut sent: Vec<Option<Sent>> = (0..dm.wraps.len()).map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        let (i, one) = joined.context("a send task failed")?;
        sent[i] = Some(one);
    }
    let sent: Vec<Sent> = sent.into_iter().flatten().collect();
    print(&sent, &dm.rumor, reader.json)?;
    let delivered = sent
        .iter()
        .filter(|s| !s.own && s.report.successes() > 0)
        .count();
    Ok(if delivered > 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: no recipient's DM relay took the message");
        ExitCode::FAILURE
    })
}

/// The directory of what the lookup found; for the people whose DM relay list it lacks, their
/// DM relay lists asked again of their own write relays (the outbox model: a person's lists
/// are where that person writes), at most `per_author` relays each.
async fn with_lists_from_write_relays(
    reader: &crate::reader::Reader,
    people: &[PublicKey],
    lists: crate::reader::Lists,
) -> RelayDirectory {
    let per_person = RouteBudget::default().per_author;
    let missing: Vec<PublicKey> = people
        .iter()
        .copied()
        .filter(|pk| lists.directory.dm_relays(pk).is_empty())
        .collect();
    let asked = reader.lookup_relays();
    let mut relays: Vec<String> = Vec::new();
    for pk in &missing {
        for url in lists.directory.write_relays(pk).iter().take(per_person) {
            if !asked.contains(url) && !relays.contains(url) {
                relays.push(url.clone());
            }
        }
    }
    if relays.is_empty() {
        return lists.directory;
    }
    let filter = Filter::new().authors(missing).kind(Kind::InboxRelays);
    let more = nostr_outbox_runtime::lookup(&relays, &filter, &reader.client).await;
    if more.events.is_empty() {
        return lists.directory;
    }
    let mut builder = RelayDirectoryBuilder::new(reader.policy.clone());
    // Both lookups verified signatures (the client's config says whether).
    for event in lists.lookup.events.iter().chain(&more.events) {
        if matches!(event.kind, Kind::RelayList | Kind::InboxRelays) {
            builder.add_verified(event);
        }
    }
    builder.build()
}

fn npub(pk: &PublicKey) -> String {
    pk.to_bech32().unwrap_or_else(|_| pk.to_hex())
}

/// Per recipient, which DM relays took the wrap; a closed stdout is the error returned.
fn print(sent: &[Sent], rumor: &nostr::event::EventId, json: bool) -> anyhow::Result<()> {
    if json {
        let recipients: Vec<serde_json::Value> = sent
            .iter()
            .map(|s| {
                serde_json::json!({
                    "to": npub(&s.to),
                    "own_copy": s.own,
                    "wrap": s.wrap.id.to_hex(),
                    "accepted": s.report.successes(),
                    "dm_list": !s.report.relays.is_empty(),
                    "relays": &s.report.relays,
                })
            })
            .collect();
        let doc = serde_json::json!({ "message": rumor.to_hex(), "recipients": recipients });
        out!("{}", json_safe(&serde_json::to_string_pretty(&doc)?))?;
        return Ok(());
    }
    for s in sent {
        let who = if s.own {
            format!("copy {} (yours)", npub(&s.to))
        } else {
            format!("to {}", npub(&s.to))
        };
        if s.report.relays.is_empty() {
            let what = if s.own {
                "not kept: you have no DM relay list (kind:10050)"
            } else {
                "not sent: no DM relay list (kind:10050) found"
            };
            out!("{who}: {what}")?;
            continue;
        }
        out!(
            "{who}: {} of {} DM relays accepted",
            s.report.successes(),
            s.report.relays.len()
        )?;
        for r in &s.report.relays {
            let message = if r.message.is_empty() {
                String::new()
            } else {
                format!("  {}", escape(&r.message))
            };
            out!("  {}  {}{message}", escape(&r.url), r.outcome.as_str())?;
        }
    }
    Ok(())
}

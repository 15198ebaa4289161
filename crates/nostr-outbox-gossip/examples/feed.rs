//! A nostr-sdk client whose relays per author come from the outbox router.
//!
//! ```text
//! cargo run -p nostr-outbox-gossip --example feed -- \
//!     --relay ws://127.0.0.1:7001 --follow <hex or npub> [--follow …] \
//!     [--config router.toml] [--stats stats.json] [--budget N]
//! ```
//!
//! `--relay` is the reader's own relay (several may be given): nostr-sdk looks the follows'
//! kind:10002 lists up there, and the engine sends the follows no routed relay covers there.
//! Loopback relays are accepted, so the example runs against local relays without a network.
//! Prints the plan, the notes read, and what was learned; with `--stats`, learning is kept.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::RelayUrl;
use nostr_gossip::GossipAllowedRelays;
use nostr_outbox_gossip::OutboxGossip;
use nostr_sdk::prelude::{Client, GossipConfig, RelayStatus};

struct Args {
    relays: Vec<String>,
    follows: Vec<PublicKey>,
    config: Option<String>,
    stats: Option<String>,
    budget: usize,
}

fn usage() -> &'static str {
    "usage: feed --relay URL [--relay URL …] --follow PUBKEY [--follow PUBKEY …] \
     [--config FILE] [--stats FILE] [--budget N]"
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        relays: Vec::new(),
        follows: Vec::new(),
        config: None,
        stats: None,
        budget: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--relay" => args.relays.push(value()?),
            "--follow" => {
                let raw = value()?;
                let key = nostr_outbox_core::parse_public_key(&raw)
                    .with_context(|| format!("--follow {raw}: not a public key"))?;
                args.follows.push(key);
            }
            "--config" => args.config = Some(value()?),
            "--stats" => args.stats = Some(value()?),
            "--budget" => args.budget = value()?.parse().context("--budget: not a number")?,
            "-h" | "--help" => bail!("{}", usage()),
            other => bail!("unknown argument {other}\n{}", usage()),
        }
    }
    if args.relays.is_empty() || args.follows.is_empty() {
        bail!("{}", usage());
    }
    Ok(args)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let toml = match &args.config {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
        None => format!(
            "max_connections = {}\n[url_policy]\nallow_loopback = true\n[strategy]\ntype = \"recall\"\n",
            args.budget
        ),
    };
    let mut builder = OutboxGossip::from_toml(&toml)?.reader_relays(&args.relays);
    if let Some(path) = &args.stats {
        builder = builder.json_store(path);
    }
    let gossip = Arc::new(builder.open().await?);
    gossip.follow(args.follows.iter().copied());

    let config = GossipConfig::default()
        .allowed(GossipAllowedRelays {
            onion: false,
            local: true,
            without_tls: true,
        })
        .sync_initial_timeout(Duration::from_secs(3))
        .fetch_timeout(Duration::from_secs(5))
        .no_background_refresh();
    let client = Client::builder()
        .gossip(gossip.clone())
        .gossip_config(config)
        .build();
    for relay in &args.relays {
        client
            .add_relay(relay.as_str())
            .await
            .with_context(|| format!("adding relay {relay}"))?;
    }
    client.connect().and_wait(Duration::from_secs(5)).await;
    let connected = |relays: std::collections::HashMap<RelayUrl, nostr_sdk::prelude::Relay>| {
        relays
            .into_iter()
            .filter(|(_, r)| r.status() == RelayStatus::Connected)
            .map(|(u, _)| u)
            .collect::<HashSet<RelayUrl>>()
    };
    if connected(client.relays().all().await).is_empty() {
        bail!(
            "could not connect to any of {} (is a relay running there?)",
            args.relays.join(", ")
        );
    }

    let filter = Filter::new()
        .authors(args.follows.iter().copied())
        .kind(Kind::TextNote)
        .limit(200);
    let events = client
        .fetch_events(filter)
        .timeout(Duration::from_secs(15))
        .await
        .context("reading the feed")?;

    if let Some(plan) = gossip.plan_summary() {
        println!(
            "plan ({}): {} routed relays, {} of {} follows on the reader's relays",
            plan.strategy,
            plan.routed.len(),
            plan.residual,
            plan.keys
        );
        for url in &plan.routed {
            println!("  routed  {url}");
        }
    }
    println!("{} notes", events.len());
    for event in events.iter().take(20) {
        let text: String = event.content.chars().take(60).collect();
        println!(
            "  {} {}",
            event.pubkey.to_hex().get(..12).unwrap_or(""),
            text.escape_debug()
        );
    }

    let reached = connected(client.relays().all().await);
    gossip.end_round(Some(&reached));
    let stats = gossip.stats();
    for url in gossip.plan_summary().map(|p| p.routed).unwrap_or_default() {
        let s = stats.get(&url);
        println!(
            "  learned {url}: liveness {:.2}, delivery {:.2}",
            s.live_mean(),
            s.mean()
        );
    }
    if args.stats.is_some() {
        gossip.save().await.context("saving what was learned")?;
    }
    client.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! Embedding the router in a client: relay-list events in, REQ filters out, what came back
//! learned, and the next run planned with it. The README's embedding block is this client
//! without the output.
//!
//! Run with `cargo run -p nostr-outbox-strategies --example embed`.

use nostr::event::{Event, EventBuilder, FinalizeEvent, IntoEventBuilder, Kind};
use nostr::nips::nip65::{RelayList, RelayMetadata};
use nostr::{key::Keys, types::RelayUrl};
use nostr_outbox_client::{RoundRecorder, Slots};
use nostr_outbox_core::{session_seed, DeliveryStats, PlanContext, Router};

const CONFIG: &str = "max_connections = 8\n[strategy]\ntype = \"recall\"\n";

/// A signed kind:10002 relay list, as fetched from relays.
fn list(keys: &Keys, urls: &[&str]) -> Result<Event, Box<dyn std::error::Error>> {
    let urls = urls
        .iter()
        .map(|u| Ok((RelayUrl::parse(u)?, Some(RelayMetadata::Write))))
        .collect::<Result<Vec<_>, nostr::error::Error>>()?;
    Ok(RelayList::new(urls).into_event_builder().finalize(keys)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Every built-in strategy, by name; the config picks one.
    nostr_outbox_strategies::link();
    let mut router = Router::from_toml(CONFIG)?;

    // The reader, three follows and their lists: a hub and a relay that is down.
    let me = Keys::generate();
    let follows: Vec<Keys> = (0..3).map(|_| Keys::generate()).collect();
    let mut builder = router
        .table()
        .follows(follows.iter().map(Keys::public_key))
        .reader_event(&list(&me, &["wss://home.example"])?);
    for keys in &follows {
        builder.add_event(&list(keys, &["wss://hub.example", "wss://down.example"])?);
    }
    let table = builder.build();

    // Two runs; a real client keeps `stats` in a store between them (`nostr-outbox-stats`).
    let mut stats = DeliveryStats::new();
    let now = 1_700_000_000;
    for _ in 0..2 {
        // Each run draws afresh: the seed follows the run count kept in the stats.
        let run = stats.begin_session();
        let ctx = PlanContext::at(now).seed(session_seed(7, run - 1));
        // Checked against every invariant; a broken plan is an error, never sent.
        let plan = router.try_plan_with(&table, &stats, ctx)?;
        println!("run {run}: {}", plan.strategy());

        // A fresh pool per run; a pool that stays open keeps `slots` and follows the diffs.
        let mut slots = Slots::new();
        let mut recorder = RoundRecorder::new();
        let diff = slots.apply(&plan, &table);
        for slot in diff.dial.iter().filter_map(|url| slots.get(url)) {
            let req = slot.filter(&[Kind::TextNote], None); // sent to slot.url as a REQ
            let authors = req.authors.as_ref().map_or(0, |a| a.len());
            recorder.asked(&slot.url, slot.authors.iter().copied(), slot.generation);
            if slot.url == "wss://down.example" {
                println!("  {}: {authors} author(s), connection refused", slot.url);
                recorder.failed(&slot.url, "connection refused");
                recorder.closed(&slot.url);
            } else {
                println!("  {}: {authors} author(s), answered", slot.url);
                for keys in &follows {
                    let note = EventBuilder::new(Kind::TextNote, "gm").finalize(keys)?;
                    recorder.event(&slot.url, &note); // only asked authors count
                }
                recorder.eose(&slot.url, slot.generation, true);
            }
        }

        // What came back, learned: the next plan knows it.
        if let Some(round) = recorder.take_round() {
            stats.record_round(&round, now);
        }
        for url in ["wss://hub.example", "wss://down.example"] {
            println!("  learned: {url} answers {:.2}", stats.get(url).live_mean());
        }
    }
    Ok(())
}

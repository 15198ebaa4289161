//! Embedding the router in a client: relay-list events in, REQ filters out.
//!
//! Run with `cargo run -p outbox-strategies --example embed`.

use nostr::event::{FinalizeEvent, IntoEventBuilder, Kind};
use nostr::key::Keys;
use nostr::nips::nip65::{RelayList, RelayMetadata};
use nostr::types::{RelayUrl, Timestamp};
use outbox_core::{RouteTableBuilder, Router, RouterConfig};

const CONFIG: &str = r#"
max_connections = 2

[strategy]
type = "greedy"
coverage_target = 1
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Make sure every built-in strategy is registered in this binary.
    outbox_strategies::link();

    // Three followed authors and their signed kind:10002 relay lists, as fetched from relays.
    let follows: Vec<Keys> = (0..3).map(|_| Keys::generate()).collect();
    let lists = [
        vec!["wss://hub.example", "wss://alice.example"],
        vec!["wss://hub.example"],
        vec!["wss://carol.example"],
    ];
    let mut events = Vec::new();
    for (keys, relays) in follows.iter().zip(&lists) {
        let entries = relays
            .iter()
            .map(|url| Ok((RelayUrl::parse(url)?, Some(RelayMetadata::Write))))
            .collect::<Result<Vec<_>, nostr::error::Error>>()?;
        events.push(
            RelayList::new(entries)
                .into_event_builder()
                .finalize(keys)?,
        );
    }

    // 1. Build the route table: follows, the reader's own relays, and the lists.
    let config = RouterConfig::from_toml(CONFIG)?;
    let mut builder = RouteTableBuilder::new(config.url_policy.clone())
        .follows(follows.iter().map(Keys::public_key))
        .reader_relays(["wss://home.example"]);
    for event in &events {
        builder.add_event(event);
    }
    let table = builder.build();

    // 2. Load the strategy named in the config and plan.
    let mut router = Router::from_config(&config);
    let plan = router.plan(&table, 0);

    // 3. Turn the plan into one REQ filter per relay.
    let since = Timestamp::from_secs(Timestamp::now().as_secs() - 7 * 24 * 3600);
    for (relay, filter) in plan.to_filters(&table, &[Kind::TextNote], Some(since)) {
        let authors = filter.authors.as_ref().map_or(0, |a| a.len());
        println!("{relay}: {authors} author(s)");
    }
    println!(
        "{} routed relays, {} follow(s) on the reader's relays",
        plan.routed().len(),
        plan.residual().len()
    );
    Ok(())
}

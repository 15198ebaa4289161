//! Other clients on the live bench's world: each reads the follows' notes from the same local
//! relays, and the bench scores what it returned with the simulator's definitions and counts
//! the relays it asked from the relays' own logs. Two stand-in clients: one that asks every
//! relay the lists name, one that asks nothing.

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::types::Timestamp;
use nostr_outbox_core::UrlPolicy;
use nostr_outbox_live::clients::{ClientFuture, ClientRun, ClientSession, LiveClient};
use nostr_outbox_live::{run_live_with_clients, LiveConfig, LiveStrategy};
use nostr_outbox_runtime::{fetch_events, Client, RuntimeConfig};
use nostr_outbox_sim::{generate, Profile, Window};

/// Asks every relay the follows' lists name (and the reader's) for each read, as one lookup.
struct EveryRelay;

impl LiveClient for EveryRelay {
    fn label(&self) -> String {
        "every relay".into()
    }

    fn run<'a>(&'a self, session: ClientSession<'a>) -> ClientFuture<'a> {
        Box::pin(async move {
            let policy = UrlPolicy::allow_local();
            let mut relays: Vec<String> = session.reader_relays.to_vec();
            for list in session.relay_lists {
                for tag in list.tags.iter() {
                    let tag = tag.as_slice();
                    if tag.first().map(String::as_str) == Some("r") {
                        if let Some(url) = tag.get(1).and_then(|u| policy.canonicalize(u).ok()) {
                            if !relays.contains(&url) {
                                relays.push(url);
                            }
                        }
                    }
                }
            }
            // No relay is cut off after the first answered: on a busy machine the others
            // may answer later, and the read should still hold all they return.
            let client = Client::new(RuntimeConfig {
                eose_timeout: session.read_timeout,
                lookup_grace: session.read_timeout,
                ..RuntimeConfig::default()
            });
            let mut reads = Vec::new();
            for (_, since) in session.reads {
                let filter = Filter::new()
                    .authors(session.follows.iter().copied())
                    .kind(Kind::TextNote)
                    .since(Timestamp::from(*since))
                    .limit(session.max_events);
                reads.push(fetch_events(&relays, &filter, &client).await);
            }
            ClientRun {
                reads,
                dialled: relays.len(),
            }
        })
    }
}

/// Asks nothing: a client the bench must score at zero.
struct Idle;

impl LiveClient for Idle {
    fn label(&self) -> String {
        "idle".into()
    }

    fn run<'a>(&'a self, session: ClientSession<'a>) -> ClientFuture<'a> {
        // Nothing to wait for: the run is over at once.
        let reads = session.reads.iter().map(|_| Vec::new()).collect();
        Box::pin(std::future::ready(ClientRun { reads, dialled: 0 }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_clients_are_scored_beside_the_runtime() {
    nostr_outbox_strategies::link();
    let strategy = LiveStrategy::from_toml(
        "greedy",
        "max_connections = 20\n[strategy]\ntype = \"greedy\"\n",
    )
    .expect("a registered strategy");
    let cfg = LiveConfig {
        sessions: 2,
        one_plan: true,
        delay: false,
        port_hint: 29_000,
        ..LiveConfig::default()
    };
    let clients: Vec<Box<dyn LiveClient>> = vec![Box::new(EveryRelay), Box::new(Idle)];
    let report = run_live_with_clients(
        generate(Profile::Small, 1),
        std::slice::from_ref(&strategy),
        &clients,
        &cfg,
        |_| {},
    )
    .await
    .expect("the live bench runs");
    assert_eq!(report.clients.len(), 2, "one row per client");
    let row = |label: &str| {
        report
            .clients
            .iter()
            .find(|c| c.label == label)
            .unwrap_or_else(|| panic!("no row for {label}"))
    };
    let every = row("every relay");
    let idle = row("idle");
    assert_eq!(every.sessions.len(), 2);
    for s in &every.sessions {
        let year = s.window(Window::Y1).expect("the year was read");
        assert!(year.declared_recall > 0.5, "{s:?}");
        assert!(s.notes > 0);
        assert!(s.asked > 0 && s.asked <= s.dialled, "{s:?}");
    }
    for s in &idle.sessions {
        let year = s.window(Window::Y1).expect("the year was read");
        assert_eq!(year.declared_recall, 0.0, "{s:?}");
        assert_eq!((s.asked, s.notes), (0, 0), "{s:?}");
    }
}

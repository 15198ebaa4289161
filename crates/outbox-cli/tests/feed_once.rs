//! `outbox feed --once` end to end: the binary against real relays (nostr-relay-builder's local
//! relay) on 127.0.0.1, relay lists discovered from the reader's relay, a summary on stderr and
//! learned stats on disk. Prints the measured run.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use nostr::event::{Event, EventBuilder, FinalizeEvent, Kind, Tag};
use nostr::key::{Keys, SecretKey};
use nostr::nips::nip19::ToBech32;
use nostr::types::Timestamp;
use nostr_relay_builder::prelude as rb;

struct Relay {
    url: String,
    db: Arc<rb::MemoryDatabase>,
    _relay: rb::LocalRelay,
}

impl Relay {
    async fn start() -> Self {
        let db = Arc::new(rb::MemoryDatabase::with_opts(rb::MemoryDatabaseOptions {
            events: true,
            max_events: None,
        }));
        let relay = rb::LocalRelay::new(rb::RelayBuilder::default().database(db.clone()));
        relay.run().await.unwrap();
        let url = relay
            .url()
            .await
            .to_string()
            .trim_end_matches('/')
            .to_string();
        Self {
            url,
            db,
            _relay: relay,
        }
    }

    async fn store(&self, event: &Event) {
        use rb::{JsonUtil, NostrDatabase};
        let theirs = rb::Event::from_json(event.as_json()).unwrap();
        self.db.save_event(&theirs).await.unwrap();
    }
}

fn key(n: u32) -> Keys {
    let mut sk = [0x21u8; 32];
    sk[28..].copy_from_slice(&n.to_be_bytes());
    Keys::new(SecretKey::from_slice(&sk).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_once_against_local_relays_prints_a_summary_and_saves_stats() {
    const FOLLOWS: u32 = 60;
    const ROUTED: usize = 8;
    const NOTES_PER_AUTHOR: u64 = 10;
    let reader = Relay::start().await;
    let mut routed = Vec::new();
    for _ in 0..ROUTED {
        routed.push(Relay::start().await);
    }
    let now = Timestamp::now().as_secs();
    let mut expected_notes = 0usize;
    let mut follows = Vec::new();
    for i in 0..FOLLOWS {
        let k = key(i);
        // Half as npub, half as hex: both are accepted.
        follows.push(if i % 2 == 0 {
            k.public_key().to_bech32().unwrap()
        } else {
            k.public_key().to_hex()
        });
        // Every fifth follow has no list and writes to the reader's relay.
        let writes: Vec<&Relay> = if i % 5 == 0 {
            vec![&reader]
        } else {
            let a = &routed[i as usize % ROUTED];
            let b = &routed[(i as usize * 7 + 3) % ROUTED];
            let tags = [a, b].map(|r| Tag::parse(["r", r.url.as_str()]).unwrap());
            let list = EventBuilder::new(Kind::RelayList, "")
                .tags(tags)
                .custom_created_at(Timestamp::from(now - 1000))
                .finalize(&k)
                .unwrap();
            reader.store(&list).await;
            vec![a, b]
        };
        for n in 0..NOTES_PER_AUTHOR {
            let note = EventBuilder::new(Kind::TextNote, format!("note {n} of {i}"))
                .custom_created_at(Timestamp::from(now - 60 - n * 3600))
                .finalize(&k)
                .unwrap();
            for r in &writes {
                r.store(&note).await;
            }
            expected_notes += 1;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let follows_file = dir.path().join("follows.txt");
    std::fs::write(&follows_file, follows.join("\n")).unwrap();
    let stats = dir.path().join("stats.json");
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        "max_connections = 8\n[strategy]\ntype = \"greedy\"\ncoverage_target = 2\n",
    )
    .unwrap();

    let started = Instant::now();
    let output = tokio::task::spawn_blocking({
        let (reader_url, follows_file, stats, config) = (
            reader.url.clone(),
            follows_file.clone(),
            stats.clone(),
            config.clone(),
        );
        move || {
            Command::new(env!("CARGO_BIN_EXE_outbox"))
                .args(["feed", "--once", "--allow-local", "--since", "7d"])
                .args(["--relays", &reader_url])
                .arg("--follows")
                .arg(&follows_file)
                .arg("--config")
                .arg(&config)
                .arg("--stats")
                .arg(&stats)
                .args(["--connect-timeout", "2s", "--eose-timeout", "3s"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");
    eprintln!("measured `outbox feed --once` ({wall:?} wall):\n{stderr}");

    let notes = stdout.lines().count();
    assert_eq!(notes, expected_notes, "every note of every follow, once");
    assert!(stderr.contains(&format!("events:              {expected_notes}")));
    assert!(stderr.contains(&format!("authors covered:     {FOLLOWS}/{FOLLOWS}")));
    assert!(stderr.contains(&format!("relay lists:         {}", FOLLOWS - FOLLOWS / 5)));
    assert!(stderr.contains("time to first event: ") && !stderr.contains("first event: -"));
    let saved = std::fs::read_to_string(&stats).expect("stats written");
    for r in &routed {
        if stdout.contains(&format!("[{}]", r.url)) {
            assert!(saved.contains(&r.url), "{} learned", r.url);
        }
    }
    assert!(dir.path().join("stats.json.penalties.json").exists());
}

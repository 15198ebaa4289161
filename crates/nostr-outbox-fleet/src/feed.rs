//! Collecting a feed's channel, bounded waits, and one-shot feeds run to the end.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nostr::event::{Event, EventId};
use nostr_outbox_runtime::{
    start, Client, FeedEvent, FeedHandle, FeedInput, FeedSummary, RuntimeConfig, Status,
};
use tokio::sync::mpsc;

/// Everything the feed channel carried, collected by a drain task.
#[derive(Default, Debug)]
pub struct Collected {
    /// Every note, by id, with the relay it came from (the first to send it).
    pub notes: BTreeMap<EventId, (Event, String)>,
    /// Every note a probe found after the fetch (`FeedEvent::Found`), by id, with the probed
    /// relay.
    pub found: BTreeMap<EventId, (Event, String)>,
    /// Every status, in order.
    pub statuses: Vec<Status>,
    /// The feed channel closed: the coordinator ended and everything it sent is here.
    pub closed: bool,
}

/// Drains the feed channel into shared storage, so a test can look while the feed runs.
pub fn drain(mut rx: mpsc::Receiver<FeedEvent>) -> Arc<Mutex<Collected>> {
    let out = Arc::new(Mutex::new(Collected::default()));
    let sink = out.clone();
    tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            let mut c = sink.lock().unwrap();
            match ev {
                FeedEvent::Note { event, relay } => {
                    c.notes.insert(event.id, (*event, relay));
                }
                FeedEvent::Found { event, relay } => {
                    c.found.insert(event.id, (*event, relay));
                }
                FeedEvent::Status(s) => c.statuses.push(s),
            }
        }
        sink.lock().unwrap().closed = true;
    });
    out
}

/// Polls `pred` until it holds or `within` passed; whether it held. For conditions outside a
/// feed's channel (a relay's counter, a server's connections).
pub async fn wait_until(within: Duration, pred: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if pred() {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits (bounded) until `pred` holds on the collected output; whether it held.
pub async fn wait_for(
    collected: &Arc<Mutex<Collected>>,
    within: Duration,
    pred: impl Fn(&Collected) -> bool,
) -> bool {
    wait_until(within, || pred(&collected.lock().unwrap())).await
}

/// Runs a `--once` feed to the end, bounded by `within`, and waits until everything it sent
/// has been collected.
pub async fn run_once(
    handle: FeedHandle,
    collected: &Arc<Mutex<Collected>>,
    within: Duration,
) -> FeedSummary {
    let summary = tokio::time::timeout(within, handle.wait())
        .await
        .expect("the feed completes within its timeouts");
    assert!(
        wait_for(collected, Duration::from_secs(5), |c| c.closed).await,
        "the feed channel closes when the feed ends"
    );
    summary
}

/// The tests' config for a feed whose relay lists the test gives: [`RuntimeConfig::fast_for_tests`]
/// without list discovery, one-shot or continuing as `once` says.
pub fn given_lists(once: bool) -> RuntimeConfig {
    RuntimeConfig {
        once,
        discover_lists: false,
        ..RuntimeConfig::fast_for_tests()
    }
}

/// Starts a feed of `input` on a new [`Client`] with `config` and drains its channel.
pub async fn start_drained(
    input: FeedInput,
    config: RuntimeConfig,
) -> (FeedHandle, Arc<Mutex<Collected>>) {
    let (handle, rx) = start(input, &Client::new(config)).await;
    (handle, drain(rx))
}

/// Waits (bounded to ten seconds) until the note `id` was collected; whether it was.
pub async fn wait_for_note(collected: &Arc<Mutex<Collected>>, id: &EventId) -> bool {
    wait_for(collected, Duration::from_secs(10), |c| {
        c.notes.contains_key(id)
    })
    .await
}

/// How long [`start_once`] lets a one-shot feed run: a guard against a hung feed, far beyond
/// the test configs' timeouts and a loaded machine.
pub const ONCE_WITHIN: Duration = Duration::from_secs(120);

/// Starts a one-shot feed of `input` on a new [`Client`] with `config` (`once` set), runs it to
/// the end within [`ONCE_WITHIN`] and returns its summary and everything its channel carried.
pub async fn start_once(input: FeedInput, config: RuntimeConfig) -> (FeedSummary, Collected) {
    let config = RuntimeConfig {
        once: true,
        ..config
    };
    start_once_on(input, &Client::new(config)).await
}

/// [`start_once`] on a client the test built (a signer, a socket budget, shared sockets); its
/// config must say `once`.
pub async fn start_once_on(input: FeedInput, client: &Client) -> (FeedSummary, Collected) {
    assert!(client.config().once, "start_once_on runs one-shot feeds");
    let (handle, rx) = start(input, client).await;
    let out = drain(rx);
    let summary = run_once(handle, &out, ONCE_WITHIN).await;
    let collected = std::mem::take(&mut *out.lock().unwrap());
    (summary, collected)
}

/// How long [`start_settled`] waits for a continuing feed to settle: a guard against a feed
/// that never does, far beyond the test configs' timeouts and a loaded machine.
pub const SETTLED_WITHIN: Duration = Duration::from_secs(30);

/// Starts a continuing feed of `input` on `client`, drains its channel and waits until the
/// feed reported `Status::Settled` (panics if it did not within [`SETTLED_WITHIN`]): the
/// point after which a test publishes live notes or changes lists.
pub async fn start_settled(
    input: FeedInput,
    client: &Client,
) -> (FeedHandle, Arc<Mutex<Collected>>) {
    let (handle, rx) = start(input, client).await;
    let out = drain(rx);
    let settled = wait_for(&out, SETTLED_WITHIN, |c| {
        c.statuses.contains(&Status::Settled)
    })
    .await;
    assert!(settled, "the feed settled");
    (handle, out)
}

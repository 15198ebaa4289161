//! A running feed's handle.

use nostr::event::Kind;
use nostr::filter::Filter;
use nostr::key::PublicKey;
use nostr::types::Timestamp;
use nostr_outbox_client::routes::{FilterQuery, RouteBudget, RoutePlan};
use nostr_outbox_core::RawRelayList;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::control::{Control, SubscribeError};
use super::summary::FeedSummary;
use crate::asks::route_feed::{start_route, RouteEvent, RouteFeed};
use crate::client::Client;

/// A client's own subscription on a running feed's sockets ([`FeedHandle::subscribe`]).
#[derive(Debug)]
pub struct Subscription {
    /// Where it asks, and why.
    pub plan: RoutePlan,
    /// Stop it with [`RouteFeed::shutdown`] (or let it end at EOSE with `once`).
    pub feed: RouteFeed,
    /// Verified events that match the filter, each once, with EOSE and failures per relay.
    pub events: mpsc::Receiver<RouteEvent>,
}

/// Controls a running feed.
#[derive(Debug)]
pub struct FeedHandle {
    control: mpsc::UnboundedSender<Control>,
    task: JoinHandle<FeedSummary>,
    /// The feed's client: subscriptions share its sockets, knobs and signer.
    client: Client,
    reader_relays: Vec<String>,
    /// How the feed's relays fit the socket budget: in turns no link may hold a place for
    /// good, so the reader's follow list is looked up each turn rather than subscribed to.
    places: crate::Places,
}

impl FeedHandle {
    /// The handle of the feed whose task is `task`, told what to do through `control`.
    pub(crate) fn new(
        control: mpsc::UnboundedSender<Control>,
        task: JoinHandle<FeedSummary>,
        client: Client,
        reader_relays: Vec<String>,
        places: crate::Places,
    ) -> Self {
        Self {
            places,
            control,
            task,
            client,
            reader_relays,
        }
    }

    /// Opens a subscription for `filter`, routed by what it names over the relay lists the
    /// feed knows and what it learned ([`FilterQuery`]): `authors` to their write relays,
    /// `#p` to the tagged people's read relays, and always the reader's relays. It runs on the
    /// feed's sockets (a relay the feed holds is not dialled again), live unless the feed is
    /// `once`; close it with [`RouteFeed::shutdown`].
    ///
    /// ```no_run
    /// # async fn demo(router: nostr_outbox_core::Router, follows: Vec<nostr::key::PublicKey>) {
    /// use nostr::{event::Kind, filter::Filter};
    /// use nostr_outbox_runtime::{Client, FeedInput, RouteEvent, RuntimeConfig, SocketBudget};
    /// let client = Client::with(RuntimeConfig::default(), SocketBudget::mobile(), None);
    /// let input = FeedInput::new(router, follows.clone(), ["wss://relay.example"]);
    /// let (feed, _notes) = nostr_outbox_runtime::start(input, &client).await;
    /// // Reactions to the follows' notes, on the feed's sockets.
    /// let filter = Filter::new().authors(follows).kind(Kind::Reaction);
    /// let mut reactions = feed.subscribe(filter).await.expect("a relay to ask");
    /// while let Some(RouteEvent::Note { event, relay }) = reactions.events.recv().await {
    ///     println!("{relay}: {}", event.content);
    /// }
    /// # }
    /// ```
    pub async fn subscribe(&self, filter: Filter) -> Result<Subscription, SubscribeError> {
        self.subscribe_with(filter, RouteBudget::default()).await
    }

    /// [`subscribe`](Self::subscribe) within `budget` relays.
    pub async fn subscribe_with(
        &self,
        filter: Filter,
        budget: RouteBudget,
    ) -> Result<Subscription, SubscribeError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let query = Box::new(FilterQuery::new(filter, &self.reader_relays));
        self.control
            .send(Control::Route {
                query,
                budget,
                reply,
            })
            .map_err(|_| SubscribeError::Ended)?;
        let plan = answer.await.map_err(|_| SubscribeError::Ended)??;
        let (feed, events) = start_route(&plan, &self.client);
        Ok(Subscription { plan, feed, events })
    }

    /// Adds relay lists learned elsewhere; the feed re-plans (debounced) and applies the diff.
    pub fn add_relay_lists(&self, lists: Vec<RawRelayList>) {
        let _ = self.control.send(Control::AddLists(lists));
    }

    /// Replaces the follow list; the feed re-plans.
    pub fn set_follows(&self, follows: Vec<PublicKey>) {
        let _ = self.control.send(Control::SetFollows(follows));
    }

    /// Keeps the follows in step with `reader`'s follow list (kind:3) while the feed is open:
    /// a live subscription for its lists newer than `since` (the one the follows came from) on
    /// the relays they come from (the reader's relays, and its write relays when its relay list
    /// is known), dialled again with backoff when lost. Each newer list replaces the follows
    /// ([`set_follows`](Self::set_follows)): the feed looks up the new follows' relay lists
    /// and re-plans at once. An empty list is ignored (a client that lost the list publishes
    /// one). The subscription ends with the feed. A `once` feed has nothing to keep in step.
    pub async fn follow_contact_list(
        &self,
        reader: PublicKey,
        since: Timestamp,
    ) -> Result<(), SubscribeError> {
        if self.client.config().once {
            return Ok(());
        }
        let filter = Filter::new()
            .author(reader)
            .kind(Kind::ContactList)
            .since(since);
        if let crate::Places::Turns { every, .. } = self.places {
            self.poll_contact_list(reader, since, every);
            return Ok(());
        }
        let Subscription {
            feed, mut events, ..
        } = self.subscribe(filter).await?;
        let control = self.control.clone();
        tokio::spawn(async move {
            let mut newest = since;
            loop {
                let event = tokio::select! {
                    _ = control.closed() => break,
                    event = events.recv() => event,
                };
                let event = match event {
                    Some(RouteEvent::Note { event, .. }) => event,
                    Some(_) => continue,
                    None => break,
                };
                if !newer_follows(&control, &event, reader, &mut newest) {
                    break;
                }
            }
            feed.shutdown().await;
        });
        Ok(())
    }

    /// [`follow_contact_list`](Self::follow_contact_list) in turns: the reader's relays asked
    /// for a newer kind:3 every `every` (a short lookup, its sockets given back), so a change
    /// is seen within a turn without a place held for good.
    fn poll_contact_list(&self, reader: PublicKey, since: Timestamp, every: std::time::Duration) {
        let control = self.control.clone();
        let client = self.client.clone();
        let relays = self.reader_relays.clone();
        tokio::spawn(async move {
            let mut newest = since;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = control.closed() => break,
                    _ = tick.tick() => {}
                }
                let filter = Filter::new()
                    .author(reader)
                    .kind(Kind::ContactList)
                    .since(newest);
                let found = crate::asks::lookup::lookup(&relays, &filter, &client).await;
                let newest_found = (found.events.iter())
                    .filter(|e| e.kind == Kind::ContactList && e.pubkey == reader)
                    .max_by_key(|e| e.created_at);
                if let Some(event) = newest_found {
                    if !newer_follows(&control, event, reader, &mut newest) {
                        break;
                    }
                }
            }
        });
    }

    /// Asks the feed to end (every slot closed, stats saved) without waiting; keep draining
    /// the channel until it closes, then [`wait`](Self::wait) for the summary.
    pub fn request_shutdown(&self) {
        let _ = self.control.send(Control::Shutdown);
    }

    /// Closes every slot, saves the stats and returns the summary. The channel must still be
    /// drained (or dropped) meanwhile, as the feed may be waiting to deliver.
    pub async fn shutdown(self) -> FeedSummary {
        let _ = self.control.send(Control::Shutdown);
        self.wait().await
    }

    /// Waits for the feed to end by itself (`once` mode) and returns the summary.
    pub async fn wait(self) -> FeedSummary {
        let FeedHandle { control, task, .. } = self;
        let summary = task.await;
        drop(control);
        match summary {
            Ok(summary) => summary,
            // The coordinator does not panic on bad input; a panic here is a bug, surfaced.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("feed task cancelled: {e}"),
        }
    }
}

/// `event`, when it is the reader's follow list newer than `newest`, replaces the feed's
/// follows (an empty list is ignored: a client that lost the list publishes one). `false` once
/// the feed is gone.
fn newer_follows(
    control: &mpsc::UnboundedSender<Control>,
    event: &nostr::event::Event,
    reader: PublicKey,
    newest: &mut Timestamp,
) -> bool {
    if event.kind != Kind::ContactList || event.pubkey != reader || event.created_at <= *newest {
        return true;
    }
    *newest = event.created_at;
    let follows = nostr_outbox_core::follows_from_contact_list(event);
    if follows.is_empty() {
        tracing::warn!("the reader published an empty follow list; ignored");
        return true;
    }
    tracing::info!(follows = follows.len(), "the reader's follow list changed");
    control.send(Control::SetFollows(follows)).is_ok()
}

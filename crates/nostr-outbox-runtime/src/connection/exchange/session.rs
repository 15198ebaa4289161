//! Many asks on one link: the one reader of a link's frames (see the [module docs](super)).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::Duration;

use nostr::event::Event;
use nostr::message::RelayMessage;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::{timeout_at, Instant};
use tokio_tungstenite::tungstenite::Message;

use super::{admit, parse, Answer, Ask, Counted, Ended, FrameDrop, SignIn, Step};
use crate::client::Client;
use crate::connection::refusal::{Refusal, MAX_RATE_LIMITED_RESENDS};
use crate::connection::sockets::{Link, Read};
use crate::dedup::Dedup;

/// Event ids remembered per `REQ` to recognise an event sent again on it: a page's answer (at
/// most its limit when the relay is honest) and the newest live notes.
pub const MAX_SEEN_PER_SUB: usize = 10_000;

/// Subscription ids of closed asks remembered per link, so a late answer to one is told from
/// an answer to an id never issued; the oldest are forgotten first.
pub(crate) const MAX_CLOSED_ASKS: usize = 4_096;

/// One ask of a [`Session`]; never reused on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct AskId(u64);

/// What [`Session::next`] heard.
#[derive(Debug)]
pub(crate) enum Heard {
    /// An answer to one ask.
    Answer(AskId, Answer),
    /// A frame or event was dropped ([`admit`]): reported by callers that count them.
    Dropped(FrameDrop),
    /// The relay accepted the sign-in this link asked for.
    SignedIn,
    /// The link is over for every ask on it; heard again on every later call.
    Broken(Broken),
}

/// Why a link is over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Broken {
    /// The socket ended, or a frame could not be sent (not escaped).
    Lost(String),
    /// More valid but unrequested events than the config allows (policed links only).
    Flooded(u64),
    /// More unreadable or bad frames than the config allows (policed links only).
    BadFrames(u32),
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Lost(why) => f.write_str(why),
            Broken::Flooded(n) => write!(f, "{n} unrequested events"),
            Broken::BadFrames(n) => write!(f, "{n} bad frames"),
        }
    }
}

/// Why an ask is not on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Hold {
    /// Not sent yet: a sign-in is under way or a rate limit is waited out.
    New,
    /// Refused `auth-required:` (the relay's text): sent again once signed in.
    SignIn(String),
    /// Refused `rate-limited:`: sent again when the wait is over.
    RateLimited,
}

/// One ask and where it stands.
struct Open {
    ask: Ask,
    /// How long an answer may take after each send.
    wait: Duration,
    /// When the answer is due; `None` once answered (or live).
    deadline: Option<Instant>,
    /// `Some` while not on the wire.
    held: Option<Hold>,
    /// A `REQ`'s stored events are in: new ones come without a deadline or a cap.
    live: bool,
    /// Stored events read so far (against the `REQ`'s cap).
    read: usize,
    /// Sent after the relay accepted the sign-in: a second `auth-required:` is final.
    signed_in: bool,
    /// Ids the relay sent on this `REQ`: the same id again is a replay.
    seen: Dedup,
}

impl Open {
    /// Its subscription id, if it has one.
    fn sub(&self) -> Option<&str> {
        match &self.ask {
            Ask::Req { sub, .. } | Ask::Count { sub, .. } | Ask::Sync { sub, .. } => {
                Some(sub.as_str())
            }
            Ask::Event(_) => None,
        }
    }
}

/// Counts valid events a relay sends outside what was asked, per link.
#[derive(Debug, Default)]
pub(crate) struct FloodGuard {
    /// Events asked for on this link: the sum of the `REQ` limits sent.
    asked: u64,
    /// Unrequested events counted so far.
    unrequested: u64,
    /// Answers to closed subscriptions are not counted until then (they may cross our CLOSE,
    /// or answer a filter just replaced).
    grace_until: Option<Instant>,
}

impl FloodGuard {
    fn in_grace(&self, now: Instant) -> bool {
        self.grace_until.is_some_and(|g| now < g)
    }

    /// Counts one unrequested event; how many once the bound (`max` beyond what was asked)
    /// is passed.
    fn count(&mut self, max: u64) -> Option<u64> {
        self.unrequested += 1;
        (self.unrequested > max.saturating_add(self.asked)).then_some(self.unrequested)
    }
}

/// Subscription ids of closed asks, the newest [`MAX_CLOSED_ASKS`].
#[derive(Default)]
struct Closed {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Closed {
    fn insert(&mut self, sub: &str) {
        if !self.set.insert(sub.to_string()) {
            return;
        }
        self.order.push_back(sub.to_string());
        if self.order.len() > MAX_CLOSED_ASKS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, sub: &str) -> bool {
        self.set.contains(sub)
    }
}

/// Every ask on one link and the relay's answers, routed by subscription id (or event id for
/// an `OK`); the link's one sign-in and one rate-limit budget (see the [module docs](super)).
///
/// Asks are bounded by the caller (the relay's subscription limit for the feed's pages, one
/// for every other path); everything else it keeps is bounded here.
pub(crate) struct Session<'l> {
    link: &'l mut Link,
    client: Client,
    asks: BTreeMap<AskId, Open>,
    next: u64,
    /// The link's answer to `auth-required:`, one for all its asks.
    sign_in: SignIn,
    /// `rate-limited:` refusals waited out on this link, all asks together.
    rate_limited: u32,
    /// Nothing is sent before this: a rate limit is waited out.
    paused: Option<Instant>,
    rng: ChaCha8Rng,
    closed: Closed,
    flood: FloodGuard,
    bad_frames: u32,
    /// Floods and bad frames past the config's bounds break the link.
    policed: bool,
    /// Floods break the link ([`Session::flood_guarded`]).
    floods_break: bool,
    /// Heard outside a read (several asks answered at once), given out first.
    queued: VecDeque<Heard>,
    broken: Option<Broken>,
}

impl<'l> Session<'l> {
    /// Asks nothing yet. `seed` draws the rate-limit waits.
    pub(crate) fn new(link: &'l mut Link, client: &Client, seed: u64) -> Self {
        Self {
            link,
            client: client.clone(),
            asks: BTreeMap::new(),
            next: 0,
            sign_in: SignIn::new(client.signer().is_some()),
            rate_limited: 0,
            paused: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
            closed: Closed::default(),
            flood: FloodGuard::default(),
            bad_frames: 0,
            policed: false,
            floods_break: false,
            queued: VecDeque::new(),
            broken: None,
        }
    }

    /// Floods past [`RuntimeConfig::max_unrequested`](crate::RuntimeConfig::max_unrequested)
    /// beyond what was asked, and bad frames past
    /// [`RuntimeConfig::max_bad_frames`](crate::RuntimeConfig::max_bad_frames), break the
    /// link: a reader that keeps a link for long (the feed) must not be made to read forever.
    pub(crate) fn policed(mut self) -> Self {
        self.policed = true;
        self.floods_break = true;
        self
    }

    /// Floods past the same bound break the link (bad frames do not): every read that goes
    /// through an exchange (route feeds, lookups, probes) is guarded against a relay that
    /// replays its stored events or sends what was not asked.
    pub(crate) fn flood_guarded(mut self) -> Self {
        self.floods_break = true;
        self
    }

    /// The link, for what is the socket's rather than an ask's.
    pub(crate) fn link(&mut self) -> &mut Link {
        self.link
    }

    /// Nothing asked, held, waited out or signing in.
    pub(crate) fn is_idle(&self) -> bool {
        self.asks.is_empty() && self.paused.is_none() && !self.sign_in.waiting()
    }

    /// Sends `ask` (or holds it while a sign-in or a rate limit is under way); its answer is
    /// due within `wait` of each send. An ask that cannot be encoded ends at once, as lost.
    pub(crate) async fn ask(&mut self, ask: Ask, wait: Duration) -> Result<AskId, Broken> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        let id = AskId(self.next);
        self.next += 1;
        if let Ask::Req { filters, .. } = &ask {
            let limits: u64 = filters
                .iter()
                .map(|f| f.limit.map_or(0, |l| l as u64))
                .fold(0, u64::saturating_add);
            self.flood.asked = self.flood.asked.saturating_add(limits);
        }
        self.asks.insert(
            id,
            Open {
                ask,
                wait,
                deadline: None,
                held: Some(Hold::New),
                live: false,
                read: 0,
                signed_in: false,
                seen: Dedup::new(MAX_SEEN_PER_SUB),
            },
        );
        if !self.holding() {
            self.send(id).await?;
        }
        Ok(id)
    }

    /// Ends an ask: a `REQ` with `CLOSE`, a reconciliation with `NEG-CLOSE` (when on the
    /// wire); its late answers are then dropped quietly for a while.
    pub(crate) async fn close(&mut self, id: AskId) -> Result<(), Broken> {
        let Some(open) = self.asks.remove(&id) else {
            return Ok(());
        };
        if let Some(sub) = open.sub() {
            self.closed.insert(sub);
        }
        let grace = self.client.config().eose_timeout;
        self.flood.grace_until = Some(crate::deadline::after(grace));
        if open.held.is_some() {
            return Ok(());
        }
        let frame = match &open.ask {
            Ask::Req { sub, .. } => nostr::message::ClientMessage::close(sub.clone()).as_json(),
            Ask::Sync { sub, .. } => serde_json::json!(["NEG-CLOSE", sub.as_str()]).to_string(),
            Ask::Event(_) | Ask::Count { .. } => return Ok(()),
        };
        self.write(frame).await
    }

    /// Answers to ask `id` are due within `wait` of its next send (the first answer's wait
    /// was short: the relay had yet to show it speaks what was asked).
    pub(crate) fn rewait(&mut self, id: AskId, wait: Duration) {
        if let Some(open) = self.asks.get_mut(&id) {
            open.wait = wait;
        }
    }

    /// Our next negentropy message of an [`Ask::Sync`]; its answer is due anew.
    pub(crate) async fn reply(&mut self, id: AskId, message: &[u8]) -> Result<(), Broken> {
        let Some(open) = self.asks.get_mut(&id) else {
            return Ok(());
        };
        let Ask::Sync { sub, .. } = &open.ask else {
            return Ok(());
        };
        let frame = serde_json::json!(["NEG-MSG", sub.as_str(), hex::encode(message)]);
        open.deadline = Some(crate::deadline::after(open.wait));
        self.write(frame.to_string()).await
    }

    /// What the relay said next, or what the link did. Cancel-safe: a caller may race it
    /// against its own work, and nothing heard is lost.
    pub(crate) async fn next(&mut self) -> Heard {
        loop {
            if let Some(heard) = self.queued.pop_front() {
                return heard;
            }
            if let Some(broken) = &self.broken {
                return Heard::Broken(broken.clone());
            }
            let now = Instant::now();
            if self.paused.is_some_and(|p| p <= now) {
                self.paused = None;
                if let Err(broken) = self.send_held().await {
                    return Heard::Broken(broken);
                }
                continue;
            }
            if let Some(heard) = self.expired(now) {
                return heard;
            }
            let wake = self
                .asks
                .values()
                .filter_map(|o| o.deadline)
                .chain(self.paused)
                .min();
            let read = match wake {
                Some(wake) => match timeout_at(wake, self.link.recv()).await {
                    Ok(read) => read,
                    Err(_) => continue,
                },
                None => self.link.recv().await,
            };
            if let Some(heard) = self.read(read).await {
                return heard;
            }
        }
    }

    /// Whether new asks wait: the relay would refuse them now.
    fn holding(&self) -> bool {
        self.sign_in.waiting() || self.paused.is_some()
    }

    /// The first ask whose answer is overdue, ended.
    fn expired(&mut self, now: Instant) -> Option<Heard> {
        let (id, open) = self
            .asks
            .iter_mut()
            .find(|(_, o)| o.deadline.is_some_and(|d| d <= now))?;
        let id = *id;
        open.deadline = None;
        if matches!(open.held, Some(Hold::SignIn(_))) {
            let message = self.sign_in.timed_out();
            return self.end(
                id,
                Ended::Refused {
                    refusal: Refusal::SignIn,
                    message,
                },
            );
        }
        Some(Heard::Answer(
            id,
            Answer::Ended(Ended::TimedOut(late(&open.ask))),
        ))
    }

    /// Sends ask `id` (again): its answer is due within its wait, except that waiting out a
    /// rate limit does not stretch an answer's deadline, and a live `REQ` has none.
    async fn send(&mut self, id: AskId) -> Result<(), Broken> {
        let signed_in = self.sign_in.is_signed_in();
        let Some(open) = self.asks.get_mut(&id) else {
            return Ok(());
        };
        let held = open.held.take();
        open.signed_in = signed_in;
        if !open.live && (held != Some(Hold::RateLimited) || open.deadline.is_none()) {
            open.deadline = Some(crate::deadline::after(open.wait));
        }
        match open.ask.json() {
            Ok(json) => self.write(json).await,
            Err(e) => {
                self.forget(id);
                let ended = Ended::Lost(format!("cannot encode the request: {e}"));
                self.queued
                    .push_back(Heard::Answer(id, Answer::Ended(ended)));
                Ok(())
            }
        }
    }

    /// Sends every held ask, oldest first, unless the relay would refuse them now.
    async fn send_held(&mut self) -> Result<(), Broken> {
        if self.holding() {
            return Ok(());
        }
        let held: Vec<AskId> = self
            .asks
            .iter()
            .filter(|(_, o)| o.held.is_some())
            .map(|(id, _)| *id)
            .collect();
        for id in held {
            self.send(id).await?;
        }
        Ok(())
    }

    async fn write(&mut self, json: String) -> Result<(), Broken> {
        match self.link.send(Message::text(json)).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.break_with(Broken::Lost(format!("sending failed: {e}")))),
        }
    }

    fn break_with(&mut self, broken: Broken) -> Broken {
        self.broken.get_or_insert(broken).clone()
    }

    /// Forgets an ask the relay ended (its `CLOSED`, a refusal): later frames for it are late.
    fn forget(&mut self, id: AskId) {
        if let Some(open) = self.asks.remove(&id) {
            if let Some(sub) = open.sub() {
                self.closed.insert(sub);
            }
        }
    }

    /// Ends ask `id` the relay refused or closed.
    fn end(&mut self, id: AskId, ended: Ended) -> Option<Heard> {
        self.forget(id);
        Some(Heard::Answer(id, Answer::Ended(ended)))
    }

    /// One read of the link.
    async fn read(&mut self, read: Option<Result<Read, String>>) -> Option<Heard> {
        let text = match read {
            None => return self.lost("the relay closed the connection".into()),
            Some(Err(why)) => return self.lost(why),
            Some(Ok(Read::SignedIn(result))) => return self.signed_in(result).await,
            Some(Ok(Read::Frame(Message::Text(text)))) => text,
            Some(Ok(Read::Frame(Message::Close(frame)))) => {
                let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                return self.lost(format!("closed by relay {why}"));
            }
            Some(Ok(Read::Frame(Message::Binary(_)))) => return self.bad(FrameDrop::Unparseable),
            Some(Ok(Read::Frame(_))) => return None,
        };
        let msg = match parse(text.as_str(), self.client.config()) {
            Ok(msg) => msg,
            Err(reason) => return self.bad(reason),
        };
        match msg {
            RelayMessage::Event {
                subscription_id,
                event,
            } => self.event(subscription_id.as_str(), event.into_owned()),
            RelayMessage::EndOfStoredEvents(sub) => {
                let id = self.find(sub.as_str())?;
                let open = self.asks.get_mut(&id)?;
                if open.live || !matches!(open.ask, Ask::Req { .. }) {
                    return None;
                }
                open.live = true;
                open.deadline = None;
                Some(Heard::Answer(id, Answer::Eose))
            }
            RelayMessage::Count {
                subscription_id,
                count,
            } => {
                let id = self.find(subscription_id.as_str())?;
                let open = self.asks.get_mut(&id)?;
                if !matches!(open.ask, Ask::Count { .. }) {
                    return None;
                }
                open.deadline = None;
                let approximate = approximate(text.as_str());
                Some(Heard::Answer(
                    id,
                    Answer::Count(Counted {
                        count: count as u64,
                        approximate,
                    }),
                ))
            }
            RelayMessage::NegMsg {
                subscription_id,
                message,
            } => {
                let id = self.find_sync(subscription_id.as_str())?;
                match hex::decode(message.as_bytes()) {
                    Ok(bytes) => Some(Heard::Answer(id, Answer::Reconcile(bytes))),
                    Err(_) => self.end(
                        id,
                        Ended::Refused {
                            refusal: Refusal::Invalid,
                            message: "the relay's negentropy message is not hex".into(),
                        },
                    ),
                }
            }
            // NIP-77's own refusal (`blocked:`, `closed:`, or not supported).
            RelayMessage::NegErr {
                subscription_id,
                message,
            } => {
                let id = self.find_sync(subscription_id.as_str())?;
                self.refused(id, message.into_owned()).await
            }
            RelayMessage::Closed {
                subscription_id,
                message,
            } => {
                let id = self.find(subscription_id.as_str())?;
                tracing::debug!(sub = %subscription_id, reason = %message.chars().take(200).collect::<String>(), "CLOSED");
                self.refused(id, message.into_owned()).await
            }
            RelayMessage::Ok {
                event_id,
                status,
                message,
            } => {
                let id = self.asks.iter().find_map(|(id, o)| match &o.ask {
                    Ask::Event(e) if e.id == event_id && o.held.is_none() => Some(*id),
                    _ => None,
                })?;
                // Only sign-in is answered here; any other refusal, `rate-limited:`
                // included, is the publisher's to retry or not.
                if status || Refusal::of(&message) != Refusal::SignIn {
                    if let Some(open) = self.asks.get_mut(&id) {
                        open.deadline = None;
                    }
                    return Some(Heard::Answer(
                        id,
                        Answer::Ok {
                            accepted: status,
                            message: message.into_owned(),
                        },
                    ));
                }
                self.refused(id, message.into_owned()).await
            }
            RelayMessage::Notice(notice) => {
                tracing::debug!(notice = %notice.chars().take(200).collect::<String>(), refusal = %Refusal::of(&notice), "NOTICE");
                None
            }
            // Challenges and the OK to our AUTH event are the socket's (`sockets::auth`).
            _ => None,
        }
    }

    /// The ask on the wire that subscription id `sub` names.
    /// The reconciliation (NIP-77) ask open on `sub`: a `NEG-MSG` or `NEG-ERR` for any other
    /// is not this session's to read.
    fn find_sync(&self, sub: &str) -> Option<AskId> {
        let id = self.find(sub)?;
        matches!(self.asks.get(&id)?.ask, Ask::Sync { .. }).then_some(id)
    }

    fn find(&self, sub: &str) -> Option<AskId> {
        self.asks
            .iter()
            .find(|(_, o)| o.held.is_none() && o.sub() == Some(sub))
            .map(|(id, _)| *id)
    }

    /// An event on subscription `sub`: passed on when it is an open `REQ`'s, [`admit`]ted
    /// and not sent on it before; otherwise dropped, and counted when the relay should know
    /// better.
    fn event(&mut self, sub: &str, event: Event) -> Option<Heard> {
        let Some(id) = self.find(sub) else {
            if self.closed.contains(sub) || self.asks.values().any(|o| o.sub() == Some(sub)) {
                // Arrived after the subscription ended: harmless (it may cross our CLOSE),
                // unless it keeps coming long after.
                if self.flood.in_grace(Instant::now()) {
                    return None;
                }
                return self.unrequested();
            }
            return self.bad(FrameDrop::Unrequested);
        };
        enum Fate {
            Skip,
            Repeat,
            Check,
            Stray,
        }
        let fate = {
            let open = self.asks.get_mut(&id)?;
            match &open.ask {
                Ask::Req { cap, .. } if !open.live && open.read >= *cap => Fate::Skip,
                Ask::Req { .. } => {
                    if !open.live {
                        open.read += 1;
                    }
                    if open.seen.contains(&event.id) {
                        Fate::Repeat
                    } else {
                        Fate::Check
                    }
                }
                _ => Fate::Stray,
            }
        };
        match fate {
            Fate::Skip => return None,
            // Sent already on this subscription: a replay costs parsing and counts as
            // unrequested; it is not verified again.
            Fate::Repeat => {
                tracing::trace!(id = %event.id, "event sent again on its subscription");
                return self.unrequested();
            }
            Fate::Stray => return self.bad(FrameDrop::Unrequested),
            Fate::Check => {}
        }
        let admitted = match &self.asks.get(&id)?.ask {
            Ask::Req { filters, .. } => admit(event, filters, self.client.config()),
            _ => return None,
        };
        match admitted {
            Ok(event) => {
                if let Some(open) = self.asks.get_mut(&id) {
                    open.seen.insert(event.id);
                }
                Some(Heard::Answer(id, Answer::Event(event)))
            }
            // Not what the subscription asked: counted toward a flood, not as a bad frame.
            Err(FrameDrop::Unrequested) => {
                let flooded = self.unrequested();
                if flooded.is_some() {
                    return flooded;
                }
                Some(Heard::Dropped(FrameDrop::Unrequested))
            }
            Err(reason) => self.bad(reason),
        }
    }

    /// Counts one unrequested event; a policed link breaks past the bound.
    fn unrequested(&mut self) -> Option<Heard> {
        let n = self.flood.count(self.client.config().max_unrequested)?;
        if !self.floods_break {
            return None;
        }
        Some(Heard::Broken(self.break_with(Broken::Flooded(n))))
    }

    /// A dropped frame: said, and counted; a policed link breaks past the bound.
    fn bad(&mut self, reason: FrameDrop) -> Option<Heard> {
        tracing::trace!(?reason, "dropping frame");
        self.bad_frames = self.bad_frames.saturating_add(1);
        if self.policed && self.bad_frames > self.client.config().max_bad_frames {
            self.break_with(Broken::BadFrames(self.bad_frames));
        }
        Some(Heard::Dropped(reason))
    }

    fn lost(&mut self, why: String) -> Option<Heard> {
        Some(Heard::Broken(self.break_with(Broken::Lost(why))))
    }

    /// The relay refused ask `id` (`message`): signed in, waited out, or the end of it.
    async fn refused(&mut self, id: AskId, message: String) -> Option<Heard> {
        match Refusal::of(&message) {
            Refusal::SignIn => self.auth_required(id, message).await,
            Refusal::RateLimited => self.slow_down(id, message),
            refusal => self.end(id, Ended::Refused { refusal, message }),
        }
    }

    /// `auth-required:`: the link signs in once for all its asks (with keys), and each ask
    /// refused meanwhile goes again once it has.
    async fn auth_required(&mut self, id: AskId, message: String) -> Option<Heard> {
        // The socket answers the sign-in within its own two waits (for the challenge, then for
        // the OK): an ask held for it is not given up before, so the answer says why.
        let sign_in_wait = self
            .client
            .config()
            .dial()
            .sign_in_timeout
            .saturating_mul(2);
        let open = self.asks.get_mut(&id)?;
        match self.sign_in.refused(&message, open.signed_in) {
            Step::GiveUp(why) => self.end(
                id,
                Ended::Refused {
                    refusal: Refusal::SignIn,
                    message: why,
                },
            ),
            Step::Retry => match self.send(id).await {
                Ok(()) => None,
                Err(broken) => Some(Heard::Broken(broken)),
            },
            step @ (Step::Ask | Step::Wait) => {
                open.held = Some(Hold::SignIn(message));
                if !open.live {
                    let wait = open.wait.saturating_add(sign_in_wait);
                    open.deadline = Some(crate::deadline::after(wait));
                }
                if step == Step::Ask {
                    tracing::debug!("auth required; asking the socket to sign in");
                    if let Err(e) = self.link.sign_in() {
                        return self.lost(e.to_string());
                    }
                }
                None
            }
        }
    }

    /// The socket's answer to the sign-in: the refused asks go again, or end saying why.
    /// Asks held meanwhile go out either way (a relay that refuses them refuses them then).
    async fn signed_in(&mut self, result: Result<(), String>) -> Option<Heard> {
        match self.sign_in.answered(result) {
            Step::Retry => self.queued.push_back(Heard::SignedIn),
            Step::GiveUp(_) => {
                let why = self.sign_in.failure().unwrap_or_default().to_string();
                let refused: Vec<(AskId, String)> = self
                    .asks
                    .iter()
                    .filter_map(|(id, o)| match &o.held {
                        Some(Hold::SignIn(message)) => Some((*id, message.clone())),
                        _ => None,
                    })
                    .collect();
                for (id, message) in refused {
                    self.forget(id);
                    let ended = Ended::Refused {
                        refusal: Refusal::SignIn,
                        message: format!("{message} ({why})"),
                    };
                    self.queued
                        .push_back(Heard::Answer(id, Answer::Ended(ended)));
                }
            }
            Step::Wait | Step::Ask => return None,
        }
        if let Err(broken) = self.send_held().await {
            return Some(Heard::Broken(broken));
        }
        self.queued.pop_front()
    }

    /// `rate-limited:`: the ask waits the config's backoff and goes again, within its
    /// deadline; the link sends nothing meanwhile, and waits at most
    /// [`MAX_RATE_LIMITED_RESENDS`] times in all. A live `REQ` ends instead (its reader asks
    /// again later, for what is newer).
    fn slow_down(&mut self, id: AskId, message: String) -> Option<Heard> {
        let refused = |why: &str| Ended::Refused {
            refusal: Refusal::RateLimited,
            message: format!("{message}{why}"),
        };
        let open = self.asks.get(&id)?;
        let deadline = match open.deadline {
            Some(deadline) if !open.live => deadline,
            _ => return self.end(id, refused("")),
        };
        if self.rate_limited >= MAX_RATE_LIMITED_RESENDS {
            return self.end(id, refused(""));
        }
        let delay = self
            .client
            .config()
            .backoff
            .delay(self.rate_limited, &mut self.rng);
        self.rate_limited += 1;
        let resume = crate::deadline::after(delay);
        if resume >= deadline {
            return self.end(id, refused(" (no time left to wait)"));
        }
        tracing::debug!(
            delay_ms = delay.as_millis() as u64,
            times = self.rate_limited,
            "rate-limited: asking again later"
        );
        if let Some(open) = self.asks.get_mut(&id) {
            open.held = Some(Hold::RateLimited);
        }
        self.paused = Some(self.paused.map_or(resume, |p| p.max(resume)));
        None
    }
}

/// What no answer in time means for an ask.
fn late(ask: &Ask) -> String {
    match ask {
        Ask::Req { .. } => "no EOSE in time".into(),
        Ask::Event(_) => "no OK in time".into(),
        Ask::Count { .. } => "no COUNT in time".into(),
        Ask::Sync { .. } => "no NEG-MSG in time".into(),
    }
}

/// Whether a `COUNT` frame says its count is approximate (NIP-45). The parsed message drops
/// the field, so it is read from the frame itself.
fn approximate(frame: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(frame)
        .ok()
        .and_then(|v| v.get(2)?.get("approximate")?.as_bool())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flood_bound_grows_with_what_was_asked_and_closes_grant_grace() {
        let mut guard = FloodGuard::default();
        for _ in 0..10 {
            assert_eq!(guard.count(10), None);
        }
        assert_eq!(guard.count(10), Some(11));
        let mut guard = FloodGuard {
            asked: 500,
            ..FloodGuard::default()
        };
        for _ in 0..510 {
            assert_eq!(guard.count(10), None);
        }
        assert_eq!(guard.count(10), Some(511));

        let now = Instant::now();
        assert!(!guard.in_grace(now));
        guard.grace_until = Some(now + Duration::from_secs(1));
        assert!(guard.in_grace(now));
        assert!(!guard.in_grace(now + Duration::from_secs(1)));
    }

    #[test]
    fn closed_ids_are_bounded_and_forget_the_oldest() {
        let mut closed = Closed::default();
        for n in 0..=MAX_CLOSED_ASKS {
            closed.insert(&format!("outbox-feed-{n}"));
        }
        closed.insert("outbox-feed-7");
        assert_eq!(closed.order.len(), MAX_CLOSED_ASKS);
        assert!(!closed.contains("outbox-feed-0"));
        assert!(closed.contains(&format!("outbox-feed-{MAX_CLOSED_ASKS}")));
    }
}

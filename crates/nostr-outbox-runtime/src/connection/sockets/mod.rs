//! The client's sockets: one per relay, shared by every purpose, under one budget.
//!
//! Everything the runtime sends to a relay — the feed's slots, the relay-list lookups, route
//! feeds (inbox, thread, pointer), probes and publishing — asks [`Sockets`] for a `Link` to that
//! relay. The first link dials; later links to the same relay join the open socket, so a client
//! holds at most one connection per relay whatever it is doing. The count of
//! sockets (open or dialling) stays within [`SocketBudget::max_sockets`]: a link to a relay
//! with no socket waits while the budget is spent, and a socket nobody uses any more is closed after
//! [`SocketBudget::idle`], or at once when someone is waiting for its place.
//!
//! Lasting purposes (the feed, route feeds) may hold sockets only up to `max_sockets -
//! reserve`: the [`reserve`](SocketBudget::reserve) is kept for short work (lookups, probes,
//! publishing), which ends by its own timeouts and so always frees its place again. A feed can
//! never starve a lookup, and a lookup never waits for a feed to end. Among lasting places,
//! some may be kept (`Sockets::keep`) for named relays (a feed's reader relays and indexers)
//! until their socket opens: other lasting links never take them, so those relays never wait
//! behind relays that are slow to answer or never do.
//!
//! On a shared socket each link sees only its own traffic: subscription ids are suffixed with
//! the link's number on the way out (`outbox-feed-3~2`) and the suffix is taken off on the way
//! back, so two links may use the same ids; `OK` goes to the link that sent the event;
//! `NOTICE`s and frames for ids no link issued go to every link, which treats them as it would
//! on a socket of its own. Sign-in (NIP-42) is the socket's, not a link's: a link refused with
//! `auth-required:` asks the socket (`Link::sign_in`), which signs the relay's challenge once
//! for every link on it (`auth`). A link that finds the relay misbehaving
//! (`Link::abandon`) ends the socket for every link on it.
//!
//! The one lock here guards the table of sockets; it is never held across an `.await` nor
//! while calling code that takes another lock.

mod auth;
mod connection;
mod frame;
mod link;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch, Notify};

pub use auth::MAX_CHALLENGE_BYTES;
pub(crate) use connection::Read;
pub(crate) use link::Link;

/// Event ids awaiting an `OK` that one socket remembers, across its links; the oldest are
/// forgotten first (their `OK` then reaches every link, which ignore ids they did not send).
pub const MAX_PENDING_OKS: usize = 4096;

/// Frames queued for one link before the socket waits for that link to read.
pub const LINK_QUEUE: usize = 512;

/// What a socket dials and closes with: the few knobs of the runtime's config the socket
/// layer needs (`RuntimeConfig::dial`). A socket's task keeps only these, never the config
/// (which holds the [`Sockets`] themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dial {
    /// TCP, TLS and the WebSocket handshake together.
    pub connect_timeout: Duration,
    /// The closing handshake's wait, at most a second.
    pub shutdown_grace: Duration,
    /// A frame or message above this kills the connection.
    pub hard_frame_limit: usize,
    /// How long a sign-in may wait for the relay's challenge, then for its `OK`.
    pub sign_in_timeout: Duration,
}

/// How many sockets a client may hold, and how long an unused one stays open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketBudget {
    /// Sockets open or dialling at once, for every purpose together; `None`: no bound.
    pub max_sockets: Option<usize>,
    /// Of [`max_sockets`](Self::max_sockets), places lasting purposes (the feed, route feeds)
    /// leave to short ones (lookups, probes, publishing).
    pub reserve: usize,
    /// A socket no link uses is closed this long after its last link left.
    pub idle: Duration,
}

impl SocketBudget {
    /// A desktop client: 32 sockets, 4 of them kept for lookups, probes and publishing; an
    /// unused socket lingers 30 s (a re-plan or the next lookup often wants it again). The
    /// feed's 20 routed relays and a few reader relays fit beside the reserve.
    pub fn desktop() -> Self {
        Self {
            max_sockets: Some(32),
            reserve: 4,
            idle: Duration::from_secs(30),
        }
    }

    /// A phone: 8 sockets, 2 kept for short work, unused ones closed after 5 s.
    pub fn mobile() -> Self {
        Self {
            max_sockets: Some(8),
            reserve: 2,
            idle: Duration::from_secs(5),
        }
    }

    /// No bound on sockets (sharing still holds: one per relay).
    pub fn unbounded() -> Self {
        Self {
            max_sockets: None,
            reserve: 0,
            idle: Duration::from_secs(30),
        }
    }

    /// Sockets lasting purposes may hold: `max_sockets - reserve`, at least one.
    pub fn lasting_sockets(&self) -> Option<usize> {
        self.max_sockets
            .map(|max| max.saturating_sub(self.reserve).max(1))
    }

    fn limit(&self, role: Role) -> usize {
        let limit = if role.lasting() {
            self.lasting_sockets()
        } else {
            self.max_sockets
        };
        limit.unwrap_or(usize::MAX).max(1)
    }
}

impl Default for SocketBudget {
    fn default() -> Self {
        Self::desktop()
    }
}

/// What a link is for: lasting purposes hold their socket for the run, short ones end by their
/// own timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A feed slot (the plan's filter for one relay, and the relay-list lookup).
    Feed,
    /// A route feed: inbox, thread or pointer reads.
    Route,
    /// A one-shot lookup ([`fetch_events`](crate::fetch_events), monitors).
    Lookup,
    /// A probe after the fetch.
    Probe,
    /// Publishing an event.
    Publish,
}

impl Role {
    /// Whether links of this purpose hold their socket for as long as the feed runs.
    pub fn lasting(self) -> bool {
        matches!(self, Role::Feed | Role::Route)
    }
}

/// What the sockets have done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SocketStats {
    /// Sockets open or dialling now.
    pub open: usize,
    /// The most open or dialling at once.
    pub peak: usize,
    /// Sockets dialled.
    pub dials: u64,
    /// Links that joined a socket already open or dialling.
    pub joins: u64,
    /// HTTP requests for relay documents (NIP-11), each on a connection of its own that
    /// holds a place of the budget like a socket (counted in [`open`](Self::open) and
    /// [`peak`](Self::peak) while it lasts).
    pub documents: u64,
}

/// The sockets of one client, shared by every purpose (see the [module docs](self)). Clones
/// share them; every clone of a `RuntimeConfig` carries the same one.
#[derive(Clone)]
pub struct Sockets {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Sockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sockets")
            .field("budget", &self.inner.budget)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Default for Sockets {
    fn default() -> Self {
        Self::new(SocketBudget::default())
    }
}

pub(crate) struct Inner {
    budget: SocketBudget,
    /// Signs the connections in where a link asks (NIP-42): the client's signer.
    signer: Option<crate::signer::Signer>,
    table: Mutex<Table>,
    /// Woken whenever a socket opens, falls unused or ends: a waiting link may join it, have
    /// it closed, or take its place.
    freed: Notify,
    /// Links waiting for a place now. A one-shot feed slot that has answered everything gives
    /// its place up when this is above zero (see [`Sockets::contention`]).
    waiting: watch::Sender<usize>,
}

/// Counts one link among the waiting for as long as it lives (a waiting link may be dropped).
struct Waiting<'a>(&'a watch::Sender<usize>);

impl<'a> Waiting<'a> {
    fn new(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[derive(Default)]
struct Table {
    sockets: HashMap<String, Entry>,
    /// Relays a lasting place is kept for until a lasting link to them joins a socket
    /// ([`Sockets::keep`]): at most one per [`Kept`] guard alive.
    kept: HashSet<String>,
    next_socket: u64,
    next_link: u64,
    stats: SocketStats,
}

struct Entry {
    socket: u64,
    commands: mpsc::UnboundedSender<connection::Command>,
    links: usize,
    /// Told to close (idle, someone waits for its place): no new links join it.
    closing: bool,
}

/// What a link to a relay did not get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DialError {
    /// The handshake took longer than the connect timeout.
    TimedOut,
    /// TCP, TLS or the WebSocket handshake failed.
    Failed(String),
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::TimedOut => f.write_str("connect timed out"),
            DialError::Failed(e) => write!(f, "connect failed: {e}"),
        }
    }
}

/// Times a link may find its socket ended between joining and being admitted before giving up.
const MAX_JOIN_RACES: u32 = 3;

enum Step {
    Join {
        commands: mpsc::UnboundedSender<connection::Command>,
        socket: u64,
        link: u64,
        fresh: Option<mpsc::UnboundedReceiver<connection::Command>>,
    },
    Wait {
        close: Option<mpsc::UnboundedSender<connection::Command>>,
    },
}

impl Sockets {
    /// No sockets yet, and no signer: a link that asks to sign in is told there is no key.
    pub fn new(budget: SocketBudget) -> Self {
        Self::signing(budget, None)
    }

    /// No sockets yet; each signs in with `signer` once a link asks.
    pub(crate) fn signing(budget: SocketBudget, signer: Option<crate::signer::Signer>) -> Self {
        Self {
            inner: Arc::new(Inner {
                budget,
                signer,
                table: Mutex::new(Table::default()),
                freed: Notify::new(),
                waiting: watch::Sender::new(0),
            }),
        }
    }

    /// What its sockets sign in with, if anything.
    pub(crate) fn signer(&self) -> Option<&crate::signer::Signer> {
        self.inner.signer.as_ref()
    }

    /// Its budget.
    pub fn budget(&self) -> SocketBudget {
        self.inner.budget
    }

    /// Sockets open now, the peak, dials and joins so far.
    pub fn stats(&self) -> SocketStats {
        let table = self.inner.lock();
        SocketStats {
            open: table.sockets.len(),
            ..table.stats
        }
    }

    /// How many links wait for a place now, and a way to hear when that changes: places are
    /// time-shared by links that have nothing more to do giving theirs up while this is above
    /// zero.
    pub(crate) fn contention(&self) -> watch::Receiver<usize> {
        self.inner.waiting.subscribe()
    }

    /// A place of the budget for one HTTP request to `url` (a relay's document), waiting while
    /// the budget is spent as a short purpose would; the place is free again when the
    /// [`Place`] is dropped. Waiting is bounded by the caller.
    pub(crate) async fn place(&self, url: &str) -> Place {
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.inner.take_place(url) {
                Ok(place) => return place,
                Err(close) => {
                    if let Some(idle) = close {
                        let _ = idle.send(connection::Command::CloseIdle);
                    }
                    let _waiting = Waiting::new(&self.inner.waiting);
                    freed.await;
                }
            }
        }
    }

    /// A link to `url` (canonical) for `purpose`: joins the relay's socket, or dials one when
    /// the budget allows, waiting for a place while it does not. The dial is bounded by the
    /// config's connect timeout; waiting for a place is bounded by the caller.
    pub(crate) async fn link(&self, url: &str, role: Role, dial: Dial) -> Result<Link, DialError> {
        self.link_placed(url, role, dial, None).await
    }

    /// [`link`](Self::link), telling `placed` once the link has a place (it joined a socket or
    /// began a dial): the time before that was spent waiting for the budget, not on the relay.
    pub(crate) async fn link_placed(
        &self,
        url: &str,
        role: Role,
        dial: Dial,
        mut placed: Option<oneshot::Sender<()>>,
    ) -> Result<Link, DialError> {
        let mut races = 0;
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            match self.inner.step(url, role) {
                Step::Wait { close } => {
                    if let Some(idle) = close {
                        let _ = idle.send(connection::Command::CloseIdle);
                    }
                    let _waiting = Waiting::new(&self.inner.waiting);
                    freed.await;
                }
                Step::Join {
                    commands,
                    socket,
                    link,
                    fresh,
                } => {
                    if let Some(placed) = placed.take() {
                        let _ = placed.send(());
                    }
                    if let Some(rx) = fresh {
                        let task = connection::Connection::new(
                            url.to_string(),
                            socket,
                            dial,
                            self.inner.signer.clone(),
                            self.inner.budget.idle,
                            Arc::downgrade(&self.inner),
                        );
                        tokio::spawn(task.run(rx));
                    }
                    let (frames_tx, frames) = mpsc::channel(LINK_QUEUE);
                    let (ready_tx, ready) = oneshot::channel();
                    let attach = connection::Command::Attach {
                        link,
                        frames: frames_tx,
                        ready: ready_tx,
                    };
                    let handle = Link::new(
                        url,
                        link,
                        socket,
                        commands.clone(),
                        frames,
                        self.inner.clone(),
                    );
                    if commands.send(attach).is_ok() {
                        match ready.await {
                            Ok(Ok(())) => return Ok(handle),
                            Ok(Err(e)) => return Err(e),
                            Err(_) => {}
                        }
                    }
                    // The socket ended between joining and admitting us: try again.
                    drop(handle);
                    races += 1;
                    if races >= MAX_JOIN_RACES {
                        return Err(DialError::Failed("the connection closed at once".into()));
                    }
                }
            }
        }
    }
}

impl Sockets {
    /// Keeps a lasting place for `url` while it has no socket, until a lasting link to it
    /// joins one (or the guard is dropped): other lasting links wait rather than take it. A
    /// one-shot feed whose relays time-share the places keeps them for its reader relays and
    /// indexers, which then never wait behind a routed relay's dial.
    pub(crate) fn keep(&self, url: &str) -> Kept {
        self.inner.lock().kept.insert(url.to_string());
        Kept {
            url: url.to_string(),
            pool: self.inner.clone(),
        }
    }
}

/// A place kept for one relay ([`Sockets::keep`]); dropping it frees the place if the relay
/// has not taken it.
pub(crate) struct Kept {
    url: String,
    pool: Arc<Inner>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Kept").field(&self.url).finish()
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let freed = self.pool.lock().kept.remove(&self.url);
        if freed {
            self.pool.freed.notify_waiters();
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while holding the table leaves counts, never broken references: go on.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a new link to `url` does now, decided under the lock.
    fn step(&self, url: &str, role: Role) -> Step {
        let mut table = self.lock();
        let link = table.next_link;
        table.next_link += 1;
        if let Some(entry) = table.sockets.get_mut(url) {
            if !entry.closing && !entry.commands.is_closed() {
                entry.links += 1;
                let step = Step::Join {
                    commands: entry.commands.clone(),
                    socket: entry.socket,
                    link,
                    fresh: None,
                };
                table.stats.joins += 1;
                if role.lasting() {
                    table.kept.remove(url);
                }
                return step;
            }
        }
        let mut limit = self.budget.limit(role);
        let kept = role.lasting() && table.kept.contains(url);
        if role.lasting() && !kept {
            // Places kept for relays with no socket yet are not this link's to take.
            let unplaced = (table.kept.iter())
                .filter(|u| !table.sockets.contains_key(*u))
                .count();
            limit = limit.saturating_sub(unplaced);
        }
        if table.sockets.len() < limit && !table.sockets.contains_key(url) {
            if kept {
                // Its kept place is taken: its socket counts from here on.
                table.kept.remove(url);
            }
            let (commands, rx) = mpsc::unbounded_channel();
            let socket = table.next_socket;
            table.next_socket += 1;
            table.sockets.insert(
                url.to_string(),
                Entry {
                    socket,
                    commands: commands.clone(),
                    links: 1,
                    closing: false,
                },
            );
            table.stats.dials += 1;
            table.stats.peak = table.stats.peak.max(table.sockets.len());
            drop(table);
            // Links waiting for this relay may join the new socket.
            self.freed.notify_waiters();
            return Step::Join {
                commands,
                socket,
                link,
                fresh: Some(rx),
            };
        }
        // Full: make room by closing a socket nobody uses, then wait for it to end.
        Step::Wait {
            close: Self::close_one_idle(&mut table),
        }
    }

    /// Marks the oldest socket nobody uses as closing and returns where to tell it so.
    fn close_one_idle(table: &mut Table) -> Option<mpsc::UnboundedSender<connection::Command>> {
        let idle = table
            .sockets
            .values_mut()
            .filter(|e| e.links == 0 && !e.closing)
            .min_by_key(|e| e.socket)?;
        idle.closing = true;
        Some(idle.commands.clone())
    }

    /// A place for an HTTP request to `url` if the budget has one now; otherwise an idle
    /// socket to close (if any) so one frees.
    fn take_place(
        self: &Arc<Self>,
        url: &str,
    ) -> Result<Place, Option<mpsc::UnboundedSender<connection::Command>>> {
        let mut table = self.lock();
        if table.sockets.len() < self.budget.limit(Role::Lookup) {
            let socket = table.next_socket;
            table.next_socket += 1;
            // A key no relay URL has (URLs hold no spaces): never joined, never closed idle.
            let key = format!("{url} document {socket}");
            let (commands, keep) = mpsc::unbounded_channel();
            table.sockets.insert(
                key.clone(),
                Entry {
                    socket,
                    commands,
                    links: 1,
                    closing: false,
                },
            );
            table.stats.documents += 1;
            table.stats.peak = table.stats.peak.max(table.sockets.len());
            return Ok(Place {
                key,
                socket,
                pool: self.clone(),
                _keep: keep,
            });
        }
        Err(Self::close_one_idle(&mut table))
    }

    /// A link left its socket.
    fn left(&self, url: &str, socket: u64) {
        let unused = {
            let mut table = self.lock();
            match table.sockets.get_mut(url) {
                Some(entry) if entry.socket == socket => {
                    entry.links = entry.links.saturating_sub(1);
                    entry.links == 0
                }
                _ => false,
            }
        };
        if unused {
            // A waiting link may have this socket closed to take its place.
            self.freed.notify_waiters();
        }
    }

    /// A socket is closing: new links wait for it to end, then dial anew.
    fn closing(&self, url: &str, socket: u64) {
        let mut table = self.lock();
        if let Some(entry) = table.sockets.get_mut(url) {
            if entry.socket == socket {
                entry.closing = true;
            }
        }
    }

    /// A socket's task ended: its place is free.
    fn ended(&self, url: &str, socket: u64) {
        {
            let mut table = self.lock();
            if table.sockets.get(url).is_some_and(|e| e.socket == socket) {
                table.sockets.remove(url);
            }
        }
        self.freed.notify_waiters();
    }
}

/// A place of the budget held by one HTTP request ([`Sockets::place`]).
pub(crate) struct Place {
    key: String,
    socket: u64,
    pool: Arc<Inner>,
    /// Keeps the entry's channel open, so the pool never takes it for an ended socket.
    _keep: mpsc::UnboundedReceiver<connection::Command>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.pool.ended(&self.key, self.socket);
    }
}

#[cfg(test)]
mod tests;

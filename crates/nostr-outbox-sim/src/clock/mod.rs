//! The simulator's clock: when each note of a session's fetch arrives.
//!
//! Recall says how much of a feed a plan fetches; this module says when. [`replay()`] walks a
//! session the way the runtime runs a `--once` feed, in order and under the socket budget, with
//! every duration drawn from the world's per-relay timing
//! ([`RelayTiming`](nostr_outbox_world::RelayTiming)):
//!
//! 1. **Start.** The reader's relays are dialled at once; they carry the residual (their feed
//!    filter goes out with the first plan) and, on a first run, the relay-list lookup.
//! 2. **Lists.** A run that kept the lists from the last one plans with them at once: its
//!    routed relays are dialled at the start. A first run plans its routed relays only once the
//!    lookup is over — when every reader relay answered it, or [`ClientTiming::lookup_grace_ms`]
//!    after the first did — and the re-plan's debounce has passed.
//! 3. **Dials.** A relay that is up connects after its connect time. One that is down is set
//!    aside once its connect attempts fail: one that refuses fails each of
//!    [`ClientTiming::attempts`] at once, with the runtime's backoff between; one that hangs (a
//!    black hole) costs the whole connect timeout, and is set aside after that one attempt
//!    ([`Policy::aside_on_timeout`], on by default; off, it takes every attempt and the backoff
//!    between). A dial waits while the socket budget is spent; an answering relay keeps its
//!    socket for the run, a set-aside one frees it.
//! 4. **Pages.** Each relay's authors are paged in chunks exactly as the untimed fetch pages them
//!    ([`mod@crate::fetch`]), at most [`ClientTiming::concurrent_pages`] in flight per socket,
//!    each page one query time; a page's notes arrive when it ends.
//! 5. **Waves.** A re-plan around set-aside relays ([`crate::LoopConfig::replan_on_failure`])
//!    goes out the debounce after the first set-aside since the last plan, and a follow it
//!    moves is asked elsewhere no sooner than the debounce after its relay was set aside, as
//!    the runtime's `--once` waves do ([`Policy::early_waves`], on by default; off, a re-plan
//!    waits until every relay asked so far has answered or been set aside, or one EOSE timeout
//!    after the first failed dial since the last plan if that is sooner). Its new relays dial
//!    then, and relays already open are asked about their new follows on the open socket. A
//!    relay that answered empty
//!    ([`RoundRecorder::empty_answers`](nostr_outbox_client::RoundRecorder::empty_answers)) is
//!    set aside at the answer that shows it up (its own, or the first with notes of one of its
//!    follows) and frees its socket then; its follows move as a failed relay's do. A
//!    re-planned session chooses its re-plans from the same replay, one wave at a time
//!    ([`Replay`]): each leaves out the relays set aside by the time it goes out.
//! 6. **Probes** go out once the fetch settled, each one connect and one query (or one failed
//!    attempt), giving up connecting after [`ClientTiming::probe_give_up_ms`] (2 s by default,
//!    [`Policy::probe_timeout_ms`]), at most [`RunShape::probes_at_once`] at a time; the run
//!    ends when they are done, or at [`ClientTiming::deadline_ms`] (90 s by default), whichever
//!    is first. Notes that would arrive after the deadline never do.
//!
//! The clock never changes what is fetched (recall is scored without it), only when. It is a
//! model of the runtime, not the runtime: it skips NIP-11 documents, sign-in and the lookup's
//! own paging, and takes each backoff at its mean.

mod budget;
mod client;
mod measure;
mod replay;
mod time_ceiling;
mod timeline;
mod wait;

pub use client::{ClientTiming, Policy};
pub use measure::{time_score, Completeness, Ideal, TimeScore, COMPLETENESS_AT_MS};
pub use replay::{replay, Replay, RunShape};
pub use time_ceiling::fastest;
pub use timeline::{Timeline, SCREEN};
pub use wait::{screen_wait, Wait};

//! Draining a feed: notes to stdout, stop signals, and a reader that went away or stopped
//! reading.
//!
//! Notes are written by a thread of their own, fed through a bounded queue, so a pipe nobody
//! reads (`outbox feed | less`, left unread) blocks only that thread: stop signals are still
//! heard, the feed still shuts down, saves its stats and prints its summary to stderr.
//!
//! Stop signals are heard until the process ends. The first one while the feed runs stops it
//! gracefully (subscriptions closed, stats saved, summary printed). Any other — a second one,
//! or one once the feed has ended, while the relay lists are kept, queued notes are written or
//! the summary file is — ends the process at once ([`Drain::forced`],
//! [`Drain::unless_stopped`]), with the status a shell gives a process that signal ended.

use std::future::Future;
use std::io::Write;

use tokio::sync::{mpsc, oneshot};

use crate::text::{escape, json_safe};

/// Notes waiting for stdout. Beyond it the drain waits for the reader (back-pressure on the
/// feed), still listening for stop signals.
pub const MAX_QUEUED_NOTES: usize = 256;

/// Drains a feed's channel until it closes. A stop signal or a closed stdout asks the feed to
/// shut down, once; draining goes on meanwhile, so the feed can close its subscriptions and
/// save before the channel closes. Notes that arrive after a stop are not printed. A stop
/// signal after that ends the drain at once ([`forced`](Self::forced)).
pub(crate) struct Drain {
    stop: Stop,
    stopping: bool,
    out: Option<Output>,
    /// The stop signal that ends the process at once: one after the first stop, or one once
    /// the feed has ended.
    forced: Option<&'static str>,
}

/// The stdout writer thread: its queue, and word of how it ended.
struct Output {
    lines: mpsc::Sender<String>,
    ended: oneshot::Receiver<std::io::Result<()>>,
}

impl Output {
    fn spawn() -> anyhow::Result<Self> {
        let (lines, mut queue) = mpsc::channel::<String>(MAX_QUEUED_NOTES);
        let (done, ended) = oneshot::channel();
        std::thread::Builder::new()
            .name("stdout".into())
            .spawn(move || {
                let result = (|| {
                    while let Some(line) = queue.blocking_recv() {
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "{line}")?;
                        while let Ok(line) = queue.try_recv() {
                            writeln!(out, "{line}")?;
                        }
                        out.flush()?;
                    }
                    Ok(())
                })();
                let _ = done.send(result);
            })?;
        Ok(Self { lines, ended })
    }
}

impl Drain {
    pub(crate) fn new() -> anyhow::Result<Self> {
        Ok(Self {
            stop: Stop::new()?,
            stopping: false,
            out: Some(Output::spawn()?),
            forced: None,
        })
    }

    /// The next event, `None` once the channel closed or a stop signal after the first one
    /// ended the drain ([`forced`](Self::forced)).
    pub(crate) async fn next<E>(
        &mut self,
        events: &mut mpsc::Receiver<E>,
        shutdown: impl Fn(),
    ) -> Option<E> {
        loop {
            if self.forced.is_some() {
                return None;
            }
            let Self { stop, out, .. } = self;
            let ended = async {
                match out.as_mut() {
                    Some(out) => (&mut out.ended).await.ok().and_then(Result::err),
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                event = events.recv() => return event,
                why = stop.next() => Halt::Signal(why),
                error = ended => Halt::Closed(error),
            };
            self.halt(why, &shutdown);
        }
    }

    /// Whether a stop signal or a closed stdout ended the read before its end: a caller with
    /// more to read should not read it.
    pub(crate) fn halted(&self) -> bool {
        self.stopping
    }

    /// The stop signal that ended the drain at once, if one did: the process should end now,
    /// without waiting for what is still under way.
    pub(crate) fn forced(&self) -> Option<&'static str> {
        self.forced
    }

    /// Runs `work` once the feed has ended (keeping its state, writing its summary), unless a
    /// stop signal comes first: then `work` is dropped, the signal is returned, and the
    /// process should end at once. Blocking work belongs in `spawn_blocking`, so the signal is
    /// heard while it runs.
    pub(crate) async fn unless_stopped<T>(
        &mut self,
        work: impl Future<Output = T>,
    ) -> Result<T, &'static str> {
        if let Some(signal) = self.forced {
            return Err(signal);
        }
        tokio::select! {
            done = work => Ok(done),
            signal = self.stop.next() => {
                tracing::info!(signal, "stopping at once");
                self.forced = Some(signal);
                Err(signal)
            }
        }
    }

    /// Queues a note for stdout; waits while the queue is full, unless a stop signal comes
    /// or stdout closes (`| head`), which end the feed like Ctrl-C, with the stats saved.
    pub(crate) async fn print(
        &mut self,
        event: &nostr::event::Event,
        relay: &str,
        json: bool,
        shutdown: impl Fn(),
    ) {
        self.print_labelled(event, relay, None, json, shutdown)
            .await;
    }

    /// [`print`](Self::print) with a label saying what the note is to the read (a thread's
    /// `reply`, `quote`, …): in text after the relay, in JSON as the field `relation`.
    pub(crate) async fn print_labelled(
        &mut self,
        event: &nostr::event::Event,
        relay: &str,
        label: Option<&str>,
        json: bool,
        shutdown: impl Fn(),
    ) {
        let Self { stop, out, .. } = self;
        let Some(out) = out.as_mut() else {
            return;
        };
        let line = note_line(event, relay, label, json);
        let why = tokio::select! {
            sent = out.lines.send(line) => match sent {
                Ok(()) => return,
                Err(_) => Halt::Closed(None),
            },
            why = stop.next() => Halt::Signal(why),
        };
        self.halt(why, &shutdown);
    }

    /// Once the feed has ended: waits until every queued note reached stdout. A stop signal
    /// meanwhile ends the wait and is returned (a reader that never reads cannot hold the
    /// process back; the summary is still printed). A write error ends it quietly: the reader
    /// went away.
    pub(crate) async fn finish(&mut self) -> Result<(), &'static str> {
        let Some(Output { lines, ended }) = self.out.take() else {
            return self.forced.map_or(Ok(()), Err);
        };
        drop(lines);
        self.unless_stopped(ended).await.map(drop)
    }

    /// Stops printing and asks the feed to shut down, once; a stop signal after that ends the
    /// drain at once.
    fn halt(&mut self, why: Halt, shutdown: &impl Fn()) {
        match why {
            Halt::Signal(signal) if self.stopping => {
                tracing::info!(signal, "stopping at once");
                self.forced = Some(signal);
                return;
            }
            Halt::Signal(signal) => tracing::info!(signal, "stopping"),
            Halt::Closed(error) => tracing::info!(error = ?error, "stdout closed; stopping"),
        }
        // Dropping the queue lets the writer end once its current write returns.
        self.out = None;
        if !self.stopping {
            self.stopping = true;
            shutdown();
        }
    }
}

/// Why a drain stops printing.
enum Halt {
    /// A stop signal, by name.
    Signal(&'static str),
    /// Stdout closed (with the write error, when the writer saw one).
    Closed(Option<std::io::Error>),
}

/// The exit status of a process a stop signal ended at once: what a shell reports for a process
/// that signal killed, 128 + its number.
pub(crate) fn stopped_status(signal: &str) -> u8 {
    128 + match signal {
        "SIGHUP" => 1,
        "SIGTERM" => 15,
        // SIGINT, and Ctrl-C elsewhere.
        _ => 2,
    }
}

/// `event` as one JSON line with `key` set to `value` beside its fields.
fn json_with(event: &nostr::event::Event, key: &str, value: serde_json::Value) -> String {
    let mut line = serde_json::to_value(event).unwrap_or_default();
    if let Some(object) = line.as_object_mut() {
        object.insert(key.into(), value);
    }
    json_safe(&line.to_string())
}

/// A note kept by an earlier run, printed at the start before the network answers: in JSON
/// the event with `"kept": true`, in text `[kept]` where a relay is named (its code names no
/// relay); escaped as every other note.
pub(crate) fn kept_line(event: &nostr::event::Event, json: bool) -> String {
    if json {
        json_with(event, "kept", serde_json::Value::Bool(true))
    } else {
        let content: String = event.content.chars().take(280).collect();
        format!(
            "{} {} [kept] {} {}",
            event.created_at,
            &event.pubkey.to_hex()[..12],
            code(event, None),
            escape(&content)
        )
    }
}

/// The code a reader pastes into `outbox get` to fetch `event` again: a `nevent` with its id,
/// its author and, when it came from one, the relay as a hint (left out if it cannot be one);
/// the hex id should encoding fail. Bech32 only: nothing in it can drive a terminal.
pub(crate) fn code(event: &nostr::event::Event, relay: Option<&str>) -> String {
    use nostr::nips::nip19::{Nip19Event, ToBech32};
    let base = Nip19Event::new(event.id).author(event.pubkey);
    let hinted = relay
        .and_then(|r| nostr::types::RelayUrl::parse(r).ok())
        .and_then(|url| base.clone().relays([url]).to_bech32().ok());
    hinted
        .or_else(|| base.to_bech32().ok())
        .unwrap_or_else(|| event.id.to_hex())
}

/// One note as printed: JSON (with `relation` when labelled), or time, author, relay, the
/// note's code ([`code`]), the label and content (cut to 280 characters and escaped).
fn note_line(event: &nostr::event::Event, relay: &str, label: Option<&str>, json: bool) -> String {
    if json {
        let Some(label) = label else {
            // An event always serialises; an empty line is better than stopping the feed.
            return json_safe(&serde_json::to_string(event).unwrap_or_default());
        };
        json_with(event, "relation", serde_json::Value::from(label))
    } else {
        let content: String = event.content.chars().take(280).collect();
        let label = label
            .map(|l| format!("{}: ", escape(l)))
            .unwrap_or_default();
        format!(
            "{} {} [{}] {} {label}{}",
            event.created_at,
            &event.pubkey.to_hex()[..12],
            escape(relay),
            code(event, Some(relay)),
            escape(&content)
        )
    }
}

/// What ends a feed early: Ctrl-C (SIGINT), and on Unix SIGTERM (what service managers send)
/// and SIGHUP (a closed terminal). Each saves the stats like a normal end. The listeners live
/// as long as the drain, so a signal that comes while nothing waits for one is kept for the
/// next wait instead of being lost (once listening, the process no longer dies of them).
struct Stop {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
}

impl Stop {
    fn new() -> anyhow::Result<Self> {
        use anyhow::Context;
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                int: signal(SignalKind::interrupt()).context("listening for SIGINT")?,
                term: signal(SignalKind::terminate()).context("listening for SIGTERM")?,
                hup: signal(SignalKind::hangup()).context("listening for SIGHUP")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Waits for the next stop signal; returns its name. Cancel-safe: a signal is never lost
    /// to a wait that was dropped.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => "SIGINT",
                _ = self.term.recv() => "SIGTERM",
                _ = self.hup.recv() => "SIGHUP",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

#[cfg(test)]
mod tests {
    use nostr::event::{EventBuilder, FinalizeEvent, Kind};
    use nostr::key::Keys;

    use super::note_line;

    #[test]
    fn a_note_cannot_drive_the_terminal_as_text_or_json() {
        let note = EventBuilder::new(Kind::TextNote, "a\u{9b}2Jb\u{202e}c\u{1b}[31m")
            .finalize(&Keys::generate())
            .unwrap();
        for json in [false, true] {
            let line = note_line(&note, "wss://r.example", None, json);
            assert!(!line.contains("relation"), "{line}");
            let line = note_line(&note, "wss://r.example", Some("reply"), json);
            assert!(
                !line.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{line:?}"
            );
        }
        let back: nostr::event::Event =
            serde_json::from_str(&note_line(&note, "wss://r.example", None, true)).unwrap();
        assert_eq!(back, note, "still the same JSON");
        let labelled: serde_json::Value =
            serde_json::from_str(&note_line(&note, "wss://r.example", Some("quote"), true))
                .unwrap();
        assert_eq!(labelled["relation"], "quote");
        assert_eq!(labelled["id"], note.id.to_hex());
        let text = note_line(&note, "wss://r.example", Some("quote"), false);
        assert!(text.contains(" quote: a"), "{text}");
    }

    /// A text line carries a `nevent` naming the note, its author and the relay it came from:
    /// what `outbox get` takes to fetch it again.
    #[test]
    fn a_text_line_names_the_note_as_a_nevent_with_its_relay() {
        use nostr::nips::nip19::{FromBech32, Nip19Event};
        let note = EventBuilder::new(Kind::TextNote, "hello")
            .finalize(&Keys::generate())
            .unwrap();
        let line = note_line(&note, "wss://r.example", None, false);
        let word = line
            .split(' ')
            .find(|w| w.starts_with("nevent1"))
            .unwrap_or_else(|| panic!("no nevent in {line:?}"));
        let decoded = Nip19Event::from_bech32(word).unwrap();
        assert_eq!(decoded.event_id, note.id);
        assert_eq!(decoded.author, Some(note.pubkey));
        let relays: Vec<String> = decoded.relays.iter().map(|r| r.to_string()).collect();
        assert_eq!(relays, ["wss://r.example"]);
        assert!(line.ends_with(" hello"), "{line:?}");
        // A relay that cannot be a hint is left out of the code, never printed raw in it.
        let line = note_line(&note, "not a url", None, false);
        let word = line.split(' ').find(|w| w.starts_with("nevent1")).unwrap();
        assert!(Nip19Event::from_bech32(word).unwrap().relays.is_empty());
        // JSON is the event alone, as before.
        let json: serde_json::Value =
            serde_json::from_str(&note_line(&note, "wss://r.example", None, true)).unwrap();
        assert!(json.get("nevent").is_none());
    }
}

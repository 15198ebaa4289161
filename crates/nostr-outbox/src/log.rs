//! Log lines on stderr. Their fields quote relays (`CLOSED` reasons, close frames, NOTICE text,
//! URLs from relay lists), so every field is escaped and has URL credentials hidden, whatever its
//! level or how it was recorded; colour is used only on a terminal, and never with `NO_COLOR`.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::FormatFields;

use crate::text;

/// The most characters of one field shown; the rest is cut with `…` (a relay's 1 MB NOTICE
/// would otherwise fill the terminal).
pub const MAX_LOG_FIELD_CHARS: usize = 1000;

/// Installs the stderr logger with `filter` (`warn`, `nostr_outbox_core=debug`, …).
pub fn init(filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(quiet_local_relays(
            filter,
        )))
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .fmt_fields(Escaped)
        .init();
}

/// `filter`, with the local relays of `outbox load` and `bench --live` silent unless it names
/// them: they log every client that fetches their NIP-11 document over plain HTTP, which the
/// feed does for every relay, and every socket closed without a closing handshake.
fn quiet_local_relays(filter: &str) -> String {
    if filter.contains("nostr_relay_builder") {
        filter.to_string()
    } else {
        format!("{filter},nostr_relay_builder=off")
    }
}

/// Whether log lines may carry colour codes: only on a terminal, and not when `NO_COLOR` is set
/// to anything but the empty string (<https://no-color.org>).
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Formats fields as `message name=value …`, each value escaped, redacted and bounded.
struct Escaped;

impl<'writer> FormatFields<'writer> for Escaped {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        let mut visitor = Fields {
            writer,
            result: Ok(()),
            first: true,
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Fields<'writer> {
    writer: Writer<'writer>,
    result: fmt::Result,
    first: bool,
}

impl Fields<'_> {
    fn write(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        let shown = shown(value);
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{separator}{shown}")
        } else {
            write!(self.writer, "{separator}{}={shown}", field.name())
        };
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.write(field, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(cause) = source {
            let _ = write!(text, ": {cause}");
            source = cause.source();
        }
        self.write(field, &text);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, &format!("{value:?}"));
    }
}

/// A field's value as it may reach the terminal.
fn shown(value: &str) -> String {
    let mut cut: String = value.chars().take(MAX_LOG_FIELD_CHARS).collect();
    if cut.len() < value.len() {
        cut.push('…');
    }
    text::shown(&cut)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    #[test]
    fn local_relays_are_quiet_unless_named() {
        assert_eq!(
            super::quiet_local_relays("warn"),
            "warn,nostr_relay_builder=off"
        );
        let named = "warn,nostr_relay_builder=debug";
        assert_eq!(super::quiet_local_relays(named), named);
    }

    use super::*;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("not poisoned").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// What one event with hostile fields looks like through the logger.
    fn logged(emit: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::TRACE)
            .fmt_fields(Escaped)
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().expect("not poisoned").clone();
        String::from_utf8(bytes).expect("UTF-8")
    }

    #[test]
    fn every_field_is_escaped_and_redacted_at_every_level() {
        let reason = "blocked\u{1b}]0;pwned\u{7}\u{202e}";
        let url = "wss://alice:hunter2@relay.example";
        let err = std::io::Error::other("closed: \u{1b}[2J");
        let out = logged(|| {
            tracing::warn!(relay = url, reason = %reason, "CLOSED \u{1b}[31m");
            tracing::debug!(notice = ?reason, error = &err as &(dyn std::error::Error + 'static));
            tracing::trace!(frame = reason);
        });
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
            "{out}"
        );
        assert!(!out.contains("hunter2"), "{out}");
        assert!(out.contains("relay=wss://***@relay.example"), "{out}");
        assert!(
            out.contains("reason=blocked\\u{1b}]0;pwned\\u{7}\\u{202e}"),
            "{out}"
        );
        assert!(out.contains("CLOSED \\u{1b}[31m"), "{out}");
        assert!(out.contains("error=closed: \\u{1b}[2J"), "{out}");
        assert_eq!(out.lines().count(), 3, "{out}");
    }

    #[test]
    fn long_fields_are_cut() {
        let long = "x".repeat(MAX_LOG_FIELD_CHARS * 3);
        let out = logged(|| tracing::warn!(notice = %long));
        assert!(
            out.contains(&format!("notice={}…", "x".repeat(MAX_LOG_FIELD_CHARS))),
            "{out}"
        );
        assert!(!out.contains(&"x".repeat(MAX_LOG_FIELD_CHARS + 1)), "{out}");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }
}

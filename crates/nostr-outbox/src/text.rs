//! Text from files and the network (world names, relay URLs, notes, relay messages) made safe
//! to print on a terminal.

use std::fmt::Write;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context};

/// The largest config file read (TOML router configs are a few hundred bytes).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The largest follows file read (a million npubs fit in 64 MiB; 16 MiB holds ~250,000).
pub const MAX_FOLLOWS_BYTES: u64 = 16 << 20;

/// Whether `c` reorders or hides text on a terminal: the Unicode bidirectional controls and
/// marks (`U+061C`, `U+200E`, `U+200F`, `U+202A`–`U+202E`, `U+2066`–`U+2069`).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// `s` with every control character (C0, DEL, C1) and bidirectional control written as an
/// escape (`\n`, `\t`, `\r`, otherwise `\u{1b}`), so file text cannot move the cursor, change
/// colours or reverse what follows it. Backslashes are doubled, so the escaped form is
/// unambiguous. Everything else is kept as is.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || is_bidi_control(c) => {
                write!(out, "\\u{{{:x}}}", c as u32).expect("writing to a string cannot fail");
            }
            c => out.push(c),
        }
    }
    out
}

/// JSON text with every control character and bidirectional control written as a `\uXXXX`
/// escape: still the same JSON, but a string in it cannot drive the terminal (serde_json
/// leaves C1 controls and bidirectional controls raw).
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if (c.is_control() && c != '\n') || is_bidi_control(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(out, "\\u{unit:04x}").expect("writing to a string cannot fail");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// [`escape`] line by line: the lines of a multi-line message (a TOML error's excerpt) stay
/// lines, and nothing else in them reaches the terminal raw.
pub fn escape_lines(s: &str) -> String {
    s.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// `s` with the credentials of every URL in it hidden (`wss://user:pass@host` becomes
/// `wss://***@host`): error chains and logs quote relay URLs as given, and a password in one
/// must not reach a terminal or a log file.
pub fn redact(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("://") || !s.contains('@') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends where a path, query, fragment, space or quote begins.
        let end = after
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(sign) => {
                out.push_str("***");
                out.push_str(&authority[sign..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A command-line value as an error quotes it: in quotes, escaped, at most 80 characters;
/// unless it may be a secret key, which is never shown: an nsec or ncryptsec (anywhere in it),
/// or a run of 64 hex characters (the hex of a secret key given where a public key was
/// expected reads like one). Then only what it looks like is said.
pub fn quoted_arg(raw: &str) -> String {
    let lower = raw.to_ascii_lowercase();
    if lower.contains("ncryptsec1") {
        return "(an encrypted secret key, ncryptsec, not shown)".into();
    }
    if lower.contains("nsec1") {
        return "(a secret key, nsec, not shown)".into();
    }
    let mut run = 0;
    for c in raw.chars() {
        run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
        if run >= 64 {
            return "(64 hex characters, not shown: they may be a secret key)".into();
        }
    }
    let cut: String = raw.chars().take(MAX_QUOTED_ARG_CHARS).collect();
    let more = if cut.len() < raw.len() { "…" } else { "" };
    format!("\"{}\"{more}", escape(&cut))
}

/// The longest part of a command-line value an error quotes.
pub const MAX_QUOTED_ARG_CHARS: usize = 80;

/// One line of text from a file or the network as it may reach the terminal: credentials
/// hidden, controls escaped.
pub fn shown(s: &str) -> String {
    escape(&redact(s))
}

/// An error chain as shown to the user: credentials hidden ([`redact`]), and escaped line by
/// line ([`escape_lines`]).
pub fn shown_error(err: &anyhow::Error) -> String {
    escape_lines(&redact(&format!("{err:#}")))
}

/// The text of the regular file at `path`, at most `limit` bytes: a FIFO, device or directory
/// is refused before it is opened (it could block or never end), and a longer file is an error
/// instead of an unbounded read.
pub fn read_bounded(path: &Path, limit: u64) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > limit {
        bail!("{} is larger than {limit} bytes", path.display());
    }
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{escape, escape_lines, quoted_arg, read_bounded, redact};

    #[test]
    fn quoted_args_never_show_a_secret_key() {
        let hex = "a".repeat(64);
        for secret in [
            "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5",
            "nostr:NSEC1VL029MGPSPEDVA04G90VLTKH6FVH240ZQTV9K0T9AF8935KE9LAQSNLFE5",
            "ncryptsec1qgg9947rlpvqu76pj5ecreduf9jxhselq2nae2kghhvd5g7dgjtcxfqtd67p9m0w57",
            &hex,
            &format!("x{hex}y"),
        ] {
            let shown = quoted_arg(secret);
            assert!(shown.contains("not shown"), "{shown}");
            assert!(!shown.to_lowercase().contains(&secret[8..20].to_lowercase()));
        }
        assert_eq!(quoted_arg("npub1xyz"), "\"npub1xyz\"");
        assert_eq!(quoted_arg("a\u{1b}b"), "\"a\\u{1b}b\"");
        assert!(quoted_arg(&"x".repeat(500)).ends_with("\"…"));
    }

    #[test]
    fn messages_keep_their_lines_but_no_controls() {
        assert_eq!(
            escape_lines("bad key\n  \u{1b}[31mx\n"),
            "bad key\n  \\u{1b}[31mx\n"
        );
    }

    #[test]
    fn reads_are_bounded_and_only_of_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "max_connections = 8\n").unwrap();
        assert_eq!(read_bounded(&path, 20).unwrap(), "max_connections = 8\n");
        let err = read_bounded(&path, 19).unwrap_err().to_string();
        assert!(err.contains("larger than 19 bytes"), "{err}");
        let err = read_bounded(Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
        let err = read_bounded(dir.path(), 1 << 20).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn plain_text_is_kept() {
        assert_eq!(escape("medium/seed-7 ünïcode ✓"), "medium/seed-7 ünïcode ✓");
    }

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(
            escape("a\u{1b}[2Jb\u{7}\u{0}\u{7f}\u{9b}c"),
            "a\\u{1b}[2Jb\\u{7}\\u{0}\\u{7f}\\u{9b}c"
        );
        assert_eq!(escape("x\ny\tz\r"), "x\\ny\\tz\\r");
        assert_eq!(
            escape("evil\u{202e}txt.exe\u{2066}\u{2069}\u{200f}\u{61c}"),
            "evil\\u{202e}txt.exe\\u{2066}\\u{2069}\\u{200f}\\u{61c}"
        );
        assert_eq!(escape("a\\u{1b}"), "a\\\\u{1b}");
    }

    #[test]
    fn url_credentials_are_hidden() {
        assert_eq!(
            redact("relay \"wss://alice:hunter2@relay.example/x\" not usable"),
            "relay \"wss://***@relay.example/x\" not usable"
        );
        assert_eq!(
            redact("a wss://u@h b https://p:q@r:1?x c"),
            "a wss://***@h b https://***@r:1?x c"
        );
        assert_eq!(
            redact("mail bob@example.org at wss://relay.example/@x"),
            "mail bob@example.org at wss://relay.example/@x"
        );
        assert_eq!(redact("no urls here"), "no urls here");
    }
}

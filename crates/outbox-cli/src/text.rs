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

/// [`escape`] line by line: the lines of a multi-line message (a TOML error's excerpt) stay
/// lines, and nothing else in them reaches the terminal raw.
pub fn escape_lines(s: &str) -> String {
    s.split('\n').map(escape).collect::<Vec<_>>().join("\n")
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

    use super::{escape, escape_lines, read_bounded};

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
}

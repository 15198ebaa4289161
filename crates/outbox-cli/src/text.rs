//! Text from files and the network (world names, relay URLs, notes, relay messages) made safe
//! to print on a terminal.

use std::fmt::Write;

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

#[cfg(test)]
mod tests {
    use super::escape;

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

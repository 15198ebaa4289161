//! Reading just enough of a frame to route it: its type and its second element when that is a
//! plain string (a subscription id, or an event id in `OK`), and rewriting that id in place.
//! The rest of the frame is left to the link that gets it, which parses and checks it fully.

use std::ops::Range;

/// The separator between a subscription id and the number of the link that issued it.
const SEP: char = '~';

/// A frame's type and the byte range of its second element's text, when the frame starts
/// `["TYPE", "text"` and that text has no escapes (ours never do; others are not routed).
pub(crate) fn head(text: &str) -> Option<(&str, Option<Range<usize>>)> {
    let bytes = text.as_bytes();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    i = skip_ws(bytes, i + 1);
    let kind = plain_string(bytes, i)?;
    let ty = &text[kind.clone()];
    i = skip_ws(bytes, kind.end + 1);
    if bytes.get(i) != Some(&b',') {
        return Some((ty, None));
    }
    i = skip_ws(bytes, i + 1);
    Some((ty, plain_string(bytes, i)))
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(|b| b.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// The range inside the quotes of a string starting at `start`, if it has no escapes.
fn plain_string(bytes: &[u8], start: usize) -> Option<Range<usize>> {
    if bytes.get(start) != Some(&b'"') {
        return None;
    }
    let from = start + 1;
    let len = bytes[from..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\')?;
    (bytes[from + len] == b'"').then_some(from..from + len)
}

/// `text` with the bytes in `range` replaced by `with`.
pub(crate) fn splice(text: &str, range: Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len());
    out.push_str(&text[..range.start]);
    out.push_str(with);
    out.push_str(&text[range.end..]);
    out
}

/// The wire id of subscription `id` of link `link`.
pub(crate) fn tag(id: &str, link: u64) -> String {
    format!("{id}{SEP}{link}")
}

/// The link and the link's own id of a wire id that [`tag`] made.
pub(crate) fn untag(wire: &str) -> Option<(u64, &str)> {
    let (id, link) = wire.rsplit_once(SEP)?;
    if link.is_empty() || !link.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((link.parse().ok()?, id))
}

/// Relay frame types whose second element is a subscription id.
pub(crate) fn names_subscription(ty: &str) -> bool {
    matches!(
        ty,
        "EVENT" | "EOSE" | "CLOSED" | "COUNT" | "NEG-MSG" | "NEG-ERR"
    )
}

/// The id of the event an outgoing `["EVENT", {...}]` or `["AUTH", {...}]` carries: its `OK`
/// will name it.
pub(crate) fn sent_event_id(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: String,
    }
    let (ty, event): (String, Id) = serde_json::from_str(text).ok()?;
    matches!(ty.as_str(), "EVENT" | "AUTH").then_some(event.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_type_and_the_plain_second_element() {
        let (ty, id) = head(r#" [ "EVENT" , "outbox-feed-3~7", {"id":"x"}]"#).unwrap();
        assert_eq!(ty, "EVENT");
        let text = r#" [ "EVENT" , "outbox-feed-3~7", {"id":"x"}]"#;
        assert_eq!(&text[id.unwrap()], "outbox-feed-3~7");
        assert_eq!(head(r#"["NOTICE"]"#), Some(("NOTICE", None)));
        assert_eq!(head(r#"["EOSE", 3]"#), Some(("EOSE", None)));
        // Escaped ids are not ours: they are not routed.
        assert_eq!(head(r#"["EOSE","a\"b"]"#), Some(("EOSE", None)));
        assert_eq!(head(r#"["EOSE","ab"#), Some(("EOSE", None)));
        for bad in ["", "{}", "[", r#"[""#, r#"["EOSE"#, "[1,2]"] {
            assert_eq!(head(bad).map(|(t, _)| t.to_string()), None, "{bad}");
        }
    }

    #[test]
    fn tags_round_trip_and_foreign_ids_are_not_ours() {
        assert_eq!(
            untag(&tag("outbox-lookup-0", 12)),
            Some((12, "outbox-lookup-0"))
        );
        assert_eq!(untag("outbox-feed-3"), None);
        assert_eq!(untag("a~"), None);
        assert_eq!(untag("a~+1"), None);
        assert_eq!(untag("a~99999999999999999999999"), None);
        let text = r#"["EOSE","sub~4"]"#;
        let (_, range) = head(text).unwrap();
        assert_eq!(splice(text, range.unwrap(), "sub"), r#"["EOSE","sub"]"#);
    }

    #[test]
    fn finds_the_id_of_a_sent_event() {
        let event = r#"["EVENT",{"id":"abc","kind":1,"tags":[]}]"#;
        assert_eq!(sent_event_id(event).as_deref(), Some("abc"));
        assert_eq!(
            sent_event_id(r#"["AUTH",{"id":"def"}]"#).as_deref(),
            Some("def")
        );
        assert_eq!(sent_event_id(r#"["REQ","s",{}]"#), None);
        assert_eq!(sent_event_id("not json"), None);
    }
}

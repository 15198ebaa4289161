//! Writing `outbox-world/1` in canonical form, streaming: one relay list, relay, monitor entry,
//! mention, hint or event per line, `max_limit` only where there is a cap, `monitor`,
//! `mentions` and `hints` only when there are any, an event's `p` only when it tags someone.

use std::io::Write;

use super::{World, WorldError, WorldRelay, WORLD_FORMAT};

impl World {
    /// Writes the world as `outbox-world/1` JSON, streaming (one relay list, relay or event per
    /// line). Wrap files in a `BufWriter`.
    pub fn write(&self, mut w: impl Write) -> Result<(), WorldError> {
        let q = |s: &str| serde_json::to_string(s).expect("strings always serialise");
        writeln!(w, "{{")?;
        writeln!(w, "  \"format\": {},", q(WORLD_FORMAT))?;
        writeln!(w, "  \"name\": {},", q(&self.name))?;
        writeln!(w, "  \"now\": {},", self.now)?;
        writeln!(w, "  \"sessions\": {},", self.sessions)?;
        write!(
            w,
            "  \"reader\": {{\"pubkey\": \"{}\", \"follows\": [",
            self.reader.to_hex()
        )?;
        for (i, f) in self.follows.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(w, "{sep}\"{}\"", f.to_hex())?;
        }
        write!(w, "], \"relays\": [")?;
        for (i, r) in self.reader_relays.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(w, "{sep}{}", q(r))?;
        }
        writeln!(w, "]}},")?;
        writeln!(w, "  \"relay_lists\": [")?;
        for (i, l) in self.relay_lists.iter().enumerate() {
            let tags = serde_json::to_string(&l.tags).expect("tags always serialise");
            let sep = if i + 1 == self.relay_lists.len() {
                ""
            } else {
                ","
            };
            writeln!(
                w,
                "    {{\"author\": \"{}\", \"created_at\": {}, \"tags\": {tags}}}{sep}",
                l.author.to_hex(),
                l.created_at
            )?;
        }
        writeln!(w, "  ],")?;
        writeln!(w, "  \"relays\": {{")?;
        let existing: Vec<&WorldRelay> = self.relays.iter().filter(|r| r.exists).collect();
        for (i, r) in existing.iter().enumerate() {
            let sep = if i + 1 == existing.len() { "" } else { "," };
            let up: Vec<&str> =
                r.up.iter()
                    .map(|&u| if u { "true" } else { "false" })
                    .collect();
            write!(w, "    {}: {{\"up\": [{}]", q(&r.url), up.join(", "))?;
            if let Some(max) = r.max_limit {
                write!(w, ", \"max_limit\": {max}")?;
            }
            if let Some(t) = &r.timing {
                let timing = serde_json::to_string(t).map_err(std::io::Error::other)?;
                write!(w, ", \"timing\": {timing}")?;
            }
            writeln!(w, "}}{sep}")?;
        }
        writeln!(w, "  }},")?;
        if !self.monitor.is_empty() {
            writeln!(w, "  \"monitor\": {{")?;
            for (i, m) in self.monitor.iter().enumerate() {
                let sep = if i + 1 == self.monitor.len() { "" } else { "," };
                writeln!(
                    w,
                    "    {}: {{\"last_seen\": {}}}{sep}",
                    q(&m.url),
                    m.last_seen
                )?;
            }
            writeln!(w, "  }},")?;
        }
        let mut hex = [0u8; 64];
        if !self.mentions.is_empty() {
            writeln!(w, "  \"mentions\": [")?;
            for (i, m) in self.mentions.iter().enumerate() {
                let sep = if i + 1 == self.mentions.len() {
                    ""
                } else {
                    ","
                };
                write!(w, "    {{\"id\": \"{}\", ", encode_hex(&m.id, &mut hex))?;
                write!(
                    w,
                    "\"author\": \"{}\", \"created_at\": {}, \"kind\": {}, \"on\": [",
                    encode_hex(&m.author, &mut hex),
                    m.created_at,
                    m.kind
                )?;
                for (j, &r) in self.mention_relays(m).iter().enumerate() {
                    let s = if j == 0 { "" } else { ", " };
                    write!(w, "{s}{}", q(&self.relays[r as usize].url))?;
                }
                writeln!(w, "]}}{sep}")?;
            }
            writeln!(w, "  ],")?;
        }
        if !self.hints.is_empty() {
            writeln!(w, "  \"hints\": [")?;
            for (i, h) in self.hints.iter().enumerate() {
                let sep = if i + 1 == self.hints.len() { "" } else { "," };
                writeln!(
                    w,
                    "    {{\"author\": \"{}\", \"relay\": {}, \"source\": \"{}\"}}{sep}",
                    h.author.to_hex(),
                    q(&h.relay),
                    h.source.name()
                )?;
            }
            writeln!(w, "  ],")?;
        }
        writeln!(w, "  \"events\": [")?;
        for (i, e) in self.events.iter().enumerate() {
            let sep = if i + 1 == self.events.len() { "" } else { "," };
            write!(
                w,
                "    {{\"id\": \"{}\", \"author\": \"{}\", \"created_at\": {}, \"kind\": {}, \"on\": [",
                encode_hex(&e.id, &mut hex),
                self.follows[e.author as usize].to_hex(),
                e.created_at,
                e.kind
            )?;
            for (j, &r) in self.event_relays(e).iter().enumerate() {
                let s = if j == 0 { "" } else { ", " };
                write!(w, "{s}{}", q(&self.relays[r as usize].url))?;
            }
            write!(w, "]")?;
            let tags = self.event_tags(e);
            if !tags.is_empty() {
                write!(w, ", \"p\": [")?;
                for (j, pk) in tags.iter().enumerate() {
                    let s = if j == 0 { "" } else { ", " };
                    write!(w, "{s}\"{}\"", pk.to_hex())?;
                }
                write!(w, "]")?;
            }
            writeln!(w, "}}{sep}")?;
        }
        writeln!(w, "  ]")?;
        writeln!(w, "}}")?;
        w.flush()?;
        Ok(())
    }

    /// Writes the world to a path (buffered).
    pub fn write_path(&self, path: &std::path::Path) -> Result<(), WorldError> {
        let file = std::fs::File::create(path)?;
        self.write(std::io::BufWriter::with_capacity(1 << 20, file))
    }

    /// The world as a JSON string.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        self.write(&mut out).expect("writing to memory cannot fail");
        String::from_utf8(out).expect("the writer emits utf-8")
    }
}

fn encode_hex<'a>(bytes: &[u8; 32], out: &'a mut [u8; 64]) -> &'a str {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    std::str::from_utf8(out).expect("hex digits are ascii")
}

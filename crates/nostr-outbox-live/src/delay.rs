//! A delay proxy per world relay: the world's clock put in front of a local relay.
//!
//! The local relays answer in milliseconds; the world says how long each relay takes
//! ([`RelayTiming`]). A [`DelayProxy`] listens on the relay's URL port and, in session `s`:
//!
//! - **up** ([`Mode::Forward`]): each accepted connection waits the relay's connect time
//!   (`connect_ms(url, s, n)`, `n` the connection's number in the session) before it is joined
//!   to the relay. The client's HTTP request head (the WebSocket handshake) then passes at once,
//!   and what follows is read frame by frame: a REQ is held one query time (`query_ms(url, s,
//!   k)`, `k` the REQ's number on the connection) from when it was read, so each page is
//!   answered one query time after it was sent, as the simulator's clock has it; every other
//!   frame (CLOSE, pong, close) passes at once. Whole frames are held, so the stream stays
//!   valid; REQs held at once are independent (one slow page does not hold back the pages in
//!   flight beside it, as in the clock's model). Server→client bytes pass at once.
//! - **down, and its timing hangs** ([`Mode::BlackHole`]): connections are accepted and never
//!   answered; what the client sends is read and dropped, nothing reaches a relay.
//! - **down otherwise**: the proxy does not listen; connections are refused at once.
//!
//! Draws use the world relay's URL, so the proxy waits exactly what the simulator's clock
//! draws for the same relay, session and counter. Every wait is at most the cap it is given
//! ([`DelayCaps`]; the live bench passes [`CAP_SHARE`] of the client's timeouts): the
//! simulator's clock holds a relay that is up to answer within the client's timeouts, and so
//! does the proxy.
//!
//! Bounded: a connection reads at most [`CHUNK_BYTES`] at a time, buffers at most one frame of
//! up to [`MAX_FRAME_BYTES`] (a larger one, or bytes that are not a client's frames, end the
//! delays: the rest of the stream passes at once) and holds at most [`MAX_HELD_FRAMES`] frames;
//! a full queue stops reading from the client. Closing either side closes both, and stopping
//! the proxy closes every connection it holds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use nostr_outbox_sim::RelayTiming;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// The most bytes one read from a client takes.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// The most client→server frames a connection holds back at once.
pub const MAX_HELD_FRAMES: usize = 16;

/// The longest client frame read whole (a REQ for a thousand authors is about 70 KB).
pub const MAX_FRAME_BYTES: usize = 256 * 1024;

/// The longest HTTP request head looked for (past it, the rest of the stream passes at once).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The share of the client's connect and EOSE timeouts the live bench caps a delay at.
pub const CAP_SHARE: f64 = 0.8;

/// The longest a proxy waits before joining a connection, and before passing a REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayCaps {
    /// Cap on a connect wait.
    pub connect: Duration,
    /// Cap on a REQ's wait.
    pub query: Duration,
}

impl DelayCaps {
    /// [`CAP_SHARE`] of a client's connect and EOSE timeouts.
    pub fn of_timeouts(connect_timeout: Duration, eose_timeout: Duration) -> Self {
        Self {
            connect: connect_timeout.mul_f64(CAP_SHARE),
            query: eose_timeout.mul_f64(CAP_SHARE),
        }
    }
}

/// What a listening proxy does with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Join it to the relay after the session's connect time, delaying each chunk.
    Forward {
        /// The session (the timing's draws depend on it).
        session: u32,
    },
    /// Accept it and never answer.
    BlackHole,
}

/// One relay's proxy.
pub struct DelayProxy {
    /// The port clients connect to (the relay's URL port).
    pub port: u16,
    shared: Arc<Shared>,
    running: Option<(Mode, JoinHandle<()>)>,
}

/// What every connection of a proxy reads.
struct Shared {
    url: String,
    timing: RelayTiming,
    upstream: SocketAddr,
    caps: DelayCaps,
}

/// A proxy that could not listen.
#[derive(Debug, thiserror::Error)]
#[error("delay proxy on port {port} could not listen: {reason}")]
pub struct ListenError {
    /// The port.
    pub port: u16,
    /// Why.
    pub reason: String,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
}

impl DelayProxy {
    /// A proxy for the relay at `url` (the world's URL, which the draws are keyed by) listening
    /// on `port` in front of the local relay on `upstream_port`. It listens once told to.
    pub fn new(
        url: &str,
        timing: RelayTiming,
        port: u16,
        upstream_port: u16,
        caps: DelayCaps,
    ) -> Self {
        Self {
            port,
            shared: Arc::new(Shared {
                url: url.to_string(),
                timing,
                upstream: loopback(upstream_port),
                caps,
            }),
            running: None,
        }
    }

    /// The mode it listens in (`None`: it refuses).
    pub fn mode(&self) -> Option<Mode> {
        self.running.as_ref().map(|(mode, _)| *mode)
    }

    /// Listens in `mode`, closing every connection of an earlier mode or session first (the
    /// connection counter starts again). The port of a listener closed a moment ago may take a
    /// little while to be free: retried for up to two seconds.
    pub async fn listen(&mut self, mode: Mode) -> Result<(), ListenError> {
        self.stop().await;
        let mut last = String::new();
        for _ in 0..40 {
            match TcpListener::bind(loopback(self.port)).await {
                Ok(listener) => {
                    let task = tokio::spawn(serve(listener, mode, self.shared.clone()));
                    self.running = Some((mode, task));
                    return Ok(());
                }
                Err(e) => {
                    last = e.to_string();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        Err(ListenError {
            port: self.port,
            reason: last,
        })
    }

    /// Stops listening and closes every connection it holds: the port refuses again.
    pub async fn stop(&mut self) {
        if let Some((_, task)) = self.running.take() {
            task.abort();
            // The task owns the listener and the connections: once it is dropped they are.
            let _ = task.await;
        }
    }
}

/// Accepts connections until aborted; dropping it drops the listener and every connection.
async fn serve(listener: TcpListener, mode: Mode, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    let mut accepted: u64 = 0;
    loop {
        tokio::select! {
            next = listener.accept() => {
                let Ok((client, _)) = next else {
                    // Out of descriptors, say: wait a little rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let n = accepted;
                accepted += 1;
                match mode {
                    Mode::BlackHole => connections.spawn(hold(client)),
                    Mode::Forward { session } => {
                        connections.spawn(forward(client, session, n, shared.clone()))
                    }
                };
            }
            // Reap finished connections so the set stays as large as what is open.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A black hole: reads and drops what the client sends until it closes.
async fn hold(mut client: TcpStream) {
    let mut buf = [0u8; 1024];
    while let Ok(n) = client.read(&mut buf).await {
        if n == 0 {
            return;
        }
    }
}

fn capped_ms(ms: f64, cap: Duration) -> Duration {
    Duration::from_secs_f64((ms.max(0.0) / 1_000.0).min(cap.as_secs_f64()))
}

/// Connection `n` of `session`: the connect wait, then both directions until either closes.
async fn forward(client: TcpStream, session: u32, n: u64, shared: Arc<Shared>) {
    let wait = capped_ms(
        shared.timing.connect_ms(&shared.url, session, n),
        shared.caps.connect,
    );
    tokio::time::sleep(wait).await;
    let Ok(upstream) = TcpStream::connect(shared.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (client_read, mut client_write) = client.into_split();
    let (mut upstream_read, upstream_write) = upstream.into_split();
    let mut k: u64 = 0;
    let query = move || {
        let ms = shared.timing.query_ms(&shared.url, session, k);
        k += 1;
        capped_ms(ms, shared.caps.query)
    };
    tokio::select! {
        _ = delayed(client_read, upstream_write, query) => {}
        _ = tokio::io::copy(&mut upstream_read, &mut client_write) => {}
    }
    // Every half is dropped here: both sockets close.
}

/// Client → server: the HTTP request head at once, then frame by frame, each REQ `delay()`
/// after it was read and every other frame at once. Ends when either side closes or fails.
async fn delayed(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut delay: impl FnMut() -> Duration,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(MAX_HELD_FRAMES);
    let read = async move {
        let mut stream = Stream::default();
        let mut buf = vec![0u8; CHUNK_BYTES];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let now = Instant::now();
            for (bytes, req) in stream.push(&buf[..n]) {
                let at = if req { now + delay() } else { now };
                if tx.send((at, bytes)).await.is_err() {
                    return;
                }
            }
        }
    };
    let write = async move {
        // Held frames by release time, then by arrival.
        let mut held: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>> = BinaryHeap::new();
        let mut arrived: u64 = 0;
        loop {
            let next = held.peek().map(|Reverse((at, _, _))| *at);
            tokio::select! {
                frame = rx.recv(), if held.len() < MAX_HELD_FRAMES => {
                    let Some((at, bytes)) = frame else { return };
                    held.push(Reverse((at, arrived, bytes)));
                    arrived += 1;
                }
                _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                    let Some(Reverse((_, _, bytes))) = held.pop() else { continue };
                    if to.write_all(&bytes).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        _ = read => {}
        _ = write => {}
    }
}

/// The client's side of a WebSocket stream, cut into what may be held: the HTTP request head,
/// then whole frames, each marked when it is a REQ.
#[derive(Default)]
struct Stream {
    head: Head,
    /// Bytes of a frame not yet whole.
    partial: Vec<u8>,
    /// Frames could not be followed (too large, or not a client's): everything passes.
    lost: bool,
}

impl Stream {
    /// Takes the bytes of one read: what may be sent, in order, each with whether it is a REQ.
    fn push(&mut self, chunk: &[u8]) -> Vec<(Vec<u8>, bool)> {
        let mut out = Vec::new();
        let head = self.head.take(chunk);
        if head > 0 {
            out.push((chunk[..head].to_vec(), false));
        }
        let rest = &chunk[head..];
        if rest.is_empty() {
            return out;
        }
        if self.lost {
            out.push((rest.to_vec(), false));
            return out;
        }
        self.partial.extend_from_slice(rest);
        let mut at = 0;
        loop {
            match frame(&self.partial[at..]) {
                Frame::Whole { len, req } => {
                    out.push((self.partial[at..at + len].to_vec(), req));
                    at += len;
                }
                Frame::Partial => break,
                Frame::Unfollowable => {
                    self.lost = true;
                    out.push((self.partial[at..].to_vec(), false));
                    at = self.partial.len();
                    break;
                }
            }
        }
        self.partial.drain(..at);
        out
    }
}

/// What the start of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// A whole frame of `len` bytes; `req` when it is a text frame holding a REQ.
    Whole { len: usize, req: bool },
    /// The start of a frame.
    Partial,
    /// A frame larger than [`MAX_FRAME_BYTES`], or one a client does not send (unmasked).
    Unfollowable,
}

/// Reads the frame at the start of `buf` (RFC 6455 §5.2).
fn frame(buf: &[u8]) -> Frame {
    let [b0, b1, ..] = *buf else {
        return Frame::Partial;
    };
    if b1 & 0x80 == 0 {
        return Frame::Unfollowable;
    }
    let (len, mut at) = match b1 & 0x7f {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Frame::Partial,
        },
        127 => match buf.get(2..10) {
            Some(b) => (u64::from_be_bytes(b.try_into().expect("eight bytes")), 10),
            None => return Frame::Partial,
        },
        n => (u64::from(n), 2),
    };
    let Some(total) = usize::try_from(len)
        .ok()
        .and_then(|len| len.checked_add(at + 4))
        .filter(|&total| total <= MAX_FRAME_BYTES)
    else {
        return Frame::Unfollowable;
    };
    if buf.len() < total {
        return Frame::Partial;
    }
    let mask = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
    at += 4;
    const REQ: &[u8] = b"[\"REQ\"";
    let text = b0 & 0x0f == 1;
    let req = text
        && total - at >= REQ.len()
        && (REQ.iter().enumerate()).all(|(i, &c)| buf[at + i] ^ mask[i % 4] == c);
    Frame::Whole { len: total, req }
}

/// Finds the end of the client's HTTP request head (`\r\n\r\n`) across reads.
#[derive(Default)]
struct Head {
    /// The head ended (or was too long to be one): nothing more passes as head.
    done: bool,
    /// Bytes of the head seen so far.
    seen: usize,
    /// How many bytes of `\r\n\r\n` the last bytes matched.
    matched: usize,
}

impl Head {
    /// How many leading bytes of `chunk` still belong to the head.
    fn take(&mut self, chunk: &[u8]) -> usize {
        const END: &[u8; 4] = b"\r\n\r\n";
        if self.done {
            return 0;
        }
        for (i, &b) in chunk.iter().enumerate() {
            self.matched = if b == END[self.matched] {
                self.matched + 1
            } else if b == END[0] {
                1
            } else {
                0
            };
            self.seen += 1;
            if self.matched == END.len() || self.seen >= MAX_HEAD_BYTES {
                self.done = true;
                return i + 1;
            }
        }
        chunk.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked text frame, as a client sends it.
    fn client_frame(text: &str) -> Vec<u8> {
        let mask = [0x12, 0x34, 0x56, 0x78];
        let mut f = vec![0x81];
        match text.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n <= 0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    #[test]
    fn the_head_ends_at_its_blank_line_even_across_reads() {
        let mut h = Head::default();
        assert_eq!(h.take(b"GET / HTTP/1.1\r\nHost: x\r\n\r"), 26);
        assert_eq!(h.take(b"\nframe"), 1);
        assert_eq!(h.take(b"more"), 0);
        let mut h = Head::default();
        assert_eq!(h.take(b"GET /\r\n\r\nframe"), 9);
    }

    #[test]
    fn frames_are_cut_whole_and_reqs_are_told_apart() {
        let req = client_frame(r#"["REQ","s1",{"kinds":[1]}]"#);
        let close = client_frame(r#"["CLOSE","s1"]"#);
        let long = client_frame(&format!(r#"["REQ","s2",{{"x":"{}"}}]"#, "a".repeat(300)));
        assert_eq!(
            frame(&req),
            Frame::Whole {
                len: req.len(),
                req: true
            }
        );
        assert_eq!(
            frame(&close),
            Frame::Whole {
                len: close.len(),
                req: false
            }
        );
        assert_eq!(
            frame(&long),
            Frame::Whole {
                len: long.len(),
                req: true
            }
        );
        assert_eq!(frame(&long[..long.len() - 1]), Frame::Partial);
        // A stream split anywhere gives the same frames.
        let mut bytes = b"GET / HTTP/1.1\r\n\r\n".to_vec();
        for f in [&req, &close, &long] {
            bytes.extend_from_slice(f);
        }
        for cut in [1, 7, 20, 25, 60, bytes.len() - 3] {
            let mut s = Stream::default();
            let mut got = s.push(&bytes[..cut]);
            got.extend(s.push(&bytes[cut..]));
            let joined: Vec<u8> = got.iter().flat_map(|(b, _)| b.clone()).collect();
            assert_eq!(joined, bytes, "cut at {cut}");
            let reqs: Vec<bool> = got
                .iter()
                .filter(|(b, _)| b[0] == 0x81)
                .map(|g| g.1)
                .collect();
            assert_eq!(reqs, [true, false, true], "cut at {cut}");
        }
        // Bytes that are not a client's frames pass as they are.
        let mut s = Stream::default();
        let got = s.push(b"GET /\r\n\r\nplain");
        assert_eq!(got[1], (b"plain".to_vec(), false));
        assert_eq!(s.push(b"more"), [(b"more".to_vec(), false)]);
    }

    /// An echo server behind a proxy: the connect waits, a REQ comes back no sooner than its
    /// query time while the frame after it passes at once; a black hole answers nothing; a
    /// stopped proxy refuses.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reqs_are_held_one_query_time_and_other_frames_pass() {
        let echo = TcpListener::bind(loopback(0)).await.unwrap();
        let upstream_port = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let timing = RelayTiming {
            connect_ms: 50,
            query_ms: 300,
            jitter: 0.0,
            spread: 0.0,
            tail: 0.0,
            hangs: true,
        };
        let caps = DelayCaps {
            connect: Duration::from_secs(5),
            query: Duration::from_secs(5),
        };
        let port = crate::fleet::free_port_range(1, 27_500).unwrap();
        let mut proxy = DelayProxy::new("wss://a.example", timing, port, upstream_port, caps);
        proxy.listen(Mode::Forward { session: 0 }).await.unwrap();
        let started = std::time::Instant::now();
        let mut s = TcpStream::connect(loopback(port)).await.unwrap();
        let head = b"GET / HTTP/1.1\r\n\r\n";
        s.write_all(head).await.unwrap();
        let mut back = vec![0u8; head.len()];
        s.read_exact(&mut back).await.unwrap();
        // The head is not held: only the connect time passed.
        assert!(started.elapsed() >= Duration::from_millis(50));
        let req = client_frame(r#"["REQ","s1",{}]"#);
        let close = client_frame(r#"["CLOSE","s0"]"#);
        let sent = std::time::Instant::now();
        s.write_all(&req).await.unwrap();
        s.write_all(&close).await.unwrap();
        let mut got = vec![0u8; close.len() + req.len()];
        s.read_exact(&mut got).await.unwrap();
        assert!(sent.elapsed() >= Duration::from_millis(300));
        // The CLOSE did not wait behind the REQ.
        assert_eq!(got, [close, req].concat());

        proxy.listen(Mode::BlackHole).await.unwrap();
        let mut s = TcpStream::connect(loopback(port)).await.unwrap();
        s.write_all(head).await.unwrap();
        let mut buf = [0u8; 1];
        let answer = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
        assert!(answer.is_err(), "a black hole answered: {answer:?}");

        proxy.stop().await;
        assert!(TcpStream::connect(loopback(port)).await.is_err());
    }
}

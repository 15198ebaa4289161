//! A TCP proxy in front of a relay that counts the client's connections and the bytes they
//! carry.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections open now and the most at once, over every proxy that shares it.
#[derive(Clone, Default)]
pub struct Gauge {
    /// Connections open now.
    pub open: Arc<AtomicUsize>,
    /// The most open at once.
    pub peak: Arc<AtomicUsize>,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicUsize>,
    /// Bytes carried so far, both ways (WebSocket framing included).
    pub bytes: Arc<AtomicU64>,
}

impl Gauge {
    pub(crate) fn opened(&self) {
        self.accepted.fetch_add(1, Ordering::SeqCst);
        let now = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    pub(crate) fn closed(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A TCP proxy in front of `upstream` (a `ws://host:port` URL) that counts the client's
/// connections in `gauge`, each from its accept until either end closed it; returns its URL.
pub async fn proxy(upstream: &str, gauge: Gauge) -> String {
    delayed_proxy(upstream, gauge, Duration::ZERO).await
}

/// A relay alive but slow to accept: a proxy in front of `upstream` that accepts TCP at once
/// but passes no byte either way until `delay` has passed, so the WebSocket handshake
/// completes only then. Returns its URL.
pub async fn slow_to_accept(upstream: &str, delay: Duration) -> String {
    delayed_proxy(upstream, Gauge::default(), delay).await
}

/// [`proxy`], each connection reaching `upstream` only after `delay`.
async fn delayed_proxy(upstream: &str, gauge: Gauge, delay: Duration) -> String {
    let target = upstream.trim_start_matches("ws://").to_string();
    let (listener, url) = crate::task::listen_locally().await;
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            gauge.opened();
            let (target, gauge) = (target.clone(), gauge.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let Ok(server) = TcpStream::connect(&target).await else {
                    gauge.closed();
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                // Closed as soon as either side closed: the relay's end or the client's.
                tokio::select! {
                    _ = carry(&mut server_read, &mut client_write, &gauge.bytes) => {}
                    _ = carry(&mut client_read, &mut server_write, &gauge.bytes) => {}
                }
                gauge.closed();
                let _ = client_write.shutdown().await;
                let _ = server_write.shutdown().await;
            });
        }
    });
    url
}

/// Copies `from` to `to` until either ends, counting the bytes as they pass.
async fn carry(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    bytes: &AtomicU64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        bytes.fetch_add(n as u64, Ordering::SeqCst);
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

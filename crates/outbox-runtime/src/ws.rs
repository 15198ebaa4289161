//! Dialling one relay: the WebSocket handshake under the config's frame limits and connect
//! timeout, shared by route feeds, lookups and publishing.

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::config::RuntimeConfig;

/// An open relay socket.
pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The WebSocket limits of `cfg`: a frame or message above
/// [`hard_frame_limit`](RuntimeConfig::hard_frame_limit) kills the connection.
pub(crate) fn ws_config(cfg: &RuntimeConfig) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(cfg.hard_frame_limit))
        .max_frame_size(Some(cfg.hard_frame_limit))
}

/// Opens a socket to `url` within [`connect_timeout`](RuntimeConfig::connect_timeout); the
/// error says why not (`connect failed: …` or `connect timed out`).
pub(crate) async fn dial(url: &str, cfg: &RuntimeConfig) -> Result<Socket, String> {
    let connect =
        tokio_tungstenite::connect_async_tls_with_config(url, Some(ws_config(cfg)), true, None);
    match tokio::time::timeout(cfg.connect_timeout, connect).await {
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(e)) => Err(format!("connect failed: {e}")),
        Err(_) => Err("connect timed out".into()),
    }
}

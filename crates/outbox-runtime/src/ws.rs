//! The WebSocket layer under [`Sockets`](crate::Sockets): the socket type and the frame limits every socket is
//! opened with.

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

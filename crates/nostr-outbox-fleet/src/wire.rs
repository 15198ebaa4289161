//! What the servers read from a client: its text messages as JSON.

use futures_util::{Stream, StreamExt};
use tokio_tungstenite::tungstenite::{Error, Message};

/// The client's next text message that parses as JSON, with its text; other frames and
/// unparseable text are skipped. `None` once the connection ended or failed.
pub(crate) async fn next_json<S>(ws: &mut S) -> Option<(String, serde_json::Value)>
where
    S: Stream<Item = Result<Message, Error>> + Unpin,
{
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else { continue };
        if let Ok(value) = serde_json::from_str(&text) {
            return Some((text.to_string(), value));
        }
    }
    None
}

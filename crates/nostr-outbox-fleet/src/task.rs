//! A server's accept loop that stops with the value owning it, so a test's servers end with
//! the test, and where such a server listens.

use std::future::Future;

/// A spawned task aborted when dropped.
pub(crate) struct Task(tokio::task::JoinHandle<()>);

impl Task {
    /// Spawns `work` on the test's runtime.
    pub(crate) fn spawn(work: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(work))
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A listener on a free port of 127.0.0.1, and its `ws://127.0.0.1:port` URL.
pub(crate) async fn listen_locally() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    (listener, url)
}

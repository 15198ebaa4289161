//! A server's accept loop that stops with the value owning it, so a test's servers end with
//! the test.

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

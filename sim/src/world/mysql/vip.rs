//! The clients' address for the MySQL primary: a name dialled at whichever host it
//! points at now, re-pointed by a failover as a virtual IP or a DNS name would be.

use std::sync::Arc;

use lock_impl::zk::StreamDialer;

/// MySQL connections to the clients' address for the primary (`mysql-1`), dialled at
/// the host it points at now.
pub(crate) struct VipDialer {
    pub inner: Arc<dyn StreamDialer>,
    /// The name the clients dial.
    pub name: String,
    /// The host it points at.
    pub vip: Arc<std::sync::Mutex<String>>,
}

impl StreamDialer for VipDialer {
    fn dial(&self, host: &str, port: u16) -> lock_impl::zk::StreamDial<'_> {
        let host = if host == self.name {
            self.vip.lock().unwrap_or_else(|e| e.into_inner()).clone()
        } else {
            host.to_string()
        };
        Box::pin(async move { self.inner.dial(&host, port).await })
    }

    fn spawn(&self, task: lock_impl::Task) {
        self.inner.spawn(task);
    }
}

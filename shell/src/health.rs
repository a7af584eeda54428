//! Inputs of the liveness and readiness probes that are not owned by another module: the bound
//! on a pass's duration and the apiserver contact tracker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::watch;
use tracing::debug;

/// Default bound on one pass: `/healthz` fails when a pass has been running longer, so the
/// kubelet restarts a replica whose pass is stuck. Override with [`PASS_STUCK_AFTER_ENV`].
pub const PASS_STUCK_AFTER: Duration = Duration::from_secs(600);

/// Environment variable overriding [`PASS_STUCK_AFTER`], in whole seconds.
pub const PASS_STUCK_AFTER_ENV: &str = "NODEWRIGHT_PASS_STUCK_AFTER_SECONDS";

/// How often the contact loop asks the apiserver for its version.
pub const CONTACT_PERIOD: Duration = Duration::from_secs(3);

/// Readiness needs a successful apiserver answer within this window.
pub const CONTACT_WINDOW: Duration = Duration::from_secs(15);

/// The pass bound from the environment value, if valid, else the default.
pub fn stuck_after(env_value: Option<&str>) -> Result<Duration, String> {
    match env_value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(PASS_STUCK_AFTER),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
            _ => Err(format!(
                "{PASS_STUCK_AFTER_ENV}={v:?}: expected a positive number of seconds"
            )),
        },
    }
}

/// When the apiserver last answered this process.
#[derive(Clone, Debug, Default)]
pub struct Contact(Arc<Mutex<Option<Instant>>>);

impl Contact {
    /// Records a successful answer now.
    pub fn touch(&self) {
        *self.lock() = Some(Instant::now());
    }

    /// True when the last answer came less than `window` ago.
    pub fn within(&self, window: Duration) -> bool {
        self.lock().is_some_and(|t| t.elapsed() < window)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Asks the apiserver's own `/readyz` every [`CONTACT_PERIOD`] until shutdown, touching
/// `contact` on every "ok" (so an apiserver that answers but lost etcd counts as no contact).
pub async fn track_contact(client: Client, contact: Contact, mut shutdown: watch::Receiver<bool>) {
    loop {
        let call = tokio::time::timeout(CONTACT_PERIOD, apiserver_ready(&client));
        match call.await {
            Ok(Ok(_)) => contact.touch(),
            Ok(Err(e)) => debug!(error = %e, "apiserver contact check failed"),
            Err(_) => debug!("apiserver contact check timed out"),
        }
        tokio::select! {
            _ = tokio::time::sleep(CONTACT_PERIOD) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

async fn apiserver_ready(client: &Client) -> Result<(), kube::Error> {
    let request = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(request).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stuck_after_parses_seconds() {
        assert_eq!(stuck_after(None), Ok(PASS_STUCK_AFTER));
        assert_eq!(stuck_after(Some(" ")), Ok(PASS_STUCK_AFTER));
        assert_eq!(stuck_after(Some("30")), Ok(Duration::from_secs(30)));
        assert!(stuck_after(Some("0")).is_err());
        assert!(stuck_after(Some("10m")).is_err());
    }

    #[test]
    fn contact_expires() {
        let c = Contact::default();
        assert!(!c.within(CONTACT_WINDOW));
        c.touch();
        assert!(c.within(CONTACT_WINDOW));
        assert!(!c.within(Duration::ZERO));
    }
}

//! Serving the webhook certificate from fixed files (`WEBHOOK_CERT_DIR` with `tls.crt` and
//! `tls.key`), for local control planes that call the webhook by URL.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use tokio::sync::{Mutex, watch};
use tracing::{info, warn};

use super::tls::server_config;

/// Reloads `tls.crt`/`tls.key` from a directory when they change.
#[derive(Clone)]
pub struct CertFiles {
    dir: PathBuf,
    tls: RustlsConfig,
    loaded: Arc<Mutex<Option<String>>>,
    ready: Arc<AtomicBool>,
}

impl CertFiles {
    /// Files in `dir`, loaded into `tls`.
    pub fn new(dir: &str, tls: RustlsConfig) -> Self {
        CertFiles {
            dir: dir.into(),
            tls,
            loaded: Arc::default(),
            ready: Arc::default(),
        }
    }

    /// True once the files were loaded.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Checks the files every `period` until shutdown.
    pub async fn run(self, period: Duration, mut shutdown: watch::Receiver<bool>) {
        loop {
            if let Err(e) = self.load().await {
                warn!(dir = %self.dir.display(), error = %e, "cannot load webhook certificate files");
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    async fn load(&self) -> Result<(), String> {
        let crt = tokio::fs::read_to_string(self.dir.join("tls.crt"))
            .await
            .map_err(|e| e.to_string())?;
        let key = tokio::fs::read_to_string(self.dir.join("tls.key"))
            .await
            .map_err(|e| e.to_string())?;
        let mut loaded = self.loaded.lock().await;
        if loaded.as_deref() != Some(crt.as_str()) {
            self.tls
                .reload_from_config(server_config(&crt, &key).map_err(|e| e.to_string())?);
            info!(dir = %self.dir.display(), "serving the webhook certificate from files");
            *loaded = Some(crt);
        }
        self.ready.store(true, Ordering::Relaxed);
        Ok(())
    }
}

//! The serving-certificate Secret and CA-bundle injection (06-operations.md §2.6).
//!
//! Every replica runs this loop; writes carry resourceVersion preconditions, so concurrent
//! replicas cannot overwrite each other's certificate (the loser re-reads and adopts the winner's
//! Secret). The loaded certificate is swapped into the running TLS server without a restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use nodewright_crds::keys;
use tokio::sync::{Mutex, watch};
use tracing::{info, warn};

use super::cert::{self, CertBundle};
use super::tls::server_config;
use crate::error::{ShellError, is_already_exists, is_conflict};

/// Label on the chart's webhook configurations.
pub const CONFIG_LABEL: &str = "nodewright.nvidia.com/webhook-config";

/// Re-mint when the certificate expires within this window.
pub const ROTATE_BEFORE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Keeps the webhook certificate valid, loaded and trusted.
#[derive(Clone)]
pub struct CertManager {
    client: Client,
    namespace: String,
    secret_name: String,
    service_name: String,
    tls: RustlsConfig,
    loaded: Arc<Mutex<Option<String>>>,
    ready: Arc<AtomicBool>,
    /// RSA modulus size (4096; tests use less).
    pub bits: usize,
}

impl CertManager {
    /// A manager reloading certificates into `tls`.
    pub fn new(
        client: Client,
        namespace: &str,
        secret_name: &str,
        service_name: &str,
        tls: RustlsConfig,
    ) -> Self {
        CertManager {
            client,
            namespace: namespace.into(),
            secret_name: secret_name.into(),
            service_name: service_name.into(),
            tls,
            loaded: Arc::default(),
            ready: Arc::default(),
            bits: cert::RSA_BITS,
        }
    }

    /// True once the Secret's certificate is served and its CA is in both configuration kinds.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Reconciles every `period` until shutdown.
    pub async fn run(self, period: Duration, mut shutdown: watch::Receiver<bool>) {
        loop {
            match self.reconcile_once().await {
                Ok(ready) => self.ready.store(ready, Ordering::Relaxed),
                Err(e) => {
                    self.ready.store(false, Ordering::Relaxed);
                    warn!(error = %e, "webhook certificate reconcile failed");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// One round: ensure the Secret, serve it, inject its CA. Returns readiness.
    pub async fn reconcile_once(&self) -> Result<bool, ShellError> {
        let secret = self.ensure_secret().await?;
        let data = secret.data.clone().unwrap_or_default();
        let text = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .unwrap_or_default()
        };
        let (crt, key, ca) = (text("tls.crt"), text("tls.key"), text("ca.crt"));
        self.serve(&crt, &key).await?;
        let injected = self.inject(&ca).await?;
        Ok(injected)
    }

    async fn ensure_secret(&self) -> Result<Secret, ShellError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for _ in 0..3 {
            let existing = api.get_opt(&self.secret_name).await?;
            if let Some(s) = &existing
                && let Ok(()) = self.still_valid(s, Timestamp::now())
            {
                return Ok(existing.unwrap_or_default());
            }
            if let Some(s) = &existing
                && let Err(why) = self.still_valid(s, Timestamp::now())
            {
                info!(secret = %self.secret_name, why = %why, "re-minting webhook certificate");
            }
            let bundle = self.mint().await?;
            let result = match existing {
                None => {
                    let secret = self.secret_for(&bundle, None);
                    api.create(&PostParams::default(), &secret).await
                }
                Some(old) => {
                    let secret = self.secret_for(&bundle, Some(old.metadata));
                    api.replace(&self.secret_name, &PostParams::default(), &secret)
                        .await
                }
            };
            match result {
                Ok(s) => {
                    info!(secret = %self.secret_name, not_after = %bundle.not_after, "webhook certificate written");
                    return Ok(s);
                }
                Err(e) if is_already_exists(&e) || is_conflict(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ShellError::ConflictRetriesExhausted(3))
    }

    async fn mint(&self) -> Result<CertBundle, ShellError> {
        let (svc, ns, bits) = (self.service_name.clone(), self.namespace.clone(), self.bits);
        tokio::task::spawn_blocking(move || {
            cert::mint(&svc, &ns, Timestamp::now(), cert::VALIDITY, bits)
        })
        .await
        .map_err(|e| ShellError::Certificate(e.to_string()))?
    }

    /// Why a Secret must be re-minted, if it must.
    pub fn still_valid(&self, secret: &Secret, now: Timestamp) -> Result<(), String> {
        let data = secret.data.clone().unwrap_or_default();
        for k in ["ca.crt", "tls.crt", "tls.key"] {
            if data.get(k).is_none_or(|v| v.0.is_empty()) {
                return Err(format!("key {k} missing"));
            }
        }
        let ann = secret.metadata.annotations.clone().unwrap_or_default();
        let read = |suffix: &str| {
            ann.get(&format!("{}/{suffix}", keys::PREFIX))
                .or_else(|| ann.get(&format!("{}/{suffix}", keys::LEGACY_PREFIX)))
                .cloned()
        };
        if read("service").as_deref() != Some(self.service_name.as_str()) {
            return Err("certificate is for another Service".into());
        }
        let expiry = read("expiration")
            .and_then(|t| t.parse::<Timestamp>().ok())
            .ok_or("no readable expiration annotation")?;
        let horizon = now + jiff::SignedDuration::try_from(ROTATE_BEFORE).unwrap_or_default();
        if expiry < horizon {
            return Err(format!("certificate expires at {expiry}"));
        }
        let text = |k: &str| String::from_utf8_lossy(&data[k].0).into_owned();
        server_config(&text("tls.crt"), &text("tls.key"))
            .map(|_| ())
            .map_err(|e| format!("certificate unusable: {e}"))
    }

    fn secret_for(&self, b: &CertBundle, previous: Option<ObjectMeta>) -> Secret {
        let mut meta = previous.unwrap_or_default();
        meta.name = Some(self.secret_name.clone());
        meta.namespace = Some(self.namespace.clone());
        meta.managed_fields = None;
        let ann = meta.annotations.get_or_insert_with(BTreeMap::new);
        let expiration = b.not_after.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        for prefix in [keys::PREFIX, keys::LEGACY_PREFIX] {
            ann.insert(format!("{prefix}/expiration"), expiration.clone());
            ann.insert(format!("{prefix}/service"), self.service_name.clone());
        }
        let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
        Secret {
            metadata: meta,
            type_: Some("Opaque".into()),
            data: Some(BTreeMap::from([
                ("ca.crt".to_string(), bytes(&b.ca_pem)),
                ("tls.crt".to_string(), bytes(&b.cert_pem)),
                ("tls.key".to_string(), bytes(&b.key_pem)),
            ])),
            ..Secret::default()
        }
    }

    async fn serve(&self, crt: &str, key: &str) -> Result<(), ShellError> {
        let mut loaded = self.loaded.lock().await;
        if loaded.as_deref() == Some(crt) {
            return Ok(());
        }
        self.tls.reload_from_config(server_config(crt, key)?);
        *loaded = Some(crt.to_string());
        info!("serving the webhook certificate from the Secret");
        Ok(())
    }

    fn dials_us(&self, config: &WebhookClientConfig) -> bool {
        config
            .service
            .as_ref()
            .is_some_and(|s| s.name == self.service_name && s.namespace == self.namespace)
    }

    /// Sets `caBundle` on our webhooks in labelled configurations; true when at least one
    /// validating and one mutating configuration are ours and carry the bundle.
    async fn inject(&self, ca: &str) -> Result<bool, ShellError> {
        let bundle = ByteString(ca.as_bytes().to_vec());
        let lp = ListParams::default().labels(&format!("{CONFIG_LABEL}=true"));
        let mut owned = (0, 0);
        let vapi: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        for mut cfg in vapi.list(&lp).await?.items {
            let hooks = cfg
                .webhooks
                .iter_mut()
                .flatten()
                .map(|w| &mut w.client_config);
            if let Some(changed) = self.set_bundle(hooks, &bundle) {
                owned.0 += 1;
                if changed {
                    let name = cfg.metadata.name.clone().unwrap_or_default();
                    write_config(&vapi, &name, &cfg).await?;
                }
            }
        }
        let mapi: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        for mut cfg in mapi.list(&lp).await?.items {
            let hooks = cfg
                .webhooks
                .iter_mut()
                .flatten()
                .map(|w| &mut w.client_config);
            if let Some(changed) = self.set_bundle(hooks, &bundle) {
                owned.1 += 1;
                if changed {
                    let name = cfg.metadata.name.clone().unwrap_or_default();
                    write_config(&mapi, &name, &cfg).await?;
                }
            }
        }
        Ok(owned.0 > 0 && owned.1 > 0)
    }

    /// `None` when no webhook dials our Service; else whether a bundle changed.
    fn set_bundle<'a>(
        &self,
        hooks: impl Iterator<Item = &'a mut WebhookClientConfig>,
        bundle: &ByteString,
    ) -> Option<bool> {
        let mut ours = false;
        let mut changed = false;
        for h in hooks {
            if self.dials_us(h) {
                ours = true;
                if h.ca_bundle.as_ref() != Some(bundle) {
                    h.ca_bundle = Some(bundle.clone());
                    changed = true;
                }
            }
        }
        ours.then_some(changed)
    }
}

async fn write_config<K>(api: &Api<K>, name: &str, obj: &K) -> Result<(), ShellError>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.replace(name, &PostParams::default(), obj).await {
        Ok(_) => {
            info!(configuration = name, "injected the webhook CA bundle");
            Ok(())
        }
        // Someone else changed it; the next round re-reads.
        Err(e) if is_conflict(&e) => Ok(()),
        Err(e)
            if e.to_string().contains("Forbidden") || crate::error::api_code(&e) == Some(403) =>
        {
            Err(ShellError::Other(format!(
                "cannot update {name}: forbidden (ClusterRole resourceNames and chart names drifted?): {e}"
            )))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> CertManager {
        let (svc, _) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let client = Client::new(svc, "default");
        let (c, k) = cert::placeholder().expect("placeholder");
        let tls = RustlsConfig::from_config(server_config(&c, &k).expect("tls"));
        CertManager::new(client, "nodewright", "webhook-cert", "svc", tls)
    }

    #[tokio::test]
    async fn r4_1_rotation_within_7_days_and_service_rename_remint() {
        let m = manager();
        let now = Timestamp::now();
        let b = cert::mint("svc", "nodewright", now, cert::VALIDITY, 2048).expect("mint");
        let s = m.secret_for(&b, None);
        assert_eq!(m.still_valid(&s, now), Ok(()));
        let near_expiry = b.not_after - jiff::SignedDuration::from_hours(6 * 24);
        assert!(
            m.still_valid(&s, near_expiry).is_err(),
            "expiring within 7 days"
        );
        let other = CertManager {
            service_name: "renamed".into(),
            ..m.clone()
        };
        assert!(other.still_valid(&s, now).is_err(), "service rename");
        let mut broken = s.clone();
        broken.data.as_mut().map(|d| d.remove("tls.key"));
        assert!(m.still_valid(&broken, now).is_err());
    }

    #[tokio::test]
    async fn d22_secret_layout_matches_go_operator() {
        let m = manager();
        let b =
            cert::mint("svc", "nodewright", Timestamp::now(), cert::VALIDITY, 2048).expect("mint");
        let s = m.secret_for(&b, None);
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        let keys: Vec<_> = s.data.clone().unwrap_or_default().into_keys().collect();
        assert_eq!(keys, ["ca.crt", "tls.crt", "tls.key"]);
        let ann = s.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(ann["skyhook.nvidia.com/service"], "svc");
        assert!(ann["nodewright.nvidia.com/expiration"].ends_with('Z'));
        // a Secret written by the Go operator (legacy prefix only) is read too
        let mut legacy = s.clone();
        legacy.metadata.annotations = Some(
            ann.into_iter()
                .filter(|(k, _)| k.starts_with("skyhook"))
                .collect(),
        );
        assert_eq!(m.still_valid(&legacy, Timestamp::now()), Ok(()));
    }
}

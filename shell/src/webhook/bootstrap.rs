//! The serving-certificate Secret and CA-bundle injection (06-operations.md §2.6).
//!
//! Every replica runs this loop; writes carry resourceVersion preconditions, so concurrent
//! replicas cannot overwrite each other's certificate (the loser re-reads and adopts the winner's
//! Secret). The loaded certificate is swapped into the running TLS server without a restart.
//!
//! Rotation keeps admission working: a re-minted Secret's `ca.crt` carries the new CA followed by
//! the previous one, and every replica injects that bundle before it serves the new certificate,
//! so whichever certificate a replica serves, the apiserver trusts it.

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

/// Default re-mint window: when the certificate expires within it (`WEBHOOK_CERT_ROTATE_BEFORE`).
pub const ROTATE_BEFORE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Longest wait between two checks of the Secret and the CA bundles.
pub const MAX_CHECK_PERIOD: Duration = Duration::from_secs(30);

/// Annotation listing the serving certificate's names (comma-separated).
pub const NAMES_ANNOTATION: &str = "nodewright.nvidia.com/names";

/// How long to let the apiserver pick up a changed `caBundle` before serving a new certificate.
const BUNDLE_SETTLE: Duration = Duration::from_secs(2);

/// Where the apiserver dials the webhooks and how long certificates live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertSettings {
    /// The webhook Service (certificate names, and the configurations that are ours).
    pub service_name: String,
    /// URL mode: the base URL the configurations dial instead of the Service.
    pub url: Option<String>,
    /// Validity of minted certificates.
    pub validity: Duration,
    /// Re-mint when the certificate expires within this window.
    pub rotate_before: Duration,
}

impl CertSettings {
    /// Service mode with the default durations.
    pub fn service(service_name: &str) -> Self {
        CertSettings {
            service_name: service_name.into(),
            url: None,
            validity: cert::VALIDITY,
            rotate_before: ROTATE_BEFORE,
        }
    }

    /// The host of the URL-mode base URL, if any.
    pub fn url_host(&self) -> Option<String> {
        let uri: http::Uri = self.url.as_deref()?.parse().ok()?;
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        Some(host.to_string())
    }
}

/// Keeps the webhook certificate valid, loaded and trusted.
#[derive(Clone)]
pub struct CertManager {
    client: Client,
    namespace: String,
    secret_name: String,
    service_name: String,
    settings: CertSettings,
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
        settings: CertSettings,
        tls: RustlsConfig,
    ) -> Self {
        CertManager {
            client,
            namespace: namespace.into(),
            secret_name: secret_name.into(),
            service_name: settings.service_name.clone(),
            settings,
            tls,
            loaded: Arc::default(),
            ready: Arc::default(),
            bits: cert::RSA_BITS,
        }
    }

    /// How often to check: a third of the rotation window, at most [`MAX_CHECK_PERIOD`].
    pub fn check_period(&self) -> Duration {
        (self.settings.rotate_before / 3).clamp(Duration::from_secs(1), MAX_CHECK_PERIOD)
    }

    /// The serving certificate's names: the Service's DNS names, then the URL host if any.
    pub fn names(&self) -> Vec<String> {
        let mut names = cert::service_dns_names(&self.service_name, &self.namespace);
        if let Some(host) = self.settings.url_host() {
            names.insert(0, host);
        }
        names
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

    /// One round: ensure the Secret, inject its CA bundle, then serve its certificate (in that
    /// order, so the served certificate is always trusted). Returns readiness.
    pub async fn reconcile_once(&self) -> Result<bool, ShellError> {
        let secret = self.ensure_secret().await?;
        let data = secret.data.clone().unwrap_or_default();
        let text = |k: &str| {
            data.get(k)
                .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                .unwrap_or_default()
        };
        let (crt, key, ca) = (text("tls.crt"), text("tls.key"), text("ca.crt"));
        let (injected, changed) = self.inject(&ca).await?;
        if changed && self.loaded.lock().await.as_deref() != Some(crt.as_str()) {
            tokio::time::sleep(BUNDLE_SETTLE).await;
        }
        self.serve(&crt, &key).await?;
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
            let mut bundle = self.mint().await?;
            if let Some(previous) = existing.as_ref().and_then(previous_ca) {
                bundle.ca_pem = format!("{}\n{previous}", bundle.ca_pem.trim_end());
            }
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
        let (names, bits, validity) = (self.names(), self.bits, self.settings.validity);
        tokio::task::spawn_blocking(move || cert::mint(&names, Timestamp::now(), validity, bits))
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
        // Secrets written by the Go operator carry no names: they are for the Service only.
        let names = ann.get(NAMES_ANNOTATION).cloned().unwrap_or_else(|| {
            cert::service_dns_names(&self.service_name, &self.namespace).join(",")
        });
        if names != self.names().join(",") {
            return Err(format!("certificate is for other names ({names})"));
        }
        let expiry = read("expiration")
            .and_then(|t| t.parse::<Timestamp>().ok())
            .ok_or("no readable expiration annotation")?;
        let window =
            jiff::SignedDuration::try_from(self.settings.rotate_before).unwrap_or_default();
        let horizon = now + window;
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
        ann.insert(NAMES_ANNOTATION.to_string(), self.names().join(","));
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

    /// True when the webhook dials our Service or, in URL mode, a path under our base URL.
    pub fn dials_us(&self, config: &WebhookClientConfig) -> bool {
        let service = config
            .service
            .as_ref()
            .is_some_and(|s| s.name == self.service_name && s.namespace == self.namespace);
        let url = match (&self.settings.url, &config.url) {
            (Some(base), Some(u)) => {
                let base = base.trim_end_matches('/');
                u.strip_prefix(base)
                    .is_some_and(|rest| rest.starts_with('/'))
            }
            _ => false,
        };
        service || url
    }

    /// Sets `caBundle` on our webhooks in labelled configurations. Returns (ready, changed):
    /// ready when at least one validating and one mutating configuration are ours and carry
    /// the bundle, changed when a configuration was written.
    async fn inject(&self, ca: &str) -> Result<(bool, bool), ShellError> {
        let bundle = ByteString(ca.as_bytes().to_vec());
        let lp = ListParams::default().labels(&format!("{CONFIG_LABEL}=true"));
        let mut owned = (0, 0);
        let mut wrote = false;
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
                    wrote = true;
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
                    wrote = true;
                }
            }
        }
        Ok((owned.0 > 0 && owned.1 > 0, wrote))
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

/// The first CA certificate of an existing Secret, kept in the next bundle during a rotation.
fn previous_ca(secret: &Secret) -> Option<String> {
    let data = secret.data.as_ref()?;
    let text = String::from_utf8_lossy(&data.get("ca.crt")?.0).into_owned();
    const END: &str = "-----END CERTIFICATE-----";
    let end = text.find(END)? + END.len();
    let first = text[..end].trim_start();
    first
        .starts_with("-----BEGIN CERTIFICATE-----")
        .then(|| format!("{first}\n"))
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
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    fn manager_with(settings: CertSettings) -> CertManager {
        let (svc, _) = tower_test::mock::pair::<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >();
        let client = Client::new(svc, "default");
        let (c, k) = cert::placeholder().expect("placeholder");
        let tls = RustlsConfig::from_config(server_config(&c, &k).expect("tls"));
        CertManager::new(client, "nodewright", "webhook-cert", settings, tls)
    }

    fn manager() -> CertManager {
        manager_with(CertSettings::service("svc"))
    }

    fn mint_for(m: &CertManager, now: Timestamp) -> CertBundle {
        cert::mint(&m.names(), now, m.settings.validity, 2048).expect("mint")
    }

    #[tokio::test]
    async fn r4_1_rotation_within_7_days_and_service_rename_remint() {
        let m = manager();
        let now = Timestamp::now();
        let b = mint_for(&m, now);
        let s = m.secret_for(&b, None);
        assert_eq!(m.still_valid(&s, now), Ok(()));
        let near_expiry = b.not_after - jiff::SignedDuration::from_hours(6 * 24);
        assert!(
            m.still_valid(&s, near_expiry).is_err(),
            "expiring within 7 days"
        );
        let other = manager_with(CertSettings::service("renamed"));
        assert!(other.still_valid(&s, now).is_err(), "service rename");
        let mut broken = s.clone();
        broken.data.as_mut().map(|d| d.remove("tls.key"));
        assert!(m.still_valid(&broken, now).is_err());
    }

    #[tokio::test]
    async fn r4_1_configurable_validity_and_rotate_before() {
        let m = manager_with(CertSettings {
            validity: Duration::from_secs(180),
            rotate_before: Duration::from_secs(120),
            ..CertSettings::service("svc")
        });
        assert_eq!(m.check_period(), Duration::from_secs(30));
        let now = Timestamp::now();
        let b = mint_for(&m, now);
        assert_eq!(b.not_after.as_second(), now.as_second() + 180);
        let s = m.secret_for(&b, None);
        assert_eq!(m.still_valid(&s, now), Ok(()));
        let later = now + jiff::SignedDuration::from_secs(61);
        assert!(m.still_valid(&s, later).is_err(), "inside the 2m window");
        let quick = manager_with(CertSettings {
            rotate_before: Duration::from_secs(15),
            ..CertSettings::service("svc")
        });
        assert_eq!(quick.check_period(), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn url_mode_names_and_dialled_configurations() {
        let m = manager_with(CertSettings {
            url: Some("https://127.0.0.1:31306".into()),
            ..CertSettings::service("svc")
        });
        assert_eq!(
            m.names(),
            [
                "127.0.0.1",
                "svc.nodewright.svc.cluster.local",
                "svc.nodewright.svc"
            ]
        );
        let url = |u: &str| WebhookClientConfig {
            url: Some(u.into()),
            ..Default::default()
        };
        assert!(m.dials_us(&url("https://127.0.0.1:31306/validate-x")));
        assert!(!m.dials_us(&url("https://127.0.0.1:313060/validate-x")));
        assert!(!m.dials_us(&url("https://10.0.0.1:31306/validate-x")));
        let svc = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "svc".into(),
                namespace: "nodewright".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(m.dials_us(&svc));
        // a Secret minted for the Service only is re-minted for the URL host
        let plain = manager();
        let s = plain.secret_for(&mint_for(&plain, Timestamp::now()), None);
        assert!(m.still_valid(&s, Timestamp::now()).is_err());
        let s = m.secret_for(&mint_for(&m, Timestamp::now()), None);
        assert_eq!(m.still_valid(&s, Timestamp::now()), Ok(()));
    }

    #[tokio::test]
    async fn r4_1_rotation_bundle_keeps_the_previous_ca() {
        let m = manager();
        let first = mint_for(&m, Timestamp::now());
        let old = m.secret_for(&first, None);
        let kept = previous_ca(&old).expect("a CA");
        assert_eq!(kept.trim_end(), first.ca_pem.trim_end());
        // a bundle of two keeps only its first (the newest) CA at the next rotation
        let second = mint_for(&m, Timestamp::now());
        let two = CertBundle {
            ca_pem: format!("{}\n{kept}", second.ca_pem.trim_end()),
            ..second.clone()
        };
        let s = m.secret_for(&two, None);
        assert_eq!(
            previous_ca(&s).expect("a CA").trim_end(),
            second.ca_pem.trim_end()
        );
        let mut garbage = old.clone();
        garbage
            .data
            .as_mut()
            .map(|d| d.insert("ca.crt".into(), ByteString(b"junk".to_vec())));
        assert_eq!(previous_ca(&garbage), None);
    }

    #[tokio::test]
    async fn d22_secret_layout_matches_go_operator() {
        let m = manager();
        let b = mint_for(&m, Timestamp::now());
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

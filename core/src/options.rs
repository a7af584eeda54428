//! Operator options (02-lifecycle.md §15, 04-jobs-rules.md §11), parsed from environment
//! variables with the Go operator's names and defaults, validated with one aggregated error.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use nodewright_crds::duration::parse_go_duration;
use thiserror::Error;

/// Every option the core or the shell reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Namespace of Jobs, ConfigMaps and the webhook Secret (`NAMESPACE`).
    pub namespace: String,
    /// Idle requeue interval (`DEFAULT_INTERVAL`, ≥ 1m).
    pub default_interval: Duration,
    /// Pull secret added to executors (`IMAGE_PULL_SECRET`).
    pub image_pull_secret: Option<String>,
    /// Host directory root for package copies (`COPY_DIR_ROOT`).
    pub copy_dir_root: String,
    /// Host log root for the agent (`AGENT_LOG_ROOT`).
    pub agent_log_root: String,
    /// Reset a node's state when its boot id changes (`REAPPLY_ON_REBOOT`).
    pub reapply_on_reboot: bool,
    /// The runtime-required taint (`RUNTIME_REQUIRED_TAINT`).
    pub runtime_required_taint: Taint,
    /// Default agent image (`AGENT_IMAGE`).
    pub agent_image: String,
    /// Main container image of legacy raw-pod executors (`PAUSE_IMAGE`).
    pub pause_image: String,
    /// Retention of succeeded Jobs (`JOB_TTL_SUCCEEDED`, ≥ 1m).
    pub job_ttl_succeeded: Duration,
    /// Retention of failed Jobs (`JOB_TTL_FAILED`, ≥ 1m).
    pub job_ttl_failed: Duration,
    /// Default stage deadline (`JOB_STAGE_TIMEOUT`, ≥ 0; zero disables).
    pub job_stage_timeout: Duration,
    /// Retries after the first attempt (`JOB_BACKOFF_LIMIT`, ≥ 0).
    pub job_backoff_limit: i32,
    /// How long an image-pull failure may persist before the entry reads erroring
    /// (`JOB_IMAGE_PULL_GRACE`, decision D13; zero disables).
    pub job_image_pull_grace: Duration,
    /// `priorityClassName` on executor pods (`PACKAGE_PRIORITY_CLASS_NAME`).
    pub package_priority_class_name: Option<String>,
    /// Also publish `skyhook_*` metrics (`PUBLISH_LEGACY_METRICS`).
    pub publish_legacy_metrics: bool,
    /// Leader election on a Lease (`LEADER_ELECTION`).
    pub leader_election: bool,
    /// Serve admission webhooks (`ENABLE_WEBHOOKS`).
    pub enable_webhooks: bool,
    /// Webhook serving-cert Secret (`WEBHOOK_SECRET_NAME`).
    pub webhook_secret_name: String,
    /// Webhook Service name (`WEBHOOK_SERVICE_NAME`).
    pub webhook_service_name: String,
    /// Validity of self-minted webhook certificates (`WEBHOOK_CERT_VALIDITY`, ≥ 1m).
    pub webhook_cert_validity: Duration,
    /// Re-mint the webhook certificate this long before it expires
    /// (`WEBHOOK_CERT_ROTATE_BEFORE`, ≥ 10s, less than the validity).
    pub webhook_cert_rotate_before: Duration,
    /// Base URL the webhook configurations dial instead of the Service (`WEBHOOK_URL`, e.g.
    /// `https://127.0.0.1:9443` on a local control plane); its host goes into the certificate.
    pub webhook_url: Option<String>,
    /// Metrics bind address (`METRICS_PORT`).
    pub metrics_addr: String,
    /// Serve `/metrics` over HTTPS for authenticated, authorized callers only (`METRICS_SECURE`).
    pub metrics_secure: bool,
    /// Probe bind address (`PROBE_PORT`).
    pub probe_addr: String,
    /// `json` or `console` (`LOG_ENCODER`).
    pub log_encoder: String,
    /// Log level (`LOG_LEVEL`).
    pub log_level: String,
}

/// Invalid options, all messages joined.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid operator options: {}", .0.join("; "))]
pub struct OptionsError(pub Vec<String>);

impl Default for Options {
    fn default() -> Self {
        // The defaults are valid by construction; parsing an empty environment cannot fail.
        Options::from_env(&BTreeMap::new()).expect("default options are valid")
    }
}

impl Options {
    /// Parses options from environment variables; unset variables take their defaults.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, OptionsError> {
        let mut errors = Vec::new();
        let mut p = Parser {
            env,
            errors: &mut errors,
        };
        let options = Options {
            namespace: p.text("NAMESPACE", "nodewright"),
            default_interval: p.duration("DEFAULT_INTERVAL", "10m", Some(60)),
            image_pull_secret: p.optional("IMAGE_PULL_SECRET"),
            copy_dir_root: p.text("COPY_DIR_ROOT", "/var/lib/skyhook"),
            agent_log_root: p.text("AGENT_LOG_ROOT", "/var/log/skyhook"),
            reapply_on_reboot: p.boolean("REAPPLY_ON_REBOOT", false),
            runtime_required_taint: p.taint(
                "RUNTIME_REQUIRED_TAINT",
                "nodewright.nvidia.com=runtime-required:NoSchedule",
            ),
            agent_image: p.text("AGENT_IMAGE", "ghcr.io/nvidia/nodewright/agent:latest"),
            pause_image: p.text("PAUSE_IMAGE", "registry.k8s.io/pause:3.10"),
            job_ttl_succeeded: p.duration("JOB_TTL_SUCCEEDED", "1h", Some(60)),
            job_ttl_failed: p.duration("JOB_TTL_FAILED", "24h", Some(60)),
            job_stage_timeout: p.duration("JOB_STAGE_TIMEOUT", "1h", Some(0)),
            job_backoff_limit: p.int("JOB_BACKOFF_LIMIT", 3),
            job_image_pull_grace: p.duration("JOB_IMAGE_PULL_GRACE", "5m", Some(0)),
            package_priority_class_name: p.optional("PACKAGE_PRIORITY_CLASS_NAME"),
            publish_legacy_metrics: p.boolean("PUBLISH_LEGACY_METRICS", true),
            leader_election: p.boolean("LEADER_ELECTION", false),
            enable_webhooks: p.boolean("ENABLE_WEBHOOKS", true),
            webhook_secret_name: p.text("WEBHOOK_SECRET_NAME", "webhook-cert"),
            webhook_service_name: p.text(
                "WEBHOOK_SERVICE_NAME",
                "nodewright-operator-webhook-service",
            ),
            webhook_cert_validity: p.duration("WEBHOOK_CERT_VALIDITY", "8760h", Some(60)),
            webhook_cert_rotate_before: p.duration("WEBHOOK_CERT_ROTATE_BEFORE", "168h", Some(10)),
            webhook_url: p.optional("WEBHOOK_URL"),
            metrics_addr: p.text("METRICS_PORT", ":8080"),
            metrics_secure: p.boolean("METRICS_SECURE", false),
            probe_addr: p.text("PROBE_PORT", ":8081"),
            log_encoder: p.text("LOG_ENCODER", "json"),
            log_level: p.text("LOG_LEVEL", "info"),
        };
        options.check(&mut errors);
        if errors.is_empty() {
            Ok(options)
        } else {
            Err(OptionsError(errors))
        }
    }

    fn check(&self, errors: &mut Vec<String>) {
        if self.namespace.is_empty() {
            errors.push("NAMESPACE must not be empty".into());
        }
        if !self.copy_dir_root.starts_with('/') {
            errors.push(format!(
                "COPY_DIR_ROOT must start with '/': {:?}",
                self.copy_dir_root
            ));
        }
        for (name, image) in [
            ("AGENT_IMAGE", &self.agent_image),
            ("PAUSE_IMAGE", &self.pause_image),
        ] {
            if !image.contains(':') {
                errors.push(format!("{name} must contain a tag (':'): {image:?}"));
            }
        }
        if self.job_backoff_limit < 0 {
            errors.push(format!(
                "JOB_BACKOFF_LIMIT must be >= 0, got {}",
                self.job_backoff_limit
            ));
        }
        if self.webhook_cert_rotate_before >= self.webhook_cert_validity {
            errors.push(format!(
                "WEBHOOK_CERT_ROTATE_BEFORE ({:?}) must be less than WEBHOOK_CERT_VALIDITY ({:?})",
                self.webhook_cert_rotate_before, self.webhook_cert_validity
            ));
        }
        if let Some(url) = &self.webhook_url
            && !url.starts_with("https://")
        {
            errors.push(format!("WEBHOOK_URL must start with https://: {url:?}"));
        }
        let key = &self.runtime_required_taint.key;
        if key.contains('/') || key.len() > 53 {
            errors.push(format!(
                "RUNTIME_REQUIRED_TAINT key must have no '/' and be at most 53 characters: {key:?}"
            ));
        }
        if !["json", "console"].contains(&self.log_encoder.as_str()) {
            errors.push(format!(
                "LOG_ENCODER must be json or console: {:?}",
                self.log_encoder
            ));
        }
    }

    /// The agent image tag (`agentVersion` in packages.json): text after the last `:`.
    pub fn agent_version(&self) -> &str {
        self.agent_image.rsplit(':').next().unwrap_or_default()
    }
}

struct Parser<'a> {
    env: &'a BTreeMap<String, String>,
    errors: &'a mut Vec<String>,
}

impl<'a> Parser<'a> {
    fn raw(&self, name: &str) -> Option<&'a str> {
        self.env.get(name).map(String::as_str)
    }

    fn text(&mut self, name: &str, default: &str) -> String {
        self.raw(name).unwrap_or(default).to_string()
    }

    fn optional(&mut self, name: &str) -> Option<String> {
        self.raw(name).filter(|v| !v.is_empty()).map(str::to_string)
    }

    fn boolean(&mut self, name: &str, default: bool) -> bool {
        match self.raw(name) {
            None | Some("") => default,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "1" | "t" | "true" => true,
                "0" | "f" | "false" => false,
                _ => {
                    self.errors
                        .push(format!("{name} must be a boolean, got {v:?}"));
                    default
                }
            },
        }
    }

    fn int(&mut self, name: &str, default: i32) -> i32 {
        match self.raw(name) {
            None | Some("") => default,
            Some(v) => v.parse().unwrap_or_else(|_| {
                self.errors
                    .push(format!("{name} must be an integer, got {v:?}"));
                default
            }),
        }
    }

    /// Parses a Go duration; `min_secs` is the floor (inclusive), negative values always fail.
    fn duration(&mut self, name: &str, default: &str, min_secs: Option<u64>) -> Duration {
        let text = self.raw(name).filter(|v| !v.is_empty()).unwrap_or(default);
        match parse_go_duration(text) {
            Ok(nanos) if nanos < 0 => {
                self.errors
                    .push(format!("{name} must be >= 0, got {text:?}"));
                Duration::ZERO
            }
            Ok(nanos) => {
                let value = Duration::from_nanos(nanos.unsigned_abs());
                if let Some(min) = min_secs
                    && value < Duration::from_secs(min)
                {
                    self.errors
                        .push(format!("{name} must be at least {min}s, got {text:?}"));
                }
                value
            }
            Err(e) => {
                self.errors.push(format!("{name}: {e}"));
                Duration::ZERO
            }
        }
    }

    fn taint(&mut self, name: &str, default: &str) -> Taint {
        let text = self.raw(name).unwrap_or(default);
        parse_taint(text).unwrap_or_else(|e| {
            self.errors.push(format!("{name}: {e}"));
            Taint::default()
        })
    }
}

/// Parses `key=value:Effect` or `key:Effect`; removal forms (`key-`) are refused.
pub fn parse_taint(text: &str) -> Result<Taint, String> {
    if text.is_empty() {
        return Err("taint must not be empty".into());
    }
    if text.ends_with('-') {
        return Err(format!("taint {text:?} is a removal, not a taint"));
    }
    let (key_value, effect) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("taint {text:?} has no effect (key=value:Effect)"))?;
    if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
        return Err(format!("taint {text:?} has an invalid effect {effect:?}"));
    }
    let (key, value) = match key_value.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (key_value, None),
    };
    if key.is_empty() {
        return Err(format!("taint {text:?} has an empty key"));
    }
    Ok(Taint {
        key: key.to_string(),
        value,
        effect: effect.to_string(),
        time_added: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn options_defaults_match_spec_15() {
        let o = Options::default();
        assert_eq!(o.namespace, "nodewright");
        assert_eq!(o.default_interval, Duration::from_secs(600));
        assert_eq!(o.job_ttl_succeeded, Duration::from_secs(3600));
        assert_eq!(o.job_ttl_failed, Duration::from_secs(86400));
        assert_eq!(o.job_stage_timeout, Duration::from_secs(3600));
        assert_eq!(o.job_backoff_limit, 3);
        assert_eq!(o.job_image_pull_grace, Duration::from_secs(300));
        assert_eq!(o.runtime_required_taint.key, "nodewright.nvidia.com");
        assert_eq!(
            o.runtime_required_taint.value.as_deref(),
            Some("runtime-required")
        );
        assert_eq!(o.agent_version(), "latest");
    }

    #[test]
    fn options_11_2_sub_minute_ttl_fails_startup() {
        let err = Options::from_env(&env(&[
            ("JOB_TTL_SUCCEEDED", "30s"),
            ("JOB_TTL_FAILED", "0"),
        ]))
        .unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
    }

    #[test]
    fn options_11_5_errors_are_aggregated() {
        let err = Options::from_env(&env(&[
            ("JOB_STAGE_TIMEOUT", "-1s"),
            ("JOB_BACKOFF_LIMIT", "-1"),
            ("AGENT_IMAGE", "agent"),
            ("RUNTIME_REQUIRED_TAINT", "foo-"),
            ("COPY_DIR_ROOT", "relative"),
        ]))
        .unwrap_err();
        assert_eq!(err.0.len(), 5, "{err}");
    }

    #[test]
    fn options_zero_stage_timeout_and_grace_are_allowed() {
        let o = Options::from_env(&env(&[
            ("JOB_STAGE_TIMEOUT", "0"),
            ("JOB_IMAGE_PULL_GRACE", "0"),
        ]))
        .unwrap();
        assert_eq!(o.job_stage_timeout, Duration::ZERO);
        assert_eq!(o.job_image_pull_grace, Duration::ZERO);
    }

    #[test]
    fn options_webhook_cert_durations_and_url() {
        let o = Options::default();
        assert_eq!(
            o.webhook_cert_validity,
            Duration::from_secs(365 * 24 * 3600)
        );
        assert_eq!(
            o.webhook_cert_rotate_before,
            Duration::from_secs(7 * 24 * 3600)
        );
        assert!(!o.metrics_secure);
        let o = Options::from_env(&env(&[
            ("WEBHOOK_CERT_VALIDITY", "3m"),
            ("WEBHOOK_CERT_ROTATE_BEFORE", "2m"),
            ("WEBHOOK_URL", "https://127.0.0.1:9443"),
            ("METRICS_SECURE", "true"),
        ]))
        .unwrap();
        assert_eq!(o.webhook_cert_validity, Duration::from_secs(180));
        assert_eq!(o.webhook_url.as_deref(), Some("https://127.0.0.1:9443"));
        assert!(o.metrics_secure);
        let err = Options::from_env(&env(&[
            ("WEBHOOK_CERT_VALIDITY", "2m"),
            ("WEBHOOK_CERT_ROTATE_BEFORE", "2m"),
            ("WEBHOOK_URL", "http://x"),
        ]))
        .unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
    }

    #[test]
    fn options_taint_parsing() {
        assert!(parse_taint("k=v:NoSchedule").is_ok());
        assert!(parse_taint("k:NoExecute").is_ok());
        assert!(parse_taint("k=v").is_err());
        assert!(parse_taint("k=v:Bogus").is_err());
    }
}

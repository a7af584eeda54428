//! The standard kubectl connection flags and the one function that turns them into a client.
//! Flags override the selected kubeconfig entries the way kubectl's do: `--server`,
//! `--certificate-authority` and `--insecure-skip-tls-verify` the cluster, `--token` the user
//! (other credentials of that user are dropped), `--as`/`--as-group` impersonate.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use kube::{Client, Config};

use crate::client::{GuardLayer, Purpose, REQUEST_TIMEOUT};

/// kubectl's connection flags.
#[derive(Args, Clone, Debug, Default)]
pub struct ConnectFlags {
    /// Path to the kubeconfig file.
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<String>,
    /// Kubeconfig context.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Kubeconfig cluster to use (instead of the context's).
    #[arg(long, global = true)]
    pub cluster: Option<String>,
    /// Kubeconfig user to use (instead of the context's).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Address of the Kubernetes API server.
    #[arg(short = 's', long, global = true)]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// Path to a CA certificate file for the API server.
    #[arg(long, global = true)]
    pub certificate_authority: Option<String>,
    /// Do not verify the API server's certificate (insecure).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Username to impersonate.
    #[arg(long = "as", global = true)]
    pub as_user: Option<String>,
    /// Group to impersonate (repeat for several).
    #[arg(long = "as-group", global = true)]
    pub as_group: Vec<String>,
    /// Bound of one request: `0` (the built-in bounds), `30`, `10s`, `500ms`, `2m`.
    #[arg(long, global = true, value_parser = parse_request_timeout)]
    pub request_timeout: Option<Duration>,
}

/// Parses kubectl's `--request-timeout` (a bare number means seconds; `0` means no override).
pub fn parse_request_timeout(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (digits, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = digits
        .parse()
        .map_err(|_| format!("invalid request timeout {s:?} (examples: 0, 30, 10s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => {
            return Err(format!(
                "invalid request timeout unit in {s:?} (ms, s, m, h)"
            ));
        }
    };
    Ok(Duration::from_secs_f64(secs))
}

impl ConnectFlags {
    /// The request timeout asked for, if any (zero means none).
    fn timeout(&self) -> Option<Duration> {
        self.request_timeout.filter(|d| !d.is_zero())
    }

    fn overrides_anything(&self) -> bool {
        self.server.is_some()
            || self.token.is_some()
            || self.certificate_authority.is_some()
            || self.insecure_skip_tls_verify
            || self.as_user.is_some()
            || !self.as_group.is_empty()
    }

    /// The kubeconfig after applying the flags, with the options that select from it.
    pub fn apply_to(&self, mut kc: Kubeconfig) -> Result<(Kubeconfig, KubeConfigOptions)> {
        if self.certificate_authority.is_some() && self.insecure_skip_tls_verify {
            bail!("--certificate-authority and --insecure-skip-tls-verify exclude each other");
        }
        let context_name = self.context.clone().or(kc.current_context.clone());
        let context = context_name
            .as_ref()
            .and_then(|n| kc.contexts.iter().find(|c| &c.name == n))
            .and_then(|c| c.context.clone());
        if context.is_none() && self.server.is_none() {
            match &context_name {
                Some(n) => bail!("context {n:?} not found in the kubeconfig"),
                None => {
                    bail!("the kubeconfig names no current context (use --context or --server)")
                }
            }
        }
        let cluster_name = self
            .cluster
            .clone()
            .or(context.as_ref().map(|c| c.cluster.clone()))
            .unwrap_or_else(|| "flags".into());
        let user_name = self
            .user
            .clone()
            .or(context.as_ref().and_then(|c| c.user.clone()))
            .unwrap_or_else(|| "flags".into());
        self.patch_cluster(&mut kc, &cluster_name)?;
        self.patch_user(&mut kc, &user_name)?;
        let context_name = context_name
            .filter(|_| context.is_some())
            .unwrap_or_else(|| "flags".into());
        if context.is_none() {
            kc.contexts.push(NamedContext {
                name: context_name.clone(),
                context: Some(Context {
                    cluster: cluster_name.clone(),
                    user: Some(user_name.clone()),
                    ..Context::default()
                }),
                other: Default::default(),
            });
        }
        let options = KubeConfigOptions {
            context: Some(context_name),
            cluster: Some(cluster_name),
            user: Some(user_name),
        };
        Ok((kc, options))
    }

    fn patch_cluster(&self, kc: &mut Kubeconfig, name: &str) -> Result<()> {
        if !kc.clusters.iter().any(|c| c.name == name) {
            if self.server.is_none() {
                bail!("cluster {name:?} not found in the kubeconfig");
            }
            kc.clusters.push(NamedCluster {
                name: name.to_string(),
                cluster: Some(Cluster::default()),
                other: Default::default(),
            });
        }
        let entry = kc
            .clusters
            .iter_mut()
            .find(|c| c.name == name)
            .context("cluster entry")?;
        let cluster = entry.cluster.get_or_insert_with(Cluster::default);
        if let Some(server) = &self.server {
            cluster.server = Some(server.clone());
        }
        if let Some(ca) = &self.certificate_authority {
            cluster.certificate_authority = Some(ca.clone());
            cluster.certificate_authority_data = None;
            cluster.insecure_skip_tls_verify = None;
        }
        if self.insecure_skip_tls_verify {
            cluster.insecure_skip_tls_verify = Some(true);
            cluster.certificate_authority = None;
            cluster.certificate_authority_data = None;
        }
        Ok(())
    }

    fn patch_user(&self, kc: &mut Kubeconfig, name: &str) -> Result<()> {
        if !kc.auth_infos.iter().any(|a| a.name == name) {
            if self.user.is_some() {
                bail!("user {name:?} not found in the kubeconfig");
            }
            kc.auth_infos.push(NamedAuthInfo {
                name: name.to_string(),
                auth_info: Some(AuthInfo::default()),
                other: Default::default(),
            });
        }
        let entry = kc
            .auth_infos
            .iter_mut()
            .find(|a| a.name == name)
            .context("user entry")?;
        let auth = entry.auth_info.get_or_insert_with(AuthInfo::default);
        if let Some(token) = &self.token {
            // The token is the credential: nothing else of this user is presented.
            *auth = AuthInfo {
                token: Some(token.clone().into()),
                impersonate: auth.impersonate.take(),
                impersonate_groups: auth.impersonate_groups.take(),
                ..AuthInfo::default()
            };
        }
        if let Some(user) = &self.as_user {
            auth.impersonate = Some(user.clone());
        }
        if !self.as_group.is_empty() {
            auth.impersonate_groups = Some(self.as_group.clone());
        }
        Ok(())
    }

    async fn config(&self) -> Result<Config> {
        let path = self.kubeconfig.as_deref().filter(|p| !p.is_empty());
        let kc = match path {
            Some(p) if !p.contains(':') => {
                Some(Kubeconfig::read_from(p).with_context(|| format!("reading {p}"))?)
            }
            _ => Kubeconfig::read().ok(),
        };
        match kc {
            Some(kc) => {
                let (kc, options) = self.apply_to(kc)?;
                Ok(Config::from_custom_kubeconfig(kc, &options).await?)
            }
            None if self.server.is_some() => {
                let (kc, options) = self.apply_to(Kubeconfig::default())?;
                Ok(Config::from_custom_kubeconfig(kc, &options).await?)
            }
            None if self.overrides_anything() => {
                bail!("no kubeconfig found: give --server to connect without one")
            }
            None => Ok(Config::infer().await?),
        }
    }

    /// A client for `purpose`: every request bounded by `--request-timeout` (or the operator's
    /// bounds), watches only by their read timeout.
    pub async fn client(&self, purpose: Purpose) -> Result<Client> {
        self.build(purpose, None).await
    }

    /// A client that refuses every write before it leaves the process (`plan`).
    pub async fn read_only_client(&self, purpose: Purpose) -> Result<Client> {
        self.build(purpose, Some(crate::leader::Fence::closed()))
            .await
    }

    async fn build(&self, purpose: Purpose, fence: Option<crate::leader::Fence>) -> Result<Client> {
        let agent = format!("kubectl-nodewright/{}", env!("CARGO_PKG_VERSION"));
        let mut config = crate::client::configure(self.config().await?, purpose, &agent)?;
        let bound = match purpose {
            Purpose::Request => Some(self.timeout().unwrap_or(REQUEST_TIMEOUT)),
            Purpose::Watch => None,
        };
        if let Some(t) = self.timeout() {
            config.connect_timeout = Some(t);
            config.write_timeout = Some(t);
            if purpose == Purpose::Request {
                config.read_timeout = Some(t);
            }
        }
        let builder = kube::client::ClientBuilder::try_from(config)?
            .with_layer(&GuardLayer::new(fence, bound));
        Ok(builder.build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig() -> Kubeconfig {
        Kubeconfig::from_yaml(
            "apiVersion: v1\nkind: Config\ncurrent-context: main\n\
             contexts:\n- name: main\n  context: {cluster: c1, user: u1}\n\
             clusters:\n- name: c1\n  cluster: {server: 'https://a:1', certificate-authority-data: QQ==}\n\
             - name: c2\n  cluster: {server: 'https://b:2'}\n\
             users:\n- name: u1\n  user: {client-certificate-data: QQ==, client-key-data: QQ==}\n\
             - name: u2\n  user: {token: t2}\n",
        )
        .expect("valid kubeconfig")
    }

    #[test]
    fn request_timeouts_read_like_kubectl() {
        assert_eq!(parse_request_timeout("0"), Ok(Duration::ZERO));
        assert_eq!(parse_request_timeout("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_request_timeout("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(
            parse_request_timeout("500ms"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(parse_request_timeout("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_request_timeout("soon").is_err());
        assert!(parse_request_timeout("3d").is_err());
    }

    #[test]
    fn flags_override_the_selected_entries() {
        let flags = ConnectFlags {
            server: Some("https://x:9".into()),
            token: Some("tok".into()),
            insecure_skip_tls_verify: true,
            as_user: Some("alice".into()),
            as_group: vec!["g1".into(), "g2".into()],
            ..ConnectFlags::default()
        };
        let (kc, options) = flags.apply_to(kubeconfig()).expect("applies");
        assert_eq!(options.cluster.as_deref(), Some("c1"));
        let c1 = kc.clusters[0].cluster.clone().expect("cluster");
        assert_eq!(c1.server.as_deref(), Some("https://x:9"));
        assert_eq!(c1.insecure_skip_tls_verify, Some(true));
        assert!(c1.certificate_authority_data.is_none());
        let u1 = kc.auth_infos[0].auth_info.clone().expect("user");
        assert!(u1.client_certificate_data.is_none() && u1.token.is_some());
        assert_eq!(u1.impersonate.as_deref(), Some("alice"));
        assert_eq!(u1.impersonate_groups, Some(vec!["g1".into(), "g2".into()]));
    }

    #[test]
    fn cluster_and_user_flags_pick_other_entries() {
        let flags = ConnectFlags {
            cluster: Some("c2".into()),
            user: Some("u2".into()),
            ..ConnectFlags::default()
        };
        let (_, options) = flags.apply_to(kubeconfig()).expect("applies");
        assert_eq!(options.cluster.as_deref(), Some("c2"));
        assert_eq!(options.user.as_deref(), Some("u2"));
        let missing = ConnectFlags {
            user: Some("nobody".into()),
            ..ConnectFlags::default()
        };
        assert!(missing.apply_to(kubeconfig()).is_err());
        let both = ConnectFlags {
            certificate_authority: Some("/ca".into()),
            insecure_skip_tls_verify: true,
            ..ConnectFlags::default()
        };
        assert!(both.apply_to(kubeconfig()).is_err());
    }
}

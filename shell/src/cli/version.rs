//! `version`: the plugin's version and the version of the operator Deployment in the operator
//! namespace (its `app.kubernetes.io/version` label, else its image tag).

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use serde::Serialize;

use super::{Global, Output, connect};

/// Flags of `version`.
#[derive(Args, Debug)]
pub struct VersionArgs {
    /// Only print the plugin version; do not contact the cluster.
    #[arg(long)]
    pub client_only: bool,
    /// Time limit for finding the operator's version.
    #[arg(long, default_value = "10s", value_parser = connect::parse_request_timeout)]
    pub timeout: Duration,
}

/// What `version -o json|yaml` prints.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Versions {
    plugin: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    operator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_error: Option<String>,
}

/// The plugin version.
pub fn plugin_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Runs `version`.
pub async fn run(g: &Global, args: VersionArgs) -> Result<()> {
    let mut v = Versions {
        plugin: plugin_version().to_string(),
        operator: None,
        operator_error: None,
    };
    if !args.client_only {
        match tokio::time::timeout(args.timeout, discover(g)).await {
            Ok(Ok(found)) => v.operator = Some(found),
            Ok(Err(e)) => v.operator_error = Some(format!("{e:#}")),
            Err(_) => {
                v.operator_error = Some(format!("no answer within {}", humanize(args.timeout)))
            }
        }
    }
    match g.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&v)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&v)?),
        Output::Table | Output::Wide => {
            println!("NodeWright plugin:\t{}", v.plugin);
            match (&v.operator, &v.operator_error) {
                (Some(op), _) => println!("NodeWright operator:\t{op}"),
                (None, Some(e)) => println!("NodeWright operator:\tunknown ({e})"),
                (None, None) => {}
            }
        }
    }
    Ok(())
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Finds the operator Deployment in the operator namespace and reads its version.
async fn discover(g: &Global) -> Result<String> {
    let api: Api<Deployment> = Api::namespaced(super::client(g).await?, &g.namespace);
    let list = api.list(&ListParams::default()).await?;
    list.items
        .iter()
        .filter(|d| is_operator(d))
        .find_map(deployment_version)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no NodeWright operator Deployment with a version in namespace {:?}",
                g.namespace
            )
        })
}

/// True for the operator's Deployment: the chart's name label, or an image or label naming
/// nodewright.
pub fn is_operator(d: &Deployment) -> bool {
    let labels = d.metadata.labels.clone().unwrap_or_default();
    if labels.get("app.kubernetes.io/name").map(String::as_str) == Some("nodewright") {
        return true;
    }
    images(d).any(|i| i.to_ascii_lowercase().contains("nodewright"))
        || labels.iter().any(|(k, v)| {
            k.to_ascii_lowercase().contains("nodewright")
                || v.to_ascii_lowercase().contains("nodewright")
        })
}

fn images(d: &Deployment) -> impl Iterator<Item = &str> {
    d.spec
        .template
        .spec
        .iter()
        .flat_map(|p| p.containers.iter())
        .filter_map(|c| c.image.as_deref())
}

/// The `app.kubernetes.io/version` label, else the first image tag that is not `latest`.
pub fn deployment_version(d: &Deployment) -> Option<String> {
    let label = d
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/version"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    label.or_else(|| {
        images(d)
            .filter_map(image_tag)
            .find(|t| *t != "latest")
            .map(str::to_string)
    })
}

/// The tag of an image reference (`repo:tag`, `repo:tag@sha256:...`), none for digests only.
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split_once(':')
        .map(|(_, tag)| tag)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(labels: &[(&str, &str)], image: &str) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "d", "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<std::collections::BTreeMap<_, _>>()},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "m", "image": image}]}}}
        }))
        .expect("deployment")
    }

    #[test]
    fn image_tags_are_read_past_registries_and_digests() {
        assert_eq!(image_tag("reg:5000/nw/op:v1.2.3"), Some("v1.2.3"));
        assert_eq!(image_tag("op:v1@sha256:abc"), Some("v1"));
        assert_eq!(image_tag("reg:5000/op"), None);
        assert_eq!(image_tag("op@sha256:abc"), None);
    }

    #[test]
    fn the_version_label_wins_over_the_image_tag() {
        let d = deployment(
            &[
                ("app.kubernetes.io/name", "nodewright"),
                ("app.kubernetes.io/version", "0.4.0"),
            ],
            "x/op:v9",
        );
        assert!(is_operator(&d));
        assert_eq!(deployment_version(&d).as_deref(), Some("0.4.0"));
        let d = deployment(&[], "ghcr.io/nvidia/nodewright/operator:v0.5.1");
        assert!(is_operator(&d));
        assert_eq!(deployment_version(&d).as_deref(), Some("v0.5.1"));
        let other = deployment(&[("app", "web")], "nginx:1.27");
        assert!(!is_operator(&other));
        let latest = deployment(&[], "nodewright/op:latest");
        assert_eq!(deployment_version(&latest), None);
    }
}

//! Executor builders: the package-stage Job and the interrupt Job, field for field as
//! 03-executor.md §1–§3 and 04-jobs-rules.md §1 describe them.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, EnvVar, HostPathVolumeSource, LocalObjectReference, PodSpec,
    PodTemplateSpec, ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use nodewright_crds::node_state::go_html_escape;
use nodewright_crds::{Interrupt, InterruptType, NodeWright, Package, Stage, keys};
use serde_json::json;

use super::annotation::PackageAnnotation;
use super::fingerprint::{agent_image, interrupt_fingerprint, package_fingerprint, package_image};
use super::naming;
use super::nw_name;
use crate::Options;

/// Everything a builder needs about one executor (the package is the winning package for an
/// interrupt Job). The package's `name` must be filled (`NodeWrightSpec::normalize`).
#[derive(Clone, Copy, Debug)]
pub struct JobInputs<'a> {
    /// The owning NodeWright.
    pub nodewright: &'a NodeWright,
    /// The package to run.
    pub package: &'a Package,
    /// The stage to run.
    pub stage: Stage,
    /// Full node name.
    pub node: &'a str,
    /// Node order (03 §0.4), see [`naming::node_order`].
    pub node_order: i64,
    /// Operator options.
    pub options: &'a Options,
}

/// The legacy runtime-required taint still tolerated after the rename (03 §1.6).
const LEGACY_RUNTIME_TAINT: (&str, &str, &str) =
    ("skyhook.nvidia.com", "runtime-required", "NoSchedule");

/// Largest value of an int32 API field (deadlines, interrupt `backoffLimit`).
pub const MAX_INT32: i32 = i32::MAX;

/// `deadline(t)`: whole seconds rounded up, clamped to int32; `None` when the timeout is 0
/// (03 §3.4 deadline rules).
pub fn deadline_seconds(pkg: &Package, options: &Options) -> Option<i64> {
    let default = || {
        let d = options.job_stage_timeout;
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX) + i64::from(d.subsec_nanos() != 0)
    };
    let secs = match pkg.stage_timeout.as_ref() {
        // An unparsable stored value (admission rejects it) falls back to the operator default.
        Some(t) => t.ceil_seconds().unwrap_or_else(|_| default()),
        None => default(),
    };
    (secs > 0).then(|| secs.min(i64::from(MAX_INT32)))
}

/// The Job and pod-template labels (03 §3.2).
pub fn job_labels(inputs: &JobInputs, interrupt: bool) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (
            keys::LABEL_NAME.to_string(),
            nw_name(inputs.nodewright).to_string(),
        ),
        (
            keys::PACKAGE.to_string(),
            naming::package_label(&inputs.package.name, &inputs.package.version),
        ),
        (
            keys::LABEL_STAGE.to_string(),
            inputs.stage.as_str().to_string(),
        ),
        (
            keys::LABEL_NODE.to_string(),
            naming::node_label_value(inputs.node),
        ),
        (
            keys::LABEL_GENERATION.to_string(),
            inputs
                .nodewright
                .metadata
                .generation
                .unwrap_or_default()
                .to_string(),
        ),
    ]);
    if interrupt {
        labels.insert(keys::LABEL_INTERRUPT.to_string(), "True".to_string());
    }
    labels
}

/// Executor tolerations in order (03 §1.6): unschedulable, runtime-required (configured, then
/// legacy unless same key and effect), the NodeWright's additional ones, then unbounded not-ready
/// and unreachable `NoExecute`.
pub fn tolerations(nw: &NodeWright, options: &Options) -> Vec<Toleration> {
    let exists = |key: &str, effect: Option<&str>| Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".to_string()),
        effect: effect.map(str::to_string),
        ..Toleration::default()
    };
    let equal = |key: &str, value: Option<&str>, effect: &str| Toleration {
        key: Some(key.to_string()),
        operator: Some("Equal".to_string()),
        value: value.filter(|v| !v.is_empty()).map(str::to_string),
        effect: Some(effect.to_string()),
        ..Toleration::default()
    };
    let taint = &options.runtime_required_taint;
    let mut out = vec![
        exists("node.kubernetes.io/unschedulable", None),
        equal(&taint.key, taint.value.as_deref(), &taint.effect),
    ];
    let (legacy_key, legacy_value, legacy_effect) = LEGACY_RUNTIME_TAINT;
    if !(taint.key == legacy_key && taint.effect == legacy_effect) {
        out.push(equal(legacy_key, Some(legacy_value), legacy_effect));
    }
    out.extend(nw.spec.additional_tolerations.iter().cloned());
    out.push(exists("node.kubernetes.io/not-ready", Some("NoExecute")));
    out.push(exists("node.kubernetes.io/unreachable", Some("NoExecute")));
    out
}

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// Names of the five operator-injected agent variables (03 §1.5), in order.
pub const OPERATOR_ENV: [&str; 5] = [
    "SKYHOOK_LOG_DIR",
    "SKYHOOK_ROOT_DIR",
    "COPY_RESOLV",
    "SKYHOOK_RESOURCE_ID",
    "SKYHOOK_NODE_ORDER",
];

/// The five operator variables of the agent containers (03 §1.5).
pub fn operator_env(inputs: &JobInputs) -> Vec<EnvVar> {
    let nw = nw_name(inputs.nodewright);
    let o = inputs.options;
    vec![
        env(OPERATOR_ENV[0], format!("{}/{nw}", o.agent_log_root)),
        env(OPERATOR_ENV[1], format!("{}/{nw}", o.copy_dir_root)),
        env(OPERATOR_ENV[2], "false"),
        env(
            OPERATOR_ENV[3],
            naming::agent_resource_id(inputs.nodewright, inputs.package),
        ),
        env(OPERATOR_ENV[4], inputs.node_order.to_string()),
    ]
}

fn quantity(text: &str) -> Quantity {
    Quantity(text.to_string())
}

fn fixed_resources(cpu: &str, memory: &str) -> ResourceRequirements {
    let both = BTreeMap::from([
        ("cpu".to_string(), quantity(cpu)),
        ("memory".to_string(), quantity(memory)),
    ]);
    ResourceRequirements {
        requests: Some(both.clone()),
        limits: Some(both),
        ..ResourceRequirements::default()
    }
}

/// Init-container resources from the package override (03 §1.7); `None` without an override or
/// when every value is zero.
pub fn package_resources(pkg: &Package) -> Option<ResourceRequirements> {
    let r = pkg.resources.as_ref()?;
    let nonzero = |q: &Option<Quantity>| {
        q.as_ref().is_some_and(|q| {
            nodewright_crds::quantity::parse_quantity(&q.0).map_or(true, |v| !v.is_zero())
        })
    };
    if ![
        &r.cpu_request,
        &r.cpu_limit,
        &r.memory_request,
        &r.memory_limit,
    ]
    .into_iter()
    .any(nonzero)
    {
        return None;
    }
    let pair = |cpu: &Option<Quantity>, memory: &Option<Quantity>| {
        let mut map = BTreeMap::new();
        if let Some(c) = cpu {
            map.insert("cpu".to_string(), c.clone());
        }
        if let Some(m) = memory {
            map.insert("memory".to_string(), m.clone());
        }
        map
    };
    Some(ResourceRequirements {
        limits: Some(pair(&r.cpu_limit, &r.memory_limit)),
        requests: Some(pair(&r.cpu_request, &r.memory_request)),
        ..ResourceRequirements::default()
    })
}

fn privileged() -> Option<SecurityContext> {
    Some(SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    })
}

fn root_mount() -> VolumeMount {
    VolumeMount {
        name: "root-mount".to_string(),
        mount_path: "/root".to_string(),
        mount_propagation: Some("HostToContainer".to_string()),
        ..VolumeMount::default()
    }
}

fn root_volume() -> Volume {
    Volume {
        name: "root-mount".to_string(),
        host_path: Some(HostPathVolumeSource {
            path: "/".to_string(),
            type_: None,
        }),
        ..Volume::default()
    }
}

fn config_map_volume(name: String, config_map: String) -> Volume {
    Volume {
        name,
        config_map: Some(ConfigMapVolumeSource {
            name: config_map,
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// The `done` main container: exits 0 on the package image (03 §1.2).
fn done_container(pkg: &Package) -> Container {
    Container {
        name: "done".to_string(),
        image: Some(package_image(pkg)),
        command: Some(vec!["/bin/sh".into(), "-c".into(), "exit 0".into()]),
        resources: Some(fixed_resources("100m", "20Mi")),
        ..Container::default()
    }
}

fn package_mounts(inputs: &JobInputs) -> Vec<VolumeMount> {
    let pkg = inputs.package;
    let mut mounts = vec![
        root_mount(),
        VolumeMount {
            name: naming::package_metadata_volume_name(inputs.node),
            mount_path: "/skyhook-package/node-metadata".to_string(),
            ..VolumeMount::default()
        },
    ];
    // BTreeMap iteration is byte-order sorted, as 03 §1.4 requires.
    for key in pkg.config_map.keys() {
        mounts.push(VolumeMount {
            name: pkg.name.clone(),
            mount_path: format!("/skyhook-package/configmaps/{key}"),
            sub_path: Some(key.clone()),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    mounts
}

fn package_init_containers(inputs: &JobInputs) -> Vec<Container> {
    let pkg = inputs.package;
    let copy_dir = naming::copy_dir(inputs.nodewright, pkg, inputs.options);
    let mounts = package_mounts(inputs);
    let resources = package_resources(pkg);
    let short: String = pkg.name.chars().take(43).collect();
    let mut agent_env = pkg.env.clone();
    agent_env.extend(operator_env(inputs));
    let stage = inputs.stage.as_str();
    let agent = |name: String, mode: String| Container {
        name,
        image: Some(agent_image(pkg, inputs.options)),
        image_pull_policy: Some("Always".to_string()),
        args: Some(vec![mode, "/root".to_string(), copy_dir.clone()]),
        env: Some(agent_env.clone()),
        security_context: privileged(),
        volume_mounts: Some(mounts.clone()),
        resources: resources.clone(),
        ..Container::default()
    };
    vec![
        Container {
            name: format!("{short}-init"),
            image: Some(package_image(pkg)),
            image_pull_policy: Some("Always".to_string()),
            command: Some(vec!["/bin/sh".to_string()]),
            args: Some(vec![
                "-c".to_string(),
                "mkdir -p /root/${SKYHOOK_DIR} && cp -r /skyhook-package/* /root/${SKYHOOK_DIR}"
                    .to_string(),
            ]),
            env: Some(vec![env("SKYHOOK_DIR", copy_dir.clone())]),
            security_context: privileged(),
            volume_mounts: Some(mounts.clone()),
            resources: resources.clone(),
            ..Container::default()
        },
        agent(format!("{short}-{stage}"), stage.to_string()),
        agent(format!("{short}-{stage}check"), format!("{stage}-check")),
    ]
}

fn image_pull_secrets(options: &Options) -> Option<Vec<LocalObjectReference>> {
    options
        .image_pull_secret
        .as_ref()
        .map(|name| vec![LocalObjectReference { name: name.clone() }])
}

/// Controller owner reference to the NodeWright (03 §3.1).
pub fn owner_reference(nw: &NodeWright) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", nodewright_crds::GROUP, nodewright_crds::VERSION),
        kind: "NodeWright".to_string(),
        name: nw_name(nw).to_string(),
        uid: nw.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn job_metadata(
    inputs: &JobInputs,
    name: String,
    labels: &BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(inputs.options.namespace.clone()),
        labels: Some(labels.clone()),
        annotations: Some(annotations),
        owner_references: Some(vec![owner_reference(inputs.nodewright)]),
        ..ObjectMeta::default()
    }
}

fn template_metadata(labels: &BTreeMap<String, String>, package_json: &str) -> ObjectMeta {
    ObjectMeta {
        labels: Some(labels.clone()),
        annotations: Some(BTreeMap::from([(
            keys::PACKAGE.to_string(),
            package_json.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Builds the package-stage Job (stages apply, config, post-interrupt, upgrade, uninstall).
pub fn build_package_job(inputs: &JobInputs) -> Job {
    let nw = inputs.nodewright;
    let pkg = inputs.package;
    let labels = job_labels(inputs, false);
    let package_json = PackageAnnotation::new(nw, pkg, inputs.stage).to_json();
    let annotations = BTreeMap::from([
        (keys::RESOURCE_ID.to_string(), naming::resource_id(nw)),
        (keys::PACKAGE.to_string(), package_json.clone()),
        (
            keys::EXECUTOR_FINGERPRINT.to_string(),
            package_fingerprint(pkg, inputs.options),
        ),
    ]);
    let mut volumes = vec![
        root_volume(),
        config_map_volume(
            naming::package_metadata_volume_name(inputs.node),
            naming::node_metadata_config_map_name(nw_name(nw), inputs.node),
        ),
    ];
    if !pkg.config_map.is_empty() {
        volumes.push(config_map_volume(
            pkg.name.clone(),
            naming::package_config_map_name(nw_name(nw), &pkg.name, &pkg.version),
        ));
    }
    let pod = PodSpec {
        node_name: Some(inputs.node.to_string()),
        restart_policy: Some("Never".to_string()),
        active_deadline_seconds: deadline_seconds(pkg, inputs.options),
        host_pid: Some(true),
        host_network: Some(true),
        termination_grace_period_seconds: pkg
            .graceful_shutdown
            .as_ref()
            .and_then(|g| g.trunc_seconds().ok())
            .filter(|secs| *secs >= 0),
        image_pull_secrets: image_pull_secrets(inputs.options),
        tolerations: Some(tolerations(nw, inputs.options)),
        volumes: Some(volumes),
        priority_class_name: inputs.options.package_priority_class_name.clone(),
        init_containers: Some(package_init_containers(inputs)),
        containers: vec![done_container(pkg)],
        ..PodSpec::default()
    };
    let name = naming::package_job_name(
        nw_name(nw),
        &pkg.name,
        &pkg.version,
        inputs.stage,
        inputs.node,
    );
    Job {
        metadata: job_metadata(inputs, name, &labels, annotations),
        spec: Some(JobSpec {
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: Some(inputs.options.job_backoff_limit),
            pod_failure_policy: Some(PodFailurePolicy {
                rules: vec![PodFailurePolicyRule {
                    action: "Ignore".to_string(),
                    on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                        type_: "DisruptionTarget".to_string(),
                        status: Some("True".to_string()),
                    }]),
                    on_exit_codes: None,
                }],
            }),
            pod_replacement_policy: Some("Failed".to_string()),
            template: PodTemplateSpec {
                metadata: Some(template_metadata(&labels, &package_json)),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// The interrupt argument: base64 of `{"type": <agent type>, "services": [...]}` with `services`
/// omitted when empty (03 §2.3).
pub fn encode_interrupt(interrupt: &Interrupt) -> String {
    let kind = json!(interrupt.type_.agent_type());
    let text = if interrupt.services.is_empty() {
        format!(r#"{{"type":{kind}}}"#)
    } else {
        format!(
            r#"{{"type":{kind},"services":{}}}"#,
            json!(interrupt.services)
        )
    };
    base64::engine::general_purpose::STANDARD.encode(go_html_escape(&text))
}

/// Builds the interrupt Job for the merged `interrupt`, run by the winning package of `inputs`
/// at stage `interrupt` or `uninstall-interrupt` (03 §2, §3.4).
pub fn build_interrupt_job(inputs: &JobInputs, interrupt: &Interrupt) -> Job {
    let nw = inputs.nodewright;
    let pkg = inputs.package;
    let labels = job_labels(inputs, true);
    let package_json = PackageAnnotation::new(nw, pkg, inputs.stage).to_json();
    let mut annotations = BTreeMap::from([
        (keys::RESOURCE_ID.to_string(), naming::resource_id(nw)),
        (keys::PACKAGE.to_string(), package_json.clone()),
        (
            keys::EXECUTOR_FINGERPRINT.to_string(),
            interrupt_fingerprint(pkg, inputs.options),
        ),
    ]);
    if interrupt.type_ != InterruptType::Reboot {
        annotations.insert(
            keys::RESTART_ALLOWANCE.to_string(),
            inputs.options.job_backoff_limit.to_string(),
        );
    }
    let copy_dir = naming::copy_dir(nw, pkg, inputs.options);
    let init = Container {
        name: "interrupt".to_string(),
        image: Some(agent_image(pkg, inputs.options)),
        args: Some(vec![
            "interrupt".to_string(),
            "/root".to_string(),
            copy_dir,
            encode_interrupt(interrupt),
        ]),
        env: Some(operator_env(inputs)),
        security_context: privileged(),
        volume_mounts: Some(vec![root_mount()]),
        resources: Some(fixed_resources("500m", "256Mi")),
        ..Container::default()
    };
    let pod = PodSpec {
        node_name: Some(inputs.node.to_string()),
        restart_policy: Some("OnFailure".to_string()),
        host_pid: Some(true),
        host_network: Some(true),
        image_pull_secrets: image_pull_secrets(inputs.options),
        tolerations: Some(tolerations(nw, inputs.options)),
        volumes: Some(vec![
            root_volume(),
            config_map_volume(
                naming::interrupt_metadata_volume_name(nw_name(nw), inputs.node),
                naming::node_metadata_config_map_name(nw_name(nw), inputs.node),
            ),
        ]),
        priority_class_name: inputs.options.package_priority_class_name.clone(),
        init_containers: Some(vec![init]),
        containers: vec![done_container(pkg)],
        ..PodSpec::default()
    };
    let name = naming::interrupt_job_name(nw_name(nw), inputs.stage, interrupt.type_, inputs.node);
    Job {
        metadata: job_metadata(inputs, name, &labels, annotations),
        spec: Some(JobSpec {
            parallelism: Some(1),
            completions: Some(1),
            backoff_limit: Some(MAX_INT32),
            pod_replacement_policy: Some("Failed".to_string()),
            active_deadline_seconds: deadline_seconds(pkg, inputs.options),
            template: PodTemplateSpec {
                metadata: Some(template_metadata(&labels, &package_json)),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}

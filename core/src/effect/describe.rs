//! What an effect is about: its kind, the NodeWright/node/package/stage it concerns, and the node
//! whose lane it runs in. Shared by the shell's interpreter and the simulator's model of it.

use super::{Context, Effect};

/// The context of effects that carry none.
static NO_CONTEXT: Context = Context {
    nodewright: None,
    node: None,
    package: None,
    version: None,
    stage: None,
};

impl Effect {
    /// The variant name, for logs, traces and metrics (`CreateJob`, `PatchNode`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Effect::CreateJob { .. } => "CreateJob",
            Effect::DeleteJob { .. } => "DeleteJob",
            Effect::PatchJob { .. } => "PatchJob",
            Effect::EndInterruptJob { .. } => "EndInterruptJob",
            Effect::DeletePod { .. } => "DeletePod",
            Effect::PatchNode(_) => "PatchNode",
            Effect::PatchNodeConditions { .. } => "PatchNodeConditions",
            Effect::Evict { .. } => "Evict",
            Effect::PatchStatus { .. } => "PatchStatus",
            Effect::RecordBatch { .. } => "RecordBatch",
            Effect::AddFinalizer { .. } => "AddFinalizer",
            Effect::RemoveFinalizer { .. } => "RemoveFinalizer",
            Effect::UpsertConfigMap { .. } => "UpsertConfigMap",
            Effect::DeleteConfigMap { .. } => "DeleteConfigMap",
            Effect::Event(_) => "Event",
        }
    }

    /// The NodeWright, node, package and stage the effect concerns; all empty for effects that
    /// carry no context (status, finalizers, ConfigMaps, node conditions, Events).
    pub fn context(&self) -> &Context {
        match self {
            Effect::CreateJob { context, .. }
            | Effect::DeleteJob { context, .. }
            | Effect::PatchJob { context, .. }
            | Effect::EndInterruptJob { context, .. }
            | Effect::DeletePod { context, .. }
            | Effect::Evict { context, .. } => context,
            Effect::PatchNode(p) => &p.context,
            _ => &NO_CONTEXT,
        }
    }

    /// The node the effect concerns, if any: a failed write on a node skips the later effects
    /// on it. A node-metadata ConfigMap belongs to its node (its `<prefix>/Node.name`
    /// annotation).
    pub fn node(&self) -> Option<&str> {
        match self {
            Effect::PatchNode(p) => Some(&p.node),
            Effect::PatchNodeConditions { node, .. } => Some(node),
            Effect::UpsertConfigMap { config_map, .. } => config_map
                .metadata
                .annotations
                .as_ref()?
                .get(NODE_NAME_ANNOTATION)
                .map(String::as_str),
            other => other.context().node.as_deref(),
        }
    }
}

/// The annotation naming the node of a node-metadata ConfigMap (`<keys::PREFIX>/Node.name`).
const NODE_NAME_ANNOTATION: &str = "nodewright.nvidia.com/Node.name";

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::ConfigMap;
    use nodewright_crds::keys;

    use super::NODE_NAME_ANNOTATION;
    use crate::effect::{Context, DeletionReason, Effect, NodePatch};

    fn ctx(node: &str) -> Context {
        Context {
            nodewright: Some("demo".into()),
            node: Some(node.into()),
            package: Some("pkg".into()),
            version: Some("1.0.0".into()),
            stage: Some("apply".into()),
        }
    }

    fn config_map(annotations: &[(&str, &str)]) -> Effect {
        let mut cm = ConfigMap::default();
        cm.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Effect::UpsertConfigMap {
            config_map: Box::new(cm),
            expect_resource_version: None,
        }
    }

    #[test]
    fn kind_is_the_variant_name() {
        let create = Effect::CreateJob {
            job: (Job::default()).into(),
            context: ctx("n1"),
            precondition: None,
            confirm: None,
        };
        let patch = Effect::PatchNode(Box::default());
        let finalizer = Effect::AddFinalizer {
            nodewright: "demo".into(),
            uid: "u".into(),
        };
        assert_eq!(create.kind(), "CreateJob");
        assert_eq!(patch.kind(), "PatchNode");
        assert_eq!(finalizer.kind(), "AddFinalizer");
        assert_eq!(config_map(&[]).kind(), "UpsertConfigMap");
    }

    #[test]
    fn kind_matches_the_serde_tag() {
        let effect = Effect::DeleteJob {
            name: "j".into(),
            uid: "u".into(),
            reason: DeletionReason::Rerun,
            context: Context::default(),
            confirm: None,
        };
        let value = serde_json::to_value(&effect).unwrap_or_default();
        let tag = value
            .get("effect")
            .and_then(|t| t.as_str())
            .unwrap_or_default();
        assert_eq!(tag.to_ascii_lowercase(), effect.kind().to_ascii_lowercase());
    }

    #[test]
    fn context_of_job_and_node_effects_is_their_own() {
        let delete = Effect::DeleteJob {
            name: "j".into(),
            uid: "u".into(),
            reason: DeletionReason::StaleSpec,
            context: ctx("n1"),
            confirm: None,
        };
        assert_eq!(delete.context(), &ctx("n1"));
        let patch = Effect::PatchNode(Box::new(NodePatch {
            node: "n2".into(),
            context: ctx("n2"),
            ..NodePatch::default()
        }));
        assert_eq!(patch.context(), &ctx("n2"));
    }

    #[test]
    fn context_is_empty_for_effects_without_one() {
        let status = Effect::RemoveFinalizer {
            nodewright: "demo".into(),
            uid: "u".into(),
        };
        assert_eq!(status.context(), &Context::default());
        assert_eq!(config_map(&[]).context(), &Context::default());
    }

    #[test]
    fn node_of_node_writes_and_contextual_effects() {
        let patch = Effect::PatchNode(Box::new(NodePatch {
            node: "n2".into(),
            ..NodePatch::default()
        }));
        assert_eq!(patch.node(), Some("n2"));
        let conditions = Effect::PatchNodeConditions {
            node: "n3".into(),
            set: vec![],
            remove: vec![],
        };
        assert_eq!(conditions.node(), Some("n3"));
        let evict = Effect::Evict {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            delete_instead: false,
            grace_period_seconds: None,
            context: ctx("n4"),
        };
        assert_eq!(evict.node(), Some("n4"));
        let status = Effect::PatchStatus {
            nodewright: "demo".into(),
            status: Box::default(),
        };
        assert_eq!(status.node(), None);
    }

    #[test]
    fn r13_7_node_metadata_config_map_belongs_to_its_node() {
        assert_eq!(NODE_NAME_ANNOTATION, format!("{}/Node.name", keys::PREFIX));
        assert_eq!(
            config_map(&[(NODE_NAME_ANNOTATION, "n5")]).node(),
            Some("n5")
        );
        assert_eq!(config_map(&[("other", "n5")]).node(), None);
    }
}

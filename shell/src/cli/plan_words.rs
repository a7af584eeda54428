//! Plain-language sentences for the effects `plan` prints.

use nodewright_core::{Effect, EntryChange, NodePatch};

/// One effect as a sentence.
pub fn sentence(effect: &Effect) -> String {
    let ctx = effect.context();
    let what = match (&ctx.package, &ctx.version, &ctx.stage) {
        (Some(p), Some(v), Some(s)) => format!("{s} of {p}:{v}"),
        (Some(p), Some(v), None) => format!("{p}:{v}"),
        _ => String::new(),
    };
    match effect {
        Effect::CreateJob { job, .. } => {
            let name = job.name();
            let name = if name.is_empty() { "?" } else { &name };
            format!("start Job {name} ({what})")
        }
        Effect::DeleteJob { name, reason, .. } => {
            format!("delete Job {name} ({})", reason.as_str())
        }
        Effect::PatchJob { name, suspend, .. } => match suspend {
            Some(true) => format!("suspend Job {name}"),
            Some(false) => format!("resume Job {name}"),
            None => format!("update Job {name}"),
        },
        Effect::EndInterruptJob { name, restarts, .. } => {
            format!("end crash-looping interrupt Job {name} after {restarts} restarts")
        }
        Effect::DeletePod {
            namespace,
            name,
            reason,
            ..
        } => format!("delete pod {namespace}/{name} ({})", reason.as_str()),
        Effect::PatchNode(p) => node_patch(p),
        Effect::PatchNodeConditions { set, remove, .. } => {
            let set: Vec<&str> = set.iter().map(|c| c.type_.as_str()).collect();
            format!(
                "set node conditions [{}], remove [{}]",
                set.join(", "),
                remove.join(", ")
            )
        }
        Effect::Evict {
            namespace,
            name,
            delete_instead,
            ..
        } => {
            let verb = if *delete_instead { "delete" } else { "evict" };
            format!("{verb} pod {namespace}/{name} (drain)")
        }
        Effect::PatchStatus { status, .. } => format!(
            "update status: {}, {} nodes complete, {} in progress",
            status.status.unwrap_or_default().as_str(),
            status.complete_nodes,
            status.nodes_in_progress
        ),
        Effect::RecordBatch { status, .. } => format!(
            "record the new batch before acting on it: {} nodes in the batch",
            status.node_priority.len()
        ),
        Effect::AddFinalizer { .. } => "add the finalizer".into(),
        Effect::RemoveFinalizer { .. } => "remove the finalizer".into(),
        Effect::UpsertConfigMap {
            config_map,
            expect_resource_version,
        } => {
            let verb = if expect_resource_version.is_some() {
                "update"
            } else {
                "create"
            };
            format!(
                "{verb} ConfigMap {}",
                config_map.metadata.name.as_deref().unwrap_or("?")
            )
        }
        Effect::DeleteConfigMap { name, reason, .. } => {
            format!("delete ConfigMap {name} ({})", reason.as_str())
        }
        Effect::Event(e) => format!(
            "event {} {}: {}",
            if e.warning { "Warning" } else { "Normal" },
            e.reason,
            e.message
        ),
    }
}

fn entry(change: &EntryChange) -> String {
    match &change.set {
        Some(ps) => {
            let state = ps.state.map_or("unknown", |s| s.as_str());
            format!(
                "record {}:{} {} {state}",
                ps.name,
                ps.version,
                ps.stage.as_str()
            )
        }
        None => format!("remove entry {}", change.key),
    }
}

/// A node patch: entries, cordon, taints, labels and annotations.
fn node_patch(p: &NodePatch) -> String {
    let mut parts: Vec<String> = p.state.iter().map(entry).collect();
    parts.extend(
        p.remove_state_of
            .iter()
            .map(|nw| format!("remove the state of {nw}")),
    );
    match p.unschedulable {
        Some(true) => parts.push("cordon".into()),
        Some(false) => parts.push("uncordon".into()),
        None => {}
    }
    parts.extend(
        p.release_cordon_of
            .iter()
            .map(|nw| format!("release the cordon of {nw} if the node holds it")),
    );
    parts.extend(
        p.taints_add
            .iter()
            .map(|t| format!("taint {}:{}", t.key, t.effect)),
    );
    parts.extend(
        p.taints_remove
            .iter()
            .map(|t| format!("untaint {}:{}", t.key, t.effect)),
    );
    let short = |k: &String| k.rsplit('/').next().unwrap_or(k).to_string();
    let set = |m: &std::collections::BTreeMap<String, Option<String>>, what: &str| {
        let keys: Vec<String> = m.keys().map(short).collect();
        (!keys.is_empty()).then(|| format!("{what} {}", keys.join(", ")))
    };
    parts.extend(set(&p.labels, "set labels"));
    parts.extend(set(&p.annotations, "set annotations"));
    if parts.is_empty() {
        return "touch the node".into();
    }
    format!("node: {}", parts.join("; "))
}

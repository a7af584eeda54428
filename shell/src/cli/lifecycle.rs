//! `pause`, `resume`, `disable`, `enable` (06-operations.md §1.5).

use std::cmp::Ordering;

use anyhow::{Result, bail};
use clap::Args;
use kube::api::{Api, Patch, PatchParams};
use nodewright_crds::{NodeWright, keys, version};
use serde_json::{Value, json};

use super::{Global, client, confirm_lifecycle};
use crate::error::is_conflict;

/// Arguments of the four lifecycle verbs.
#[derive(Args, Debug)]
pub struct LifecycleArgs {
    /// NodeWright name.
    pub nodewright: String,
    /// Skip the confirmation prompt.
    #[arg(short = 'y', long)]
    pub confirm: bool,
}

/// Which lifecycle change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Set the pause annotation.
    Pause,
    /// Remove the pause annotation.
    Resume,
    /// Set the disable annotation.
    Disable,
    /// Remove the disable annotation.
    Enable,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Pause => "pause",
            Verb::Resume => "resume",
            Verb::Disable => "disable",
            Verb::Enable => "enable",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Verb::Pause => "paused",
            Verb::Resume => "resumed",
            Verb::Disable => "disabled",
            Verb::Enable => "enabled",
        }
    }

    /// The annotation and its new value (`None` removes it).
    pub fn annotation(self) -> (&'static str, Option<&'static str>) {
        match self {
            Verb::Pause => (keys::PAUSE, Some("true")),
            Verb::Resume => (keys::PAUSE, None),
            Verb::Disable => (keys::DISABLE, Some("true")),
            Verb::Enable => (keys::DISABLE, None),
        }
    }
}

/// The version gate: `Err` when the operator that last touched the NodeWright predates v0.8.0.
pub fn version_gate(verb: Verb, nw: &NodeWright) -> Result<Option<String>> {
    let annotated = nw
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::VERSION))
        .filter(|v| version::is_valid(v));
    let Some(v) = annotated else {
        return Ok(Some(
            "unable to determine operator version; cannot verify compatibility (requires v0.8.0+)"
                .into(),
        ));
    };
    // M2: the version this operator writes supports every verb (its numbering is not the Go
    // operator's, so it is not compared with v0.8.0).
    if v == keys::OPERATOR_VERSION {
        return Ok(None);
    }
    if version::compare(v, "0.8.0") == Some(Ordering::Less) {
        match verb {
            Verb::Pause | Verb::Resume => bail!(
                "operator version {v} does not support {} through annotations; edit spec.pause instead",
                verb.word()
            ),
            Verb::Disable | Verb::Enable => bail!(
                "operator version {v} does not support {}; this feature was added in v0.8.0",
                verb.word()
            ),
        }
    }
    Ok(None)
}

/// The guarded annotation patch.
pub fn annotation_patch(verb: Verb, resource_version: Option<&str>) -> Value {
    let (key, value) = verb.annotation();
    json!({"metadata": {
        "resourceVersion": resource_version.unwrap_or_default(),
        "annotations": { key: value },
    }})
}

/// Runs one lifecycle verb.
pub async fn run(g: &Global, verb: Verb, args: LifecycleArgs) -> Result<()> {
    let name = &args.nodewright;
    if !args.confirm {
        let question = format!("This will {} NodeWright {name:?}. Continue?", verb.word());
        if !confirm_lifecycle(&question, &mut std::io::stdin().lock()) {
            println!("Aborted.");
            return Ok(());
        }
    }
    if g.dry_run {
        println!("[dry-run] Would {} NodeWright {name:?}", verb.word());
        return Ok(());
    }
    let api: Api<NodeWright> = Api::all(client(g).await?);
    for _ in 0..5 {
        let nw = api.get(name).await?;
        if let Some(warning) = version_gate(verb, &nw)? {
            eprintln!("Warning: {warning}");
        }
        let body = annotation_patch(verb, nw.metadata.resource_version.as_deref());
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {
                println!("NodeWright {name:?} {}", verb.past());
                return Ok(());
            }
            Err(e) if is_conflict(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("NodeWright {name:?} kept changing; try again")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_crds::NodeWrightSpec;

    fn nw(version: Option<&str>) -> NodeWright {
        let mut nw = NodeWright::new("nw", NodeWrightSpec::default());
        nw.metadata.annotations =
            version.map(|v| [(keys::VERSION.to_string(), v.to_string())].into());
        nw
    }

    #[test]
    fn d14_lifecycle_patch_is_guarded_and_minimal() {
        assert_eq!(
            annotation_patch(Verb::Pause, Some("7")),
            json!({"metadata": {"resourceVersion": "7", "annotations": {keys::PAUSE: "true"}}})
        );
        assert_eq!(
            annotation_patch(Verb::Enable, Some("7"))["metadata"]["annotations"][keys::DISABLE],
            Value::Null
        );
    }

    #[test]
    fn version_gate_rules() {
        assert!(
            version_gate(Verb::Pause, &nw(Some("0.9.0")))
                .map(|w| w.is_none())
                .unwrap_or(false)
        );
        assert!(
            version_gate(Verb::Pause, &nw(None))
                .map(|w| w.is_some())
                .unwrap_or(false)
        );
        assert!(
            version_gate(Verb::Pause, &nw(Some("dev")))
                .map(|w| w.is_some())
                .unwrap_or(false)
        );
        let err = version_gate(Verb::Disable, &nw(Some("0.7.1")))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("this feature was added in v0.8.0"), "{err}");
    }

    #[test]
    fn m2_version_gate_passes_the_version_this_operator_writes() {
        let ours = nw(Some(keys::OPERATOR_VERSION));
        for verb in [Verb::Pause, Verb::Resume, Verb::Disable, Verb::Enable] {
            assert!(matches!(version_gate(verb, &ours), Ok(None)));
        }
    }
}

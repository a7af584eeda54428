//! Executor manifests built when they are needed (D27): a `CreateJob` carries the builder's inputs
//! (a few hundred bytes) instead of the built Job (about 30 KB in memory), so a pass that starts
//! a batch of thousands of executors does not hold thousands of manifests at once. The manifest
//! is the same pure function of the same inputs whenever it is built.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use nodewright_crds::{Interrupt, NodeWright, Package, Stage, keys};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::builder::{JobInputs, build_interrupt_job, build_package_job};
use super::create::context_of;
use super::naming;
use crate::Options;
use crate::effect::Context;

/// What every executor of one NodeWright in one pass is built from: its metadata and spec (the
/// status is not read by the builders), its packages with names defaulted, and the options.
#[derive(Debug, PartialEq)]
pub struct ExecutorBasis {
    nodewright: NodeWright,
    packages: BTreeMap<String, Package>,
    options: Options,
}

impl ExecutorBasis {
    /// The basis of `nw` (its status left out) with its normalized `packages`.
    pub fn new(nw: &NodeWright, packages: &BTreeMap<String, Package>, options: &Options) -> Self {
        Self {
            nodewright: NodeWright {
                metadata: nw.metadata.clone(),
                spec: nw.spec.clone(),
                status: None,
            },
            packages: packages.clone(),
            options: options.clone(),
        }
    }
}

/// One executor Job described by its builder inputs; [`JobRecipe::build`] makes the manifest.
#[derive(Clone)]
pub struct JobRecipe {
    basis: Arc<ExecutorBasis>,
    package: String,
    stage: Stage,
    node: String,
    node_order: i64,
    interrupt: Option<Interrupt>,
}

impl JobRecipe {
    /// The recipe of the Job of the package under key `package` in the basis at `stage` on `node`;
    /// `interrupt` selects the interrupt Job of that (winning) package. `None` when the package
    /// is not in the basis.
    pub fn new(
        basis: Arc<ExecutorBasis>,
        package: &str,
        stage: Stage,
        node: &str,
        node_order: i64,
        interrupt: Option<Interrupt>,
    ) -> Option<Self> {
        basis.packages.contains_key(package).then(|| Self {
            basis,
            package: package.to_string(),
            stage,
            node: node.to_string(),
            node_order,
            interrupt,
        })
    }

    fn package(&self) -> &Package {
        // `new` admits only packages of the basis, which never changes.
        &self.basis.packages[&self.package]
    }

    /// Builds the manifest: `build_package_job`, or `build_interrupt_job` for an interrupt.
    pub fn build(&self) -> Job {
        let inputs = JobInputs {
            nodewright: &self.basis.nodewright,
            package: self.package(),
            stage: self.stage,
            node: &self.node,
            node_order: self.node_order,
            options: &self.basis.options,
        };
        match &self.interrupt {
            Some(i) => build_interrupt_job(&inputs, i),
            None => build_package_job(&inputs),
        }
    }

    /// The Job's name, as the built manifest has it.
    pub fn name(&self) -> String {
        let nw = self.basis.nodewright.metadata.name.as_deref().unwrap_or("");
        let pkg = self.package();
        match &self.interrupt {
            Some(i) => naming::interrupt_job_name(nw, self.stage, i.type_, &self.node),
            None => naming::package_job_name(nw, &pkg.name, &pkg.version, self.stage, &self.node),
        }
    }

    /// The log context, as [`context_of`] reads it from the built manifest.
    pub fn context(&self) -> Context {
        let pkg = self.package();
        Context {
            nodewright: Some(
                self.basis
                    .nodewright
                    .metadata
                    .name
                    .clone()
                    .unwrap_or_default(),
            ),
            node: Some(self.node.clone()),
            package: Some(pkg.name.clone()),
            version: Some(pkg.version.clone()),
            stage: Some(self.stage.as_str().to_string()),
        }
    }
}

impl fmt::Debug for JobRecipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRecipe")
            .field("name", &self.name())
            .field("stage", &self.stage)
            .field("node", &self.node)
            .field("node_order", &self.node_order)
            .field("interrupt", &self.interrupt)
            .finish()
    }
}

/// The manifest of a `CreateJob`: a recipe built when the Job is created, or a Job already built
/// (a test's fixture, or one read back from a trace). Serializes as the built Job, so traces and
/// plans read the same either way.
#[derive(Clone, Debug)]
pub enum JobManifest {
    /// Built on demand from its inputs.
    Recipe(JobRecipe),
    /// Already built.
    Built(Box<Job>),
}

impl JobManifest {
    /// The manifest as a Job (built now for a recipe).
    pub fn to_job(&self) -> Job {
        match self {
            Self::Recipe(r) => r.build(),
            Self::Built(job) => (**job).clone(),
        }
    }

    /// The Job's name.
    pub fn name(&self) -> String {
        match self {
            Self::Recipe(r) => r.name(),
            Self::Built(job) => job.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The log context of the Job.
    pub fn context(&self) -> Context {
        match self {
            Self::Recipe(r) => r.context(),
            Self::Built(job) => context_of(job),
        }
    }

    /// Whether this is an interrupt Job (label `<P>/interrupt=True`).
    pub fn is_interrupt(&self) -> bool {
        match self {
            Self::Recipe(r) => r.interrupt.is_some(),
            Self::Built(job) => job
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::LABEL_INTERRUPT))
                .is_some_and(|v| v == "True"),
        }
    }
}

impl From<Job> for JobManifest {
    fn from(job: Job) -> Self {
        Self::Built(Box::new(job))
    }
}

impl From<JobRecipe> for JobManifest {
    fn from(recipe: JobRecipe) -> Self {
        Self::Recipe(recipe)
    }
}

impl PartialEq for JobManifest {
    fn eq(&self, other: &Self) -> bool {
        self.to_job() == other.to_job()
    }
}

impl Serialize for JobManifest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Recipe(r) => r.build().serialize(serializer),
            Self::Built(job) => job.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for JobManifest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Job::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_crds::{InterruptType, NodeWrightSpec};

    fn basis() -> Arc<ExecutorBasis> {
        let mut nw = NodeWright::new("demo", NodeWrightSpec::default());
        nw.metadata.uid = Some("uid-1".into());
        nw.metadata.generation = Some(3);
        let packages = BTreeMap::from([(
            "dexter".to_string(),
            Package {
                name: "dexter".into(),
                version: "1.2.3".into(),
                image: "ghcr.io/example/dexter".into(),
                config_map: BTreeMap::from([("a.sh".into(), "echo a".into())]),
                ..Package::default()
            },
        )]);
        Arc::new(ExecutorBasis::new(&nw, &packages, &Options::default()))
    }

    /// D27: what a recipe says of its Job without building it (name, log context, interrupt or
    /// not) is what the built manifest says, for package and interrupt Jobs.
    #[test]
    fn d27_a_recipe_names_and_describes_its_job_as_the_built_manifest() {
        let interrupt = Interrupt {
            type_: InterruptType::Service,
            services: vec!["containerd".into()],
        };
        for (stage, i) in [
            (Stage::Apply, None),
            (Stage::Config, None),
            (Stage::Interrupt, Some(interrupt.clone())),
            (Stage::UninstallInterrupt, Some(interrupt)),
        ] {
            let recipe = JobRecipe::new(basis(), "dexter", stage, "node-7", 7, i).unwrap();
            let built = recipe.build();
            let lazy = JobManifest::from(recipe.clone());
            let eager = JobManifest::from(built.clone());
            assert_eq!(lazy.name(), eager.name(), "{stage:?}");
            assert_eq!(lazy.context(), eager.context(), "{stage:?}");
            assert_eq!(lazy.is_interrupt(), eager.is_interrupt(), "{stage:?}");
            assert_eq!(lazy, eager);
            assert_eq!(
                serde_json::to_value(&lazy).unwrap(),
                serde_json::to_value(&built).unwrap()
            );
        }
    }

    /// D27: a recipe is only made for a package of its basis.
    #[test]
    fn d27_a_recipe_of_an_unknown_package_is_refused() {
        assert!(JobRecipe::new(basis(), "other", Stage::Apply, "n", 0, None).is_none());
    }
}

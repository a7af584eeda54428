//! Scripted package behaviour: how long each attempt of a stage takes and how it ends.

use serde::{Deserialize, Serialize};

use crate::time::{Dur, SimTime};

/// Behaviour of matching executor pods; unset match fields match anything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageScript {
    /// Package name.
    #[serde(default)]
    pub package: Option<String>,
    /// Package version.
    #[serde(default)]
    pub version: Option<String>,
    /// Stage (`apply`, `config`, `interrupt`, ...).
    #[serde(default)]
    pub stage: Option<String>,
    /// Node name.
    #[serde(default)]
    pub node: Option<String>,
    /// Attempts in order; the last one repeats. Empty means one quick success.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Every container using the package image waits in `ErrImagePull` with this message.
    #[serde(default)]
    pub image_pull_error: Option<String>,
    /// The kubelet never acknowledges the pod (no `startTime`).
    #[serde(default)]
    pub never_starts: bool,
    /// For reboot interrupts: how long the node stays down.
    #[serde(default)]
    pub reboot_down: Option<Dur>,
}

/// One attempt of a stage step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attempt {
    /// How long the step container runs.
    #[serde(default = "default_duration")]
    pub duration: Dur,
    /// Exit code of the step container.
    #[serde(default)]
    pub exit: i32,
    /// Exit code of the check container.
    #[serde(default)]
    pub check_exit: i32,
    /// Kubelet admission refuses the pod with this reason (`OutOfcpu`); nothing runs.
    #[serde(default)]
    pub refuse: Option<String>,
}

fn default_duration() -> Dur {
    Dur(5_000)
}

impl Default for Attempt {
    fn default() -> Self {
        Attempt {
            duration: default_duration(),
            exit: 0,
            check_exit: 0,
            refuse: None,
        }
    }
}

/// The scripts of a scenario, first match wins.
#[derive(Clone, Debug, Default)]
pub struct Scripts(pub Vec<PackageScript>);

/// What a pod is, for script lookup.
#[derive(Clone, Debug, Default)]
pub struct PodIdentity {
    /// Package name.
    pub package: String,
    /// Package version.
    pub version: String,
    /// Stage.
    pub stage: String,
    /// Node name.
    pub node: String,
}

impl Scripts {
    /// The first script matching the pod, if any.
    pub fn find(&self, id: &PodIdentity) -> Option<&PackageScript> {
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.0.iter().find(|s| {
            ok(&s.package, &id.package)
                && ok(&s.version, &id.version)
                && ok(&s.stage, &id.stage)
                && ok(&s.node, &id.node)
        })
    }

    /// The attempt numbered `n` (0-based) for the pod; the last scripted one repeats.
    pub fn attempt(&self, id: &PodIdentity, n: usize) -> Attempt {
        self.find(id)
            .and_then(|s| {
                s.attempts
                    .get(n.min(s.attempts.len().saturating_sub(1)))
                    .cloned()
            })
            .unwrap_or_default()
    }

    /// How long a reboot interrupt keeps the node down.
    pub fn reboot_down(&self, id: &PodIdentity) -> SimTime {
        self.find(id)
            .and_then(|s| s.reboot_down)
            .map_or(30_000, |d| d.0)
    }
}

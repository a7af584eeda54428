//! "Does this Job still match the spec?" (04-jobs-rules.md §6.4–6.6, 03-executor.md §4).
//!
//! Jobs built by this operator carry `<P>/executor-fingerprint` and are compared by it (D19);
//! Jobs without it (built by the Go operator) are compared the reference way, on the pod
//! template's init containers, with the env normalisation of 03 §8.10.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar, ResourceRequirements};
use nodewright_crds::{Interrupt, InterruptType, NodeWright, Package, Stage, keys};

use super::builder::{JobInputs, OPERATOR_ENV, build_interrupt_job, build_package_job};
use super::fingerprint::{interrupt_fingerprint, package_fingerprint};
use super::index::ExecutorJob;
use super::naming::package_label;
use super::quantity::same_value;
use crate::Options;
use crate::slim::{SlimJob, Tagged};

/// The parts of a Job the comparisons read, from a Job the builder produced ([`Job`]) or one of
/// the snapshot ([`SlimJob`]).
pub trait JobParts {
    /// A label value.
    fn label(&self, key: &str) -> Option<&str>;
    /// An annotation value.
    fn annotation(&self, key: &str) -> Option<&str>;
    /// The Job-level and the template's `activeDeadlineSeconds`; `None` without a spec.
    fn deadlines(&self) -> Option<(Option<i64>, Option<i64>)>;
    /// The template's init containers.
    fn init_containers(&self) -> &[Container];
}

// One body for both forms: the record keeps the Job's field paths.
macro_rules! jobparts_impls {
    ($($t:ty),+) => {$(
        impl JobParts for $t {
            fn label(&self, key: &str) -> Option<&str> {
                Tagged::label(&self.metadata, key)
            }

            fn annotation(&self, key: &str) -> Option<&str> {
                Tagged::annotation(&self.metadata, key)
            }

            fn deadlines(&self) -> Option<(Option<i64>, Option<i64>)> {
                let spec = self.spec.as_ref()?;
                let template = spec
                    .template
                    .spec
                    .as_ref()
                    .and_then(|s| s.active_deadline_seconds);
                Some((spec.active_deadline_seconds, template))
            }

            fn init_containers(&self) -> &[Container] {
                self.spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|s| s.init_containers.as_deref())
                    .unwrap_or_default()
            }
        }
    )+};
}

jobparts_impls!(Job, SlimJob);

/// The deadline a Job carries: the template's `activeDeadlineSeconds` for package Jobs, the
/// Job-level one for interrupt Jobs; an absent field counts as 0 (04 §6.6 item 3).
pub fn job_deadline(job: &impl JobParts) -> i64 {
    let Some((job_level, template)) = job.deadlines() else {
        return 0;
    };
    if job.label(keys::LABEL_INTERRUPT) == Some("True") {
        job_level.unwrap_or(0)
    } else {
        template.unwrap_or(0)
    }
}

/// Compares an existing Job with the Job the builder produces now (same kind and stage):
/// fingerprint when the existing Job has one, else the reference template comparison.
pub fn executor_matches(existing: &SlimJob, expected: &Job) -> bool {
    if existing.label(keys::PACKAGE) != expected.label(keys::PACKAGE) {
        return false;
    }
    match existing.annotation(keys::EXECUTOR_FINGERPRINT) {
        Some(fp) => Some(fp) == expected.annotation(keys::EXECUTOR_FINGERPRINT),
        None => template_matches(existing, expected),
    }
}

/// The reference comparison of 03 §4.1 on two pod templates.
fn template_matches(existing: &SlimJob, expected: &Job) -> bool {
    let interrupt = existing.label(keys::LABEL_INTERRUPT) == Some("True");
    let limit_ranger = existing
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .is_some_and(|a| a.contains_key("kubernetes.io/limit-ranger"));
    let (actual, wanted) = (existing.init_containers(), expected.init_containers());
    if actual.len() != wanted.len() {
        return false;
    }
    actual.iter().zip(wanted).all(|(a, w)| {
        a.name == w.name
            && a.image == w.image
            && user_env(a) == user_env(w)
            && (interrupt || resources_match(a, w, limit_ranger))
    })
}

/// The env without the operator variables, `fieldRef.apiVersion` defaulted to `v1` (03 §8.10).
fn user_env(c: &Container) -> Vec<EnvVar> {
    c.env
        .iter()
        .flatten()
        .filter(|e| !OPERATOR_ENV.contains(&e.name.as_str()))
        .cloned()
        .map(|mut e| {
            if let Some(field) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut())
                && field.api_version.as_deref().is_none_or(str::is_empty)
            {
                field.api_version = Some("v1".to_string());
            }
            e
        })
        .collect()
}

fn is_empty(r: Option<&ResourceRequirements>) -> bool {
    r.is_none_or(|r| {
        r.limits.as_ref().is_none_or(|m| m.is_empty())
            && r.requests.as_ref().is_none_or(|m| m.is_empty())
    })
}

fn resources_match(actual: &Container, wanted: &Container, limit_ranger: bool) -> bool {
    let (a, w) = (actual.resources.as_ref(), wanted.resources.as_ref());
    if is_empty(w) {
        return limit_ranger || is_empty(a);
    }
    let same_map = |x: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
                    y: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        let empty = std::collections::BTreeMap::new();
        let (x, y) = (x.unwrap_or(&empty), y.unwrap_or(&empty));
        x.len() == y.len()
            && x.iter()
                .all(|(k, q)| y.get(k).is_some_and(|q2| same_value(&q.0, &q2.0)))
    };
    same_map(
        a.and_then(|r| r.limits.as_ref()),
        w.and_then(|r| r.limits.as_ref()),
    ) && same_map(
        a.and_then(|r| r.requests.as_ref()),
        w.and_then(|r| r.requests.as_ref()),
    )
}

/// What the builder would produce now for `pkg` at `stage` (empty node, order 0): the expected
/// side of a comparison.
pub fn expected_job(
    nw: &NodeWright,
    pkg: &Package,
    stage: Stage,
    interrupt: bool,
    options: &Options,
) -> Job {
    let inputs = JobInputs {
        nodewright: nw,
        package: pkg,
        stage,
        node: "",
        node_order: 0,
        options,
    };
    if interrupt {
        let empty = Interrupt {
            type_: InterruptType::Noop,
            services: Vec::new(),
        };
        build_interrupt_job(&inputs, &empty)
    } else {
        build_package_job(&inputs)
    }
}

/// `jobMatchesPackage` for one spec package (04 §6.4, §6.6 item 2).
pub fn matches_package(
    job: &ExecutorJob,
    nw: &NodeWright,
    pkg: &Package,
    options: &Options,
) -> bool {
    let fingerprint = || {
        Cow::Owned(if job.interrupt {
            interrupt_fingerprint(pkg, options)
        } else {
            package_fingerprint(pkg, options)
        })
    };
    matches_with(job, nw, pkg, options, fingerprint)
}

fn matches_with<'f>(
    job: &ExecutorJob,
    nw: &NodeWright,
    pkg: &Package,
    options: &Options,
    fingerprint_now: impl FnOnce() -> Cow<'f, str>,
) -> bool {
    if !job.runs(&pkg.name, &pkg.version) {
        return false;
    }
    match job.fingerprint.as_deref() {
        Some(fp) => fp == fingerprint_now().as_ref(),
        None => {
            let Some(stage) = job.stage else {
                return false;
            };
            template_matches(
                &job.job,
                &expected_job(nw, pkg, stage, job.interrupt, options),
            )
        }
    }
}

/// The spec packages of one NodeWright with their fingerprints, computed once per sweep so a
/// pass over many Jobs hashes each package once (names filled from the map keys).
#[derive(Clone, Debug)]
pub struct SpecFingerprints {
    packages: BTreeMap<String, (Package, String, String)>,
}

impl SpecFingerprints {
    /// Fingerprints of every spec package of `nw` (package-stage and interrupt kind).
    pub fn new(nw: &NodeWright, options: &Options) -> Self {
        let packages = nw
            .spec
            .packages
            .keys()
            .filter_map(|name| spec_package(nw, name))
            .map(|p| {
                let fps = (
                    package_fingerprint(&p, options),
                    interrupt_fingerprint(&p, options),
                );
                (p.name.clone(), (p, fps.0, fps.1))
            })
            .collect();
        Self { packages }
    }

    fn matches_any(&self, job: &ExecutorJob, nw: &NodeWright, options: &Options) -> bool {
        self.packages
            .values()
            .any(|(pkg, package_fp, interrupt_fp)| {
                let fp = if job.interrupt {
                    interrupt_fp
                } else {
                    package_fp
                };
                matches_with(job, nw, pkg, options, || Cow::Borrowed(fp.as_str()))
            })
    }
}

/// The spec package named like the Job's package, with its name filled from the map key.
pub fn spec_package(nw: &NodeWright, name: &str) -> Option<Package> {
    nw.spec.packages.get(name).map(|p| {
        let mut p = p.clone();
        if p.name.is_empty() {
            p.name = name.to_string();
        }
        p
    })
}

/// True when some spec package matches the Job, or it is an uninstall Job whose package left the
/// spec or changed version (04 §6.5).
pub fn matches_spec(job: &ExecutorJob, nw: &NodeWright, options: &Options) -> bool {
    matches_spec_with(job, nw, &SpecFingerprints::new(nw, options), options)
}

/// [`matches_spec`] with precomputed fingerprints.
pub fn matches_spec_with(
    job: &ExecutorJob,
    nw: &NodeWright,
    fps: &SpecFingerprints,
    options: &Options,
) -> bool {
    if job.stage == Some(Stage::Uninstall)
        && let Some(pkg) = job.package.as_ref()
    {
        let current = fps.packages.get(&pkg.name).map(|(p, _, _)| p);
        if current.is_none_or(|c| c.version != pkg.version) {
            return true;
        }
    }
    fps.matches_any(job, nw, options)
}

/// The timed-out test (04 §6.6 item 3): matches the spec and carries the deadline a new Job
/// would get now.
pub fn timed_out_still_matches(job: &ExecutorJob, nw: &NodeWright, options: &Options) -> bool {
    timed_out_still_matches_with(job, nw, &SpecFingerprints::new(nw, options), options)
}

/// [`timed_out_still_matches`] with precomputed fingerprints.
pub fn timed_out_still_matches_with(
    job: &ExecutorJob,
    nw: &NodeWright,
    fps: &SpecFingerprints,
    options: &Options,
) -> bool {
    if !matches_spec_with(job, nw, fps, options) {
        return false;
    }
    let Some((pkg, _, _)) = job.package.as_ref().and_then(|p| fps.packages.get(&p.name)) else {
        // Uninstall Job of a package that left the spec: nothing to compare the deadline with.
        return true;
    };
    job_deadline(&*job.job) == super::builder::deadline_seconds(pkg, options).unwrap_or(0)
}

/// True when the package label of `job` equals `<name>-<version>`.
pub fn label_is(job: &impl JobParts, name: &str, version: &str) -> bool {
    job.label(keys::PACKAGE) == Some(package_label(name, version).as_str())
}

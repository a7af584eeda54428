//! NodeWright object checks (01-api.md §4.3 checks 1–7, decisions D1 and D9): one test per rule,
//! each with its exact message, plus the accepted forms.

mod common;

use common::{base, nodewright, pkg, with};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use nodewright_crds::duration::GoDuration;
use nodewright_crds::validation::{
    ValidationError, validate_nodewright, validate_policy_reference,
};
use nodewright_crds::{DrainConfig, Interrupt, InterruptType, InterruptionBudget, NodeWright};
use nodewright_crds::{ResourceRequirements, Uninstall};

fn reject(nw: &NodeWright) -> String {
    validate_nodewright(nw)
        .expect_err("object should be rejected")
        .to_string()
}

fn accept(nw: &NodeWright) {
    if let Err(e) = validate_nodewright(nw) {
        panic!("object should be accepted, got: {e}");
    }
}

fn budget(percent: Option<i32>, count: Option<i32>) -> Option<InterruptionBudget> {
    Some(InterruptionBudget { percent, count })
}

fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }]),
        ..Default::default()
    }
}

fn resources(values: [&str; 4]) -> Option<ResourceRequirements> {
    let q = |v: &str| (!v.is_empty()).then(|| Quantity(v.to_string()));
    Some(ResourceRequirements {
        cpu_request: q(values[0]),
        cpu_limit: q(values[1]),
        memory_request: q(values[2]),
        memory_limit: q(values[3]),
    })
}

#[test]
fn base_fixture_is_valid() {
    accept(&base());
}

#[test]
fn check_1_both_percent_and_count_rejected() {
    let nw = with(|nw| nw.spec.interruption_budget = budget(Some(10), Some(2)));
    assert_eq!(
        validate_nodewright(&nw),
        Err(ValidationError::BudgetBothSet)
    );
    assert_eq!(
        reject(&nw),
        "interruption budget: error InterruptionBudget is not valid, both percent and count can not be set at the same time"
    );
}

#[test]
fn check_1_single_budget_accepted() {
    accept(&with(|nw| {
        nw.spec.interruption_budget = budget(Some(25), None)
    }));
    accept(&with(|nw| {
        nw.spec.interruption_budget = budget(None, Some(3))
    }));
    accept(&with(|nw| nw.spec.interruption_budget = budget(None, None)));
}

#[test]
fn d9_zero_budget_rejected() {
    let percent = with(|nw| nw.spec.interruption_budget = budget(Some(0), None));
    assert_eq!(
        reject(&percent),
        "interruption budget: percent must be between 1 and 100, got 0"
    );
    let count = with(|nw| nw.spec.interruption_budget = budget(None, Some(0)));
    assert_eq!(
        reject(&count),
        "interruption budget: count must be at least 1, got 0"
    );
    let over = with(|nw| nw.spec.interruption_budget = budget(Some(101), None));
    assert_eq!(
        validate_nodewright(&over),
        Err(ValidationError::BudgetPercentOutOfRange(101))
    );
}

#[test]
fn d1_drain_timeout_negative_rejected() {
    let nw = with(|nw| {
        nw.spec.drain_config = Some(DrainConfig {
            timeout: Some(GoDuration::new("-1s")),
            ..Default::default()
        })
    });
    assert_eq!(
        reject(&nw),
        "drain config: drainConfig.timeout must be greater than or equal to 0"
    );
}

#[test]
fn d1_drain_grace_period_negative_rejected() {
    let nw = with(|nw| {
        nw.spec.drain_config = Some(DrainConfig {
            grace_period: Some(GoDuration::new("-5m")),
            ..Default::default()
        })
    });
    assert_eq!(
        reject(&nw),
        "drain config: drainConfig.gracePeriod must be greater than or equal to 0"
    );
}

#[test]
fn d1_drain_zero_and_positive_accepted() {
    accept(&with(|nw| {
        nw.spec.drain_config = Some(DrainConfig {
            timeout: Some(GoDuration::new("0")),
            grace_period: Some(GoDuration::new("30s")),
            ..Default::default()
        })
    }));
}

#[test]
fn check_2_policy_and_budget_rejected() {
    let nw = with(|nw| {
        nw.spec.deployment_policy = "rollout".into();
        nw.spec.interruption_budget = budget(None, Some(1));
    });
    assert_eq!(
        reject(&nw),
        "deploymentPolicy and interruptionBudget are mutually exclusive"
    );
}

#[test]
fn check_2_policy_with_empty_budget_accepted() {
    accept(&with(|nw| {
        nw.spec.deployment_policy = "rollout".into();
        nw.spec.interruption_budget = budget(None, None);
    }));
}

#[test]
fn d1_pod_non_interrupt_labels_invalid_rejected() {
    let nw = with(|nw| nw.spec.pod_non_interrupt_labels = Some(expr("app", "Equals", &["x"])));
    assert_eq!(
        reject(&nw),
        r#"pod non-interrupt labels are not valid: "Equals" is not a valid label selector operator"#
    );
    accept(&with(|nw| {
        nw.spec.pod_non_interrupt_labels = Some(expr("app", "In", &["training"]))
    }));
}

#[test]
fn check_3_invalid_node_selector_rejected() {
    let nw = with(|nw| nw.spec.node_selector = Some(expr("pool", "In", &[])));
    assert_eq!(
        reject(&nw),
        "node selectors are not valid: values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"
    );
    let exists = with(|nw| nw.spec.node_selector = Some(expr("pool", "Exists", &["a"])));
    assert!(reject(&exists).starts_with("node selectors are not valid: values: Invalid value"));
    let key = with(|nw| nw.spec.node_selector = Some(expr("Bad Key", "Exists", &[])));
    assert!(
        reject(&key).starts_with("node selectors are not valid: key: Invalid value: \"Bad Key\"")
    );
}

#[test]
fn check_3_valid_node_selector_accepted() {
    accept(&with(|nw| nw.spec.node_selector = None));
    accept(&with(|nw| {
        nw.spec.node_selector = Some(expr("example.com/pool", "NotIn", &["cpu"]))
    }));
}

#[test]
fn check_4a_name_mismatch_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").name = "other".into());
    assert_eq!(
        reject(&nw),
        "error package dexter's name was set to other. Do not explicitly set the name in the package's definition"
    );
}

#[test]
fn check_4a_name_equal_to_key_accepted() {
    accept(&with(|nw| pkg(nw, "dexter").name = "dexter".into()));
}

#[test]
fn check_4b_duplicate_package_names_impossible() {
    // Packages are a map keyed by name and 4a forces name == key, so two packages can never
    // share a name: the Go operator's check 4b is dead code and has no counterpart here.
    let nw = base();
    let names: std::collections::BTreeSet<_> = nw.spec.packages.keys().collect();
    assert_eq!(names.len(), nw.spec.packages.len());
}

#[test]
fn check_4c_invalid_package_name_rejected() {
    for key in [
        "a",
        "Dexter",
        "dexter-",
        "1dexter",
        "dex_ter",
        "dexter\nok",
        "ab-",
        &"a".repeat(44),
    ] {
        let nw = with(|nw| {
            let p = nw.spec.packages.remove("spencer").expect("fixture");
            nw.spec.packages.insert(key.to_string(), p);
            pkg(nw, "dexter").depends_on.clear();
        });
        assert_eq!(
            reject(&nw),
            format!(
                "package name [{key}] is not valid. must match [^[a-z][-a-z0-9]{{0,41}}[a-z]$]"
            ),
            "{key:?}"
        );
    }
}

#[test]
fn check_4c_valid_package_names_accepted() {
    for key in ["ab", "nvidia-setup", "a0-9z", &"a".repeat(43)] {
        accept(&with(|nw| {
            let p = nw.spec.packages.remove("spencer").expect("fixture");
            nw.spec.packages.insert(key.to_string(), p);
            pkg(nw, "dexter").depends_on.clear();
        }));
    }
}

fn reboot() -> Interrupt {
    Interrupt {
        type_: InterruptType::Reboot,
        services: vec![],
    }
}

#[test]
fn check_4d_literal_config_interrupt_missing_rejected() {
    let nw = with(|nw| {
        let p = pkg(nw, "dexter");
        p.config_map.insert("a.conf".into(), "x".into());
        p.config_interrupts.insert("b.conf".into(), reboot());
    });
    assert_eq!(
        reject(&nw),
        "error config interrupt for key that doesn't exist: b.conf doesn't exist as a configmap"
    );
}

#[test]
fn check_4d_glob_config_interrupt_no_match_rejected() {
    let nw = with(|nw| {
        let p = pkg(nw, "dexter");
        p.config_map.insert("a.conf".into(), "x".into());
        p.config_interrupts.insert("*.sh".into(), reboot());
    });
    assert_eq!(
        reject(&nw),
        r#"error config interrupt glob "*.sh" does not match any configMap keys"#
    );
}

#[test]
fn check_4d_literal_and_glob_accepted() {
    accept(&with(|nw| {
        let p = pkg(nw, "dexter");
        p.config_map.insert("a.conf".into(), "x".into());
        p.config_map.insert("run.sh".into(), "x".into());
        p.config_interrupts.insert("a.conf".into(), reboot());
        p.config_interrupts.insert("*.sh".into(), reboot());
        p.config_interrupts.insert("r*".into(), reboot());
    }));
}

#[test]
fn check_4e_inline_tag_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").image = "ghcr.io/example/dexter:1.2.3".into());
    assert_eq!(
        reject(&nw),
        "error package dexter's image 'ghcr.io/example/dexter:1.2.3' contains an inline tag '1.2.3'. Do not embed a tag in the image; the package version supplies the tag"
    );
    let port_and_tag = with(|nw| pkg(nw, "dexter").image = "localhost:5000/dexter:x".into());
    assert!(reject(&port_and_tag).contains("contains an inline tag 'x'"));
    let empty_tag = with(|nw| pkg(nw, "dexter").image = "dexter:".into());
    assert!(reject(&empty_tag).contains("contains an inline tag ''"));
}

#[test]
fn check_4e_inline_digest_rejected() {
    let image = format!("ghcr.io/example/dexter@sha256:{}", "a".repeat(64));
    let nw = with(|nw| pkg(nw, "dexter").image = image.clone());
    assert_eq!(
        reject(&nw),
        format!(
            "error package dexter's image '{image}' contains an inline digest. Do not embed a digest in the image; pin the image bytes using the package's containerSHA field instead"
        )
    );
    let empty = with(|nw| pkg(nw, "dexter").image = "dexter@".into());
    assert!(reject(&empty).contains("contains an inline digest"));
}

#[test]
fn check_4e_registry_port_accepted() {
    accept(&with(|nw| {
        pkg(nw, "dexter").image = "localhost:5000/org/dexter".into()
    }));
    accept(&with(|nw| pkg(nw, "dexter").image = "dexter".into()));
}

#[test]
fn d1_image_blank_rejected() {
    for image in ["", "ghcr.io/a b"] {
        let nw = with(|nw| pkg(nw, "dexter").image = image.into());
        assert_eq!(
            reject(&nw),
            r#"package "dexter": image must be non-empty and must not contain whitespace"#
        );
    }
}

#[test]
fn d1_container_sha_pattern() {
    let bad = with(|nw| pkg(nw, "dexter").container_sha = "sha256:ABC".into());
    assert_eq!(
        reject(&bad),
        r#"package "dexter": containerSHA "sha256:ABC" must match ^sha256:[0-9a-f]{64}$"#
    );
    let good = format!("sha256:{}", "0123456789abcdef".repeat(4));
    accept(&with(|nw| pkg(nw, "dexter").container_sha = good.clone()));
}

#[test]
fn check_4f_invalid_version_rejected() {
    for version in ["latest", "01.2.3", "1.2-rc1", ""] {
        let nw = with(|nw| {
            pkg(nw, "dexter").version = version.into();
        });
        assert_eq!(
            reject(&nw),
            format!("error version string for dexter is invalid: {version}")
        );
    }
}

#[test]
fn check_4f_shorthand_versions_accepted() {
    accept(&with(|nw| pkg(nw, "dexter").version = "2".into()));
    accept(&with(|nw| pkg(nw, "dexter").version = "v2.1".into()));
    accept(&with(|nw| {
        pkg(nw, "dexter").version = "2.1.0-rc.1+build.5".into()
    }));
}

#[test]
fn check_4g_partial_resources_rejected() {
    let message = r#"package "dexter": if any resource override is set, all of cpuRequest, cpuLimit, memoryRequest, memoryLimit must be set"#;
    let partial = with(|nw| pkg(nw, "dexter").resources = resources(["100m", "", "", ""]));
    assert_eq!(reject(&partial), message);
    let zero = with(|nw| pkg(nw, "dexter").resources = resources(["100m", "200m", "0", "1Gi"]));
    assert_eq!(reject(&zero), message, "a zero quantity counts as not set");
}

#[test]
fn check_4g_all_or_none_accepted() {
    accept(&with(|nw| {
        pkg(nw, "dexter").resources = resources(["", "", "", ""])
    }));
    accept(&with(|nw| {
        pkg(nw, "dexter").resources = resources(["0", "0m", "", "0Gi"])
    }));
    accept(&with(|nw| {
        pkg(nw, "dexter").resources = resources(["500m", "1", "512Mi", "1Gi"])
    }));
    accept(&with(|nw| {
        pkg(nw, "dexter").resources = resources(["1", "1000m", "1Gi", "1073741824"])
    }));
}

#[test]
fn check_4h_cpu_limit_below_request_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").resources = resources(["1500m", "1", "1Gi", "1Gi"]));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": cpuLimit (1) must be >= cpuRequest (1500m)"#
    );
    // Quantities are printed in Kubernetes' canonical spelling, as the Go webhook does.
    let spelled =
        with(|nw| pkg(nw, "dexter").resources = resources(["1.5", "1000m", "1Gi", "1Gi"]));
    assert_eq!(
        reject(&spelled),
        r#"package "dexter": cpuLimit (1) must be >= cpuRequest (1500m)"#
    );
}

#[test]
fn check_4i_memory_limit_below_request_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").resources = resources(["1", "1", "1Gi", "1000Mi"]));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": memoryLimit (1000Mi) must be >= memoryRequest (1Gi)"#
    );
}

#[test]
fn check_4j_non_positive_resources_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").resources = resources(["-1", "1", "1Gi", "1Gi"]));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": all resource values must be positive"#
    );
}

#[test]
fn check_4k_uninstall_apply_without_enabled_rejected() {
    let nw = with(|nw| {
        pkg(nw, "dexter").uninstall = Some(Uninstall {
            enabled: false,
            apply: true,
        })
    });
    assert_eq!(
        reject(&nw),
        r#"package "dexter": uninstall.apply requires uninstall.enabled to be true"#
    );
    accept(&with(|nw| {
        pkg(nw, "dexter").uninstall = Some(Uninstall {
            enabled: true,
            apply: true,
        })
    }));
}

#[test]
fn check_4l_negative_stage_timeout_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").stage_timeout = Some(GoDuration::new("-1m")));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": stageTimeout must be greater than or equal to 0"#
    );
}

#[test]
fn check_4l_zero_and_positive_stage_timeout_accepted() {
    accept(&with(|nw| {
        pkg(nw, "dexter").stage_timeout = Some(GoDuration::new("0"))
    }));
    accept(&with(|nw| {
        pkg(nw, "dexter").stage_timeout = Some(GoDuration::new("90m"))
    }));
}

#[test]
fn r4_3_decode_invalid_duration_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").graceful_shutdown = Some(GoDuration::new("10")));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": gracefulShutdown: time: invalid duration "10""#
    );
    let drain = with(|nw| {
        nw.spec.drain_config = Some(DrainConfig {
            timeout: Some(GoDuration::new("soon")),
            ..Default::default()
        })
    });
    assert_eq!(
        reject(&drain),
        r#"drain config: drainConfig.timeout: time: invalid duration "soon""#
    );
}

#[test]
fn r4_3_decode_invalid_quantity_rejected() {
    let nw = with(|nw| pkg(nw, "dexter").resources = resources(["1", "1", "1GB", "2Gi"]));
    assert_eq!(
        reject(&nw),
        r#"package "dexter": resources.memoryRequest "1GB": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"#
    );
}

#[test]
fn check_5_empty_depends_on_version_rejected() {
    let nw = with(|nw| {
        pkg(nw, "dexter")
            .depends_on
            .insert("spencer".into(), String::new());
    });
    assert_eq!(
        reject(&nw),
        "error trying to validate nodewright spec building graph: DependsOn version is empty for [spencer]"
    );
}

#[test]
fn check_6_missing_dependency_rejected() {
    let nw = with(|nw| {
        let p = pkg(nw, "dexter");
        p.depends_on.insert("zeta".into(), "1.0.0".into());
        p.depends_on.insert("alpha".into(), "2.0.0".into());
    });
    assert_eq!(
        reject(&nw),
        "error trying to validate nodewright spec graph is invalid: error graph is not valid, missing: [alpha|2.0.0 zeta|1.0.0]"
    );
}

#[test]
fn check_6_version_mismatch_rejected() {
    let nw = with(|nw| {
        pkg(nw, "dexter")
            .depends_on
            .insert("spencer".into(), "0.2.0".into());
    });
    assert_eq!(
        reject(&nw),
        "error trying to validate nodewright spec graph is invalid: error graph is not valid, missing: [spencer|0.2.0]"
    );
}

#[test]
fn check_6_valid_chain_accepted() {
    accept(&nodewright(
        r#"
metadata: {name: chain}
spec:
  packages:
    aa: {version: "1", image: r/a}
    bb: {version: "2", image: r/b, dependsOn: {aa: "1"}}
    cc: {version: "3", image: r/c, dependsOn: {aa: "1", bb: "2"}}
"#,
    ));
}

#[test]
fn d9_cycle_rejected() {
    let nw = nodewright(
        r#"
metadata: {name: loop}
spec:
  packages:
    aa: {version: "1", image: r/a, dependsOn: {bb: "1"}}
    bb: {version: "1", image: r/b, dependsOn: {cc: "1"}}
    cc: {version: "1", image: r/c, dependsOn: {aa: "1"}}
"#,
    );
    assert_eq!(
        validate_nodewright(&nw),
        Err(ValidationError::DependencyCycle(vec![
            "aa".into(),
            "bb".into(),
            "cc".into(),
            "aa".into()
        ]))
    );
    assert_eq!(
        reject(&nw),
        "error trying to validate nodewright spec graph is invalid: dependency cycle: aa -> bb -> cc -> aa"
    );
}

#[test]
fn d9_self_dependency_rejected() {
    let nw = with(|nw| {
        pkg(nw, "spencer")
            .depends_on
            .insert("spencer".into(), "0.1.0".into());
    });
    assert_eq!(
        reject(&nw),
        "error trying to validate nodewright spec graph is invalid: dependency cycle: spencer -> spencer"
    );
}

#[test]
fn d9_diamond_is_not_a_cycle() {
    accept(&nodewright(
        r#"
metadata: {name: diamond}
spec:
  packages:
    top: {version: "1", image: r/t, dependsOn: {left: "1", right: "1"}}
    left: {version: "1", image: r/l, dependsOn: {base: "1"}}
    right: {version: "1", image: r/r, dependsOn: {base: "1"}}
    base: {version: "1", image: r/b}
"#,
    ));
}

#[test]
fn check_7_policy_not_found_rejected() {
    let nw = with(|nw| nw.spec.deployment_policy = "rollout".into());
    let err = validate_policy_reference(&nw, |_| Ok(false)).expect_err("missing policy");
    assert_eq!(err.to_string(), r#"deploymentPolicy "rollout" not found"#);
}

#[test]
fn check_7_policy_lookup_error_rejected() {
    let nw = with(|nw| nw.spec.deployment_policy = "rollout".into());
    let err = validate_policy_reference(&nw, |_| Err("connection refused".into()))
        .expect_err("lookup failed");
    assert_eq!(
        err.to_string(),
        r#"error checking if deploymentPolicy "rollout" exists: connection refused"#
    );
}

#[test]
fn check_7_policy_found_or_absent_accepted() {
    let nw = with(|nw| nw.spec.deployment_policy = "rollout".into());
    assert_eq!(
        validate_policy_reference(&nw, |name| Ok(name == "rollout")),
        Ok(())
    );
    let without = base();
    assert_eq!(
        validate_policy_reference(&without, |_| panic!("no lookup without a policy")),
        Ok(())
    );
}

#[test]
fn r4_3_first_failure_wins_in_rule_order() {
    let nw = with(|nw| {
        nw.spec.interruption_budget = budget(Some(10), Some(1));
        nw.spec.deployment_policy = "rollout".into();
        nw.spec.node_selector = Some(expr("x", "Bogus", &[]));
        pkg(nw, "dexter").version = "latest".into();
    });
    assert_eq!(
        validate_nodewright(&nw),
        Err(ValidationError::BudgetBothSet)
    );
}

#[test]
fn r4_3_packages_checked_in_key_order() {
    let nw = with(|nw| {
        pkg(nw, "spencer").version = "bad-s".into();
        pkg(nw, "dexter").version = "bad-d".into();
    });
    assert_eq!(
        reject(&nw),
        "error version string for dexter is invalid: bad-d"
    );
}

#[test]
fn r4_3_wrapped_message_names_the_object() {
    let err = ValidationError::PolicyAndBudget;
    assert_eq!(
        err.wrapped("demo"),
        r#"validating NodeWright "demo": deploymentPolicy and interruptionBudget are mutually exclusive"#
    );
}

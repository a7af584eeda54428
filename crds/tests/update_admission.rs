//! UPDATE-only NodeWright checks U1–U5 (01-api.md §4.4).

mod common;

use common::{base, pkg, with};
use nodewright_crds::validation::{
    ValidationError, is_fully_uninstalled, validate_nodewright_update, validate_policy_reference,
};
use nodewright_crds::{NodeState, NodeWright, NodeWrightStatus, PackageStatus, Stage, State};
use nodewright_crds::{Uninstall, nodewright::unique_name};

fn uninstall(enabled: bool, apply: bool) -> Option<Uninstall> {
    Some(Uninstall { enabled, apply })
}

/// `old` with `dexter@1.2.3` still recorded on node `n1`.
fn installed_on_a_node(mut old: NodeWright) -> NodeWright {
    let entry = PackageStatus {
        name: "dexter".into(),
        version: "1.2.3".into(),
        image: "ghcr.io/example/dexter".into(),
        container_sha: String::new(),
        stage: Stage::Config,
        state: Some(State::Complete),
        restarts: 0,
    };
    let mut state = NodeState::default();
    state.0.insert(unique_name("dexter", "1.2.3"), entry);
    old.status = Some(NodeWrightStatus {
        node_state: [("n1".to_string(), state)].into(),
        ..Default::default()
    });
    old
}

fn enabled_old() -> NodeWright {
    with(|nw| pkg(nw, "dexter").uninstall = uninstall(true, false))
}

fn remove_dexter(old: &NodeWright) -> NodeWright {
    let mut new = old.clone();
    new.spec.packages.remove("dexter");
    new
}

fn downgrade_dexter(old: &NodeWright) -> NodeWright {
    let mut new = old.clone();
    pkg(&mut new, "dexter").version = "1.0.0".into();
    new
}

#[test]
fn u1_remove_enabled_package_not_uninstalled_rejected() {
    let old = installed_on_a_node(enabled_old());
    let err = validate_nodewright_update(&old, &remove_dexter(&old)).expect_err("U1");
    assert_eq!(
        err.to_string(),
        r#"package "dexter" has uninstall.enabled=true; set uninstall.apply=true and wait for completion before removing from spec"#
    );
}

#[test]
fn u1_remove_after_full_uninstall_accepted() {
    let old = enabled_old();
    assert!(is_fully_uninstalled(&old, "dexter"), "no node state at all");
    let mut new = remove_dexter(&old);
    new.spec.packages.remove("spencer");
    let mut old = old;
    pkg(&mut old, "dexter").depends_on.clear();
    assert_eq!(validate_nodewright_update(&old, &new), Ok(vec![]));
}

#[test]
fn u1_remove_disabled_package_accepted() {
    let old = installed_on_a_node(base());
    assert_eq!(
        validate_nodewright_update(&old, &remove_dexter(&old)),
        Ok(vec![])
    );
}

#[test]
fn u2_downgrade_without_uninstall_apply_rejected() {
    let old = installed_on_a_node(enabled_old());
    let err = validate_nodewright_update(&old, &downgrade_dexter(&old)).expect_err("U2");
    assert_eq!(
        err.to_string(),
        r#"package "dexter": downgrade not allowed — set uninstall.apply=true first, wait for uninstall to complete, then change version"#
    );
    // Even with no node state, apply must have been set first.
    let fresh = enabled_old();
    assert_eq!(
        validate_nodewright_update(&fresh, &downgrade_dexter(&fresh)),
        Err(ValidationError::DowngradeWithoutUninstall("dexter".into()))
    );
}

#[test]
fn u3_downgrade_before_uninstall_completed_rejected() {
    let old = installed_on_a_node(with(|nw| {
        pkg(nw, "dexter").uninstall = uninstall(true, true)
    }));
    let err = validate_nodewright_update(&old, &downgrade_dexter(&old)).expect_err("U3");
    assert_eq!(
        err.to_string(),
        r#"package "dexter": downgrade not allowed — uninstall has not yet completed on all nodes. Wait for the uninstall to finish, then change version"#
    );
}

#[test]
fn u3_downgrade_after_uninstall_completed_accepted() {
    let old = with(|nw| pkg(nw, "dexter").uninstall = uninstall(true, true));
    let new = downgrade_dexter(&old);
    assert_eq!(validate_nodewright_update(&old, &new), Ok(vec![]));
}

#[test]
fn u2_downgrade_of_package_without_uninstall_accepted_and_upgrade_always() {
    let old = installed_on_a_node(base());
    assert_eq!(
        validate_nodewright_update(&old, &downgrade_dexter(&old)),
        Ok(vec![])
    );
    let enabled = installed_on_a_node(enabled_old());
    let mut upgrade = enabled.clone();
    pkg(&mut upgrade, "dexter").version = "2.0.0".into();
    assert_eq!(validate_nodewright_update(&enabled, &upgrade), Ok(vec![]));
}

#[test]
fn u4_uninstall_cancel_warns() {
    let old = installed_on_a_node(with(|nw| {
        pkg(nw, "dexter").uninstall = uninstall(true, true)
    }));
    let mut new = old.clone();
    pkg(&mut new, "dexter").uninstall = uninstall(true, false);
    assert_eq!(
        validate_nodewright_update(&old, &new),
        Ok(vec![
            r#"package "dexter": uninstall cancelled — nodes where uninstall completed will need to re-install"#
                .to_string()
        ])
    );
}

#[test]
fn u5_new_object_checks_and_policy_check_run_on_update() {
    let old = base();
    let mut bad = old.clone();
    pkg(&mut bad, "dexter").version = "latest".into();
    assert_eq!(
        validate_nodewright_update(&old, &bad),
        Err(ValidationError::VersionInvalid {
            name: "dexter".into(),
            version: "latest".into()
        })
    );
    // U5: the policy check runs last, after warnings were collected.
    let old = with(|nw| pkg(nw, "dexter").uninstall = uninstall(true, true));
    let mut new = old.clone();
    pkg(&mut new, "dexter").uninstall = uninstall(true, false);
    new.spec.deployment_policy = "gone".into();
    let warnings = validate_nodewright_update(&old, &new).expect("object checks pass");
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        validate_policy_reference(&new, |_| Ok(false)),
        Err(ValidationError::PolicyNotFound("gone".into()))
    );
}

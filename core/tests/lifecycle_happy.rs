//! End-to-end happy paths of the pass (R1–R9, T1, T5, T6, §12).

mod fixtures;

use fixtures::*;
use nodewright_crds::{Stage, State, Status};

#[test]
fn r7_one_package_on_one_node_converges_apply_then_config() {
    let mut s = snapshot(
        vec![with_pkg(nw("demo"), "dexter", "1.2.3")],
        vec![node("n1")],
    );
    let passes = converge(&mut s, 20);
    assert!(passes < 20, "did not converge");
    let d = doc(&s, "n1", "demo");
    let e = d.get("dexter", "1.2.3").unwrap();
    assert_eq!((e.stage, e.state), (Stage::Config, Some(State::Complete)));
    assert_eq!(node_status(&s, "n1", "demo"), Some(Status::Complete));
    let st = s.nodewrights[0].status.clone().unwrap();
    assert_eq!(st.status, Some(Status::Complete));
    assert_eq!(st.complete_nodes, "1/1");
}

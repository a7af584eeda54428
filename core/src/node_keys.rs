//! The node metadata one NodeWright owns on a node, and the part of it a full reset removes
//! (reboot reset T18, NodeWright deletion cleanup §14.3, the CLI's `reset`).

use nodewright_crds::keys;

/// The per-node keys of one NodeWright.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeKeys {
    /// `nodeState_<nw>`: the node-state document.
    pub state: String,
    /// `status_<nw>`: the node Status, as annotation and as label.
    pub status: String,
    /// `version_<nw>`: the operator version that last wrote the node.
    pub version: String,
    /// `drainStart_<nw>`: when the current drain began.
    pub drain_start: String,
    /// `cordon_<nw>`: the cordon this NodeWright holds (released by the ownership rule, Q16).
    pub cordon: String,
}

impl NodeKeys {
    /// The keys of NodeWright `nw`.
    pub fn of(nw: &str) -> Self {
        NodeKeys {
            state: keys::node_state(nw),
            status: keys::node_status(nw),
            version: keys::node_version(nw),
            drain_start: keys::drain_start(nw),
            cordon: keys::cordon(nw),
        }
    }

    /// Annotations a full reset deletes (the cordon is released separately).
    pub fn reset_annotations(&self) -> [&str; 4] {
        [&self.state, &self.status, &self.version, &self.drain_start]
    }

    /// Labels a full reset deletes.
    pub fn reset_labels(&self) -> [&str; 1] {
        [&self.status]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t18_reset_keys_name_every_per_node_key_but_the_cordon() {
        let k = NodeKeys::of("demo");
        assert_eq!(
            k.reset_annotations(),
            [
                "nodewright.nvidia.com/nodeState_demo",
                "nodewright.nvidia.com/status_demo",
                "nodewright.nvidia.com/version_demo",
                "nodewright.nvidia.com/drainStart_demo",
            ]
        );
        assert_eq!(k.reset_labels(), ["nodewright.nvidia.com/status_demo"]);
        assert_eq!(k.cordon, "nodewright.nvidia.com/cordon_demo");
    }
}

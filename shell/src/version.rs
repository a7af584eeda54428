//! The start-up server-version check of decision D20 (04-jobs-rules.md §13).

use kube::Client;
use nodewright_core::ClusterInfo;
use tracing::{info, warn};

/// First minor where every Job field the operator writes is on by default.
pub const FULL_SUPPORT_MINOR: u32 = 29;

/// First minor where deadline expiry raises `FailureTarget` first.
pub const FAILURE_TARGET_MINOR: u32 = 31;

/// Parses `major` and `minor` as the apiserver reports them (`"1"`, `"35+"`).
pub fn parse_version(major: &str, minor: &str) -> Option<(u32, u32)> {
    let digits = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    Some((digits(major)?, digits(minor)?))
}

/// The guarantees lost on a server of this version (04-jobs-rules.md §13 table), newest first.
pub fn lost_guarantees(version: (u32, u32)) -> Vec<&'static str> {
    let (major, minor) = version;
    if major != 1 {
        return Vec::new();
    }
    let table: [(u32, &str); 7] = [
        (
            31,
            "deadline expiry no longer raises FailureTarget first: no last-logs snapshot, no stale-FailureTarget erroring on unreachable nodes",
        ),
        (
            29,
            "podReplacementPolicy is off: a replacement pod can overlap a terminating attempt on the same copy dir",
        ),
        (
            27,
            "no batch.kubernetes.io job-name/controller-uid pod labels: archive pruning finds nothing",
        ),
        (
            26,
            "no podFailurePolicy/DisruptionTarget: evictions count toward backoffLimit",
        ),
        (
            23,
            "Job tracking with finalizers is not default: attempt accounting is unreliable",
        ),
        (
            22,
            "ttlSecondsAfterFinished is not GA: finished Jobs are never collected",
        ),
        (21, "no spec.suspend: pause cannot stop a running stage"),
    ];
    table
        .iter()
        .filter(|(below, _)| minor < *below)
        .map(|(_, what)| *what)
        .collect()
}

/// Reads the server version and logs what is lost below the supported floor. A failed read is
/// logged and yields an unknown version (the core then assumes full support).
pub async fn check(client: &Client) -> ClusterInfo {
    let info = match client.apiserver_version().await {
        Ok(info) => info,
        Err(e) => {
            warn!(error = %e, "cannot read the apiserver version");
            return ClusterInfo::default();
        }
    };
    let version = parse_version(&info.major, &info.minor);
    match version {
        Some(v) => {
            let lost = lost_guarantees(v);
            if v.1 < FULL_SUPPORT_MINOR && v.0 == 1 {
                warn!(server = %info.git_version, lost = ?lost,
                    "apiserver is older than 1.29: Job fields the operator relies on are silently dropped");
            } else if !lost.is_empty() {
                warn!(server = %info.git_version, lost = ?lost, "apiserver older than 1.31");
            } else {
                info!(server = %info.git_version, "apiserver version supported");
            }
        }
        None => warn!(major = %info.major, minor = %info.minor, "unparsable apiserver version"),
    }
    ClusterInfo {
        server_version: version,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d20_version_parsing_accepts_provider_suffixes() {
        assert_eq!(parse_version("1", "35+"), Some((1, 35)));
        assert_eq!(parse_version("1", "28"), Some((1, 28)));
        assert_eq!(parse_version("", "x"), None);
    }

    #[test]
    fn d20_losses_accumulate_downwards() {
        assert!(lost_guarantees((1, 35)).is_empty());
        assert_eq!(
            lost_guarantees((1, 30)).len(),
            1,
            "only FailureTarget signals on 1.29-1.30"
        );
        assert_eq!(lost_guarantees((1, 28)).len(), 2);
        assert_eq!(lost_guarantees((1, 20)).len(), 7);
    }
}

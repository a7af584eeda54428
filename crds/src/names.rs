//! Deterministic, length-capped object names (01-api.md §7.1).

use sha2::{Digest, Sha256};

/// `safeName(max, parts…)`: joins with `-`, replaces `.` with `-`, appends the first 8 hex chars
/// of the SHA-256 of the joined string, truncating so the result fits in `max`; lowercase.
///
/// The hash is taken before lowercasing and no trailing `-` is trimmed (03-executor.md §0.3), so
/// names equal the Go operator's byte for byte.
pub fn safe_name(max: usize, parts: &[&str]) -> String {
    let joined = parts.join("-").replace('.', "-");
    let hash = hex::encode(Sha256::digest(joined.as_bytes()));
    let keep = max.saturating_sub(9);
    let mut cut = keep.min(joined.len());
    while !joined.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &joined[..cut], &hash[..8]).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_name_matches_sha256sum() {
        // printf 'a-b-1-0' | sha256sum → 3dcf9501...
        assert_eq!(safe_name(63, &["a", "b", "1.0"]), "a-b-1-0-3dcf9501");
    }

    #[test]
    fn safe_name_golden_package_job_name() {
        // 03-executor.md §0.8 worked value.
        assert_eq!(
            safe_name(63, &["demo", "baz", "1.1.0", "apply", "worker-1"]),
            "demo-baz-1-1-0-apply-worker-1-64dabc20"
        );
    }

    #[test]
    fn safe_name_caps_length() {
        let node = "n".repeat(200);
        let name = safe_name(63, &["nw", "pkg", "1.2.3", "apply", &node]);
        assert_eq!(name.len(), 63);
        assert!(name.starts_with("nw-pkg-1-2-3-apply-nnn"));
    }
}

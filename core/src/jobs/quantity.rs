//! Quantities compared by exact value (03-executor.md §4.2), through `nodewright_crds::quantity`.

use nodewright_crds::quantity::parse_quantity;

/// Canonical text of a quantity's exact value; unparsable text is kept verbatim (marked `raw:`).
pub fn canonical(text: &str) -> String {
    match parse_quantity(text) {
        Ok(q) => q.canonical(),
        Err(_) => format!("raw:{}", text.trim()),
    }
}

/// Semantic equality of two quantity strings (`4000m == 4`, `8192Mi == 8Gi`).
pub fn same_value(a: &str, b: &str) -> bool {
    canonical(a) == canonical(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_semantic_equality() {
        assert!(same_value("4000m", "4"));
        assert!(same_value("8192Mi", "8Gi"));
        assert!(same_value("0.5", "500m"));
        assert!(!same_value("100m", "101m"));
        assert!(!same_value("1G", "1Gi"));
    }
}

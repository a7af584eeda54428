//! Exact numeric value of a Kubernetes quantity, so `4000m` equals `4` and `8192Mi` equals `8Gi`
//! (03-executor.md §4.2). Used until `nodewright_crds` provides a shared parser.

/// The value of a quantity in nano-units (10⁻⁹), rounded up like the apiserver rounds sub-nano
/// values; `None` when the text is not a quantity or overflows.
pub fn nano_value(text: &str) -> Option<i128> {
    let text = text.trim();
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => (-1i128, r),
        None => (1i128, text.strip_prefix('+').unwrap_or(text)),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    if number.is_empty() || number == "." {
        return None;
    }
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if frac.contains('.') {
        return None;
    }
    // mantissa = digits / 10^frac.len()
    let digits: i128 = format!("{whole}{frac}").parse().ok()?;
    let frac_len = u32::try_from(frac.len()).ok()?;
    let (num, den) = scale(suffix)?;
    // value in nano units = digits * num * 10^9 / (den * 10^frac_len), rounded up.
    let numerator = digits
        .checked_mul(num)?
        .checked_mul(1_000_000_000)?;
    let denominator = den.checked_mul(10i128.checked_pow(frac_len)?)?;
    let value = numerator / denominator + i128::from(numerator % denominator != 0);
    Some(sign * value)
}

/// Suffix as a fraction (numerator, denominator).
fn scale(suffix: &str) -> Option<(i128, i128)> {
    let binary = |exp: u32| Some((1024i128.pow(exp), 1));
    let decimal = |exp: i32| {
        if exp >= 0 {
            Some((10i128.pow(exp.unsigned_abs()), 1))
        } else {
            Some((1, 10i128.pow(exp.unsigned_abs())))
        }
    };
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        other => {
            let exp = other.strip_prefix(['e', 'E'])?;
            let exp: i32 = exp.parse().ok()?;
            if !(-18..=18).contains(&exp) {
                return None;
            }
            decimal(exp)
        }
    }
}

/// Canonical text for a quantity: its nano value, or the trimmed text when unparsable.
pub fn canonical(text: &str) -> String {
    match nano_value(text) {
        Some(v) => format!("{v}n"),
        None => format!("raw:{}", text.trim()),
    }
}

/// Semantic equality of two quantity strings (exact value; unparsable ones compare as text).
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
        assert!(same_value("1e3", "1k"));
        assert!(same_value("1.5Gi", "1536Mi"));
        assert!(!same_value("100m", "101m"));
        assert!(!same_value("1G", "1Gi"));
        assert_eq!(nano_value("bogus"), None);
        assert_eq!(nano_value("-1"), Some(-1_000_000_000));
    }
}

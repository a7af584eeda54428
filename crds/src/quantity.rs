//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed exactly so they compare by
//! value (01-api.md §4.3 checks 4g–4j; decision D19 fingerprints).
//!
//! Grammar (Kubernetes `resource.ParseQuantity`): an optionally signed decimal number (`1`, `1.5`,
//! `1.`, `.5`) followed by a binary suffix (`Ki` … `Ei`), a decimal suffix (`n`, `u`, `m`, none,
//! `k`, `M`, `G`, `T`, `P`, `E`) or a decimal exponent (`e3`, `E-2`). The value is kept as an exact
//! decimal, never as a float, so `1Gi` equals `1073741824` and `0.1` equals `100m`.

use std::cmp::Ordering;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use thiserror::Error;

/// The message Kubernetes gives for an unparsable quantity.
pub const QUANTITY_FORMAT_MESSAGE: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A quantity string that does not follow the Kubernetes grammar.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{QUANTITY_FORMAT_MESSAGE}")]
pub struct QuantityError(pub String);

/// A parsed quantity: an exact decimal `±digits × 10^exponent`, plus the text it came from.
///
/// Equality and ordering are by value (`1k == 1000`); [`fmt::Display`] shows the original text.
#[derive(Clone, Debug)]
pub struct Q {
    negative: bool,
    /// Significant digits (0–9), no leading or trailing zeros; empty for zero.
    digits: Vec<u8>,
    exponent: i64,
    text: String,
}

/// Parses a Kubernetes quantity string (surrounding whitespace ignored, as in JSON decoding).
pub fn parse_quantity(text: &str) -> Result<Q, QuantityError> {
    let err = || QuantityError(text.to_string());
    let trimmed = text.trim();
    let (negative, rest) = split_sign(trimmed);
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(err());
    }
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    let frac_len = i64::try_from(frac_part.len()).map_err(|_| err())?;
    let (exp10, pow1024) = suffix_scale(suffix).ok_or_else(err)?;
    for _ in 0..pow1024 {
        multiply_small(&mut digits, 1024);
    }
    let exponent = exp10.checked_sub(frac_len).ok_or_else(err)?;
    Ok(Q::normalized(
        negative,
        digits,
        exponent,
        trimmed.to_string(),
    ))
}

impl TryFrom<&Quantity> for Q {
    type Error = QuantityError;

    fn try_from(q: &Quantity) -> Result<Self, Self::Error> {
        parse_quantity(&q.0)
    }
}

fn split_sign(text: &str) -> (bool, &str) {
    match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    }
}

/// (power of ten, power of 1024) of a suffix, or `None` when the suffix is not valid.
fn suffix_scale(suffix: &str) -> Option<(i64, u32)> {
    let scale = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        _ => return exponent_suffix(suffix).map(|e| (e, 0)),
    };
    Some(scale)
}

fn exponent_suffix(suffix: &str) -> Option<i64> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let (negative, digits) = split_sign(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = digits.parse().ok()?;
    Some(if negative { -value } else { value })
}

/// Multiplies a big-endian decimal digit vector in place by a small factor.
fn multiply_small(digits: &mut Vec<u8>, factor: u32) {
    let mut carry = 0u32;
    for d in digits.iter_mut().rev() {
        let v = u32::from(*d) * factor + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

impl Q {
    fn normalized(negative: bool, mut digits: Vec<u8>, mut exponent: i64, text: String) -> Self {
        let leading = digits.iter().take_while(|d| **d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent += 1;
        }
        if digits.is_empty() {
            return Self {
                negative: false,
                digits,
                exponent: 0,
                text,
            };
        }
        Self {
            negative,
            digits,
            exponent,
            text,
        }
    }

    /// True when the value is zero (`0`, `0m`, `0Gi`, ...).
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// -1, 0 or 1 by the sign of the value.
    pub fn signum(&self) -> i32 {
        match (self.is_zero(), self.negative) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    /// The text the quantity was parsed from (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// A canonical spelling of the exact value (`<digits>e<exponent>`), equal for equal values.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        let digits: String = self.digits.iter().map(|d| char::from(b'0' + d)).collect();
        let sign = if self.negative { "-" } else { "" };
        format!("{sign}{digits}e{}", self.exponent)
    }

    fn cmp_magnitude(&self, other: &Self) -> Ordering {
        let magnitude = |q: &Self| q.digits.len() as i64 + q.exponent;
        magnitude(self)
            .cmp(&magnitude(other))
            .then_with(|| self.digits.cmp(&other.digits))
    }
}

impl PartialEq for Q {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Q {}

impl PartialOrd for Q {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Q {
    fn cmp(&self, other: &Self) -> Ordering {
        self.signum()
            .cmp(&other.signum())
            .then_with(|| match self.signum() {
                0 => Ordering::Equal,
                1 => self.cmp_magnitude(other),
                _ => other.cmp_magnitude(self),
            })
    }
}

impl fmt::Display for Q {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Q {
        parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn quantity_equal_values_compare_equal() {
        let groups: &[&[&str]] = &[
            &["1", "1000m", "1.0", "1.", "0.001k", "1e0", "1000e-3", "+1"],
            &["1Gi", "1073741824", "1024Mi", "1048576Ki"],
            &["100m", "0.1", ".1", "100000u", "1e-1", "1E-1"],
            &["0", "0m", "0Gi", "-0", "0.000", "0e5"],
            &["1500m", "1.5"],
            &["2E", "2e18", "2000P"],
            &["1n", "0.001u"],
        ];
        for group in groups {
            for pair in group.windows(2) {
                assert_eq!(q(pair[0]), q(pair[1]), "{pair:?}");
                assert_eq!(q(pair[0]).canonical(), q(pair[1]).canonical(), "{pair:?}");
            }
        }
    }

    #[test]
    fn quantity_ordering_by_value() {
        let ascending = [
            "-1Gi", "-1", "-1m", "0", "1n", "1u", "1m", "999m", "1", "1.001", "1k", "1Ki", "1M",
            "1Mi", "1G", "1Gi", "1Ti", "1Pi", "1E", "1Ei", "1e19",
        ];
        for pair in ascending.windows(2) {
            assert!(q(pair[0]) < q(pair[1]), "{pair:?}");
        }
    }

    #[test]
    fn quantity_rejects_bad_syntax() {
        for text in [
            "", "m", "1.2.3", "1x", "1Kb", "1 Gi", "1e", "1e1.5", "1ki", "--1", "1mi", "abc", ".",
            "1e+", "Gi",
        ] {
            assert!(parse_quantity(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn quantity_sign_and_display() {
        assert_eq!(q("-500m").signum(), -1);
        assert_eq!(q("0Gi").signum(), 0);
        assert!(q("0Gi").is_zero());
        assert_eq!(q("2Gi").signum(), 1);
        assert_eq!(q(" 500m ").to_string(), "500m");
        assert_eq!(q("1Ki").canonical(), "1024e0");
    }
}

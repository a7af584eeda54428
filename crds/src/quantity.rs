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

/// The notation a quantity was written in; it decides the canonical spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Decimal SI suffixes (`m`, `k`, `M`, ...) or none.
    DecimalSi,
    /// Binary SI suffixes (`Ki`, `Mi`, ...).
    BinarySi,
    /// A decimal exponent (`e3`).
    DecimalExponent,
}

/// A parsed quantity: an exact decimal `±digits × 10^exponent`, plus the text it came from.
///
/// Values finer than 1n round up (away from zero) to 1n, as in Kubernetes. Equality and ordering
/// are by value (`1k == 1000`); [`fmt::Display`] shows the original text and
/// [`Q::canonical`] the spelling Kubernetes would store.
#[derive(Clone, Debug)]
pub struct Q {
    negative: bool,
    /// Significant digits (0–9), no leading or trailing zeros; empty for zero.
    digits: Vec<u8>,
    exponent: i64,
    format: Format,
    text: String,
}

/// Exponent of the finest representable unit (nano).
const NANO: i64 = -9;

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
    let (exp10, pow1024, format) = suffix_scale(suffix).ok_or_else(err)?;
    for _ in 0..pow1024 {
        multiply_small(&mut digits, 1024);
    }
    let mut exponent = exp10.checked_sub(frac_len).ok_or_else(err)?;
    if exponent < NANO {
        round_up_to_nano(&mut digits, &mut exponent);
    }
    let mut q = Q::normalized(negative, digits, exponent, trimmed.to_string());
    q.format = format;
    Ok(q)
}

/// Drops digits finer than 1n, rounding the magnitude up when any dropped digit is non-zero.
fn round_up_to_nano(digits: &mut Vec<u8>, exponent: &mut i64) {
    let drop = usize::try_from(NANO - *exponent).unwrap_or(usize::MAX);
    let keep = digits.len().saturating_sub(drop);
    let inexact = digits[keep..].iter().any(|d| *d != 0);
    digits.truncate(keep);
    *exponent = NANO;
    if inexact {
        add_one(digits);
    }
}

/// Adds one unit in the last place of a big-endian digit vector.
fn add_one(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d < 9 {
            *d += 1;
            return;
        }
        *d = 0;
    }
    digits.insert(0, 1);
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

const DECIMAL_SUFFIXES: &[(&str, i64)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

const BINARY_SUFFIXES: &[&str] = &["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// (power of ten, power of 1024, notation) of a suffix, or `None` when it is not valid.
fn suffix_scale(suffix: &str) -> Option<(i64, u32, Format)> {
    if let Some((_, exp)) = DECIMAL_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
        return Some((*exp, 0, Format::DecimalSi));
    }
    if let Some(pow) = BINARY_SUFFIXES[1..].iter().position(|s| *s == suffix) {
        return Some((0, u32::try_from(pow + 1).ok()?, Format::BinarySi));
    }
    exponent_suffix(suffix).map(|e| (e, 0, Format::DecimalExponent))
}

fn exponent_suffix(suffix: &str) -> Option<i64> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let (negative, digits) = split_sign(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Bounded to 32 bits (the scale of Go's decimal type) so that exponent arithmetic cannot
    // overflow; `1e9223372036854775807` used to overflow on normalization (found by fuzzing).
    let value: i64 = i32::try_from(digits.parse::<i64>().ok()?).ok()?.into();
    Some(if negative { -value } else { value })
}

/// Divides a big-endian decimal digit vector by a small divisor: (quotient, remainder).
fn divide_small(digits: &[u8], divisor: u32) -> (Vec<u8>, u32) {
    let mut quotient = Vec::with_capacity(digits.len());
    let mut remainder = 0u32;
    for d in digits {
        let current = remainder * 10 + u32::from(*d);
        let q = current / divisor;
        if !(quotient.is_empty() && q == 0) {
            quotient.push(q as u8);
        }
        remainder = current % divisor;
    }
    (quotient, remainder)
}

fn digit_string(digits: &[u8]) -> String {
    digits.iter().map(|d| char::from(b'0' + d)).collect()
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
        let negative = negative && !digits.is_empty();
        let exponent = if digits.is_empty() { 0 } else { exponent };
        Self {
            negative,
            digits,
            exponent,
            format: Format::DecimalSi,
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

    /// The spelling Kubernetes stores and prints for this quantity: `1000m` → `1`, `0.5` → `500m`,
    /// `2048Ki` → `2Mi`, `1.5Ki` → `1536`, `1000e0` → `1e3`.
    pub fn canonical(&self) -> String {
        if self.is_zero() {
            return "0".to_string();
        }
        let sign = if self.negative { "-" } else { "" };
        let binary = self.format == Format::BinarySi;
        if binary && self.exponent >= 0 && !self.below_1024() {
            return format!("{sign}{}", self.binary_spelling());
        }
        let format = if binary {
            Format::DecimalSi
        } else {
            self.format
        };
        format!("{sign}{}", self.decimal_spelling(format))
    }

    fn below_1024(&self) -> bool {
        let k = Self::normalized(false, vec![1, 0, 2, 4], 0, String::new());
        self.cmp_magnitude(&k) == Ordering::Less
    }

    /// Mantissa with the exponent lowered to a multiple of three, plus the suffix.
    fn decimal_spelling(&self, format: Format) -> String {
        let pad = self.exponent.rem_euclid(3);
        let exponent = self.exponent - pad;
        let mut mantissa = digit_string(&self.digits);
        mantissa.extend(std::iter::repeat_n('0', pad as usize));
        let suffix = match format {
            Format::DecimalExponent if exponent == 0 => String::new(),
            Format::DecimalExponent => format!("e{exponent}"),
            _ => DECIMAL_SUFFIXES
                .iter()
                .find(|(_, e)| *e == exponent)
                .map_or_else(|| format!("e{exponent}"), |(s, _)| s.to_string()),
        };
        format!("{mantissa}{suffix}")
    }

    /// An integer of at least 1024 divided by 1024 as often as it divides exactly (up to `Ei`).
    fn binary_spelling(&self) -> String {
        let zeros = usize::try_from(self.exponent).unwrap_or(0);
        let mut value: Vec<u8> = self.digits.clone();
        value.extend(std::iter::repeat_n(0, zeros));
        let mut power = 0;
        while power + 1 < BINARY_SUFFIXES.len() {
            let (quotient, remainder) = divide_small(&value, 1024);
            if remainder != 0 {
                break;
            }
            value = quotient;
            power += 1;
        }
        format!("{}{}", digit_string(&value), BINARY_SUFFIXES[power])
    }

    /// The notation the quantity was written in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// A key of the exact value (`<digits>e<exponent>`): equal strings iff equal values, whatever
    /// the notation. Use it to compare or fingerprint quantities by value.
    pub fn value_key(&self) -> String {
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
                assert_eq!(q(pair[0]).value_key(), q(pair[1]).value_key(), "{pair:?}");
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
            "",
            "m",
            "1.2.3",
            "1x",
            "1Kb",
            "1 Gi",
            "1e",
            "1e1.5",
            "1ki",
            "--1",
            "1mi",
            "abc",
            ".",
            "1e+",
            "Gi",
            "1e9223372036854775807",
            "10e2147483648",
            "1e-2147483649",
        ] {
            assert!(parse_quantity(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn quantity_canonical_spelling_like_kubernetes() {
        let cases = [
            ("0", "0"),
            ("0Gi", "0"),
            ("1000m", "1"),
            ("1.0", "1"),
            ("0.5", "500m"),
            ("1500m", "1500m"),
            ("1.5m", "1500u"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("2G", "2G"),
            ("-1k", "-1k"),
            ("1024", "1024"),
            ("2048Ki", "2Mi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Ki", "1536"),
            ("0.5Ki", "512"),
            ("1024Ei", "1024Ei"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("12e-1", "1200e-3"),
            ("1e0", "1"),
            ("0.1n", "1n"),
            ("-0.0000000001", "-1n"),
            ("1.0000000001", "1000000001n"),
        ];
        for (text, canonical) in cases {
            assert_eq!(q(text).canonical(), canonical, "{text}");
        }
    }

    #[test]
    fn quantity_rounds_up_below_nano() {
        assert_eq!(q("0.1n"), q("1n"));
        assert_eq!(q("0.9n"), q("1n"));
        assert_eq!(q("1e-12"), q("1n"));
        assert!(q("1.5n") == q("2n"));
    }

    #[test]
    fn quantity_sign_and_display() {
        assert_eq!(q("-500m").signum(), -1);
        assert_eq!(q("0Gi").signum(), 0);
        assert!(q("0Gi").is_zero());
        assert_eq!(q("2Gi").signum(), 1);
        assert_eq!(q(" 500m ").to_string(), "500m");
        assert_eq!(q("1Ki").value_key(), "1024e0");
    }
}

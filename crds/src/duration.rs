//! Go `time.Duration` strings (`"90s"`, `"1h30m"`, `"0"`), kept verbatim and parsed on demand.
//!
//! The CRD types durations as plain strings, so a stored object may hold an unparsable value;
//! keeping the raw text means such an object still decodes and validation can report it.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A duration in Go syntax, stored as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(transparent)]
pub struct GoDuration(pub String);

/// Why a duration string is not valid Go duration syntax.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("time: invalid duration {0:?}")]
pub struct DurationError(pub String);

const UNITS: &[(&str, i128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

impl GoDuration {
    /// Wraps a duration string.
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// Parses to signed nanoseconds, exactly as Go's `time.ParseDuration` accepts.
    pub fn nanos(&self) -> Result<i64, DurationError> {
        parse_go_duration(&self.0)
    }

    /// Whole seconds rounded up (a positive sub-second value becomes 1), or an error.
    pub fn ceil_seconds(&self) -> Result<i64, DurationError> {
        let n = self.nanos()?;
        Ok(n.div_euclid(1_000_000_000) + i64::from(n.rem_euclid(1_000_000_000) != 0))
    }

    /// Whole seconds truncated toward zero, or an error.
    pub fn trunc_seconds(&self) -> Result<i64, DurationError> {
        Ok(self.nanos()? / 1_000_000_000)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses Go duration syntax into signed nanoseconds.
pub fn parse_go_duration(text: &str) -> Result<i64, DurationError> {
    let err = || DurationError(text.to_string());
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(err());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let (value, scale, after) = leading_decimal(rest).ok_or_else(err)?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let unit = &after[..unit_len];
        let factor = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, f)| *f)
            .ok_or_else(err)?;
        // Overflow is an invalid duration, as in Go (found by fuzzing: a debug-build panic).
        total += value.checked_mul(factor).ok_or_else(err)? / scale;
        if total > i128::from(i64::MAX) + 1 {
            return Err(err());
        }
        rest = &after[unit_len..];
    }
    let signed = if negative { -total } else { total };
    i64::try_from(signed).map_err(|_| err())
}

/// Reads `123.45` from the front: (digits as integer, 10^fraction_len, remainder).
fn leading_decimal(text: &str) -> Option<(i128, i128, &str)> {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number = &text[..end];
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if frac_part.contains('.') || frac_part.len() > 18 || int_part.len() > 20 {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let value: i128 = digits.parse().ok()?;
    let scale = 10i128.pow(u32::try_from(frac_part.len()).ok()?);
    Some((value, scale, &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_accepts_go_syntax() {
        let cases = [
            ("0", 0),
            ("90s", 90_000_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5s", 1_500_000_000),
            ("-2m", -120_000_000_000),
            ("300ms", 300_000_000),
            ("1us", 1_000),
            ("1\u{b5}s", 1_000),
            ("0s", 0),
            (".5s", 500_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_go_duration(text), Ok(nanos), "{text}");
        }
    }

    #[test]
    fn go_duration_rejects_bad_syntax() {
        for text in [
            "",
            "1",
            "s",
            "1x",
            "1h-2m",
            "abc",
            "1..2s",
            "-",
            "9999999999h",
            "99999999999999999999.999999999999999999h",
        ] {
            assert!(parse_go_duration(text).is_err(), "{text} should fail");
        }
    }

    #[test]
    fn go_duration_rounding() {
        assert_eq!(GoDuration::new("1ms").ceil_seconds(), Ok(1));
        assert_eq!(GoDuration::new("1h").ceil_seconds(), Ok(3600));
        assert_eq!(GoDuration::new("1.9s").trunc_seconds(), Ok(1));
    }
}

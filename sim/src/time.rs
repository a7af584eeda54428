//! Virtual time: milliseconds since a fixed epoch, converted to the timestamps the core sees.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use nodewright_crds::duration::parse_go_duration;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Virtual milliseconds since [`EPOCH_SECONDS`].
pub type SimTime = u64;

/// The virtual epoch, 2026-01-01T00:00:00Z, so traces read like real dates.
pub const EPOCH_SECONDS: i64 = 1_767_225_600;

/// Converts virtual time to a wall-clock timestamp.
pub fn timestamp(at: SimTime) -> Timestamp {
    // The epoch plus any u64 milliseconds a simulation can reach stays in jiff's range.
    Timestamp::from_millisecond(EPOCH_SECONDS * 1000 + at as i64).expect("virtual time in range")
}

/// Converts virtual time to a Kubernetes `Time`.
pub fn k8s_time(at: SimTime) -> Time {
    Time(timestamp(at))
}

/// Converts a Kubernetes `Time` back to virtual time (saturating at 0 before the epoch).
pub fn from_k8s_time(t: &Time) -> SimTime {
    from_timestamp(t.0)
}

/// Converts a wall-clock timestamp to virtual time (saturating at 0 before the epoch).
pub fn from_timestamp(t: Timestamp) -> SimTime {
    (t.as_millisecond() - EPOCH_SECONDS * 1000).max(0) as SimTime
}

/// Renders virtual time as `1h02m03s` (or `4.5s` below a minute).
pub fn show(at: SimTime) -> String {
    let secs = at / 1000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        format!("{h}h{m:02}m{s:02}s")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else if at.is_multiple_of(1000) {
        format!("{s}s")
    } else {
        format!("{:.3}s", at as f64 / 1000.0)
    }
}

/// Parses a Go duration (`90s`, `5m`, `1h30m`) or a bare number of seconds into milliseconds.
pub fn parse_duration(text: &str) -> Result<SimTime, String> {
    if let Ok(secs) = text.trim().parse::<f64>() {
        return Ok((secs * 1000.0).max(0.0) as SimTime);
    }
    let nanos = parse_go_duration(text.trim()).map_err(|e| e.to_string())?;
    Ok((nanos.max(0) / 1_000_000) as SimTime)
}

/// A duration field in scenario files: `30s`, `5m`, or a number of seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub SimTime);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let text = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            other => return Err(serde::de::Error::custom(format!("not a duration: {other}"))),
        };
        parse_duration(&text)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s").unwrap(), 90_000);
        assert_eq!(parse_duration("1h30m").unwrap(), 5_400_000);
        assert_eq!(parse_duration("2.5").unwrap(), 2_500);
        assert_eq!(show(3_723_000), "1h02m03s");
        assert_eq!(from_timestamp(timestamp(1234)), 1234);
    }
}

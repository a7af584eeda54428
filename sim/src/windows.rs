//! Attributing replayed passes to named time windows, for example one window per end-to-end test,
//! so a replay can say how many passes and effects each test exercised and which test diverged.

use jiff::Timestamp;

use crate::trace::PassSummary;

/// A named window `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The window's name (a test name).
    pub name: String,
    /// Inclusive start.
    pub start: Timestamp,
    /// Exclusive end.
    pub end: Timestamp,
}

/// Totals of the passes whose `now` fell in one window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowTotals {
    /// Passes.
    pub passes: u64,
    /// Effects compared.
    pub effects: u64,
    /// Differing effects.
    pub differ: u64,
}

/// Parses lines `<name> <start RFC 3339> <end RFC 3339>` (whitespace separated; blank lines and
/// `#` comments skipped), naming the line of the first bad entry.
pub fn parse_windows(text: &str) -> Result<Vec<Window>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [name, start, end] = fields[..] else {
            return Err(format!(
                "windows line {}: want `<name> <start> <end>`, got {line:?}",
                i + 1
            ));
        };
        let time = |s: &str| {
            s.parse::<Timestamp>()
                .map_err(|e| format!("windows line {}: {s:?}: {e}", i + 1))
        };
        out.push(Window {
            name: name.to_string(),
            start: time(start)?,
            end: time(end)?,
        });
    }
    Ok(out)
}

/// Adds each pass of `log` to the window its `now` falls in (the first such window).
pub fn attribute(windows: &[Window], log: &[PassSummary], totals: &mut [WindowTotals]) {
    for p in log {
        if let Some(i) = windows.iter().position(|w| w.start <= p.at && p.at < w.end) {
            totals[i].passes += 1;
            totals[i].effects += p.effects;
            totals[i].differ += p.differ;
        }
    }
}

/// The paths where two JSON values differ (`annotations."k"`, `state[0].set.stage`), each with both
/// sides, at most `limit`; walked with an explicit stack, not recursion.
pub fn json_differences(a: &serde_json::Value, b: &serde_json::Value, limit: usize) -> Vec<String> {
    use serde_json::Value;
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), Some(a), Some(b))];
    while let Some((path, x, y)) = stack.pop() {
        if out.len() >= limit {
            break;
        }
        match (x, y) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys.into_iter().rev() {
                    stack.push((format!("{path}.{k}"), x.get(k), y.get(k)));
                }
            }
            (Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
                for (i, (xi, yi)) in x.iter().zip(y).enumerate().rev() {
                    stack.push((format!("{path}[{i}]"), Some(xi), Some(yi)));
                }
            }
            (x, y) if x != y => {
                let show = |v: Option<&Value>| v.map_or("(absent)".to_string(), Value::to_string);
                out.push(format!(
                    "{}: {} -> {}",
                    path.trim_start_matches('.'),
                    show(x),
                    show(y)
                ));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(at: &str, effects: u64, differ: u64) -> PassSummary {
        PassSummary {
            pass: 0,
            at: at.parse().unwrap(),
            effects,
            differ,
        }
    }

    #[test]
    fn passes_are_counted_in_their_window_only() {
        let w = parse_windows(
            "# test windows\na 2026-01-01T00:00:00Z 2026-01-01T00:01:00Z\n\nb 2026-01-01T00:01:00Z 2026-01-01T00:02:00Z\n",
        )
        .unwrap();
        let log = [
            pass("2026-01-01T00:00:10Z", 3, 0),
            pass("2026-01-01T00:01:00Z", 2, 1),
            pass("2026-01-01T00:05:00Z", 9, 9),
        ];
        let mut totals = vec![WindowTotals::default(); 2];
        attribute(&w, &log, &mut totals);
        assert_eq!(
            totals[0],
            WindowTotals {
                passes: 1,
                effects: 3,
                differ: 0
            }
        );
        assert_eq!(
            totals[1],
            WindowTotals {
                passes: 1,
                effects: 2,
                differ: 1
            }
        );
    }

    #[test]
    fn json_differences_name_the_changed_paths() {
        let a = serde_json::json!({"annotations": {"c": null, "s": "complete"}, "unschedulable": false, "l": [1, 2]});
        let b = serde_json::json!({"annotations": {"s": "complete"}, "unschedulable": null, "l": [1, 3]});
        assert_eq!(
            json_differences(&a, &b, 10),
            [
                "annotations.c: null -> (absent)",
                "l[1]: 2 -> 3",
                "unschedulable: false -> null"
            ]
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = parse_windows("a 2026-01-01T00:00:00Z\n").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_windows("a x 2026-01-01T00:00:00Z\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("\"x\""), "{e}");
    }
}

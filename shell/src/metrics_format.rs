//! Exposition format choice and client_golang's number spelling for the classic text format.

/// True when the `Accept` header asks for OpenMetrics (`application/openmetrics-text` with a
/// non-zero quality); everything else, including no header, gets the classic text format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|header| {
        header.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            let zero_q = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !zero_q
        })
    })
}

/// Rewrites the value of every sample line the way client_golang writes it (`1`, `0.25`,
/// `1e+06`, `+Inf`); comment lines and labels are kept as they are.
pub fn go_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(&go_line(line));
        out.push('\n');
    }
    out
}

fn go_line(line: &str) -> String {
    if line.starts_with('#') || line.is_empty() {
        return line.to_string();
    }
    let Some(split) = series_end(line) else {
        return line.to_string();
    };
    let (series, rest) = line.split_at(split);
    let mut fields = rest.split_whitespace();
    let Some(value) = fields.next().and_then(|v| v.parse::<f64>().ok()) else {
        return line.to_string();
    };
    let mut out = format!("{series} {}", go_float(value));
    for f in fields {
        out.push(' ');
        out.push_str(f);
    }
    out
}

/// Byte offset just after the series (name and optional `{labels}`), honouring quoted values.
fn series_end(line: &str) -> Option<usize> {
    let brace = line.find('{');
    let space = line.find(' ')?;
    let Some(open) = brace.filter(|b| *b < space) else {
        return Some(space);
    };
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in line[open..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(open + i + 1),
            _ => {}
        }
    }
    None
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` with client_golang's special cases.
pub fn go_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if (1e-4..1e6).contains(&v.abs()) {
        return format!("{v}");
    }
    let sci = format!("{v:e}");
    match sci.split_once('e') {
        Some((mantissa, exp)) => match exp.parse::<i32>() {
            Ok(e) => format!("{mantissa}e{e:+03}"),
            Err(_) => sci,
        },
        None => sci,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.1"
        )));
        assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
        assert!(wants_openmetrics(Some("Application/OpenMetrics-Text")));
    }

    #[test]
    fn values_are_spelled_as_client_golang_spells_them() {
        for (v, s) in [
            (1.0, "1"),
            (0.0, "0"),
            (-1.0, "-1"),
            (0.005, "0.005"),
            (0.00001, "1e-05"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (45678912.0, "4.5678912e+07"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_float(v), s, "{v}");
        }
    }

    #[test]
    fn sample_lines_are_rewritten_and_comments_kept() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total 1.0\n\
                    b{x=\"sp ace}\",le=\"0.5\"} 2.0\nc 1e6 1700000000\n";
        assert_eq!(
            go_values(text),
            "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n\
             b{x=\"sp ace}\",le=\"0.5\"} 2\nc 1e+06 1700000000\n"
        );
    }
}

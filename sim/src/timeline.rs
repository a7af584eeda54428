//! Per-node timelines of package stages, cordons and node readiness, rendered as text and as
//! an SVG Gantt chart.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::facts;
use crate::objects::Objects;
use crate::time::{SimTime, show};

/// One bar of the chart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Node.
    pub node: String,
    /// Row within the node: `<nodewright> <pkg>|<ver>`, `cordon` or `node`.
    pub lane: String,
    /// Stage (or `cordoned`, `NotReady`).
    pub label: String,
    /// Entry state (`in_progress`, `complete`, ...), or the lane kind.
    pub state: String,
    /// Start.
    pub start: SimTime,
    /// End.
    pub end: SimTime,
}

/// Records spans by observing the cluster after every step.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Closed spans.
    pub spans: Vec<Span>,
    open: BTreeMap<(String, String), (String, String, SimTime)>,
}

impl Timeline {
    /// Observes the cluster at `now`.
    pub fn observe(&mut self, objects: &Objects, now: SimTime) {
        let mut current: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
        for node in objects.nodes.values() {
            let name = node.metadata.name.clone().unwrap_or_default();
            for nw in objects.nodewrights.keys() {
                for (key, entry) in facts::node_state(node, nw).0 {
                    current.insert(
                        (name.clone(), format!("{nw} {key}")),
                        (
                            entry.stage.to_string(),
                            entry.state.map_or("-".into(), |s| s.to_string()),
                        ),
                    );
                }
            }
            if facts::unschedulable(node) {
                current.insert(
                    (name.clone(), "cordon".into()),
                    ("cordoned".into(), "cordon".into()),
                );
            }
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_none_or(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if !ready {
                current.insert(
                    (name.clone(), "node".into()),
                    ("NotReady".into(), "down".into()),
                );
            }
        }
        let keys: Vec<_> = self.open.keys().cloned().collect();
        for k in keys {
            let same = current.get(&k).is_some_and(|v| {
                let o = &self.open[&k];
                (o.0.as_str(), o.1.as_str()) == (v.0.as_str(), v.1.as_str())
            });
            if !same {
                self.close(&k, now);
            }
        }
        for (k, (label, state)) in current {
            self.open.entry(k).or_insert((label, state, now));
        }
    }

    fn close(&mut self, k: &(String, String), now: SimTime) {
        if let Some((label, state, start)) = self.open.remove(k) {
            self.spans.push(Span {
                node: k.0.clone(),
                lane: k.1.clone(),
                label,
                state,
                start,
                end: now,
            });
        }
    }

    /// Closes every open span at `now`.
    pub fn finish(&mut self, now: SimTime) {
        let keys: Vec<_> = self.open.keys().cloned().collect();
        for k in keys {
            self.close(&k, now);
        }
        self.spans
            .sort_by(|a, b| (&a.node, &a.lane, a.start).cmp(&(&b.node, &b.lane, b.start)));
    }

    /// Text rendering: per node, per lane, the sequence of stages with their time ranges.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut last_node = "";
        let mut last_lane = "";
        for s in &self.spans {
            if s.node != last_node {
                let _ = writeln!(out, "node {}", s.node);
                last_node = &s.node;
                last_lane = "";
            }
            if s.lane != last_lane {
                let _ = writeln!(out, "  {}", s.lane);
                last_lane = &s.lane;
            }
            let _ = writeln!(
                out,
                "    {:>9} - {:>9}  {} ({})",
                show(s.start),
                show(s.end),
                s.label,
                s.state
            );
        }
        out
    }

    /// SVG Gantt chart: one row per (node, lane), bars coloured by state, labelled by stage.
    pub fn to_svg(&self, title: &str) -> String {
        let rows: Vec<(String, String)> = {
            let mut r: Vec<(String, String)> = self
                .spans
                .iter()
                .map(|s| (s.node.clone(), s.lane.clone()))
                .collect();
            r.dedup();
            r
        };
        let end = self.spans.iter().map(|s| s.end).max().unwrap_or(1).max(1);
        let (left, width, row_h, top) = (300.0, 900.0, 18.0, 40.0);
        let height = top + row_h * rows.len() as f64 + 40.0;
        let x = |t: SimTime| left + width * t as f64 / end as f64;
        let mut svg = String::new();
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="11">"#,
            left + width + 20.0
        );
        let _ = writeln!(
            svg,
            r#"<text x="10" y="20" font-size="14">{}</text>"#,
            escape(title)
        );
        for i in 0..=10u64 {
            let t = end * i / 10;
            let _ = writeln!(
                svg,
                r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#ddd"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
                x(t),
                height - 30.0,
                height - 15.0,
                show(t)
            );
        }
        for (i, (node, lane)) in rows.iter().enumerate() {
            let y = top + row_h * i as f64;
            let _ = writeln!(
                svg,
                r#"<text x="10" y="{:.1}">{} {}</text>"#,
                y + 13.0,
                escape(node),
                escape(lane)
            );
            for s in self
                .spans
                .iter()
                .filter(|s| &s.node == node && &s.lane == lane)
            {
                let (x0, x1) = (x(s.start), x(s.end.max(s.start + 1)));
                let w = (x1 - x0).max(1.0);
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{} {} {}: {} - {}</title></rect>"#,
                    y + 2.0,
                    row_h - 4.0,
                    colour(&s.state),
                    escape(node),
                    escape(&s.label),
                    escape(&s.state),
                    show(s.start),
                    show(s.end)
                );
                if w > 7.0 * s.label.len() as f64 {
                    let _ = writeln!(
                        svg,
                        r#"<text x="{:.1}" y="{:.1}" fill="white">{}</text>"#,
                        x0 + 3.0,
                        y + 13.0,
                        escape(&s.label)
                    );
                }
            }
        }
        svg.push_str("</svg>\n");
        svg
    }
}

fn colour(state: &str) -> &'static str {
    match state {
        "complete" => "#59a14f",
        "in_progress" => "#4e79a7",
        "erroring" | "unknown" => "#e15759",
        "skipped" => "#9c9c9c",
        "cordon" => "#f28e2b",
        "down" => "#333333",
        _ => "#b07aa1",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

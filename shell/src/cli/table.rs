//! kubectl-like tables: a header row, a dashed underline per column, two spaces between columns.

/// Renders rows under `headers`.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.len());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths.get(i).copied().unwrap_or(0)))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![
        line(headers.iter().map(|h| h.to_string()).collect()),
        line(widths.iter().map(|w| "-".repeat(*w)).collect()),
    ];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_align() {
        let t = super::render(&["NODE", "STATUS"], &[vec!["n1".into(), "complete".into()]]);
        assert_eq!(t, "NODE  STATUS\n----  --------\nn1    complete\n");
    }
}

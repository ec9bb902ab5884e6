//! A small table, rendered as aligned text or as HTML.

use std::fmt::Write as _;

/// A table of text cells. Columns may be grouped under a shared heading
/// (goodput: before / in / after), so a wide table keeps short headers: the
/// text form and the HTML form both show the groups in a row of their own.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    pub(crate) headers: Vec<String>,
    /// The heading of each column's group (empty for a column of its own);
    /// a group is a run of adjacent columns with the same heading.
    pub(crate) groups: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
}

/// A run of adjacent columns under one heading (`first..end`).
struct Span<'a> {
    heading: &'a str,
    first: usize,
    end: usize,
}

impl Table {
    pub(crate) fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            groups: vec![String::new(); headers.len()],
            rows: Vec::new(),
        }
    }

    /// A table of grouped columns: each `(heading, labels)` is one group
    /// (an empty heading: columns of their own).
    pub(crate) fn grouped(columns: &[(&str, &[&str])]) -> Self {
        let mut table = Self::default();
        for (heading, labels) in columns {
            for label in *labels {
                table.headers.push((*label).to_owned());
                table.groups.push((*heading).to_owned());
            }
        }
        table
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn spans(&self) -> Vec<Span<'_>> {
        let mut spans: Vec<Span<'_>> = Vec::new();
        for (i, heading) in self.groups.iter().enumerate() {
            match spans.last_mut() {
                Some(last) if !heading.is_empty() && last.heading == heading => last.end = i + 1,
                _ => spans.push(Span {
                    heading,
                    first: i,
                    end: i + 1,
                }),
            }
        }
        spans
    }

    fn has_groups(&self) -> bool {
        self.groups.iter().any(|g| !g.is_empty())
    }

    /// Columns separated by two spaces; the first column left-aligned, the
    /// others right-aligned (they hold numbers). Group headings, if any, go
    /// in a row above the headers, over their columns (which widen if a
    /// heading needs it).
    pub(crate) fn to_text(&self) -> String {
        let cols = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(cols) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let spans = self.spans();
        for span in spans.iter().filter(|s| !s.heading.is_empty()) {
            let have: usize = widths[span.first..span.end].iter().sum::<usize>()
                + 2 * (span.end - span.first - 1);
            let need = span.heading.chars().count();
            if need > have {
                widths[span.end - 1] += need - have;
            }
        }
        let mut out = String::new();
        if self.has_groups() {
            let mut text = String::new();
            for (k, span) in spans.iter().enumerate() {
                let width: usize = widths[span.first..span.end].iter().sum::<usize>()
                    + 2 * (span.end - span.first - 1);
                if k > 0 {
                    text.push_str("  ");
                }
                text.push_str(span.heading);
                text.extend(std::iter::repeat_n(
                    ' ',
                    width.saturating_sub(span.heading.chars().count()),
                ));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        let line = |cells: &[String], out: &mut String| {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = width.saturating_sub(cell.chars().count());
                if i > 0 {
                    text.push_str("  ");
                }
                if i == 0 {
                    text.push_str(cell);
                    text.extend(std::iter::repeat_n(' ', pad));
                } else {
                    text.extend(std::iter::repeat_n(' ', pad));
                    text.push_str(cell);
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for row in &self.rows {
            line(row, &mut out);
        }
        out
    }

    /// The table as HTML; grouped columns get a heading row above theirs
    /// (`colspan`), the others one header cell over both rows (`rowspan`).
    pub(crate) fn to_html(&self) -> String {
        let mut out = String::from("<table>\n<thead>");
        if self.has_groups() {
            out.push_str("<tr>");
            for span in self.spans() {
                if span.heading.is_empty() {
                    for h in &self.headers[span.first..span.end] {
                        let _ = write!(out, "<th rowspan=\"2\">{}</th>", escape(h));
                    }
                } else {
                    let _ = write!(
                        out,
                        "<th colspan=\"{}\" class=\"group\">{}</th>",
                        span.end - span.first,
                        escape(span.heading)
                    );
                }
            }
            out.push_str("</tr>\n<tr>");
            for (h, g) in self.headers.iter().zip(&self.groups) {
                if !g.is_empty() {
                    let _ = write!(out, "<th>{}</th>", escape(h));
                }
            }
            out.push_str("</tr>");
        } else {
            out.push_str("<tr>");
            for h in &self.headers {
                let _ = write!(out, "<th>{}</th>", escape(h));
            }
            out.push_str("</tr>");
        }
        out.push_str("</thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_aligned_and_html_escaped() {
        let mut t = Table::new(&["name", "n"]);
        t.row(vec!["a<b".into(), "1".into()]);
        t.row(vec!["long name".into(), "1000".into()]);
        assert_eq!(
            t.to_text(),
            "name          n\n---------  ----\na<b           1\nlong name  1000\n"
        );
        assert!(t.to_html().contains("<td>a&lt;b</td>"));
    }

    #[test]
    fn grouped_columns_share_a_heading_row_in_text_and_html() {
        let mut t = Table::grouped(&[
            ("", &["strategy"]),
            ("goodput (calls/s)", &["before", "after"]),
            ("", &["gave up"]),
        ]);
        t.row(vec!["plain".into(), "700".into(), "0".into(), "3".into()]);
        assert_eq!(
            t.to_text(),
            "          goodput (calls/s)\n\
             strategy  before      after  gave up\n\
             --------  ------  ---------  -------\n\
             plain        700          0        3\n"
        );
        let html = t.to_html();
        assert!(html.contains("<th rowspan=\"2\">strategy</th>"), "{html}");
        assert!(
            html.contains("<th colspan=\"2\" class=\"group\">goodput (calls/s)</th>"),
            "{html}"
        );
        assert!(
            html.contains("<tr><th>before</th><th>after</th></tr>"),
            "{html}"
        );
        // Two rows of headers, one row of data.
        assert_eq!(html.matches("<tr>").count(), 3, "{html}");
    }
}

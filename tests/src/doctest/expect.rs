//! Compares what a command printed with what a document shows. Both sides
//! are normalized the same way: trailing blanks and leading/trailing empty
//! lines dropped, runs of blanks made one (column widths follow content),
//! and RFC 3339 times replaced by `<time>`. A line that is only `...`
//! stands for any number of lines, as in rustdoc and trycmd.

use std::sync::OnceLock;

fn time_pattern() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?").expect("time pattern")
    })
}

/// One line as it is compared.
pub fn normalize_line(line: &str) -> String {
    let timed = time_pattern().replace_all(line.trim_end(), "<time>");
    let mut out = String::with_capacity(timed.len());
    let mut blank = false;
    for c in timed.chars() {
        if c == ' ' || c == '\t' {
            if !blank {
                out.push(' ');
            }
            blank = true;
        } else {
            out.push(c);
            blank = false;
        }
    }
    out
}

/// All lines as they are compared.
pub fn normalize(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines.iter().map(|l| normalize_line(l)).collect();
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    while out.first().is_some_and(String::is_empty) {
        out.remove(0);
    }
    out
}

/// Whether `actual` matches the shown `expected` lines.
pub fn matches(expected: &[String], actual: &[String]) -> bool {
    let (e, a) = (normalize(expected), normalize(actual));
    // ways[i][j]: expected[i..] matches actual[j..]
    let mut ways = vec![vec![false; a.len() + 1]; e.len() + 1];
    ways[e.len()][a.len()] = true;
    for i in (0..e.len()).rev() {
        for j in (0..=a.len()).rev() {
            ways[i][j] = if e[i].trim() == "..." {
                ways[i + 1][j] || (j < a.len() && ways[i][j + 1])
            } else {
                j < a.len() && e[i] == a[j] && ways[i + 1][j + 1]
            };
        }
    }
    ways[0][0]
}

/// A readable difference for a failure message.
pub fn explain(expected: &[String], actual: &[String]) -> String {
    let show = |lines: Vec<String>| lines.iter().map(|l| format!("    |{l}")).collect::<Vec<_>>().join("\n");
    format!("  the document shows:\n{}\n  the command printed:\n{}", show(normalize(expected)), show(normalize(actual)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn column_widths_and_times_do_not_matter() {
        let shown = v(&["ID   PHASE       CREATED", "1    Succeeded   2026-06-02T09:10:41.207Z", ""]);
        let printed = v(&["", "ID  PHASE      CREATED", "1   Succeeded  2026-11-25T17:01:02.5Z"]);
        assert!(matches(&shown, &printed));
    }

    #[test]
    fn words_do() {
        assert!(!matches(&v(&["1 Succeeded"]), &v(&["1 Failed"])));
        assert!(!matches(&v(&["a", "b"]), &v(&["a"])));
        assert!(!matches(&v(&["a"]), &v(&["a", "b"])));
    }

    #[test]
    fn an_ellipsis_line_stands_for_any_lines() {
        let shown = v(&["web2:", "  agent: agent_A", "  ...", "  runtimeConfig: |"]);
        assert!(matches(
            &shown,
            &v(&["web2:", "  agent: agent_A", "  runtime: podman", "  tags: {}", "  runtimeConfig: |"])
        ));
        assert!(matches(&shown, &v(&["web2:", "  agent: agent_A", "  runtimeConfig: |"])));
        assert!(!matches(&shown, &v(&["web2:", "  runtimeConfig: |"])));
        assert!(matches(&v(&["job 2 accepted", "..."]), &v(&["job 2 accepted", "x", "y"])));
    }

    #[test]
    fn an_ellipsis_inside_a_line_is_text() {
        assert!(matches(&v(&["No more retries: Error: lo..."]), &v(&["No more retries: Error: lo..."])));
        assert!(!matches(&v(&["No more retries: Error: lo..."]), &v(&["No more retries: Error: long text"])));
    }
}

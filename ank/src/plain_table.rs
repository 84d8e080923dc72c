//! The workload tables exactly as Ankaios' `ank` lays them out: columns
//! left-aligned and padded to their widest cell (trailing spaces kept),
//! three spaces apart, no trailing newline. On a terminal one column (the
//! additional info) gives way so the lines fit: wrapped onto more lines
//! (`get workloads`) or cut with `...` (the wait table of `apply`). When
//! even the column's header does not fit, every line is cut at the width.

use std::io::IsTerminal;

/// Spaces between two columns.
const GAP: &str = "   ";
/// What a cut cell ends with.
const CUT_SUFFIX: &str = "...";
/// The width assumed for a terminal that does not say its own.
const FALLBACK_WIDTH: usize = 80;

/// How the flexible column gives way to the terminal's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Long cells continue on the next lines.
    Wrap,
    /// Long cells are cut and end in `...`.
    Truncate,
}

/// The width to fit: the terminal's when standard output is one (80 when
/// it does not say), `None` (no limit) for pipes and files.
pub fn output_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let width = terminal_size::terminal_size_of(std::io::stdout()).map_or(0, |(w, _)| usize::from(w.0));
    Some(if width == 0 { FALLBACK_WIDTH } else { width })
}

/// Renders the table; column `flexible` gives way to `width` as `fit` says.
pub fn render<const N: usize>(
    header: [&str; N],
    rows: &[[String; N]],
    flexible: usize,
    fit: Fit,
    width: Option<usize>,
) -> String {
    let len = |s: &str| s.chars().count();
    let mut widths = header.map(len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(len(cell));
        }
    }
    let total = widths.iter().sum::<usize>() + GAP.len() * N.saturating_sub(1);
    let Some(max) = width.filter(|max| total > *max) else {
        return lines(&widths, header, rows.iter().map(|r| vec![r.clone()]));
    };
    let others = total - widths[flexible];
    if others + len(header[flexible]) > max {
        // No room even for the header: cut every line at the width.
        let full = lines(&widths, header, rows.iter().map(|r| vec![r.clone()]));
        return full.lines().map(|l| l.chars().take(max).collect::<String>()).collect::<Vec<_>>().join("\n");
    }
    let room = max - others;
    let fitted: Vec<Vec<[String; N]>> = rows
        .iter()
        .map(|row| match fit {
            Fit::Truncate => vec![cut_cell(row, flexible, room)],
            Fit::Wrap => wrap_cell(row, flexible, room),
        })
        .collect();
    widths[flexible] =
        fitted.iter().flatten().map(|r| len(&r[flexible])).chain([len(header[flexible])]).max().unwrap_or(0);
    lines(&widths, header, fitted.into_iter())
}

fn cut_cell<const N: usize>(row: &[String; N], col: usize, room: usize) -> [String; N] {
    let mut row = row.clone();
    if row[col].chars().count() > room {
        let kept: String = row[col].chars().take(room.saturating_sub(CUT_SUFFIX.len())).collect();
        row[col] = format!("{kept}{CUT_SUFFIX}");
    }
    row
}

fn wrap_cell<const N: usize>(row: &[String; N], col: usize, room: usize) -> Vec<[String; N]> {
    let chars: Vec<char> = row[col].chars().collect();
    if chars.len() <= room || room == 0 {
        return vec![row.clone()];
    }
    chars
        .chunks(room)
        .enumerate()
        .map(|(i, chunk)| {
            let mut line: [String; N] = if i == 0 { row.clone() } else { std::array::from_fn(|_| String::new()) };
            line[col] = chunk.iter().collect();
            line
        })
        .collect()
}

/// The header and the rows (each one or more lines), padded and joined.
fn lines<const N: usize>(
    widths: &[usize; N],
    header: [&str; N],
    rows: impl Iterator<Item = Vec<[String; N]>>,
) -> String {
    let line = |cells: &[&str; N]| {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join(GAP)
    };
    let mut out = vec![line(&header)];
    for row in rows {
        for l in row {
            out.push(line(&std::array::from_fn(|i| l[i].as_str())));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: [&str; 3]) -> [String; 3] {
        cells.map(str::to_owned)
    }

    #[test]
    fn plain_table_pads_every_cell_and_keeps_trailing_spaces() {
        let text = render(["NAME", "STATE", "ADDITIONAL INFO"], &[row(["web", "Running(Ok)", ""])], 2, Fit::Wrap, None);
        assert_eq!(text, "NAME   STATE         ADDITIONAL INFO\nweb    Running(Ok)                  ");
        let empty = render(["NAME", "STATE", "ADDITIONAL INFO"], &[], 2, Fit::Wrap, None);
        assert_eq!(empty, "NAME   STATE   ADDITIONAL INFO");
    }

    #[test]
    fn plain_table_truncates_or_wraps_the_flexible_column_on_a_narrow_terminal() {
        let rows = [row(["web", "Running(Ok)", "0123456789abcdefghijklmnopqrstuvwxyz"])];
        // Others take 4 + 3 + 11 + 3 = 21 columns: the info gets 40 - 21 = 19.
        let cut = render(["NAME", "STATE", "ADDITIONAL INFO"], &rows, 2, Fit::Truncate, Some(40));
        assert_eq!(cut.lines().nth(1), Some("web    Running(Ok)   0123456789abcdef..."));
        let wrapped = render(["NAME", "STATE", "ADDITIONAL INFO"], &rows, 2, Fit::Wrap, Some(40));
        let lines: Vec<&str> = wrapped.lines().collect();
        assert_eq!(lines[1], "web    Running(Ok)   0123456789abcdefghi");
        assert_eq!(lines[2], "                     jklmnopqrstuvwxyz  ");
        // Too narrow for the header: every line is cut.
        let cut_all = render(["NAME", "STATE", "ADDITIONAL INFO"], &rows, 2, Fit::Wrap, Some(10));
        assert_eq!(cut_all, "NAME   STA\nweb    Run");
    }
}

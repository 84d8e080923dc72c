//! Every table `ank` prints, from one layout: columns left-aligned and
//! padded to their widest cell, three spaces apart, each line ending in a
//! newline. What differs between tables is how a table too wide for the
//! output gives way ([`Fit`]): Ankaios' tables keep their padding and cut
//! their lines (`get agents`, `get configs`) or let one column wrap (`get
//! workloads`) or end in `...` (the wait table of `apply`); our own tables
//! (`get jobs`, `get groups`, `-o wide`, events, `describe`) narrow their
//! widest column, whose cells then end in `…`, and trim trailing spaces.

use std::io::IsTerminal;

/// Spaces between two columns.
const GAP: &str = "   ";
/// A column of our own tables is not narrowed below this (or its header's width).
const MIN_COLUMN: usize = 8;
/// What a cell of Ankaios' wait table that is cut ends with.
const CUT_SUFFIX: &str = "...";
/// The width assumed for a terminal that does not say its own.
const FALLBACK_WIDTH: usize = 80;

/// How a table wider than the output gives way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Ankaios' `get agents` and `get configs`: every line is cut at the width.
    Cut,
    /// Ankaios' `get workloads`: the long cells of this column continue on
    /// the next lines; when even its header does not fit, lines are cut.
    Wrap(usize),
    /// Ankaios' wait table: the long cells of this column are cut and end
    /// in `...`; when even its header does not fit, lines are cut.
    Truncate(usize),
    /// Our own tables: the widest column narrows (not below its header or
    /// [`MIN_COLUMN`]) and its longer cells end in `…`; trailing spaces are
    /// trimmed.
    Narrow,
}

/// The width Ankaios' tables fit: the terminal's when standard output is
/// one (80 when it does not say), `None` (no limit) for pipes and files.
pub fn output_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let width = terminal_size::terminal_size_of(std::io::stdout()).map_or(0, |(w, _)| usize::from(w.0));
    Some(if width == 0 { FALLBACK_WIDTH } else { width })
}

/// The width our own tables fit: `COLUMNS` if set, else the terminal's
/// when standard output is one; `None` (no limit) for pipes and files.
pub fn terminal_width() -> Option<usize> {
    if let Some(cols) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()) {
        return Some(cols).filter(|c| *c > 0);
    }
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
}

/// One of our own tables ([`Fit::Narrow`]) fitted to [`terminal_width`].
pub fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    render(header, rows, Fit::Narrow, terminal_width())
}

/// Renders `header` and `rows`; lines wider than `width` give way as `fit`
/// says (`None`: no limit).
pub fn render<const N: usize>(header: [&str; N], rows: &[[String; N]], fit: Fit, width: Option<usize>) -> String {
    let len = |s: &str| s.chars().count();
    let mut widths = header.map(len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(len(cell));
        }
    }
    if fit == Fit::Narrow {
        if let Some(max) = width {
            narrow(&mut widths, &header, max);
        }
        let clipped: Vec<[String; N]> = rows.iter().map(|r| std::array::from_fn(|i| clip(&r[i], widths[i]))).collect();
        return lines(&widths, header, clipped.iter().map(strs), Ends::Trimmed);
    }
    let total = widths.iter().sum::<usize>() + GAP.len() * N.saturating_sub(1);
    let cut_at = |max| lines(&widths, header, rows.iter().map(strs), Ends::CutAt(max));
    let Some(max) = width.filter(|max| total > *max) else {
        return lines(&widths, header, rows.iter().map(strs), Ends::Padded);
    };
    let (flexible, wrap) = match fit {
        Fit::Wrap(col) => (col, true),
        Fit::Truncate(col) => (col, false),
        Fit::Cut | Fit::Narrow => return cut_at(max),
    };
    let others = total - widths[flexible];
    if others + len(header[flexible]) > max {
        // No room even for the header: cut every line at the width.
        return cut_at(max);
    }
    let room = max - others;
    let fitted: Vec<[String; N]> = rows
        .iter()
        .flat_map(|row| if wrap { wrap_cell(row, flexible, room) } else { vec![cut_cell(row, flexible, room)] })
        .collect();
    widths[flexible] = fitted.iter().map(|r| len(&r[flexible])).chain([len(header[flexible])]).max().unwrap_or(0);
    lines(&widths, header, fitted.iter().map(strs), Ends::Padded)
}

fn strs<const N: usize>(row: &[String; N]) -> [&str; N] {
    std::array::from_fn(|i| row[i].as_str())
}

/// How a line of a table ends.
#[derive(Clone, Copy)]
enum Ends {
    /// Padded to the full width (Ankaios' tables).
    Padded,
    /// Padded, then cut at this many characters.
    CutAt(usize),
    /// Without trailing spaces (our own tables).
    Trimmed,
}

/// The header and the rows, padded, joined by [`GAP`], each line ending
/// as `ends` says and then in a newline.
fn lines<'a, const N: usize>(
    widths: &[usize; N],
    header: [&'a str; N],
    rows: impl Iterator<Item = [&'a str; N]>,
    ends: Ends,
) -> String {
    let mut out = String::new();
    for cells in std::iter::once(header).chain(rows) {
        let padded: Vec<String> = cells.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let line = padded.join(GAP);
        match ends {
            Ends::Padded => out.push_str(&line),
            Ends::CutAt(max) => out.extend(line.chars().take(max)),
            Ends::Trimmed => out.push_str(line.trim_end()),
        }
        out.push('\n');
    }
    out
}

/// A cell of our own tables narrowed to `width`: cut, ending in `…`.
fn clip(cell: &str, width: usize) -> String {
    if cell.chars().count() <= width {
        return cell.to_owned();
    }
    let mut s: String = cell.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn narrow<const N: usize>(widths: &mut [usize; N], header: &[&str; N], max: usize) {
    let floor = |i: usize| header[i].chars().count().max(MIN_COLUMN);
    loop {
        let total: usize = widths.iter().sum::<usize>() + GAP.len() * N.saturating_sub(1);
        if total <= max {
            return;
        }
        // The widest column that can still give way; the later one on ties.
        let Some(i) = (0..N).filter(|&i| widths[i] > floor(i)).max_by_key(|&i| (widths[i], i)) else { return };
        widths[i] -= (total - max).min(widths[i] - floor(i));
    }
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

#[cfg(test)]
mod tests;

//! YAML text of a [`Node`] exactly as Ankaios' `ank` writes it with
//! serde_yaml 0.9 (libyaml, block style, unlimited line width, unicode):
//! two-space indentation, sequences inside mappings not indented, `{}` and
//! `[]` for empty collections, strings that would read back as another type
//! in single quotes, multi-line strings as literal blocks (`|`, `|-`, `|+`),
//! and libyaml's choice between plain, single- and double-quoted scalars.

use super::Node;

/// The YAML document of `node`, ending in a newline.
pub fn to_string(node: &Node) -> String {
    let mut w = Writer::default();
    match node {
        Node::Map(entries) if !entries.is_empty() => w.map(entries, 0, false),
        Node::Seq(items) if !items.is_empty() => w.seq(items, 0, false),
        other => {
            w.inline(other, 2);
            w.out.push('\n');
        }
    }
    w.out
}

#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    fn pad(&mut self, indent: usize) {
        self.out.extend(std::iter::repeat_n(' ', indent));
    }

    /// Mapping entries at `indent`; with `inline_first` the first key
    /// continues the current line (after `- `).
    fn map(&mut self, entries: &[(String, Node)], indent: usize, inline_first: bool) {
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 || !inline_first {
                self.pad(indent);
            }
            if key.len() > 128 || key.contains(is_break) {
                // Not a simple key for libyaml: `? key` and `: value` lines.
                self.out.push('?');
                self.value(&Node::String(key.clone()), indent, false);
                self.pad(indent);
                self.out.push(':');
                self.value(value, indent, false);
                continue;
            }
            self.out.push_str(&scalar(key, true, indent));
            self.out.push(':');
            self.value(value, indent, true);
        }
    }

    /// Sequence items at `indent`.
    fn seq(&mut self, items: &[Node], indent: usize, inline_first: bool) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !inline_first {
                self.pad(indent);
            }
            self.out.push('-');
            self.value(item, indent, false);
        }
    }

    /// The value after `key:` (`in_map`) or `-`, whose line starts at `indent`.
    fn value(&mut self, node: &Node, indent: usize, in_map: bool) {
        match node {
            Node::Map(entries) if !entries.is_empty() => {
                if in_map {
                    self.out.push('\n');
                    self.map(entries, indent + 2, false);
                } else {
                    self.out.push(' ');
                    self.map(entries, indent + 2, true);
                }
            }
            Node::Seq(items) if !items.is_empty() => {
                if in_map {
                    // libyaml does not indent a sequence inside a mapping.
                    self.out.push('\n');
                    self.seq(items, indent, false);
                } else {
                    self.out.push(' ');
                    self.seq(items, indent + 2, true);
                }
            }
            other => {
                self.out.push(' ');
                self.inline(other, indent + 2);
                self.out.push('\n');
            }
        }
    }

    /// A scalar or empty collection; a literal block's lines at `indent`.
    fn inline(&mut self, node: &Node, indent: usize) {
        let text = match node {
            Node::Null => "null".to_owned(),
            Node::Bool(b) => b.to_string(),
            Node::Number(n) => n.to_string(),
            Node::String(s) => scalar(s, false, indent),
            Node::Seq(_) => "[]".to_owned(),
            Node::Map(_) => "{}".to_owned(),
        };
        // A literal block ends with its own line break.
        self.out.push_str(text.strip_suffix('\n').unwrap_or(&text));
    }
}

/// What libyaml's scalar analysis finds out about a string.
struct Analysis {
    multiline: bool,
    plain_allowed: bool,
    single_allowed: bool,
    block_allowed: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank_or_end(c: Option<char>) -> bool {
    c.is_none_or(|c| c == ' ' || c == '\t' || is_break(c) || c == '\0')
}

/// libyaml's printable set (it leaves out NEL, BOM and most control characters).
fn is_printable(c: char) -> bool {
    matches!(c as u32, 0x0A | 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..) && c != '\u{FEFF}'
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis { multiline: false, plain_allowed: true, single_allowed: true, block_allowed: false };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut indicators = s.starts_with("---") || s.starts_with("...");
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) = (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    for (i, &c) in chars.iter().enumerate() {
        let first = i == 0;
        let last = i + 1 == chars.len();
        let followed_by_blank = is_blank_or_end(chars.get(i + 1).copied());
        let preceded_by_blank = i == 0 || is_blank_or_end(Some(chars[i - 1]));
        if first {
            if "#,[]{}&*!|>'\"%@`".contains(c) || (matches!(c, '?' | ':' | '-') && followed_by_blank) {
                indicators = true;
            }
        } else if (c == ':' && followed_by_blank) || (c == '#' && preceded_by_blank) {
            indicators = true;
        }
        if !is_printable(c) {
            special = true;
        }
        if is_break(c) {
            line_breaks = true;
        }
        if c == ' ' {
            leading_space |= first;
            trailing_space |= last;
            break_space |= previous_break;
            (previous_space, previous_break) = (true, false);
        } else if is_break(c) {
            leading_break |= first;
            trailing_break |= last;
            space_break |= previous_space;
            (previous_space, previous_break) = (false, true);
        } else {
            (previous_space, previous_break) = (false, false);
        }
    }
    let mut a = Analysis { multiline: line_breaks, plain_allowed: true, single_allowed: true, block_allowed: true };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.plain_allowed = false;
        a.single_allowed = false;
    }
    if space_break || special {
        a = Analysis { multiline: a.multiline, plain_allowed: false, single_allowed: false, block_allowed: false };
    }
    if line_breaks || indicators {
        a.plain_allowed = false;
    }
    a
}

/// Whether serde_yaml would read the plain text back as something other
/// than a string (null, bool, integer, float), so that it quotes it.
fn reads_as_non_string(s: &str) -> bool {
    if s.is_empty() || matches!(s, "~" | "null" | "Null" | "NULL") {
        return true;
    }
    if matches!(s, "true" | "True" | "TRUE" | "false" | "False" | "FALSE") {
        return true;
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let radix_int = |prefix: &str, radix: u32| {
        unsigned.strip_prefix(prefix).is_some_and(|rest| {
            !rest.starts_with(['+', '-']) && !rest.is_empty() && u128::from_str_radix(rest, radix).is_ok()
        })
    };
    if radix_int("0x", 16) || radix_int("0o", 8) || radix_int("0b", 2) {
        return true;
    }
    let leading_zero_digits =
        unsigned.len() > 1 && unsigned.starts_with('0') && unsigned.bytes().all(|b| b.is_ascii_digit());
    if leading_zero_digits {
        return true;
    }
    if !unsigned.is_empty() && !s.starts_with("+-") && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(s, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let float_text = s.strip_prefix('+').filter(|rest| !rest.starts_with(['+', '-'])).unwrap_or(s);
    float_text.parse::<f64>().is_ok_and(f64::is_finite)
}

enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// A string scalar as written as a mapping key (`key`) or a value whose
/// block lines go at `indent`.
fn scalar(s: &str, key: bool, indent: usize) -> String {
    let a = analyze(s);
    let style = if s.contains('\n') {
        if key || !a.block_allowed { Style::Double } else { Style::Literal }
    } else if reads_as_non_string(s) {
        if a.single_allowed { Style::Single } else { Style::Double }
    } else if a.plain_allowed && !(s.is_empty() && key) && !(key && a.multiline) {
        Style::Plain
    } else if key && a.multiline {
        Style::Double
    } else if a.single_allowed {
        Style::Single
    } else {
        Style::Double
    };
    match style {
        Style::Plain => s.to_owned(),
        Style::Single => format!("'{}'", s.replace('\'', "''")),
        Style::Double => double_quoted(s),
        Style::Literal => literal(s, indent),
    }
}

fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if is_printable(c) && !is_break(c) && c != '"' && c != '\\' {
            out.push(c);
            continue;
        }
        out.push('\\');
        match c {
            '\0' => out.push('0'),
            '\u{7}' => out.push('a'),
            '\u{8}' => out.push('b'),
            '\t' => out.push('t'),
            '\n' => out.push('n'),
            '\u{b}' => out.push('v'),
            '\u{c}' => out.push('f'),
            '\r' => out.push('r'),
            '\u{1b}' => out.push('e'),
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            '\u{85}' => out.push('N'),
            '\u{a0}' => out.push('_'),
            '\u{2028}' => out.push('L'),
            '\u{2029}' => out.push('P'),
            c if (c as u32) <= 0xFF => out.push_str(&format!("x{:02X}", c as u32)),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("u{:04X}", c as u32)),
            c => out.push_str(&format!("U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A literal block: `|` with libyaml's indentation and chomping hints,
/// then the lines at `indent` (empty lines stay empty), ending in `\n`.
fn literal(s: &str, indent: usize) -> String {
    let mut out = String::from("|");
    if s.starts_with(' ') || s.starts_with(is_break) {
        out.push('2');
    }
    let mut tail = s.chars().rev();
    match (tail.next(), tail.next()) {
        (Some(c), _) if !is_break(c) => out.push('-'),
        (Some(_), None) => out.push('+'),
        (Some(_), Some(c)) if is_break(c) => out.push('+'),
        _ => {}
    }
    out.push('\n');
    let mut at_line_start = true;
    for c in s.chars() {
        if is_break(c) {
            out.push('\n');
            at_line_start = true;
        } else {
            if at_line_start {
                out.extend(std::iter::repeat_n(' ', indent));
            }
            out.push(c);
            at_line_start = false;
        }
    }
    if !at_line_start {
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[path = "yaml_tests.rs"]
mod tests;

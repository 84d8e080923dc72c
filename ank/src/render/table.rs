//! The tables of Ankaios' `ank get agents` and `ank get configs` (tabled's
//! blank style): every cell padded to its column's width, columns three
//! spaces apart, trailing padding kept, lines cut at the terminal's width
//! when standard output is a terminal.

/// Spaces between two columns.
const GAP: &str = "   ";

/// `header` and `rows` as Ankaios prints them, each line ending in `\n`;
/// lines longer than `max_width` characters are cut there.
pub fn table<const N: usize>(header: [&str; N], rows: &[[String; N]], max_width: Option<usize>) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N]| {
        let padded: Vec<String> =
            cells.iter().zip(widths).map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count()))).collect();
        let text = padded.join(GAP);
        let cut: String = match max_width {
            Some(max) => text.chars().take(max).collect(),
            None => text,
        };
        format!("{cut}\n")
    };
    let mut out = line(header);
    for row in rows {
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_pads_every_cell_like_ankaios() {
        let rows = [
            ["agent_A".to_owned(), "1".to_owned(), "50%".to_owned(), "1024B".to_owned()],
            ["agent_B".to_owned(), "1".to_owned(), "50%".to_owned(), "1024B".to_owned()],
        ];
        let header = ["NAME", "WORKLOADS", "CPU USAGE", "FREE MEMORY"];
        // Ankaios' own expectation (get_agents.rs), plus println's line break.
        let expected = [
            "NAME      WORKLOADS   CPU USAGE   FREE MEMORY",
            "agent_A   1           50%         1024B      ",
            "agent_B   1           50%         1024B      ",
        ]
        .join("\n");
        assert_eq!(table(header, &rows, None), format!("{expected}\n"));
        assert_eq!(table(header, &[], None), "NAME   WORKLOADS   CPU USAGE   FREE MEMORY\n");
        assert_eq!(table(header, &rows[..1], Some(12)), "NAME      WO\nagent_A   1 \n");
    }
}

use super::*;

fn row(cells: [&str; 3]) -> [String; 3] {
    cells.map(str::to_owned)
}

const HEADER: [&str; 3] = ["NAME", "STATE", "ADDITIONAL INFO"];

#[test]
fn plain_table_pads_every_cell_and_keeps_trailing_spaces() {
    let text = render(HEADER, &[row(["web", "Running(Ok)", ""])], Fit::Wrap(2), None);
    assert_eq!(text, "NAME   STATE         ADDITIONAL INFO\nweb    Running(Ok)                  \n");
    let empty = render(HEADER, &[], Fit::Wrap(2), None);
    assert_eq!(empty, "NAME   STATE   ADDITIONAL INFO\n");
}

#[test]
fn plain_table_truncates_or_wraps_the_flexible_column_on_a_narrow_terminal() {
    let rows = [row(["web", "Running(Ok)", "0123456789abcdefghijklmnopqrstuvwxyz"])];
    // Others take 4 + 3 + 11 + 3 = 21 columns: the info gets 40 - 21 = 19.
    let cut = render(HEADER, &rows, Fit::Truncate(2), Some(40));
    assert_eq!(cut.lines().nth(1), Some("web    Running(Ok)   0123456789abcdef..."));
    let wrapped = render(HEADER, &rows, Fit::Wrap(2), Some(40));
    let lines: Vec<&str> = wrapped.lines().collect();
    assert_eq!(lines[1], "web    Running(Ok)   0123456789abcdefghi");
    assert_eq!(lines[2], "                     jklmnopqrstuvwxyz  ");
    // Too narrow for the header: every line is cut.
    let cut_all = render(HEADER, &rows, Fit::Wrap(2), Some(10));
    assert_eq!(cut_all, "NAME   STA\nweb    Run\n");
}

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
    assert_eq!(render(header, &rows, Fit::Cut, None), format!("{expected}\n"));
    assert_eq!(render(header, &[], Fit::Cut, None), "NAME   WORKLOADS   CPU USAGE   FREE MEMORY\n");
    assert_eq!(render(header, &rows[..1], Fit::Cut, Some(12)), "NAME      WO\nagent_A   1 \n");
}

#[test]
fn output_table_narrows_the_widest_column_to_fit() {
    let rows = [["web".to_owned(), "Running(Ok)".to_owned(), "x".repeat(60)]];
    let text = render(HEADER, &rows, Fit::Narrow, Some(40));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.iter().all(|l| l.chars().count() <= 40), "{text}");
    assert!(lines[1].ends_with('…') && lines[1].starts_with("web    Running(Ok)   xxx"), "{text}");
    // Too narrow for the floors: columns stop at their header or 8.
    let text = render(HEADER, &rows, Fit::Narrow, Some(5));
    assert_eq!(text.lines().nth(1).unwrap(), format!("web    Running…   {}…", "x".repeat(14)), "{text}");
    // Without a limit nothing is clipped.
    assert!(render(["N"], &[["y".repeat(300)]], Fit::Narrow, None).contains(&"y".repeat(300)));
}

#[test]
fn output_table_aligns_columns() {
    let text = table(
        ["A", "LONG HEADER", "C"],
        &[["xxxxx".into(), "y".into(), "z".into()], ["u".into(), "".into(), "".into()]],
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, vec!["A       LONG HEADER   C", "xxxxx   y             z", "u"]);
}

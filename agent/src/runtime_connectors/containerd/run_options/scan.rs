//! A small command-line scanner in the style of nerdctl's flag parser
//! (spf13/pflag): `--opt value`, `--opt=value`, `-o value`, `-o=value`,
//! `-ovalue`, combined boolean shorts (`-it`) and `--flag=true|false`. It
//! only splits words into options and stray words; what an option means is
//! the caller's business.

/// One option the scanner knows.
#[derive(Debug)]
pub(super) struct Flag {
    /// The canonical long name, without dashes (`env`).
    pub long: &'static str,
    /// Further long names meaning the same (`net` for `network`).
    pub aliases: &'static [&'static str],
    /// The one-letter form, if any (`e`).
    pub short: Option<char>,
    /// Whether the option takes a value (otherwise it is a boolean).
    pub takes_value: bool,
}

/// What a word (or a pair of words) of the command line is.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Item {
    /// A known option: its canonical long name, how the user spelled it
    /// (for messages) and its value (`"true"`/`"false"` for booleans).
    Opt { long: &'static str, spelled: String, value: String },
    /// A word that is not an option.
    Word(String),
}

/// Why the words do not scan.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ScanError {
    /// An option the table does not have, as spelled.
    Unknown(String),
    /// An option that needs a value came last.
    MissingValue(String),
    /// A boolean option with a value that is not `true` or `false`.
    NotABool { option: String, value: String },
}

/// Splits `args` into options of `table` and stray words.
pub(super) fn scan(args: &[String], table: &'static [Flag]) -> Result<Vec<Item>, ScanError> {
    let mut items = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let flag = table
                .iter()
                .find(|f| f.long == name || f.aliases.contains(&name))
                .ok_or_else(|| ScanError::Unknown(format!("--{name}")))?;
            items.push(option(flag, format!("--{name}"), inline, &mut words)?);
        } else if let Some(shorts) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            scan_shorts(shorts, table, &mut words, &mut items)?;
        } else {
            items.push(Item::Word(word.clone()));
        }
    }
    Ok(items)
}

/// One short option with its value, or a run of boolean shorts (`-dit`).
fn scan_shorts<'a>(
    shorts: &str,
    table: &'static [Flag],
    words: &mut impl Iterator<Item = &'a String>,
    items: &mut Vec<Item>,
) -> Result<(), ScanError> {
    for (at, c) in shorts.char_indices() {
        let flag = table.iter().find(|f| f.short == Some(c)).ok_or_else(|| ScanError::Unknown(format!("-{c}")))?;
        let rest = &shorts[at + c.len_utf8()..];
        if flag.takes_value || rest.starts_with('=') {
            // `-e=A=1` and `-eA=1` carry their value; `-e A=1` takes the next word.
            let inline = (!rest.is_empty()).then(|| rest.strip_prefix('=').unwrap_or(rest).to_owned());
            items.push(option(flag, format!("-{c}"), inline, words)?);
            return Ok(());
        }
        items.push(option(flag, format!("-{c}"), None, words)?);
    }
    Ok(())
}

/// The item of `flag` with its inline value or the next word.
fn option<'a>(
    flag: &'static Flag,
    spelled: String,
    inline: Option<String>,
    words: &mut impl Iterator<Item = &'a String>,
) -> Result<Item, ScanError> {
    let value = match (flag.takes_value, inline) {
        (true, Some(value)) => value,
        (true, None) => words.next().cloned().ok_or_else(|| ScanError::MissingValue(spelled.clone()))?,
        (false, None) => "true".to_owned(),
        (false, Some(value)) => match value.as_str() {
            "true" | "1" => "true".to_owned(),
            "false" | "0" => "false".to_owned(),
            _ => return Err(ScanError::NotABool { option: spelled, value }),
        },
    };
    Ok(Item::Opt { long: flag.long, spelled, value })
}

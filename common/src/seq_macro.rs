//! The `${seq:N}` macro (the tackle2-hub number generator): in a rendered
//! workload's `runtimeConfig` (which holds a podman workload's environment) and
//! text `files[].data` (where rendered config items end up), each
//! `${seq:N}` is replaced by a number from pool `N` of the workload's
//! agent: successive occurrences in one workload get successive free
//! numbers from N up. This module finds the occurrences (in a fixed order:
//! runtimeConfig, then the files in order) and substitutes numbers; which
//! number an occurrence gets is the server's allocation table's business.
//!
//! `$${seq:` stands for a literal `${seq:`. Any other `${...}` (shell
//! variables) is left alone, as are Handlebars' `{{...}}`.

use crate::workload::{FileContent, Workload};

const OPEN: &str = "${seq:";

/// Why a workload's macros cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MacroError {
    #[error("macro: bad pool '{pool}' in {field} of workload '{workload}' (expected ${{seq:N}} with a number N)")]
    BadPool { workload: String, field: String, pool: String },
    #[error("macro: unterminated '${{seq:' in {field} of workload '{workload}'")]
    Unterminated { workload: String, field: String },
}

/// One piece of a field's text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Seq(u64),
}

/// Splits `text` into literal text and macros; `Err((pool, unterminated))`.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, (String, bool)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        if at > 0 && rest.as_bytes()[at - 1] == b'$' {
            // `$${seq:` -> literal `${seq:`
            out.push(Piece::Text(&rest[..at - 1]));
            out.push(Piece::Text(OPEN));
            rest = &rest[at + OPEN.len()..];
            continue;
        }
        out.push(Piece::Text(&rest[..at]));
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find('}') else { return Err((String::new(), true)) };
        let pool = &after[..end];
        let number = (!pool.is_empty() && pool.bytes().all(|b| b.is_ascii_digit()))
            .then(|| pool.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| (pool.to_owned(), false))?;
        out.push(Piece::Seq(number));
        rest = &after[end + 1..];
    }
    out.push(Piece::Text(rest));
    Ok(out)
}

/// The fields of a workload that may hold macros, in allocation order.
fn fields(wl: &Workload) -> Vec<(String, &str)> {
    let mut out = vec![("runtimeConfig".to_owned(), wl.runtime_config.as_str())];
    for (i, f) in wl.files.iter().enumerate() {
        if let FileContent::Data(d) = &f.content {
            out.push((format!("files[{i}].data"), d.as_str()));
        }
    }
    out
}

/// Whether `text` holds a macro (or an escaped one) at all.
fn mentions(text: &str) -> bool {
    text.contains(OPEN)
}

/// The pools of the workload's macros, one entry per occurrence in order.
// [feature K9: ${seq:N} occurrences, errors name the workload and the field]
pub fn pools(name: &str, wl: &Workload) -> Result<Vec<u64>, MacroError> {
    let mut out = Vec::new();
    for (field, text) in fields(wl) {
        if !mentions(text) {
            continue;
        }
        let parts = pieces(text).map_err(|(pool, unterminated)| {
            if unterminated {
                MacroError::Unterminated { workload: name.to_owned(), field: field.clone() }
            } else {
                MacroError::BadPool { workload: name.to_owned(), field: field.clone(), pool }
            }
        })?;
        out.extend(parts.iter().filter_map(|p| match p {
            Piece::Seq(n) => Some(*n),
            Piece::Text(_) => None,
        }));
    }
    Ok(out)
}

/// Replaces the workload's macros, in order, by `numbers` (one per
/// occurrence as [`pools`] lists them) and unescapes `$${seq:`. The
/// workload must have passed [`pools`].
pub fn substitute(wl: &mut Workload, numbers: &[u64]) {
    let mut next = numbers.iter();
    let mut replace = |text: &str| -> String {
        let Ok(parts) = pieces(text) else { return text.to_owned() };
        parts
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => t.to_owned(),
                Piece::Seq(pool) => next.next().copied().unwrap_or(pool).to_string(),
            })
            .collect()
    };
    if mentions(&wl.runtime_config) {
        wl.runtime_config = replace(&wl.runtime_config);
    }
    for f in wl.files.iter_mut() {
        if let FileContent::Data(d) = &f.content
            && mentions(d)
        {
            f.content = FileContent::Data(replace(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(runtime_config: &str) -> Workload {
        Workload { runtime: "podman".into(), runtime_config: runtime_config.into(), ..Default::default() }
    }

    // [test of feature K9]
    #[test]
    fn seq_macro_occurrences_are_listed_in_order_and_substituted() {
        let mut w =
            wl("image: x\nenv:\n  PORT_A: \"${seq:8000}\"\n  PORT_B: \"${seq:8000}\"\n  OTHER: \"${seq:9000}\"\n");
        w.files.push(crate::workload::File {
            mount_point: "/etc/p".into(),
            content: FileContent::Data("port=${seq:8000} home=${HOME} {{x.y}}".into()),
        });
        assert_eq!(pools("w", &w).unwrap(), vec![8000, 8000, 9000, 8000]);
        substitute(&mut w, &[8000, 8001, 9000, 8002]);
        assert_eq!(w.runtime_config, "image: x\nenv:\n  PORT_A: \"8000\"\n  PORT_B: \"8001\"\n  OTHER: \"9000\"\n");
        assert_eq!(w.files[0].content, FileContent::Data("port=8002 home=${HOME} {{x.y}}".into()));
    }

    #[test]
    fn seq_macro_errors_name_workload_field_and_pool() {
        let e = pools("w", &wl("PORT: ${seq:x}")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "macro: bad pool 'x' in runtimeConfig of workload 'w' (expected ${seq:N} with a number N)"
        );
        assert!(pools("w", &wl("${seq:}")).unwrap_err().to_string().contains("bad pool ''"));
        assert!(pools("w", &wl("${seq:-1}")).unwrap_err().to_string().contains("bad pool '-1'"));
        assert!(pools("w", &wl("${seq:99999999999999999999999}")).is_err());
        let e = pools("w", &wl("${seq:80")).unwrap_err();
        assert_eq!(e.to_string(), "macro: unterminated '${seq:' in runtimeConfig of workload 'w'");
        let mut f = wl("x");
        f.files.push(crate::workload::File { mount_point: "/a".into(), content: FileContent::Data("${seq:y}".into()) });
        assert!(pools("f", &f).unwrap_err().to_string().contains("in files[0].data of workload 'f'"));
    }

    #[test]
    fn seq_macro_escaped_and_foreign_dollar_braces_stay() {
        let mut w = wl("a: $${seq:8000} b: ${HOME} c: $$ d: ${seq:1}");
        assert_eq!(pools("w", &w).unwrap(), vec![1]);
        substitute(&mut w, &[5]);
        assert_eq!(w.runtime_config, "a: ${seq:8000} b: ${HOME} c: $$ d: 5");
        assert!(pools("w", &wl("plain")).unwrap().is_empty());
    }
}

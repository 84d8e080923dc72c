//! The `${seq:N}` macro (the tackle2-hub number generator): in a rendered
//! workload's `runtimeConfig` (which holds a podman workload's environment) and
//! text `files[].data` (where rendered config items end up), each
//! `${seq:N}` is replaced by a number from pool `N` of the workload's
//! agent: successive occurrences in one workload get successive free
//! numbers from N up. This module finds the occurrences (in a fixed order:
//! runtimeConfig, then the files in order) and substitutes numbers; which
//! number an occurrence gets is the server's allocation table's business.
//!
//! Only `${seq:` followed by decimal digits and `}` is a macro; `$${seq:`
//! stands for a literal `${seq:`. Anything else that starts with `${seq:`
//! is a shell expansion of a variable `seq` (`${seq:-1}`, `${seq:2:3}`) and
//! stays as written, as it would under Ankaios, so a plain Ankaios manifest
//! is never refused or changed by this extension. Other `${...}` and
//! Handlebars' `{{...}}` are left alone too.

use crate::workload::{FileContent, Workload};

const OPEN: &str = "${seq:";

/// One piece of a field's text.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Seq(u64),
}

/// The pool number of a macro body (`8000` of `${seq:8000}`), if it is one.
fn pool_of(body: &str) -> Option<u64> {
    if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    body.parse().ok()
}

/// Splits `text` into literal text and macros.
fn pieces(text: &str) -> Vec<Piece<'_>> {
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
        let after = &rest[at + OPEN.len()..];
        match after.find('}').and_then(|end| pool_of(&after[..end]).map(|n| (end, n))) {
            Some((end, number)) => {
                out.push(Piece::Text(&rest[..at]));
                out.push(Piece::Seq(number));
                rest = &after[end + 1..];
            }
            None => {
                // Not a macro: keep `${seq:` and go on after it.
                out.push(Piece::Text(&rest[..at + OPEN.len()]));
                rest = after;
            }
        }
    }
    out.push(Piece::Text(rest));
    out
}

/// The fields of a workload that may hold macros, in allocation order.
fn fields(wl: &Workload) -> Vec<&str> {
    let mut out = vec![wl.runtime_config.as_str()];
    out.extend(wl.files.iter().filter_map(|f| match &f.content {
        FileContent::Data(d) => Some(d.as_str()),
        _ => None,
    }));
    out
}

/// Whether `text` holds a macro (or an escaped one) at all.
fn mentions(text: &str) -> bool {
    text.contains(OPEN)
}

/// The pools of the workload's macros, one entry per occurrence in order.
// [feature K9: ${seq:N} occurrences in runtimeConfig, then the files]
pub fn pools(wl: &Workload) -> Vec<u64> {
    fields(wl)
        .into_iter()
        .filter(|text| mentions(text))
        .flat_map(pieces)
        .filter_map(|p| match p {
            Piece::Seq(n) => Some(n),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Replaces the workload's macros, in order, by `numbers` (one per
/// occurrence as [`pools`] lists them) and unescapes `$${seq:`.
pub fn substitute(wl: &mut Workload, numbers: &[u64]) {
    let mut next = numbers.iter();
    let mut replace = |text: &str| -> String {
        pieces(text)
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
        assert_eq!(pools(&w), vec![8000, 8000, 9000, 8000]);
        substitute(&mut w, &[8000, 8001, 9000, 8002]);
        assert_eq!(w.runtime_config, "image: x\nenv:\n  PORT_A: \"8000\"\n  PORT_B: \"8001\"\n  OTHER: \"9000\"\n");
        assert_eq!(w.files[0].content, FileContent::Data("port=8002 home=${HOME} {{x.y}}".into()));
    }

    #[test]
    fn seq_macro_only_digits_make_a_macro_shell_expansions_stay_as_written() {
        // Valid shell in a plain Ankaios manifest: never refused, never changed.
        for text in
            ["PORT: ${seq:x}", "${seq:}", "echo ${seq:-1}", "${seq:2:3}", "${seq:80", "${seq:99999999999999999999999}"]
        {
            let mut w = wl(text);
            assert!(pools(&w).is_empty(), "{text}");
            substitute(&mut w, &[]);
            assert_eq!(w.runtime_config, text);
        }
        let mut w = wl("a=${seq:-1} b=${seq:7} c=${seq:x");
        assert_eq!(pools(&w), vec![7]);
        substitute(&mut w, &[9]);
        assert_eq!(w.runtime_config, "a=${seq:-1} b=9 c=${seq:x");
    }

    #[test]
    fn seq_macro_escaped_and_foreign_dollar_braces_stay() {
        let mut w = wl("a: $${seq:8000} b: ${HOME} c: $$ d: ${seq:1}");
        assert_eq!(pools(&w), vec![1]);
        substitute(&mut w, &[5]);
        assert_eq!(w.runtime_config, "a: ${seq:8000} b: ${HOME} c: $$ d: 5");
        assert!(pools(&wl("plain")).is_empty());
    }
}

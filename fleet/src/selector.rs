//! Label selectors: `k=v,k2=v2` matches the vehicles that carry every
//! pair; an empty selector matches all of them.

use std::collections::BTreeMap;

/// A parsed selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pairs: Vec<(String, String)>,
}

/// Why a selector cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid selector '{text}': '{part}' is not key=value")]
pub struct SelectorError {
    text: String,
    part: String,
}

impl Selector {
    /// Reads `k=v,k2=v2` (spaces around parts are ignored).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut pairs = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => pairs.push((k.trim().to_owned(), v.trim().to_owned())),
                _ => return Err(SelectorError { text: text.to_owned(), part: part.to_owned() }),
            }
        }
        Ok(Self { pairs })
    }

    /// Whether `labels` carry every pair.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.pairs.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// The selector as written, normalised.
    pub fn text(&self) -> String {
        self.pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// Reads `k=v` labels (a connector's `--label`).
pub fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(format!("invalid label '{text}': expected key=value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_needs_every_pair_and_empty_matches_all() {
        let labels: BTreeMap<_, _> = [("model".to_owned(), "x".to_owned()), ("eu".to_owned(), "1".to_owned())].into();
        assert!(Selector::parse("").unwrap().matches(&labels));
        assert!(Selector::parse("model=x").unwrap().matches(&labels));
        assert!(Selector::parse(" model=x , eu=1 ").unwrap().matches(&labels));
        assert!(!Selector::parse("model=x,eu=2").unwrap().matches(&labels));
        assert!(!Selector::parse("model=y").unwrap().matches(&labels));
        assert_eq!(Selector::parse("model=x,eu=1").unwrap().text(), "model=x,eu=1");
    }

    #[test]
    fn a_part_without_equals_is_named() {
        let e = Selector::parse("model=x,oops").unwrap_err();
        assert_eq!(e.to_string(), "invalid selector 'model=x,oops': 'oops' is not key=value");
        assert!(parse_label("=v").is_err());
        assert_eq!(parse_label("a=b").unwrap(), ("a".into(), "b".into()));
    }
}

//! The one definition of a field-mask path, shared by the agent's
//! control-interface authorizer and the server's field masks, so both read
//! a mask the same way.
//!
//! A mask is a `.`-separated list of segments; the empty string is the path
//! of no segment (the whole state). A segment is `*` (exactly one key,
//! whatever its name, never an empty one) or a key. An empty segment
//! (`a..b`, `a.`, `.a`) is refused: Ankaios keeps it as a key named `""`,
//! which no workload or agent can have, while a reader that drops it would
//! widen the path (`desiredState.workloads.` would name every workload).
//!
//! Matching of rules (written the same way) against request paths:
//! - [`MaskPath::covers`] (allow rules): the path is the rule or below it; a
//!   rule `*` segment covers any one segment (a request `*` included), a
//!   named rule segment only itself; the rule `*` also covers the whole
//!   state; a rule without segments covers nothing.
//! - [`MaskPath::overlaps`] (deny rules): the rule and the path agree over
//!   the shorter of both, a `*` on either side agreeing with any segment, so
//!   a deny matches its path, what is below it and what includes it; a rule
//!   without segments overlaps nothing.

use std::fmt;

/// The wildcard segment.
pub const WILDCARD: &str = "*";

/// One segment of a mask path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// `*`: any one non-empty key.
    Any,
    /// A key, never empty.
    Key(String),
}

impl Segment {
    /// Whether this segment selects the key `key` of a map.
    pub fn selects(&self, key: &str) -> bool {
        match self {
            Segment::Any => !key.is_empty(),
            Segment::Key(k) => k == key,
        }
    }

    /// Whether a rule segment `self` covers the request segment `path`
    /// (everything the request segment selects).
    fn covers(&self, path: &Segment) -> bool {
        match self {
            Segment::Any => true,
            Segment::Key(_) => self == path,
        }
    }

    /// Whether two segments can select the same key.
    fn overlaps(&self, other: &Segment) -> bool {
        matches!((self, other), (Segment::Any, _) | (_, Segment::Any)) || self == other
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Any => f.write_str(WILDCARD),
            Segment::Key(k) => f.write_str(k),
        }
    }
}

/// A refused mask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaskPathError {
    #[error("field mask '{0}' has an empty segment: segments are separated by single dots and none may be empty")]
    EmptySegment(String),
}

/// A parsed field mask or rule path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct MaskPath {
    segments: Vec<Segment>,
}

impl MaskPath {
    /// Parses a mask; `""` is the whole state, an empty segment is refused.
    pub fn parse(mask: &str) -> Result<Self, MaskPathError> {
        if mask.is_empty() {
            return Ok(Self::default());
        }
        let segments = mask
            .split('.')
            .map(|s| match s {
                "" => Err(MaskPathError::EmptySegment(mask.to_owned())),
                WILDCARD => Ok(Segment::Any),
                key => Ok(Segment::Key(key.to_owned())),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { segments })
    }

    /// Parses every mask; the error names the first refused one.
    pub fn parse_all<S: AsRef<str>>(masks: &[S]) -> Result<Vec<Self>, MaskPathError> {
        masks.iter().map(|m| Self::parse(m.as_ref())).collect()
    }

    /// A path of the given keys (none may be empty; `*` is the wildcard; a
    /// key may hold a `.`, which no mask string can address).
    pub fn from_keys<S: AsRef<str>>(keys: &[S]) -> Result<Self, MaskPathError> {
        let segments = keys
            .iter()
            .map(|k| match k.as_ref() {
                "" => {
                    Err(MaskPathError::EmptySegment(keys.iter().map(|k| k.as_ref()).collect::<Vec<&str>>().join(".")))
                }
                WILDCARD => Ok(Segment::Any),
                key => Ok(Segment::Key(key.to_owned())),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { segments })
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether this is the path of the whole state.
    pub fn is_whole(&self) -> bool {
        self.segments.is_empty()
    }

    /// The path one segment further down.
    pub fn child(&self, segment: Segment) -> Self {
        let mut segments = self.segments.clone();
        segments.push(segment);
        Self { segments }
    }

    /// The keys of a path without wildcards (`*` read as a key named `*`,
    /// the way an update's mask addresses the new state).
    pub fn literal_keys(&self) -> Vec<&str> {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Any => WILDCARD,
                Segment::Key(k) => k.as_str(),
            })
            .collect()
    }

    /// Allow-rule matching: `path` is this rule's path or below it (see the
    /// module doc).
    pub fn covers(&self, path: &MaskPath) -> bool {
        let whole = matches!(self.segments.as_slice(), [Segment::Any]);
        !self.is_whole()
            && (self.segments.len() <= path.segments.len() || whole)
            && self.segments.iter().zip(&path.segments).all(|(r, p)| r.covers(p))
    }

    /// Deny-rule matching: this rule and `path` select a common part (see
    /// the module doc).
    pub fn overlaps(&self, path: &MaskPath) -> bool {
        !self.is_whole() && self.segments.iter().zip(&path.segments).all(|(r, p)| r.overlaps(p))
    }

    /// Whether the concrete key path `keys` lies at or below what this
    /// mask selects.
    pub fn selects_keys<S: AsRef<str>>(&self, keys: &[S]) -> bool {
        self.segments.len() <= keys.len() && self.segments.iter().zip(keys).all(|(s, k)| s.selects(k.as_ref()))
    }
}

impl fmt::Display for MaskPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for MaskPath {
    type Err = MaskPathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MaskPath {
        MaskPath::parse(s).unwrap()
    }

    #[test]
    fn empty_segments_are_refused_with_the_mask_named() {
        for bad in ["a..b", "a.", ".a", ".", "desiredState.workloads.", "desiredState.workloads..tags"] {
            let e = MaskPath::parse(bad).unwrap_err();
            assert_eq!(e, MaskPathError::EmptySegment(bad.to_owned()));
            assert!(e.to_string().contains(&format!("'{bad}'")), "{e}");
            assert!(e.to_string().contains("empty segment"), "{e}");
        }
        assert!(MaskPath::parse("").unwrap().is_whole());
        assert_eq!(p("a.*.b").segments(), [Segment::Key("a".into()), Segment::Any, Segment::Key("b".into())]);
        assert_eq!(p("a.*.b").to_string(), "a.*.b");
        assert_eq!(MaskPath::parse_all(&["a", "b..c"]), Err(MaskPathError::EmptySegment("b..c".into())));
    }

    #[test]
    fn a_wildcard_selects_exactly_one_non_empty_key() {
        assert!(Segment::Any.selects("x"));
        assert!(!Segment::Any.selects(""));
        assert!(p("a.*").selects_keys(&["a", "x"]));
        assert!(p("a.*").selects_keys(&["a", "x", "y"]), "below a selected key");
        assert!(!p("a.*").selects_keys(&["a"]), "a wildcard needs a key");
        assert!(!p("a.*").selects_keys(&["a", ""]));
    }

    #[test]
    fn allow_rules_cover_their_path_and_below_and_deny_rules_overlap() {
        assert!(p("a.*.c").covers(&p("a.b.c.d")));
        assert!(p("a.*.c").covers(&p("a.*.c")));
        assert!(!p("a.b.c").covers(&p("a.*.c")), "a request wildcard reaches keys the rule does not name");
        assert!(!p("a.*.c").covers(&p("a.b")));
        assert!(p("*").covers(&p("")));
        assert!(!p("").covers(&p("")));
        assert!(p("a.b").overlaps(&p("a")));
        assert!(p("a.b").overlaps(&p("a.*.c")));
        assert!(p("a.*").overlaps(&p("a.b.c")));
        assert!(!p("a.b").overlaps(&p("a.c")));
        assert!(!p("").overlaps(&p("a")));
    }
}

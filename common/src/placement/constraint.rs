//! The constraint language of `agentSelector` (the Krake grammar): label
//! constraints (`key = v`, `key == v`, `key is v`, `key != v`, `key is not
//! v`, `key in (a, b)`, `key not in (a, b)`) and metric constraints
//! (`name >= 512` with `>`, `>=`/`=>`/`gte`, `<`, `<=`/`=<`/`lte`,
//! `==`/`=`/`is`, `!=`/`is not`). Parsing names the offending token and its
//! column; evaluation follows Krake: a missing label satisfies only `!=`
//! and `not in`, a missing metric satisfies nothing.

use std::collections::BTreeMap;
use std::fmt;

/// A parse error: what was unexpected and where (1-based column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub message: String,
    pub column: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.message, self.column)
    }
}

/// A label constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelConstraint {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl LabelConstraint {
    /// Parses one expression.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut p = Parser::new(text)?;
        let key = p.word("a label key")?;
        let c = match p.next() {
            Some((Token::Op("=" | "=="), _)) => LabelConstraint::Equals(key, p.word("a value")?),
            Some((Token::Op("!="), _)) => LabelConstraint::NotEquals(key, p.word("a value")?),
            Some((Token::Word(w), _)) if w == "is" => {
                if p.peek_word("not") {
                    p.next();
                    LabelConstraint::NotEquals(key, p.word("a value")?)
                } else {
                    LabelConstraint::Equals(key, p.word("a value")?)
                }
            }
            Some((Token::Word(w), _)) if w == "in" => LabelConstraint::In(key, p.list()?),
            Some((Token::Word(w), _)) if w == "not" => match p.next() {
                Some((Token::Word(w), _)) if w == "in" => LabelConstraint::NotIn(key, p.list()?),
                other => return Err(p.unexpected(other, "'in' after 'not'")),
            },
            other => return Err(p.unexpected(other, "an operator")),
        };
        p.end()?;
        Ok(c)
    }

    /// Whether `labels` satisfy the constraint.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            LabelConstraint::Equals(k, v) => labels.get(k) == Some(v),
            LabelConstraint::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelConstraint::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelConstraint::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        }
    }
}

/// How a metric is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
    Equal,
    NotEqual,
}

/// A metric constraint.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricConstraint {
    pub metric: String,
    pub comparison: Comparison,
    pub value: f64,
}

impl MetricConstraint {
    /// Parses one expression.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let mut p = Parser::new(text)?;
        let metric = p.word("a metric name")?;
        let comparison = match p.next() {
            Some((Token::Op(">"), _)) => Comparison::Greater,
            Some((Token::Op(">=" | "=>"), _)) => Comparison::GreaterOrEqual,
            Some((Token::Op("<"), _)) => Comparison::Less,
            Some((Token::Op("<=" | "=<"), _)) => Comparison::LessOrEqual,
            Some((Token::Op("=" | "=="), _)) => Comparison::Equal,
            Some((Token::Op("!="), _)) => Comparison::NotEqual,
            Some((Token::Word(w), _)) if w == "gte" => Comparison::GreaterOrEqual,
            Some((Token::Word(w), _)) if w == "lte" => Comparison::LessOrEqual,
            Some((Token::Word(w), _)) if w == "is" => {
                if p.peek_word("not") {
                    p.next();
                    Comparison::NotEqual
                } else {
                    Comparison::Equal
                }
            }
            other => return Err(p.unexpected(other, "a comparison")),
        };
        let (word, column) = p.word_at("a number")?;
        let value = word
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| ParseError { message: format!("expected a number, found '{word}'"), column })?;
        p.end()?;
        Ok(Self { metric, comparison, value })
    }

    /// Whether the agent's `metrics` satisfy the constraint; a metric the
    /// agent does not have satisfies nothing.
    pub fn matches(&self, metrics: &BTreeMap<String, f64>) -> bool {
        let Some(v) = metrics.get(&self.metric).copied() else { return false };
        match self.comparison {
            Comparison::Greater => v > self.value,
            Comparison::GreaterOrEqual => v >= self.value,
            Comparison::Less => v < self.value,
            Comparison::LessOrEqual => v <= self.value,
            Comparison::Equal => v == self.value,
            Comparison::NotEqual => v != self.value,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Op(&'static str),
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) => write!(f, "'{w}'"),
            Token::Op(o) => write!(f, "'{o}'"),
            Token::Open => f.write_str("'('"),
            Token::Close => f.write_str("')'"),
            Token::Comma => f.write_str("','"),
        }
    }
}

/// Operators, longest first so `===` reads as `==` then `=`.
const OPERATORS: [&str; 9] = ["==", "!=", ">=", "<=", "=>", "=<", "=", "<", ">"];

fn tokenize(text: &str) -> Result<Vec<(Token, usize)>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let single = match c {
            '(' => Some(Token::Open),
            ')' => Some(Token::Close),
            ',' => Some(Token::Comma),
            _ => None,
        };
        if let Some(t) = single {
            out.push((t, column));
            i += 1;
            continue;
        }
        if "<>=!".contains(c) {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) else {
                return Err(ParseError { message: format!("unexpected '{c}'"), column });
            };
            out.push((Token::Op(op), column));
            i += op.len();
            continue;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && !"(),<>=!".contains(chars[i]) {
            i += 1;
        }
        out.push((Token::Word(chars[start..i].iter().collect()), column));
    }
    Ok(out)
}

struct Parser {
    tokens: std::vec::IntoIter<(Token, usize)>,
    peeked: Option<(Token, usize)>,
    end_column: usize,
}

impl Parser {
    fn new(text: &str) -> Result<Self, ParseError> {
        let end_column = text.chars().count() + 1;
        Ok(Self { tokens: tokenize(text)?.into_iter(), peeked: None, end_column })
    }

    fn next(&mut self) -> Option<(Token, usize)> {
        self.peeked.take().or_else(|| self.tokens.next())
    }

    fn peek_word(&mut self, word: &str) -> bool {
        if self.peeked.is_none() {
            self.peeked = self.tokens.next();
        }
        matches!(&self.peeked, Some((Token::Word(w), _)) if w == word)
    }

    fn unexpected(&self, got: Option<(Token, usize)>, wanted: &str) -> ParseError {
        match got {
            Some((t, column)) => ParseError { message: format!("unexpected {t}, expected {wanted}"), column },
            None => ParseError { message: format!("expected {wanted}"), column: self.end_column },
        }
    }

    fn word_at(&mut self, wanted: &str) -> Result<(String, usize), ParseError> {
        match self.next() {
            Some((Token::Word(w), column)) => Ok((w, column)),
            other => Err(self.unexpected(other, wanted)),
        }
    }

    fn word(&mut self, wanted: &str) -> Result<String, ParseError> {
        self.word_at(wanted).map(|(w, _)| w)
    }

    /// `( a, b )`, a trailing comma allowed, not empty.
    fn list(&mut self) -> Result<Vec<String>, ParseError> {
        match self.next() {
            Some((Token::Open, _)) => {}
            other => return Err(self.unexpected(other, "'('")),
        }
        let mut values = Vec::new();
        loop {
            match self.next() {
                Some((Token::Word(w), _)) => values.push(w),
                Some((Token::Close, column)) if values.is_empty() => {
                    return Err(ParseError { message: "empty list".into(), column });
                }
                Some((Token::Close, _)) => return Ok(values),
                other => return Err(self.unexpected(other, "a value")),
            }
            match self.next() {
                Some((Token::Comma, _)) => {
                    if matches!(self.peeked_close(), Some(true)) {
                        self.next();
                        return Ok(values);
                    }
                }
                Some((Token::Close, _)) => return Ok(values),
                other => return Err(self.unexpected(other, "',' or ')'")),
            }
        }
    }

    fn peeked_close(&mut self) -> Option<bool> {
        if self.peeked.is_none() {
            self.peeked = self.tokens.next();
        }
        self.peeked.as_ref().map(|(t, _)| *t == Token::Close)
    }

    fn end(&mut self) -> Result<(), ParseError> {
        match self.next() {
            None => Ok(()),
            Some((t, column)) => Err(ParseError { message: format!("unexpected {t}"), column }),
        }
    }
}

#[cfg(test)]
#[path = "constraint_tests.rs"]
mod tests;

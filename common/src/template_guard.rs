//! Bounds on what one config template may cost before the engine runs it.
//!
//! Handlebars has no limit of its own: mutually recursive inline partials
//! recurse until the stack overflows, and partials that include the next
//! one twice double the work per level. Two checks run before a template
//! is rendered:
//!
//! * [`check_nesting`] reads the text and bounds how deeply the parser
//!   will recurse (nested blocks, and parentheses, brackets and braces
//!   inside one `{{...}}`), so parsing itself cannot exhaust the stack;
//! * [`check_template`] walks the parsed template: a partial that includes
//!   itself (directly or through others) is refused, partial names must be
//!   literal, and the nesting depth and an estimate of the work (partial
//!   expansions, `each` iterations over the largest collection of the
//!   data) must stay under [`MAX_DEPTH`] and [`MAX_WORK`].
//!
//! A template within these bounds renders in bounded time; its output is
//! bounded separately by the renderer.

use std::collections::HashMap;

use handlebars::Path;
use handlebars::template::{DecoratorTemplate, HelperTemplate, Parameter, Template, TemplateElement};
use serde_json::Value;

/// Deepest nesting of blocks in the text (before parsing).
pub const MAX_BLOCK_NESTING: usize = 64;
/// Deepest nesting of `(`, `[` and `{` inside one `{{...}}`.
pub const MAX_EXPRESSION_NESTING: usize = 32;
/// Deepest nesting while rendering: blocks and partial expansions.
pub const MAX_DEPTH: u64 = 64;
/// Most estimated render steps: an element, an `each` iteration, or a
/// node of the data copied when a partial is entered.
pub const MAX_WORK: u64 = 5_000_000;

/// Why a template is refused before rendering.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateRefused {
    #[error("blocks are nested more than {MAX_BLOCK_NESTING} deep")]
    BlockNesting,
    #[error("an expression nests parentheses, brackets or braces more than {MAX_EXPRESSION_NESTING} deep")]
    ExpressionNesting,
    #[error("partial '{0}' includes itself ({1}); recursive partials are not supported")]
    RecursivePartial(String, String),
    #[error("partial names must be literal (found a computed name)")]
    ComputedPartialName,
    #[error("inline partial names must be quoted strings")]
    InlineName,
    #[error("blocks and partials would nest more than {MAX_DEPTH} deep when rendered")]
    Depth,
    #[error(
        "the template would take too much work to render (more than {MAX_WORK} steps: chained partials or nested loops)"
    )]
    Work,
}

/// Bounds the parser's recursion by reading the text as the Handlebars
/// grammar does: escapes (`\{{`), comments and raw blocks are skipped,
/// string literals inside an expression are skipped, `{{#` opens and `{{/`
/// closes a block.
pub fn check_nesting(text: &str) -> Result<(), TemplateRefused> {
    let b = text.as_bytes();
    let at = |i: usize, s: &str| b.get(i..i + s.len()) == Some(s.as_bytes());
    let find = |from: usize, s: &str| -> usize {
        text.get(from..).and_then(|rest| rest.find(s)).map_or(b.len(), |p| from + p + s.len())
    };
    let mut i = 0;
    let mut blocks = 0usize;
    while i < b.len() {
        if b[i] == b'\\' && at(i + 1, "{{") {
            i += 3;
        } else if at(i, "{{!--") {
            i = find(i + 5, "--}}");
        } else if at(i, "{{!") {
            i = find(i + 3, "}}");
        } else if at(i, "{{{{") {
            // A raw block: its start, its text up to the next `{{{{`, and its end.
            i = find(i + 4, "}}}}");
            i = find(i, "{{{{");
            i = find(i, "}}}}");
        } else if at(i, "{{") {
            let mut k = i + 2;
            if at(k, "~") {
                k += 1;
            }
            if at(k, "#") {
                blocks += 1;
                if blocks > MAX_BLOCK_NESTING {
                    return Err(TemplateRefused::BlockNesting);
                }
            } else if at(k, "/") {
                blocks = blocks.saturating_sub(1);
            }
            i = skip_expression(b, k)?;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// From inside `{{`, the index after the `}}` that ends the expression:
/// string literals are skipped and braces counted, so `}}` inside an
/// object literal does not end it.
fn skip_expression(b: &[u8], mut k: usize) -> Result<usize, TemplateRefused> {
    let mut depth = 0usize;
    while k < b.len() {
        match b[k] {
            q @ (b'"' | b'\'') => {
                k += 1;
                while k < b.len() && b[k] != q {
                    k += if b[k] == b'\\' { 2 } else { 1 };
                }
            }
            b'}' if depth == 0 && b.get(k + 1) == Some(&b'}') => return Ok(k + 2),
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_EXPRESSION_NESTING {
                    return Err(TemplateRefused::ExpressionNesting);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        k += 1;
    }
    Ok(b.len())
}

/// Walks a parsed template with the data it will be rendered with.
pub fn check_template(template: &Template, data: &Value) -> Result<(), TemplateRefused> {
    let mut inline = HashMap::new();
    collect_inline(template, &mut inline)?;
    let mut walk = Walk { inline, done: HashMap::new(), path: Vec::new(), loop_len: max_len(data), copy: nodes(data) };
    let cost = walk.template(template)?;
    if cost.depth > MAX_DEPTH {
        return Err(TemplateRefused::Depth);
    }
    Ok(())
}

/// The work and the nesting depth of rendering something once.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    work: u64,
    depth: u64,
}

struct Walk<'t> {
    /// Every inline partial definition by name (all scopes together: an
    /// over-approximation of which one a reference reaches).
    inline: HashMap<String, Vec<&'t Template>>,
    done: HashMap<String, Cost>,
    /// Partials being walked, for the cycle's description.
    path: Vec<String>,
    /// Most items an `each` can iterate over.
    loop_len: u64,
    /// Nodes of the data, copied when a partial is entered.
    copy: u64,
}

impl<'t> Walk<'t> {
    fn template(&mut self, t: &'t Template) -> Result<Cost, TemplateRefused> {
        let mut total = Cost::default();
        for e in &t.elements {
            let c = self.element(e)?;
            total.work = total.work.saturating_add(c.work);
            total.depth = total.depth.max(c.depth);
            if total.work > MAX_WORK {
                return Err(TemplateRefused::Work);
            }
            if total.depth > MAX_DEPTH {
                return Err(TemplateRefused::Depth);
            }
        }
        Ok(total)
    }

    fn optional(&mut self, t: Option<&'t Template>) -> Result<Cost, TemplateRefused> {
        t.map_or(Ok(Cost::default()), |t| self.template(t))
    }

    fn element(&mut self, e: &'t TemplateElement) -> Result<Cost, TemplateRefused> {
        Ok(match e {
            TemplateElement::RawString(_) | TemplateElement::Comment(_) => Cost { work: 1, depth: 0 },
            TemplateElement::Expression(h) | TemplateElement::HtmlExpression(h) => {
                Cost { work: 1 + subexpressions(h), depth: 1 }
            }
            TemplateElement::HelperBlock(h) => {
                let body = self.optional(h.template.as_ref())?;
                let inverse = self.optional(h.inverse.as_ref())?;
                let times = if matches!(&h.name, Parameter::Name(n) if n == "each") { self.loop_len } else { 1 };
                Cost {
                    work: (1 + subexpressions(h))
                        .saturating_add(times.saturating_mul(body.work.saturating_add(1)))
                        .saturating_add(inverse.work),
                    depth: 1 + body.depth.max(inverse.depth),
                }
            }
            // An inline definition costs nothing where it stands; its body
            // is counted where a partial expression uses it.
            TemplateElement::DecoratorExpression(_) | TemplateElement::DecoratorBlock(_) => Cost { work: 1, depth: 1 },
            TemplateElement::PartialExpression(d) | TemplateElement::PartialBlock(d) => {
                let name = partial_name(d)?;
                let called = self.partial(&name)?;
                // A partial block's own content is rendered on every use.
                let block = self.optional(d.template.as_ref())?;
                Cost {
                    work: 1u64.saturating_add(self.copy).saturating_add(called.work).saturating_add(block.work),
                    depth: 1 + called.depth.max(block.depth),
                }
            }
            // Kinds of element a later engine version may add: one step.
            _ => Cost { work: 1, depth: 1 },
        })
    }

    fn partial(&mut self, name: &str) -> Result<Cost, TemplateRefused> {
        if let Some(c) = self.done.get(name) {
            return Ok(*c);
        }
        if let Some(at) = self.path.iter().position(|p| p == name) {
            let mut cycle = self.path[at..].to_vec();
            cycle.push(name.to_owned());
            return Err(TemplateRefused::RecursivePartial(name.to_owned(), cycle.join(" -> ")));
        }
        // Not defined inline: a registered partial (`indent`), the partial
        // block (`@partial-block`, already rendered) or one the engine will
        // report as missing.
        let Some(bodies) = self.inline.get(name).cloned() else {
            return Ok(Cost { work: 1, depth: 1 });
        };
        self.path.push(name.to_owned());
        let mut worst = Cost::default();
        for body in bodies {
            let c = self.template(body)?;
            worst.work = worst.work.max(c.work);
            worst.depth = worst.depth.max(c.depth);
        }
        self.path.pop();
        self.done.insert(name.to_owned(), worst);
        Ok(worst)
    }
}

/// Every `{{#*inline "name"}}` body in the template, at any depth.
fn collect_inline<'t>(t: &'t Template, into: &mut HashMap<String, Vec<&'t Template>>) -> Result<(), TemplateRefused> {
    for e in &t.elements {
        match e {
            TemplateElement::HelperBlock(h) => {
                for inner in [&h.template, &h.inverse].into_iter().flatten() {
                    collect_inline(inner, into)?;
                }
            }
            TemplateElement::DecoratorBlock(d) | TemplateElement::PartialBlock(d) => {
                if matches!(&d.name, Parameter::Name(n) if n == "inline") {
                    let Some(Parameter::Literal(Value::String(name))) = d.params.first() else {
                        return Err(TemplateRefused::InlineName);
                    };
                    if let Some(body) = &d.template {
                        into.entry(unquote(name).to_owned()).or_default().push(body);
                    }
                }
                if let Some(inner) = &d.template {
                    collect_inline(inner, into)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The name a partial expression includes, as the engine looks it up.
fn partial_name(d: &DecoratorTemplate) -> Result<String, TemplateRefused> {
    match &d.name {
        Parameter::Name(n) => Ok(unquote(n).to_owned()),
        Parameter::Path(Path::Relative((_, raw)) | Path::Local((_, _, raw))) => Ok(unquote(raw).to_owned()),
        Parameter::Literal(Value::String(s)) => Ok(unquote(s).to_owned()),
        _ => Err(TemplateRefused::ComputedPartialName),
    }
}

/// `'a'`, `"a"` and `[a]` name the partial `a`: matching on the bare name
/// errs on the side of finding a reference.
fn unquote(name: &str) -> &str {
    let n = name.trim();
    for (open, close) in [('\'', '\''), ('"', '"'), ('[', ']')] {
        if let Some(inner) = n.strip_prefix(open).and_then(|r| r.strip_suffix(close)) {
            return inner;
        }
    }
    n
}

/// How many subexpressions an expression evaluates (each is one step).
fn subexpressions(h: &HelperTemplate) -> u64 {
    let count = |p: &Parameter| match p {
        Parameter::Subexpression(s) => match s.element.as_ref() {
            TemplateElement::Expression(inner) | TemplateElement::HelperBlock(inner) => 1 + subexpressions(inner),
            _ => 1,
        },
        _ => 0,
    };
    h.params.iter().chain(h.hash.values()).map(count).sum::<u64>() + count(&h.name)
}

/// The largest array or object in the data (at least 1).
fn max_len(v: &Value) -> u64 {
    match v {
        Value::Array(a) => a.iter().map(max_len).fold(a.len() as u64, u64::max),
        Value::Object(o) => o.values().map(max_len).fold(o.len() as u64, u64::max),
        _ => 1,
    }
    .max(1)
}

/// The number of nodes in the data.
fn nodes(v: &Value) -> u64 {
    1 + match v {
        Value::Array(a) => a.iter().map(nodes).sum(),
        Value::Object(o) => o.values().map(nodes).sum(),
        _ => 0,
    }
}

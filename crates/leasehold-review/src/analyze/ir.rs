//! The language-independent reduction of one file: the calls, string literals, assignments,
//! functions and error handlers that lock analysis needs, with where each one is. Every
//! language's front end fills the same types, so the client knowledge and the rules are
//! written once.

use std::collections::HashMap;

use crate::Span;

/// Index into [`FileIr::funcs`]; 0 is the file's top level.
pub(crate) type FuncId = usize;
/// Index into [`FileIr::calls`].
pub(crate) type CallId = usize;

/// What an expression is, as far as the rules care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A string literal with no interpolation; its decoded text.
    Str(String),
    /// A string with interpolated parts: the literal fragments, joined by `{}`.
    Template(String),
    /// A number literal.
    Num(String),
    /// `true`/`false` in any spelling.
    Bool(bool),
    /// `None`, `null`, `nil`, `undefined`.
    Null,
    /// A plain name (a local, a parameter, a constant).
    Name(String),
    /// A field of this object: `self.x`, `this.x`, `$this->x`, `@x`.
    Field(String),
    /// A call; its id.
    Call(CallId),
    /// Anything else (an object literal, an arithmetic expression, a member chain).
    Other,
}

/// An expression as written, with the names and string contents inside it.
#[derive(Debug, Clone)]
pub(crate) struct Expr {
    pub span: Span,
    /// Source text, whitespace folded.
    pub text: String,
    pub kind: Kind,
    /// Lower-cased identifiers and string contents within it, in order (keys of keyword
    /// arguments and object literals included).
    pub words: Vec<String>,
}

/// One argument.
#[derive(Debug, Clone)]
pub(crate) struct Arg {
    /// The keyword, for `nx=True`, `nx: true`, `name: value`.
    pub name: Option<String>,
    pub expr: Expr,
}

/// How a call's value is used, looking through `await`, `?`, parentheses and the calls
/// chained on it (those are in [`Call::chain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Use {
    /// An expression statement, `let _ =`, or bound only to `_`.
    Discarded,
    /// Bound to these names (Go's `ok, err :=` gives two; `_` kept as written).
    Bound(Vec<String>),
    /// Inside a condition, a comparison or a boolean operator.
    Condition,
    /// Returned to the caller.
    Returned,
    /// Anything else (an argument, a list element, a field).
    Other,
}

/// A call or method call.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub func: FuncId,
    pub span: Span,
    /// The method or function name as written (`setnx`, `SetNX`, `set_nx`, `cmd`).
    pub name: String,
    /// The receiver, when it is a method call (`r` in `r.set`, `Redis` in `Redis::set`).
    pub receiver: Option<Expr>,
    /// When the receiver is itself a call (a builder chain), that call.
    pub receiver_call: Option<CallId>,
    pub args: Vec<Arg>,
    /// The calls applied to this call's value, innermost first, with their argument text
    /// (`Result`, `unwrap_or(false)`, `query_async`, `arg("NX")` …).
    pub chain: Vec<(String, String)>,
    /// How the value at the end of the chain is used.
    pub used: Use,
    /// `let _: () =` or a turbofish `::<()>` / `::<_, ()>` on the chain (Rust): the reply is
    /// converted to unit, so a nil reply reads as success.
    pub unit_typed: bool,
    /// An error from the call is propagated with `?` (Rust).
    pub tried: bool,
    /// Its value reaches a `return`, directly or through a comparison or a call
    /// (`return "OK".equals(jedis.set(…))`).
    pub in_return: bool,
    /// The handlers whose protected block holds this call, innermost first.
    pub handlers: Vec<usize>,
}

/// A function, method, closure or block with its own locals.
#[derive(Debug, Clone)]
pub(crate) struct Func {
    pub name: String,
    /// Its bytes.
    pub range: (usize, usize),
    pub params: Vec<String>,
    pub parent: Option<FuncId>,
}

/// `name = value` (also declarations, constants, fields set in a constructor).
#[derive(Debug, Clone)]
pub(crate) struct Assign {
    pub func: FuncId,
    /// The last name on the left (`x`, `self.x` → `x`, `$this->x` → `x`, `@x` → `x`).
    pub name: String,
    /// Whether the left side is a field of this object.
    pub field: bool,
    pub value: Expr,
}

/// A string literal whose contents may be SQL or a Lua script.
#[derive(Debug, Clone)]
pub(crate) struct StrLit {
    pub func: FuncId,
    pub span: Span,
    pub text: String,
    /// The call it is an argument of (directly), if any.
    pub call: Option<CallId>,
    /// The name it is assigned to, if any.
    pub assigned_to: Option<String>,
}

/// What an error handler does after it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Raises, throws, rethrows, returns an error, exits.
    Propagates,
    /// Returns a false-like value (or nothing) without an error: "not acquired".
    Refuses,
    /// Returns a true-like value: "acquired".
    Grants,
    /// Neither returns nor throws: execution goes on after the protected block.
    FallsThrough,
    /// Returns something computed (a re-check, a lookup): neither answer taken for granted.
    Checks,
}

/// An error handler: `except`, `catch`, `rescue`, Go's `if err != nil`, Rust's
/// `unwrap_or(false)` / `if let Err` / `let _ =`.
#[derive(Debug, Clone)]
pub(crate) struct Handler {
    /// Where it is reported (the clause's first line).
    pub span: Span,
    /// The bytes it protects.
    pub protects: (usize, usize),
    pub outcome: Outcome,
    /// Whether code of the same function follows the handler's statement.
    pub work_after: bool,
}

/// One name occurrence.
#[derive(Debug, Clone)]
pub(crate) struct Ident {
    pub func: FuncId,
    pub byte: usize,
    pub name: String,
}

/// A connection borrowed from a pool for a block: Python's `with pool.connection() as conn`,
/// Ruby's `pool.with_connection do |conn|`. It goes back to the pool when the block ends.
#[derive(Debug, Clone)]
pub(crate) struct Borrow {
    pub name: String,
    /// Where it came from, as written (`pool.connection()`).
    pub source: String,
    /// The bytes of the block.
    pub scope: (usize, usize),
}

/// Everything the rules read about one file.
#[derive(Debug, Default)]
pub(crate) struct FileIr {
    pub funcs: Vec<Func>,
    pub calls: Vec<Call>,
    pub assigns: Vec<Assign>,
    pub strings: Vec<StrLit>,
    pub handlers: Vec<Handler>,
    pub idents: Vec<Ident>,
    pub borrows: Vec<Borrow>,
    /// Whether the parser had to recover from syntax errors.
    pub had_errors: bool,
    /// Indexes built by [`FileIr::index`], so lookups stay linear on generated files with
    /// tens of thousands of calls.
    /// Each name's occurrences, in file order (the walk is pre-order, so bytes ascend).
    pub by_ident: HashMap<String, Vec<usize>>,
    /// Each (function, name)'s assignments, in extraction order.
    pub by_func_assign: HashMap<(FuncId, String), Vec<usize>>,
    /// Each name's file-wide constant, as [`FileIr::value_of`] falls back to it: (the only
    /// assignment of the name anywhere, the only one that is a field or at the top level).
    pub only_assign: HashMap<String, (Option<usize>, Option<usize>)>,
    pub by_call_name: HashMap<String, Vec<CallId>>,
    /// The call made on each call's value (`a.b().c()`: b → c).
    pub caller_of: HashMap<CallId, CallId>,
}

impl FileIr {
    /// Builds the lookup indexes; call once, after extraction.
    pub fn index(&mut self) {
        for (i, x) in self.idents.iter().enumerate() {
            self.by_ident.entry(x.name.clone()).or_default().push(i);
        }
        // (how many, the last one) per name, over all assignments and over the constant-like.
        let mut counts: HashMap<&str, [(usize, usize); 2]> = HashMap::new();
        for (i, a) in self.assigns.iter().enumerate() {
            self.by_func_assign.entry((a.func, a.name.clone())).or_default().push(i);
            let e = counts.entry(&a.name).or_default();
            e[0] = (e[0].0 + 1, i);
            if a.field || a.func == 0 {
                e[1] = (e[1].0 + 1, i);
            }
        }
        let one = |(n, i): (usize, usize)| (n == 1).then_some(i);
        self.only_assign = counts
            .into_iter()
            .map(|(k, [all, fix])| (k.to_owned(), (one(all), one(fix))))
            .collect();
        for (i, c) in self.calls.iter().enumerate() {
            self.by_call_name.entry(c.name.clone()).or_default().push(i);
            if let Some(r) = c.receiver_call {
                self.caller_of.entry(r).or_insert(i);
            }
        }
    }

    /// The calls named `name`.
    pub fn calls_named(&self, name: &str) -> impl Iterator<Item = (CallId, &Call)> {
        self.by_call_name.get(name).into_iter().flatten().map(|i| (*i, &self.calls[*i]))
    }

    /// Whether `name` is read in `func` (or a function nested in it) after byte `after`.
    pub fn read_after(&self, func: FuncId, name: &str, after: usize) -> bool {
        self.occurrences_in_from(name, func, after.saturating_add(1)).next().is_some()
    }

    /// Whether `inner` is `outer` or nested in it.
    pub fn within(&self, mut inner: FuncId, outer: FuncId) -> bool {
        loop {
            if inner == outer {
                return true;
            }
            match self.funcs.get(inner).and_then(|f| f.parent) {
                Some(p) => inner = p,
                None => return false,
            }
        }
    }

    /// The value last assigned to `name` before byte `before`, looking in `func`, then its
    /// parents, then anywhere in the file (constants and fields).
    pub fn value_of(&self, func: FuncId, name: &str, field: bool, before: usize) -> Option<&Expr> {
        let mut f = Some(func);
        while let Some(id) = f {
            if !field {
                let hit = self
                    .by_func_assign
                    .get(&(id, name.to_owned()))
                    .into_iter()
                    .flatten()
                    .map(|i| &self.assigns[*i])
                    .inspect(|_| super::work::add(1))
                    .rfind(|a| !a.field && a.value.span.start_byte < before);
                if let Some(a) = hit {
                    return Some(&a.value);
                }
            }
            f = self.funcs[id].parent;
        }
        // Fields are set in constructors and setters; constants at the top. A name assigned
        // more than once with different values is not a known constant.
        let (all, fixed) = self.only_assign.get(name)?;
        let one = if field { all } else { fixed };
        one.map(|i| &self.assigns[i].value)
    }

    /// The occurrences of `name` in `func` or a function nested in it: those within its bytes
    /// (a function's nested functions lie within its bytes, and whatever lies within them is
    /// in it or nested in it), found by bisecting the file-ordered occurrences.
    pub fn occurrences_in(&self, name: &str, func: FuncId) -> impl Iterator<Item = &Ident> {
        self.occurrences_in_from(name, func, 0)
    }

    /// [`FileIr::occurrences_in`] from byte `from` on.
    pub fn occurrences_in_from(
        &self,
        name: &str,
        func: FuncId,
        from: usize,
    ) -> impl Iterator<Item = &Ident> {
        let (lo, hi) = self.funcs.get(func).map_or((0, usize::MAX), |f| f.range);
        let lo = lo.max(from);
        let all: &[usize] = self.by_ident.get(name).map_or(&[], |v| v.as_slice());
        let from = all.partition_point(|i| self.idents[*i].byte < lo);
        all[from..]
            .iter()
            .map(|i| &self.idents[*i])
            .inspect(|_| super::work::add(1))
            .take_while(move |x| x.byte < hi)
            .filter(move |x| self.within(x.func, func))
    }

    /// The calls that start at or after byte `from`, in file order (calls are collected in
    /// pre-order, so their starts ascend).
    pub fn calls_from(&self, from: usize) -> impl Iterator<Item = (CallId, &Call)> {
        let at = self.calls.partition_point(|c| c.span.start_byte < from);
        self.calls.iter().enumerate().skip(at).inspect(|_| super::work::add(1))
    }
}

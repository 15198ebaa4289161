//! Second pass: walk each function body in evaluation order, tracking which
//! guards are alive, and record every acquisition, call and `.await` together
//! with the guards held at that point.
//!
//! The walk follows Rust's evaluation order closely enough for this purpose:
//! a method call's receiver and arguments run before the call itself, so in
//! `f(m.lock().unwrap().len())` the guard is alive when `f` is called.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::visit::Visit;
use syn::{Expr, Pat};

use super::program::{line_of, mentions_lock, type_name, Program, Shape};
use super::{Config, Finding, Loc, SourceFile, Unseen, UnseenKind};

/// Zero-argument methods that return a guard when called on a lock.
pub(crate) const LOCK_METHODS: &[&str] = &[
    "lock",
    "read",
    "write",
    "try_lock",
    "try_read",
    "try_write",
    "upgradable_read",
    "try_upgradable_read",
    "blocking_lock",
    "blocking_read",
    "blocking_write",
    "lock_owned",
    "read_owned",
    "write_owned",
];

/// Methods that pass a guard through (`m.lock().unwrap()` is still the guard).
const GUARD_PRESERVING: &[&str] = &[
    "unwrap",
    "expect",
    "unwrap_or_else",
    "ok",
    "map_err",
    "context",
    "with_context",
];

/// A guard alive at some point, as recorded in the summaries.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub lock: String,
    pub line: usize,
}

pub(crate) struct Acquire {
    pub lock: String,
    pub reentrant: bool,
    pub line: usize,
    pub held: Vec<Held>,
}

pub(crate) enum Callee {
    /// Workspace functions the call may reach (several when names collide).
    Fns(Vec<usize>),
    /// A call the audit cannot follow. `method` is the name to match against
    /// workspace lock-takers when deciding whether it is worth mentioning.
    Unresolved {
        kind: UnseenKind,
        what: String,
        method: Option<String>,
    },
}

pub(crate) struct CallSite {
    pub callee: Callee,
    pub line: usize,
    pub held: Vec<Held>,
}

/// Summary of one function body, closure or async block.
pub(crate) struct FnInfo {
    /// Index into `Program::fns`; `None` for closures and async blocks.
    pub def: Option<usize>,
    pub display: String,
    pub file: usize,
    pub line: usize,
    pub acquires: Vec<Acquire>,
    pub calls: Vec<CallSite>,
}

pub(crate) struct Walked {
    /// The first `prog.fns.len()` entries correspond to `prog.fns`.
    pub infos: Vec<FnInfo>,
    pub findings: Vec<Finding>,
    pub unseen: Vec<Unseen>,
}

pub(crate) fn walk_all(prog: &Program, files: &[SourceFile], cfg: &Config) -> Walked {
    let mut infos: Vec<FnInfo> = prog
        .fns
        .iter()
        .enumerate()
        .map(|(i, f)| FnInfo {
            def: Some(i),
            display: f.display.clone(),
            file: f.file,
            line: f.line,
            acquires: Vec::new(),
            calls: Vec::new(),
        })
        .collect();
    let mut findings = Vec::new();
    let mut unseen = Vec::new();
    for (i, f) in prog.fns.iter().enumerate() {
        let mut w = Walker {
            prog,
            cfg,
            file_display: &files[f.file].display,
            file: f.file,
            self_ty: f.owner.clone(),
            frames: Vec::new(),
            held: Vec::new(),
            ctx: i,
            infos: &mut infos,
            findings: &mut findings,
            unseen: &mut unseen,
        };
        w.push_frame(false);
        for input in &f.sig.inputs {
            if let syn::FnArg::Typed(pt) = input {
                if let Some(name) = pat_ident(&pt.pat) {
                    let shape = prog.shape(&pt.ty, f.owner.as_deref());
                    w.bind_var(&name, Val::from_shape(shape, &name));
                }
            }
        }
        w.visit_block(&f.body);
        w.pop_frame();
    }
    Walked {
        infos,
        findings,
        unseen,
    }
}

/// What the walker knows about a value.
#[derive(Clone, Debug)]
enum Val {
    /// A lock; an empty name means "not named yet" (`Mutex::new(..)` before
    /// it is bound to a variable).
    Lock {
        name: String,
        reentrant: bool,
    },
    Named(String),
    Dyn(String),
    Unknown,
}

impl Val {
    fn from_shape(shape: Shape, lock_name: &str) -> Self {
        match shape {
            Shape::Lock { reentrant } => Val::Lock {
                name: lock_name.to_string(),
                reentrant,
            },
            Shape::Named(n) => Val::Named(n),
            Shape::Dyn(n) => Val::Dyn(n),
            Shape::Unknown => Val::Unknown,
        }
    }
}

#[derive(Clone)]
struct Guard {
    lock: String,
    line: usize,
    /// Position of the acquiring method name, to find the guard again when
    /// the enclosing `let` binds it.
    key: (usize, usize),
    /// Index of the frame that drops this guard when it ends.
    frame: usize,
    binding: Option<String>,
}

struct Frame {
    /// Temporary scope (a statement, condition or scrutinee) rather than a
    /// block; `let` bindings go to the nearest block.
    temp: bool,
    vars: HashMap<String, Val>,
}

struct Walker<'a> {
    prog: &'a Program,
    cfg: &'a Config,
    file_display: &'a str,
    file: usize,
    self_ty: Option<String>,
    frames: Vec<Frame>,
    held: Vec<Guard>,
    ctx: usize,
    infos: &'a mut Vec<FnInfo>,
    findings: &'a mut Vec<Finding>,
    unseen: &'a mut Vec<Unseen>,
}

fn key_of(span: Span) -> (usize, usize) {
    let s = span.start();
    (s.line, s.column)
}

fn pat_ident(p: &Pat) -> Option<String> {
    match p {
        Pat::Ident(i) => Some(i.ident.to_string()),
        Pat::Type(t) => pat_ident(&t.pat),
        Pat::Paren(p) => pat_ident(&p.pat),
        Pat::Reference(r) => pat_ident(&r.pat),
        Pat::TupleStruct(ts) if ts.elems.len() == 1 => pat_ident(&ts.elems[0]),
        _ => None,
    }
}

/// If `e` evaluates to a guard (possibly through `unwrap()`, `?`, `.await`,
/// `&`), the key of the acquisition that produced it.
fn guard_source(e: &Expr) -> Option<(usize, usize)> {
    match e {
        Expr::Paren(p) => guard_source(&p.expr),
        Expr::Group(g) => guard_source(&g.expr),
        Expr::Reference(r) => guard_source(&r.expr),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => guard_source(&u.expr),
        Expr::Try(t) => guard_source(&t.expr),
        Expr::Await(a) => guard_source(&a.base),
        Expr::MethodCall(m) => {
            let name = m.method.to_string();
            if m.args.is_empty() && LOCK_METHODS.contains(&name.as_str()) {
                Some(key_of(m.method.span()))
            } else if GUARD_PRESERVING.contains(&name.as_str()) {
                guard_source(&m.receiver)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether the guard source of `e` is a `try_*` acquisition, which yields no
/// guard when it fails.
fn is_try_acquire(e: &Expr) -> bool {
    match e {
        Expr::Paren(p) => is_try_acquire(&p.expr),
        Expr::MethodCall(m) if m.args.is_empty() && m.method.to_string().starts_with("try_") => {
            true
        }
        Expr::MethodCall(m) if GUARD_PRESERVING.contains(&m.method.to_string().as_str()) => {
            is_try_acquire(&m.receiver)
        }
        _ => false,
    }
}

fn path_segments(p: &syn::Path) -> Vec<String> {
    p.segments.iter().map(|s| s.ident.to_string()).collect()
}

fn starts_upper(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_uppercase)
}

fn expr_text(e: &Expr) -> String {
    // Token streams print with a space between every token; squeeze the
    // common ones back so the text reads like the source.
    let mut text = quote::ToTokens::to_token_stream(e).to_string();
    for (from, to) in [
        (" . ", "."),
        (" (", "("),
        ("( ", "("),
        (" )", ")"),
        ("& ", "&"),
        (" ,", ","),
    ] {
        text = text.replace(from, to);
    }
    if text.len() > 60 {
        format!("{}..", &text[..text.floor_char_boundary_compat(57)])
    } else {
        text
    }
}

/// `str::floor_char_boundary` is unstable; this is the same idea.
trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

enum LockCall {
    Lock { name: String, reentrant: bool },
    UnknownReceiver,
}

impl Walker<'_> {
    fn push_frame(&mut self, temp: bool) {
        self.frames.push(Frame {
            temp,
            vars: HashMap::new(),
        });
    }

    fn pop_frame(&mut self) {
        let idx = self.frames.len() - 1;
        self.held.retain(|g| g.frame < idx);
        self.frames.pop();
    }

    fn bind_var(&mut self, name: &str, val: Val) {
        if let Some(f) = self.frames.iter_mut().rev().find(|f| !f.temp) {
            f.vars.insert(name.to_string(), val);
        }
    }

    fn lookup_var(&self, name: &str) -> Option<&Val> {
        self.frames.iter().rev().find_map(|f| f.vars.get(name))
    }

    fn display(&self) -> String {
        self.infos[self.ctx].display.clone()
    }

    fn loc(&self, line: usize) -> Loc {
        Loc::new(self.file_display, line)
    }

    fn held_now(&self) -> Vec<Held> {
        self.held
            .iter()
            .map(|g| Held {
                lock: g.lock.clone(),
                line: g.line,
            })
            .collect()
    }

    /// Walk a branch from the current state and come back to it, so that a
    /// `drop` on one path is not assumed on the others.
    fn branch(&mut self, f: impl FnOnce(&mut Self)) {
        let saved = self.held.clone();
        f(self);
        self.held = saved;
    }

    fn acquire(&mut self, name: String, reentrant: bool, span: Span) {
        let line = line_of(span);
        let held = self.held_now();
        self.infos[self.ctx].acquires.push(Acquire {
            lock: name.clone(),
            reentrant,
            line,
            held,
        });
        self.held.push(Guard {
            lock: name,
            line,
            key: key_of(span),
            frame: self.frames.len() - 1,
            binding: None,
        });
    }

    /// Move the guard produced by `init` from the current temporary frame to
    /// the enclosing block, under `binding`.
    fn bind_guard(&mut self, init: &Expr, binding: Option<String>, to_block: bool) {
        let Some(key) = guard_source(init) else {
            return;
        };
        let top = self.frames.len() - 1;
        for g in self
            .held
            .iter_mut()
            .filter(|g| g.key == key && g.frame == top)
        {
            if to_block {
                g.frame = top.saturating_sub(1);
            }
            g.binding.clone_from(&binding);
        }
    }

    fn release(&mut self, binding: &str) {
        self.held.retain(|g| g.binding.as_deref() != Some(binding));
    }

    fn call(&mut self, callee: Callee, line: usize) {
        let held = self.held_now();
        self.infos[self.ctx]
            .calls
            .push(CallSite { callee, line, held });
    }

    fn check_await(&mut self, line: usize) {
        let function = self.display();
        for g in &self.held {
            self.findings.push(Finding::AcrossAwait {
                at: Loc::new(self.file_display, line),
                function: function.clone(),
                lock: g.lock.clone(),
                taken_line: g.line,
            });
        }
    }

    /// Run `f` as a separate context (closure or async block): it starts with
    /// no guards held, since it may run anywhere.
    fn nested_context(&mut self, label: &str, line: usize, f: impl FnOnce(&mut Self)) {
        let idx = self.infos.len();
        let display = format!("{}::{{{label}@{line}}}", self.display());
        self.infos.push(FnInfo {
            def: None,
            display,
            file: self.file,
            line,
            acquires: Vec::new(),
            calls: Vec::new(),
        });
        let saved_held = std::mem::take(&mut self.held);
        let saved_ctx = std::mem::replace(&mut self.ctx, idx);
        let depth = self.frames.len();
        f(self);
        while self.frames.len() > depth {
            self.pop_frame();
        }
        self.held = saved_held;
        self.ctx = saved_ctx;
    }

    fn field_val(&self, base: &Expr, member: &syn::Member) -> Val {
        let field = match member {
            syn::Member::Named(id) => id.to_string(),
            syn::Member::Unnamed(i) => i.index.to_string(),
        };
        // Configured names win: they exist for lock types the audit cannot
        // recognise from the declaration.
        if self.cfg.extra_lock_names.contains(&field) {
            return Val::Lock {
                name: field,
                reentrant: false,
            };
        }
        if let Val::Named(t) = self.expr_val(base) {
            if let Some(fields) = self.prog.structs.get(&t) {
                return match fields.get(&field) {
                    Some(ty) => {
                        Val::from_shape(self.prog.shape(ty, Some(&t)), &format!("{t}.{field}"))
                    }
                    None => Val::Unknown,
                };
            }
        }
        // Receiver type unknown: if exactly one workspace struct has a lock
        // field of this name, assume it is that one.
        let owners = self.prog.structs_with_lock_field(&field);
        if let [only] = owners.as_slice() {
            let reentrant = self.prog.structs[only]
                .get(&field)
                .is_some_and(|ty| self.prog.shape(ty, None) == Shape::Lock { reentrant: true });
            return Val::Lock {
                name: format!("{only}.{field}"),
                reentrant,
            };
        }
        Val::Unknown
    }

    fn expr_val(&self, e: &Expr) -> Val {
        match e {
            Expr::Path(p) if p.qself.is_none() => {
                let segs = path_segments(&p.path);
                let last = segs.last().cloned().unwrap_or_default();
                if segs.len() == 1 && self.cfg.extra_lock_names.contains(&last) {
                    return Val::Lock {
                        name: last,
                        reentrant: false,
                    };
                }
                if segs.len() == 1 {
                    if last == "self" {
                        return self.self_ty.clone().map_or(Val::Unknown, Val::Named);
                    }
                    if let Some(v) = self.lookup_var(&last) {
                        return v.clone();
                    }
                }
                if let Some(ty) = self.prog.statics.get(&last) {
                    return Val::from_shape(self.prog.shape(ty, self.self_ty.as_deref()), &last);
                }
                Val::Unknown
            }
            Expr::Field(f) => self.field_val(&f.base, &f.member),
            Expr::Reference(r) => self.expr_val(&r.expr),
            Expr::Paren(p) => self.expr_val(&p.expr),
            Expr::Group(g) => self.expr_val(&g.expr),
            Expr::Try(t) => self.expr_val(&t.expr),
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => self.expr_val(&u.expr),
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                if LOCK_METHODS.contains(&name.as_str()) {
                    return Val::Unknown;
                }
                if matches!(
                    name.as_str(),
                    "clone" | "as_ref" | "borrow" | "deref" | "unwrap" | "expect"
                ) {
                    return self.expr_val(&m.receiver);
                }
                if let Val::Named(t) = self.expr_val(&m.receiver) {
                    return self.return_val(&t, &name);
                }
                Val::Unknown
            }
            Expr::Call(c) => self.call_val(c),
            Expr::Struct(s) => {
                let segs = path_segments(&s.path);
                match segs.last().map(String::as_str) {
                    Some("Self") => self.self_ty.clone().map_or(Val::Unknown, Val::Named),
                    Some(n) => Val::Named(n.to_string()),
                    None => Val::Unknown,
                }
            }
            _ => Val::Unknown,
        }
    }

    /// Value of `Type::function(..)` from its declared return type.
    fn return_val(&self, owner: &str, name: &str) -> Val {
        let Some(ids) = self
            .prog
            .by_key
            .get(&(Some(owner.to_string()), name.to_string()))
        else {
            return Val::Unknown;
        };
        let Some(&id) = ids.first() else {
            return Val::Unknown;
        };
        match &self.prog.fns[id].sig.output {
            syn::ReturnType::Type(_, ty) => Val::from_shape(
                self.prog.return_shape(ty, Some(owner)),
                &format!("{owner}::{name}()"),
            ),
            syn::ReturnType::Default => Val::Unknown,
        }
    }

    /// Value of `function(..)` for a workspace free function, from its
    /// declared return type (so `let out = collector();` returning
    /// `Arc<Mutex<_>>` is a lock, named `collector()`).
    fn free_fn_val(&self, name: &str) -> Val {
        let Some(ids) = self.prog.free_by_name.get(name) else {
            return Val::Unknown;
        };
        let Some(&id) = self.same_file_first(ids).first() else {
            return Val::Unknown;
        };
        match &self.prog.fns[id].sig.output {
            syn::ReturnType::Type(_, ty) => {
                Val::from_shape(self.prog.return_shape(ty, None), &format!("{name}()"))
            }
            syn::ReturnType::Default => Val::Unknown,
        }
    }

    fn call_val(&self, c: &syn::ExprCall) -> Val {
        let Expr::Path(p) = &*c.func else {
            return Val::Unknown;
        };
        let segs = path_segments(&p.path);
        if segs.len() < 2 {
            return self.free_fn_val(&segs[0]);
        }
        let last = segs[segs.len() - 1].as_str();
        let qual = segs[segs.len() - 2].as_str();
        if matches!(qual, "Arc" | "Rc" | "Box")
            && matches!(last, "new" | "clone" | "from")
            && c.args.len() == 1
        {
            return self.expr_val(&c.args[0]);
        }
        if self.prog.is_lock_type(qual) && matches!(last, "new" | "const_new" | "default") {
            return Val::Lock {
                name: String::new(),
                reentrant: qual == "ReentrantMutex",
            };
        }
        let owner = if qual == "Self" {
            match &self.self_ty {
                Some(s) => s.clone(),
                None => return Val::Unknown,
            }
        } else {
            qual.to_string()
        };
        self.return_val(&owner, last)
    }

    fn lock_call(&self, m: &syn::ExprMethodCall) -> Option<LockCall> {
        let name = m.method.to_string();
        if !m.args.is_empty() || !LOCK_METHODS.contains(&name.as_str()) {
            return None;
        }
        match self.expr_val(&m.receiver) {
            Val::Lock { name, reentrant } => Some(LockCall::Lock {
                name: if name.is_empty() {
                    "<temporary lock>".to_string()
                } else {
                    name
                },
                reentrant,
            }),
            Val::Unknown => Some(LockCall::UnknownReceiver),
            _ => None,
        }
    }

    /// Walk a lock call's receiver; returns the lock if it is one, after
    /// recording unresolved receivers as not seen.
    fn lock_prelude(&mut self, m: &syn::ExprMethodCall) -> Option<(String, bool)> {
        match self.lock_call(m) {
            Some(LockCall::Lock { name, reentrant }) => {
                self.visit_expr(&m.receiver);
                Some((name, reentrant))
            }
            Some(LockCall::UnknownReceiver) => {
                let line = line_of(m.method.span());
                self.unseen.push(Unseen {
                    kind: UnseenKind::UnresolvedLockReceiver,
                    at: self.loc(line),
                    detail: format!(
                        "`{}.{}()` in `{}`",
                        expr_text(&m.receiver),
                        m.method,
                        self.display()
                    ),
                });
                None
            }
            None => None,
        }
    }

    /// Candidates for an unqualified call: the same file's, else the same
    /// crate's, else every function of that name (resolution is by name).
    fn same_file_first(&self, ids: &[usize]) -> Vec<usize> {
        let file_of = |i: usize| self.prog.fns[i].file;
        let local: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&i| file_of(i) == self.file)
            .collect();
        if !local.is_empty() {
            return local;
        }
        let krate = &self.prog.crate_of[self.file];
        let same_crate: Vec<usize> = ids
            .iter()
            .copied()
            .filter(|&i| &self.prog.crate_of[file_of(i)] == krate)
            .collect();
        if same_crate.is_empty() {
            ids.to_vec()
        } else {
            same_crate
        }
    }

    fn methods_of(&self, owner: &str, name: &str) -> Vec<usize> {
        let mut out = Vec::new();
        if let Some(ids) = self
            .prog
            .by_key
            .get(&(Some(owner.to_string()), name.to_string()))
        {
            out.extend(ids);
        }
        if out.is_empty() {
            // Default bodies of traits the type implements.
            for tr in self.prog.trait_impls.get(owner).into_iter().flatten() {
                if let Some(ids) = self.prog.by_key.get(&(Some(tr.clone()), name.to_string())) {
                    out.extend(ids);
                }
            }
        }
        out
    }

    fn resolve_call(&self, func: &Expr) -> Option<Callee> {
        match func {
            Expr::Paren(p) => self.resolve_call(&p.expr),
            Expr::Path(p) => {
                let last = p.path.segments.last()?.ident.to_string();
                if let Some(q) = &p.qself {
                    let owner = type_name(&q.ty)?;
                    let ids = self.methods_of(&owner, &last);
                    return (!ids.is_empty()).then_some(Callee::Fns(ids));
                }
                let segs = path_segments(&p.path);
                if segs.len() == 1 {
                    if self.lookup_var(&last).is_some() {
                        return Some(Callee::Unresolved {
                            kind: UnseenKind::FnPointer,
                            what: format!("{last}(..)"),
                            method: None,
                        });
                    }
                    let ids = self.prog.free_by_name.get(&last)?;
                    return Some(Callee::Fns(self.same_file_first(ids)));
                }
                let qual = segs[segs.len() - 2].as_str();
                if qual == "Self" || starts_upper(qual) {
                    let owner = if qual == "Self" {
                        self.self_ty.clone()?
                    } else {
                        qual.to_string()
                    };
                    let ids = self.methods_of(&owner, &last);
                    if !ids.is_empty() {
                        return Some(Callee::Fns(ids));
                    }
                    if self.prog.traits.contains(&owner) {
                        return Some(Callee::Unresolved {
                            kind: UnseenKind::DynamicDispatch,
                            what: format!("{owner}::{last}(..)"),
                            method: Some(last),
                        });
                    }
                    return None;
                }
                let ids = self.prog.free_by_name.get(&last)?;
                Some(Callee::Fns(self.same_file_first(ids)))
            }
            other => Some(Callee::Unresolved {
                kind: UnseenKind::FnPointer,
                what: format!("({})(..)", expr_text(other)),
                method: None,
            }),
        }
    }

    fn resolve_method(&self, recv: &Expr, name: &str) -> Option<Callee> {
        let interesting = self.prog.method_names.contains(name);
        match self.expr_val(recv) {
            Val::Named(t) => {
                let ids = self.methods_of(&t, name);
                if !ids.is_empty() {
                    return Some(Callee::Fns(ids));
                }
                if !interesting {
                    return None;
                }
                let kind = if self.prog.traits.contains(&t) {
                    UnseenKind::DynamicDispatch
                } else if self.prog.structs.contains_key(&t) {
                    // A workspace type without such a method: the method is
                    // from a foreign trait or std; nothing to follow.
                    return None;
                } else {
                    UnseenKind::UnknownReceiver
                };
                Some(Callee::Unresolved {
                    kind,
                    what: format!("{}.{name}()", expr_text(recv)),
                    method: Some(name.to_string()),
                })
            }
            Val::Dyn(tr) if interesting => Some(Callee::Unresolved {
                kind: UnseenKind::DynamicDispatch,
                what: format!("(dyn {tr}).{name}()"),
                method: Some(name.to_string()),
            }),
            Val::Unknown if interesting => Some(Callee::Unresolved {
                kind: UnseenKind::UnknownReceiver,
                what: format!("{}.{name}()", expr_text(recv)),
                method: Some(name.to_string()),
            }),
            _ => None,
        }
    }

    fn visit_let_scrutinee(&mut self, pat: &Pat, expr: &Expr) {
        self.visit_expr(expr);
        self.bind_guard(expr, pat_ident(pat), false);
    }
}

impl<'ast> Visit<'ast> for Walker<'_> {
    fn visit_block(&mut self, b: &'ast syn::Block) {
        self.push_frame(false);
        for stmt in &b.stmts {
            self.visit_stmt(stmt);
        }
        self.pop_frame();
    }

    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        match s {
            syn::Stmt::Local(l) => self.visit_local(l),
            // Nested items are analysed as functions of their own.
            syn::Stmt::Item(_) => {}
            syn::Stmt::Expr(e, _) => {
                self.push_frame(true);
                self.visit_expr(e);
                self.pop_frame();
            }
            syn::Stmt::Macro(m) => {
                self.push_frame(true);
                self.visit_macro(&m.mac);
                self.pop_frame();
            }
        }
    }

    fn visit_local(&mut self, l: &'ast syn::Local) {
        self.push_frame(true);
        let name = pat_ident(&l.pat);
        let mut val = match &l.pat {
            Pat::Type(t) => Val::from_shape(
                self.prog.shape(&t.ty, self.self_ty.as_deref()),
                name.as_deref().unwrap_or("?"),
            ),
            _ => Val::Unknown,
        };
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if !matches!(l.pat, Pat::Wild(_)) {
                self.bind_guard(&init.expr, name.clone(), true);
            }
            match self.expr_val(&init.expr) {
                Val::Lock { name: n, reentrant } if n.is_empty() => {
                    val = Val::Lock {
                        name: name.clone().unwrap_or_else(|| "?".to_string()),
                        reentrant,
                    };
                }
                Val::Unknown => {}
                other => val = other,
            }
            if let Some((_, diverge)) = &init.diverge {
                let diverge: &Expr = diverge;
                // `let Ok(g) = m.try_lock() else {..}` runs the else block
                // when the lock was not taken.
                let failed_try = guard_source(&init.expr).filter(|_| is_try_acquire(&init.expr));
                self.branch(|w| {
                    if let Some(key) = failed_try {
                        w.held.retain(|g| g.key != key);
                    }
                    w.visit_expr(diverge);
                });
            }
        }
        if let Some(n) = &name {
            self.bind_var(n, val);
        }
        self.pop_frame();
    }

    fn visit_item(&mut self, _: &'ast syn::Item) {}

    fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
        if let Some((name, reentrant)) = self.lock_prelude(m) {
            self.acquire(name, reentrant, m.method.span());
            return;
        }
        self.visit_expr(&m.receiver);
        for a in &m.args {
            self.visit_expr(a);
        }
        if let Some(c) = self.resolve_method(&m.receiver, &m.method.to_string()) {
            self.call(c, line_of(m.method.span()));
        }
    }

    fn visit_expr_await(&mut self, a: &'ast syn::ExprAwait) {
        let line = line_of(a.await_token.span);
        if let Expr::MethodCall(m) = &*a.base {
            // `m.lock().await`: the guard exists only once the await
            // completes, so it is not "held across" its own await.
            if let Some((name, reentrant)) = self.lock_prelude(m) {
                self.check_await(line);
                self.acquire(name, reentrant, m.method.span());
                return;
            }
        }
        self.visit_expr(&a.base);
        self.check_await(line);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if !matches!(&*c.func, Expr::Path(_)) {
            self.visit_expr(&c.func);
        }
        for a in &c.args {
            self.visit_expr(a);
        }
        if let Expr::Path(p) = &*c.func {
            let segs = path_segments(&p.path);
            let is_drop = segs.last().is_some_and(|s| s == "drop")
                && (segs.len() == 1 || segs.iter().any(|s| s == "mem"));
            if is_drop {
                if let [Expr::Path(arg)] = c.args.iter().collect::<Vec<_>>().as_slice() {
                    if let Some(id) = arg.path.get_ident() {
                        self.release(&id.to_string());
                    }
                }
                return;
            }
        }
        if let Some(callee) = self.resolve_call(&c.func) {
            let line = match &*c.func {
                Expr::Path(p) => p
                    .path
                    .segments
                    .last()
                    .map_or(0, |s| line_of(s.ident.span())),
                _ => line_of(c.paren_token.span.open()),
            };
            self.call(callee, line);
        }
    }

    fn visit_expr_if(&mut self, i: &'ast syn::ExprIf) {
        if let Expr::Let(l) = &*i.cond {
            // `if let` scrutinee temporaries live through both branches
            // (edition 2021).
            self.push_frame(true);
            self.visit_let_scrutinee(&l.pat, &l.expr);
            self.branch(|w| w.visit_block(&i.then_branch));
            if let Some((_, e)) = &i.else_branch {
                // `if let Ok(g) = m.try_lock() {..} else {..}`: the else
                // branch runs when the lock was *not* taken.
                let failed_try = guard_source(&l.expr).filter(|_| is_try_acquire(&l.expr));
                self.branch(|w| {
                    if let Some(key) = failed_try {
                        w.held.retain(|g| g.key != key);
                    }
                    w.visit_expr(e);
                });
            }
            self.pop_frame();
        } else {
            self.push_frame(true);
            self.visit_expr(&i.cond);
            self.pop_frame();
            self.branch(|w| w.visit_block(&i.then_branch));
            if let Some((_, e)) = &i.else_branch {
                self.branch(|w| w.visit_expr(e));
            }
        }
    }

    fn visit_expr_while(&mut self, wl: &'ast syn::ExprWhile) {
        self.push_frame(true);
        if let Expr::Let(l) = &*wl.cond {
            self.visit_let_scrutinee(&l.pat, &l.expr);
            self.branch(|w| w.visit_block(&wl.body));
            self.pop_frame();
        } else {
            self.visit_expr(&wl.cond);
            self.pop_frame();
            self.branch(|w| w.visit_block(&wl.body));
        }
    }

    fn visit_expr_for_loop(&mut self, f: &'ast syn::ExprForLoop) {
        // The iterator expression's temporaries live for the whole loop.
        self.push_frame(true);
        self.visit_expr(&f.expr);
        self.branch(|w| w.visit_block(&f.body));
        self.pop_frame();
    }

    fn visit_expr_match(&mut self, m: &'ast syn::ExprMatch) {
        // Scrutinee temporaries live until the end of the match.
        self.push_frame(true);
        self.visit_expr(&m.expr);
        for arm in &m.arms {
            self.bind_guard(&m.expr, pat_ident(&arm.pat), false);
            self.branch(|w| {
                w.push_frame(false);
                if let Some((_, g)) = &arm.guard {
                    w.visit_expr(g);
                }
                w.push_frame(true);
                w.visit_expr(&arm.body);
                w.pop_frame();
                w.pop_frame();
            });
        }
        self.pop_frame();
    }

    fn visit_expr_closure(&mut self, c: &'ast syn::ExprClosure) {
        let line = line_of(c.or1_token.span);
        let label = if c.asyncness.is_some() {
            "async closure"
        } else {
            "closure"
        };
        self.nested_context(label, line, |w| {
            w.push_frame(false);
            for input in &c.inputs {
                if let Pat::Type(pt) = input {
                    if let Some(name) = pat_ident(&pt.pat) {
                        let shape = w.prog.shape(&pt.ty, w.self_ty.as_deref());
                        w.bind_var(&name, Val::from_shape(shape, &name));
                    }
                }
            }
            w.push_frame(true);
            w.visit_expr(&c.body);
        });
    }

    fn visit_expr_async(&mut self, a: &'ast syn::ExprAsync) {
        let line = line_of(a.async_token.span);
        self.nested_context("async block", line, |w| w.visit_block(&a.block));
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        let parser = Punctuated::<Expr, syn::Token![,]>::parse_terminated;
        match parser.parse2(mac.tokens.clone()) {
            Ok(exprs) => {
                for e in &exprs {
                    self.visit_expr(e);
                }
            }
            Err(_) => {
                let text = mac.tokens.to_string();
                if mentions_lock(&text) {
                    let name = mac
                        .path
                        .segments
                        .last()
                        .map(|s| s.ident.to_string())
                        .unwrap_or_default();
                    let line = mac
                        .path
                        .segments
                        .first()
                        .map_or(0, |s| line_of(s.ident.span()));
                    self.unseen.push(Unseen {
                        kind: UnseenKind::MacroBody,
                        at: self.loc(line),
                        detail: format!("`{name}!` in `{}`", self.display()),
                    });
                }
            }
        }
    }
}

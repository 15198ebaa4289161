//! First pass: collect the items the walker needs to resolve names.
//!
//! The audit has no type checker, so it builds a small symbol table from the
//! syntax alone: struct field types (to tell a `Mutex` field from a `File`
//! field), statics, and every function body keyed by `(owner, name)` where the
//! owner is the `impl` type or the trait that holds a default body.

use std::collections::{HashMap, HashSet};

use syn::visit::Visit;
use syn::{Type, TypeParamBound};

use super::{Config, Loc, SourceFile, Unseen, UnseenKind};

/// Wrapper types that are transparent for lock purposes: a method call or
/// field access on `Arc<Mutex<T>>` reaches the `Mutex` through auto-deref.
const TRANSPARENT: &[&str] = &[
    "Arc",
    "Rc",
    "Box",
    "LazyLock",
    "Lazy",
    "Pin",
    "CachePadded",
    "ManuallyDrop",
];

/// Lock types recognised without configuration (std, parking_lot, tokio and
/// async-lock all use these names). Matching is on the last path segment so
/// `std::sync::Mutex`, `parking_lot::Mutex` and `tokio::sync::Mutex` all match.
const LOCK_TYPES: &[&str] = &["Mutex", "RwLock", "FairMutex", "ReentrantMutex"];

/// Lock types whose owner may lock them again while holding them.
const REENTRANT_TYPES: &[&str] = &["ReentrantMutex"];

/// What the audit knows about the type of a field, variable or expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A lock; `reentrant` is true for `ReentrantMutex`.
    Lock {
        reentrant: bool,
    },
    /// A named, non-lock type (only useful when it is a workspace struct).
    Named(String),
    /// `dyn Trait` / `impl Trait`: calls on it dispatch to code not visible here.
    Dyn(String),
    Unknown,
}

/// One function (or method, or trait default method) with a body.
pub(crate) struct FnDef {
    pub file: usize,
    pub name: String,
    /// `impl` self type or trait name; `None` for free functions.
    pub owner: Option<String>,
    pub display: String,
    pub line: usize,
    pub sig: syn::Signature,
    pub body: syn::Block,
}

/// Symbol table for one analysis run.
#[derive(Default)]
pub(crate) struct Program {
    pub structs: HashMap<String, HashMap<String, Type>>,
    pub statics: HashMap<String, Type>,
    pub fns: Vec<FnDef>,
    pub by_key: HashMap<(Option<String>, String), Vec<usize>>,
    pub free_by_name: HashMap<String, Vec<usize>>,
    /// Method names defined anywhere in the workspace (with a `self` receiver
    /// or not): a call `x.name()` on an unknown receiver is only worth
    /// mentioning when `name` is one of these.
    pub method_names: HashSet<String>,
    /// type name -> traits it implements in this workspace.
    pub trait_impls: HashMap<String, Vec<String>>,
    pub traits: HashSet<String>,
    pub extra_lock_types: Vec<String>,
    pub unseen: Vec<Unseen>,
    /// Per file: the crate directory it belongs to (the path before its
    /// `src/`, `tests/`, `benches/` or `examples/` component), so that an
    /// unqualified call prefers a function from the same crate.
    pub crate_of: Vec<String>,
}

/// The crate directory part of a workspace-relative path.
fn crate_key(display: &str) -> String {
    let parts: Vec<&str> = display.split('/').collect();
    let end = parts
        .iter()
        .position(|p| matches!(*p, "src" | "tests" | "benches" | "examples"))
        .unwrap_or(parts.len().saturating_sub(1));
    parts[..end].join("/")
}

impl Program {
    pub fn build(files: &[SourceFile], parsed: &[Option<syn::File>], cfg: &Config) -> Self {
        let mut prog = Program {
            extra_lock_types: cfg.extra_lock_types.clone(),
            crate_of: files.iter().map(|f| crate_key(&f.display)).collect(),
            ..Program::default()
        };
        for (idx, file) in parsed.iter().enumerate() {
            let Some(file) = file else { continue };
            let mut c = Collector {
                prog: &mut prog,
                file: idx,
                display: &files[idx].display,
                owner: Vec::new(),
            };
            c.visit_file(file);
        }
        for (i, f) in prog.fns.iter().enumerate() {
            let key = (f.owner.clone(), f.name.clone());
            prog.by_key.entry(key).or_default().push(i);
            if f.owner.is_none() {
                prog.free_by_name.entry(f.name.clone()).or_default().push(i);
            } else if f.sig.receiver().is_some() {
                prog.method_names.insert(f.name.clone());
            }
        }
        prog
    }

    /// Classify a declared type, looking through `&`, `Arc`, `Box` and friends.
    pub fn shape(&self, ty: &Type, self_ty: Option<&str>) -> Shape {
        match ty {
            Type::Reference(r) => self.shape(&r.elem, self_ty),
            Type::Paren(p) => self.shape(&p.elem, self_ty),
            Type::Group(g) => self.shape(&g.elem, self_ty),
            Type::TraitObject(t) => Shape::Dyn(first_trait(&t.bounds)),
            Type::ImplTrait(t) => Shape::Dyn(first_trait(&t.bounds)),
            Type::Path(p) => {
                let Some(last) = p.path.segments.last() else {
                    return Shape::Unknown;
                };
                let name = last.ident.to_string();
                if TRANSPARENT.contains(&name.as_str()) {
                    if let Some(inner) = first_type_arg(&last.arguments) {
                        return self.shape(inner, self_ty);
                    }
                    return Shape::Unknown;
                }
                if self.is_lock_type(&name) {
                    return Shape::Lock {
                        reentrant: REENTRANT_TYPES.contains(&name.as_str()),
                    };
                }
                if name == "Self" {
                    return self_ty.map_or(Shape::Unknown, |s| Shape::Named(s.to_string()));
                }
                Shape::Named(name)
            }
            _ => Shape::Unknown,
        }
    }

    /// Like [`Program::shape`] but also looks through `Result`/`Option`, for
    /// return types of constructors used as `let x = T::new()?;`.
    pub fn return_shape(&self, ty: &Type, self_ty: Option<&str>) -> Shape {
        if let Type::Path(p) = ty {
            if let Some(last) = p.path.segments.last() {
                if matches!(last.ident.to_string().as_str(), "Result" | "Option") {
                    if let Some(inner) = first_type_arg(&last.arguments) {
                        return self.return_shape(inner, self_ty);
                    }
                }
            }
        }
        self.shape(ty, self_ty)
    }

    pub fn is_lock_type(&self, name: &str) -> bool {
        LOCK_TYPES.contains(&name) || self.extra_lock_types.iter().any(|t| t == name)
    }

    /// Structs that have a lock-typed field called `field`.
    pub fn structs_with_lock_field(&self, field: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .structs
            .iter()
            .filter(|(_, fields)| {
                fields
                    .get(field)
                    .is_some_and(|t| matches!(self.shape(t, None), Shape::Lock { .. }))
            })
            .map(|(name, _)| name.clone())
            .collect();
        out.sort();
        out
    }
}

fn first_trait(bounds: &syn::punctuated::Punctuated<TypeParamBound, syn::token::Plus>) -> String {
    bounds
        .iter()
        .find_map(|b| match b {
            TypeParamBound::Trait(t) => t.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "?".to_string())
}

pub(crate) fn first_type_arg(args: &syn::PathArguments) -> Option<&Type> {
    match args {
        syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

pub(crate) fn type_name(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        Type::Reference(r) => type_name(&r.elem),
        Type::Paren(p) => type_name(&p.elem),
        Type::Group(g) => type_name(&g.elem),
        _ => None,
    }
}

pub(crate) fn line_of(span: proc_macro2::Span) -> usize {
    span.start().line
}

struct Owner {
    name: String,
    /// Trait being implemented, or the trait itself for default methods.
    is_trait_def: bool,
}

struct Collector<'a> {
    prog: &'a mut Program,
    file: usize,
    display: &'a str,
    owner: Vec<Option<Owner>>,
}

impl Collector<'_> {
    fn push_fn(
        &mut self,
        name: String,
        owner: Option<String>,
        sig: &syn::Signature,
        body: &syn::Block,
    ) {
        let display = match &owner {
            Some(o) => format!("{o}::{name}"),
            None => name.clone(),
        };
        let line = line_of(sig.ident.span());
        if returns_guard(&sig.output) {
            self.prog.unseen.push(Unseen {
                kind: UnseenKind::GuardReturned,
                at: Loc::new(self.display, line),
                detail: format!(
                    "`{display}` returns a lock guard; its callers' hold is not tracked"
                ),
            });
        }
        self.prog.fns.push(FnDef {
            file: self.file,
            name,
            owner,
            display,
            line,
            sig: sig.clone(),
            body: body.clone(),
        });
    }

    fn current_owner(&self) -> Option<&Owner> {
        self.owner.last().and_then(|o| o.as_ref())
    }
}

fn returns_guard(out: &syn::ReturnType) -> bool {
    let syn::ReturnType::Type(_, ty) = out else {
        return false;
    };
    let text = quote_type(ty);
    text.contains("Guard")
}

fn quote_type(ty: &Type) -> String {
    quote::ToTokens::to_token_stream(ty).to_string()
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        let fields = self.prog.structs.entry(s.ident.to_string()).or_default();
        for (i, f) in s.fields.iter().enumerate() {
            let name = f
                .ident
                .as_ref()
                .map_or_else(|| i.to_string(), |id| id.to_string());
            fields.insert(name, f.ty.clone());
        }
        syn::visit::visit_item_struct(self, s);
    }

    fn visit_item_static(&mut self, s: &'ast syn::ItemStatic) {
        self.prog
            .statics
            .insert(s.ident.to_string(), (*s.ty).clone());
        syn::visit::visit_item_static(self, s);
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.push_fn(f.sig.ident.to_string(), None, &f.sig, &f.block);
        // Nested items inside a function body are free-standing.
        self.owner.push(None);
        syn::visit::visit_item_fn(self, f);
        self.owner.pop();
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let self_name = type_name(&i.self_ty).unwrap_or_else(|| "?".to_string());
        if let Some((_, path, _)) = &i.trait_ {
            if let Some(t) = path.segments.last() {
                self.prog
                    .trait_impls
                    .entry(self_name.clone())
                    .or_default()
                    .push(t.ident.to_string());
            }
        }
        self.owner.push(Some(Owner {
            name: self_name,
            is_trait_def: false,
        }));
        syn::visit::visit_item_impl(self, i);
        self.owner.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.prog.traits.insert(t.ident.to_string());
        self.owner.push(Some(Owner {
            name: t.ident.to_string(),
            is_trait_def: true,
        }));
        syn::visit::visit_item_trait(self, t);
        self.owner.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let owner = self.current_owner().map(|o| o.name.clone());
        self.push_fn(f.sig.ident.to_string(), owner, &f.sig, &f.block);
        self.owner.push(None);
        syn::visit::visit_impl_item_fn(self, f);
        self.owner.pop();
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        let owner = self
            .current_owner()
            .filter(|o| o.is_trait_def)
            .map(|o| o.name.clone());
        if let Some(body) = &f.default {
            self.push_fn(f.sig.ident.to_string(), owner, &f.sig, body);
        } else if owner.is_some() {
            // A required method: only reachable through dynamic dispatch or
            // generics, but its name still marks `x.name()` as interesting.
            self.prog.method_names.insert(f.sig.ident.to_string());
        }
        self.owner.push(None);
        syn::visit::visit_trait_item_fn(self, f);
        self.owner.pop();
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        let is_def = m.mac.path.is_ident("macro_rules");
        let text = m.mac.tokens.to_string();
        if is_def || mentions_lock(&text) {
            let what = if is_def {
                format!(
                    "macro_rules! {} body is not analysed",
                    m.ident.as_ref().map(|i| i.to_string()).unwrap_or_default()
                )
            } else {
                "item macro mentioning lock/read/write is not analysed".to_string()
            };
            self.prog.unseen.push(Unseen {
                kind: if is_def {
                    UnseenKind::MacroDefinition
                } else {
                    UnseenKind::MacroBody
                },
                at: Loc::new(self.display, line_of(m.mac.path.segments[0].ident.span())),
                detail: what,
            });
        }
        syn::visit::visit_item_macro(self, m);
    }
}

/// Whether unparsed macro tokens look like they could take a lock.
pub(crate) fn mentions_lock(tokens_text: &str) -> bool {
    [
        ". lock (",
        ". read (",
        ". write (",
        ". try_lock",
        ". try_read",
        ". try_write",
        ". blocking_lock",
    ]
    .iter()
    .any(|p| tokens_text.contains(p))
}

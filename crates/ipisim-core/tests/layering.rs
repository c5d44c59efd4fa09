//! The layers hold: no module imports a higher layer (`ipisim_core::LAYERS`, lowest first), and
//! no layer folders import each other in a circle. Imports are the `crate::` paths of each file's
//! code (comments left out), so `use` lines and inline paths both count. Where a lower layer
//! needs something above it, it declares a trait (its `Host`, or `Hooks`) and the root implements
//! it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ipisim_core::{LAYERS, ROOT};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its comments (line comments; the crate has no block comments) and
/// without its unit tests (a trailing `#[cfg(test)] mod tests`, which may use the root's builder).
fn code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b::c` path in `code`, as its segments; `use` groups `{a, b::c}` are expanded.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        expand(&code[i + "crate::".len()..], Vec::new(), &mut out);
    }
    out
}

/// The paths of `rest` (after a `::`), each prefixed by `prefix`.
fn expand(rest: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        // Split the group at its top-level commas.
        let (mut depth, mut start) = (0, 0);
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    expand(&group[start..j], prefix.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&group[start..j], prefix.clone(), out);
                    start = j + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let id: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let mut path = prefix;
    if id.is_empty() || id == "self" {
        if !path.is_empty() {
            out.push(path);
        }
        return;
    }
    path.push(id.clone());
    match rest[id.len()..].strip_prefix("::") {
        Some(more) => expand(more, path, out),
        None => out.push(path),
    }
}

struct Crate {
    /// Each file, relative to src ("mm/rmap.rs").
    files: Vec<String>,
    /// Module path ("mm/rmap") of each file, relative to src, without ".rs" or "/mod".
    modules: Vec<String>,
    /// Module paths each file imports (resolved to the deepest module that is a file).
    imports: Vec<BTreeSet<String>>,
}

fn module_of(rel: &Path) -> String {
    let s = rel.with_extension("").to_string_lossy().replace('\\', "/");
    s.strip_suffix("/mod").unwrap_or(&s).to_string()
}

fn load() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: Vec<String> = files
        .iter()
        .map(|f| module_of(f.strip_prefix(&src).unwrap()))
        .collect();
    let known: BTreeSet<&str> = modules.iter().map(|m| m.as_str()).collect();
    let rel: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    let imports = files
        .iter()
        .zip(&modules)
        .map(|(f, me)| {
            let text = code(&std::fs::read_to_string(f).unwrap());
            // `super::x` in module a/b is `crate::a::x`.
            let parent: Vec<String> = me.split('/').map(String::from).collect();
            let parent = parent[..parent.len() - 1].to_vec();
            let supers = text.match_indices("super::").filter_map(|(i, _)| {
                let mut v = Vec::new();
                expand(&text[i + "super::".len()..], parent.clone(), &mut v);
                v.into_iter().next()
            });
            crate_paths(&text)
                .into_iter()
                .chain(supers)
                .filter_map(|segs| {
                    // The deepest prefix of the path that is a module with a file of its own.
                    (1..=segs.len())
                        .rev()
                        .map(|n| segs[..n].join("/"))
                        .find(|m| known.contains(m.as_str()))
                })
                .filter(|m| m != me)
                .collect()
        })
        .collect();
    Crate {
        files: rel,
        modules,
        imports,
    }
}

fn layer(module: &str) -> &str {
    module.split('/').next().unwrap()
}

/// The rank of a layer or root module: LAYERS lowest first, ROOT above all of them.
fn rank(l: &str) -> Option<usize> {
    let pos = LAYERS.iter().position(|x| *x == l);
    pos.or_else(|| ROOT.contains(&l).then_some(LAYERS.len()))
}

/// (file, higher layer) for every import of a layer module from a higher layer or the root.
fn upward(c: &Crate) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for ((f, m), imps) in c.files.iter().zip(&c.modules).zip(&c.imports) {
        let (me, Some(r)) = (layer(m), rank(layer(m))) else {
            continue;
        };
        if ROOT.contains(&me) {
            continue;
        }
        for i in imps {
            let to = layer(i);
            if to != me && rank(to).is_some_and(|t| t > r) {
                out.insert((f.clone(), to.to_string()));
            }
        }
    }
    out
}

/// Strongly connected components with more than one member (Tarjan), over `edges`.
fn circles(nodes: &[String], edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        let i = t.index.len();
        t.index.insert(v.into(), i);
        t.low.insert(v.into(), i);
        t.stack.push(v.into());
        t.on.insert(v.into());
        for w in t.edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in nodes {
        if !t.index.contains_key(n) {
            visit(&mut t, n);
        }
    }
    t.out
}

/// The import graph between layer folders (root modules left out: they compose the layers).
fn layer_edges(c: &Crate) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, imps) in c.modules.iter().zip(&c.imports) {
        if !LAYERS.contains(&layer(m)) {
            continue;
        }
        for i in imps {
            if LAYERS.contains(&layer(i)) && layer(i) != layer(m) {
                edges
                    .entry(layer(m).into())
                    .or_default()
                    .insert(layer(i).into());
            }
        }
    }
    edges
}

#[test]
fn every_module_file_is_in_a_declared_layer_or_the_root() {
    let c = load();
    let stray: Vec<_> = c
        .modules
        .iter()
        .filter(|m| rank(layer(m)).is_none())
        .collect();
    assert!(
        stray.is_empty(),
        "not in LAYERS or ROOT (lib.rs): {stray:?}"
    );
}

#[test]
fn no_layer_imports_a_higher_one() {
    let c = load();
    let found = upward(&c);
    let by_layer = found
        .iter()
        .fold(BTreeMap::<&str, usize>::new(), |mut m, (_, l)| {
            *m.entry(l.as_str()).or_default() += 1;
            m
        });
    eprintln!(
        "upward imports (file -> higher layer): {} {by_layer:?}",
        found.len()
    );
    let listing: String = found
        .iter()
        .map(|(f, l)| format!("    (\"{f}\", \"{l}\"),\n"))
        .collect();
    assert!(
        found.is_empty(),
        "imports of a higher layer (declare a trait below and implement it at the root):\n{listing}"
    );
}

#[test]
fn layer_folders_import_each_other_in_no_circle() {
    let c = load();
    let edges = layer_edges(&c);
    let nodes: Vec<String> = LAYERS.iter().map(|l| l.to_string()).collect();
    let layer_circles = circles(&nodes, &edges);
    // Files in circles, for the record: the whole crate's file graph.
    let file_edges: BTreeMap<String, BTreeSet<String>> = c
        .modules
        .iter()
        .cloned()
        .zip(c.imports.iter().cloned())
        .collect();
    let file_circles = circles(&c.modules, &file_edges);
    let in_circles: usize = file_circles.iter().map(|c| c.len()).sum();
    eprintln!(
        "files in circles: {in_circles}; largest {:?}",
        file_circles.iter().map(|c| c.len()).max()
    );
    assert!(
        layer_circles.is_empty(),
        "layer folders in a circle: {layer_circles:?}"
    );
}

#[test]
fn the_parser_finds_use_lines_and_inline_paths() {
    let text = "use crate::mm::{self, rmap::{A, B}};\nlet x = crate::sched::charge(s); // crate::workload\n";
    let paths = crate_paths(&code(text));
    let want: Vec<Vec<String>> = [
        &["mm"][..],
        &["mm", "rmap", "A"],
        &["mm", "rmap", "B"],
        &["sched", "charge"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(paths, want);
}

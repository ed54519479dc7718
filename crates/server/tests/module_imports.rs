//! The server's modules import one another in one direction: the dispatcher
//! (`serve.rs`) imports the routes, the routes import the state modules and
//! `http.rs`, and nothing imports back up. This test reads the crate's sources
//! and fails on an import cycle among its modules, of any length. An import is
//! any `crate::NAME` or `super::NAME` path outside the `#[cfg(test)]` module,
//! doc comments included, `crate::{a, b}` read as both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of the crate (a file of `src/` but `lib.rs`) and the modules it
/// imports.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut texts = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("read the crate's src/") {
        let path = entry.expect("list the crate's src/").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if path.extension().is_some_and(|e| e == "rs") && stem != "lib" {
            let text = std::fs::read_to_string(&path).expect("read a module");
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
            texts.insert(stem.to_string(), code);
        }
    }
    let names: BTreeSet<String> = texts.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (name, code) in &texts {
        let used: BTreeSet<String> = paths(code)
            .into_iter()
            .filter(|m| names.contains(m) && m != name)
            .collect();
        graph.insert(name.clone(), used);
    }
    graph
}

/// The first word of every `crate::` and `super::` path in `code`, each word of
/// a brace list after one too.
fn paths(code: &str) -> Vec<String> {
    let word = |s: &str| -> String {
        (s.trim_start().chars())
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for prefix in ["crate::", "super::"] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            match rest.strip_prefix('{') {
                Some(list) => {
                    let list = list.split('}').next().unwrap_or("");
                    out.extend(list.split(',').map(word));
                }
                None => out.push(word(rest)),
            }
        }
    }
    out
}

/// A cycle of `graph`, as the modules along it, the first again at its end.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit<'a>(
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        m: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut c: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m);
        for next in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m);
        None
    }
    let mut done = BTreeSet::new();
    (graph.keys()).find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_server_modules_import_one_another_without_a_cycle() {
    let graph = imports();
    // The sources were read and their imports found.
    assert!(graph.len() >= 20, "{} modules", graph.len());
    assert!(graph["serve"].contains("backups") && graph["backups"].contains("work"));
    if let Some(c) = cycle(&graph) {
        panic!(
            "an import cycle among the server's modules: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut graph = BTreeMap::new();
    let edge = |to: &[&str]| to.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    graph.insert("api".to_string(), edge(&["http", "status"]));
    graph.insert("status".to_string(), edge(&["http"]));
    graph.insert("http".to_string(), edge(&[]));
    assert_eq!(cycle(&graph), None);
    graph.insert("http".to_string(), edge(&["api"]));
    let c = cycle(&graph).expect("the cycle api -> http -> api");
    assert_eq!(c.first(), c.last());
    assert!(c.contains(&"http".to_string()) && c.contains(&"api".to_string()));
    let found = paths("use crate::{http::Answer, work};\n/// [`super::site::Site`]");
    assert_eq!(found, ["http", "work", "site"]);
}

//! The documents name only what exists: every file or folder, crate and Rust item
//! that README.md, ARCHITECTURE.md and `docs/*.md` put in code spans is looked
//! for in the repository, so a rename that leaves a document behind fails here.
//!
//! A code span is taken as
//! - a path when it starts with a folder at the top of the repository
//!   (`crates/`, `docs/`, `bench/`, ...) or ends in `.rs`, `.md`, `.py` or `.sh`:
//!   some file or folder of the repository must end with it (`media/reader.rs`
//!   names `crates/engine/src/media/reader.rs`); a path with a placeholder in
//!   capitals (`HOME/stage`) names no one file and is not checked;
//! - a crate when it is `tapeloom-NAME`: a crate of that name must exist;
//! - a Rust item when it is a path of identifiers (`Home::open_to_read`,
//!   `backup::run`), one capitalised identifier (`KeySource`), or, in
//!   ARCHITECTURE.md only, one `snake_case` identifier (`copy_due`; elsewhere
//!   such a word is as often a configuration key or a JSON field): its last
//!   part must be declared in some crate's source (a `fn`, type, trait,
//!   constant, module, macro, enum variant or field).
//!
//! Spans with spaces, flags, shell words or other punctuation are commands and
//! values, and are not checked.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and folder of the repository (not `target/` nor hidden ones), as
/// paths relative to its root.
fn repo_paths(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || (rel.as_os_str().is_empty() && name == "target") {
                continue;
            }
            let p = rel.join(&name);
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(format!("{}/", p.display()));
                todo.push(p);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

/// The names declared in the crates' sources and tests.
fn declared(root: &Path, paths: &[String]) -> HashSet<String> {
    let decl = regex_lite_words();
    let mut names = HashSet::new();
    for p in paths.iter().filter(|p| p.ends_with(".rs")) {
        let Ok(text) = std::fs::read_to_string(root.join(p)) else {
            continue;
        };
        for line in text.lines() {
            let t = line.trim_start();
            for kw in &decl {
                if let Some(rest) = t.split_once(kw).map(|(_, r)| r) {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        names.insert(name);
                    }
                }
            }
            // An enum variant or a field: `Name,`, `Name {`, `Name(`, `name:`.
            let word: String = t
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after = t[word.len()..].trim_start();
            if !word.is_empty()
                && [",", "{", "(", ":", "="]
                    .iter()
                    .any(|s| after.starts_with(s))
            {
                names.insert(word);
            }
        }
    }
    names
}

/// The words that begin a declaration (a following name is declared).
fn regex_lite_words() -> Vec<&'static str> {
    vec![
        "fn ",
        "struct ",
        "enum ",
        "trait ",
        "type ",
        "const ",
        "static ",
        "mod ",
        "macro_rules! ",
        "union ",
    ]
}

/// The code spans of a Markdown text (outside fenced blocks).
fn code_spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            out.push(span.to_string());
        }
    }
    out
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_alphabetic() || f == '_')
        && c.all(|x| x.is_alphanumeric() || x == '_')
}

/// What a span names, if it names something this test checks.
enum Named {
    Path(String),
    Crate(String),
    Item(String),
}

/// The folders at the top of the repository a path in a document may start
/// with; other paths are of a home or a stage at run time.
const TOP: [&str; 7] = [
    "crates",
    "docs",
    "bench",
    "scripts",
    "fuzz",
    "packaging",
    ".ci",
];

fn classify(span: &str, code_map: bool) -> Option<Named> {
    let s = span.trim();
    if s.is_empty() || s.contains(char::is_whitespace) || s.starts_with('-') {
        return None;
    }
    let pathy = s.chars().all(|c| c.is_alphanumeric() || "/._-".contains(c));
    let ext = [".rs", ".md", ".py", ".sh"].iter().any(|e| s.ends_with(e));
    // A placeholder (`HOME/stage`, `fuzz/corpus/TARGET/`) names no one path.
    let placeholder = (s.split('/'))
        .any(|seg| seg.chars().any(char::is_alphabetic) && !seg.chars().any(char::is_lowercase));
    let top = s.split('/').next().is_some_and(|f| TOP.contains(&f));
    if pathy && !placeholder && ((s.contains('/') && top) || ext) {
        return Some(Named::Path(s.trim_end_matches('/').to_string()));
    }
    if pathy && s.contains('/') {
        return None;
    }
    // A package, `tapeloom-ops` (a metric is `tapeloom_jobs`).
    if let Some(rest) = s.strip_prefix("tapeloom-") {
        if is_ident(rest) && !rest.contains('_') {
            return Some(Named::Crate(rest.to_string()));
        }
    }
    let s = s.trim_end_matches("()").trim_end_matches('!');
    let parts: Vec<&str> = s.split("::").collect();
    if !parts.iter().all(|p| is_ident(p)) {
        return None;
    }
    let first = parts[0];
    let capital = first.chars().next().is_some_and(char::is_uppercase)
        && first.chars().any(char::is_lowercase);
    match (parts.len(), capital) {
        (1, true) => Some(Named::Item(first.to_string())),
        (n, _) if n > 1 => Some(Named::Item(parts[n - 1].to_string())),
        // A lone `snake_case` word: a function in the code map; elsewhere a
        // configuration key, a JSON field or a table as often.
        (1, false)
            if code_map && s.contains('_') && s.chars().all(|c| c.is_lowercase() || c == '_') =>
        {
            Some(Named::Item(s.to_string()))
        }
        _ => None,
    }
}

/// What the documents name that does not exist: (document, span, why).
fn missing(root: &Path) -> Vec<(String, String, &'static str)> {
    let paths = repo_paths(root);
    let names = declared(root, &paths);
    let crates: HashSet<String> = (paths.iter())
        .filter_map(|p| p.strip_prefix("crates/"))
        .filter_map(|p| p.strip_suffix('/'))
        .filter(|p| !p.contains('/'))
        .map(str::to_string)
        .collect();
    let mut docs = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    docs.extend(
        (paths.iter())
            .filter(|p| p.starts_with("docs/") && p.ends_with(".md"))
            .cloned(),
    );
    let mut out = Vec::new();
    for d in docs {
        let text = std::fs::read_to_string(root.join(&d)).unwrap();
        for span in code_spans(&text) {
            let found = match classify(&span, d == "ARCHITECTURE.md") {
                None => continue,
                Some(Named::Path(p)) => (paths.iter()).any(|r| {
                    let r = r.trim_end_matches('/');
                    r == p || r.ends_with(&format!("/{p}"))
                }),
                Some(Named::Crate(c)) => c == "cli" || crates.contains(&c),
                Some(Named::Item(i)) => names.contains(&i),
            };
            if !found {
                out.push((d.clone(), span, "names nothing that exists"));
            }
        }
    }
    out
}

#[test]
fn every_file_crate_and_item_the_documents_name_exists() {
    let gone = missing(&root());
    let lines: Vec<String> = (gone.iter())
        .map(|(doc, span, why)| format!("{doc}: `{span}` {why}"))
        .collect();
    assert!(gone.is_empty(), "\n{}", lines.join("\n"));
}

#[test]
fn a_renamed_file_is_found() {
    // A copy of the repository's documents beside a tree that lacks one file
    // they name: the check must name it.
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("docs")).unwrap();
    std::fs::create_dir_all(r.join("crates/x/src")).unwrap();
    std::fs::write(r.join("crates/x/src/lib.rs"), "pub fn kept() {}\n").unwrap();
    std::fs::write(r.join("README.md"), "").unwrap();
    std::fs::write(
        r.join("ARCHITECTURE.md"),
        "`crates/x/src/lib.rs` `kept_fn` `crates/x/src/gone.rs` `tapeloom-x` `tapeloom-y` `Kept` `x::kept` `HOME/gone`\n",
    )
    .unwrap();
    let gone: Vec<String> = missing(r).into_iter().map(|(_, s, _)| s).collect();
    assert_eq!(
        gone,
        ["kept_fn", "crates/x/src/gone.rs", "tapeloom-y", "Kept"],
        "{gone:?}"
    );
}

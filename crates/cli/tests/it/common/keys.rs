//! The key paths of each command's `--json`, recorded in `tests/json-keys/`:
//! keys may be added, never lost.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// The key paths of a JSON document: `a`, `a.b`, `a[].c`, ...
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                key_paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn keys_fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/json-keys")
        .join(format!("{name}.txt"))
}

/// Records (with TAPELOOM_RECORD_JSON_KEYS set) or checks the key paths of one
/// command's output; a recorded key that is missing now is added to `missing`.
pub fn check_keys(name: &str, v: &Value, missing: &mut Vec<String>) {
    let mut now = BTreeSet::new();
    key_paths(v, "", &mut now);
    assert!(!now.is_empty(), "{name}: no keys in {v}");
    let path = keys_fixture(name);
    if std::env::var_os("TAPELOOM_RECORD_JSON_KEYS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text: String = now.iter().map(|k| format!("{k}\n")).collect();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (record with TAPELOOM_RECORD_JSON_KEYS=1)",
            path.display()
        )
    });
    for k in recorded.lines().filter(|l| !l.is_empty()) {
        if !now.contains(k) {
            missing.push(format!("{name}: {k}"));
        }
    }
}

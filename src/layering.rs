//! The layers, checked on every test run. The headless commands and the command line live in
//! the binary crate, so the compiler already keeps the library from naming them; inside the
//! library this test keeps each layer from naming the ones above it:
//!
//! ```text
//! binary:  cli, commands                    (may use everything below)
//! library: tui                              front end: state, views, pollers
//!          ctx, config, render              the opened run, its settings, shared text output
//!          ops, worker, demo                use cases
//!          db, redis                        infrastructure (neither names the other)
//!          domain                           pure rules and types
//!          error, redact                    foundation
//! ```
//!
//! `config` sits above `db` and `redis` on purpose: those define the settings they need
//! (`RedisTarget`, `KeySpace`, a database URL) and `config` builds them from the file, the
//! environment and the flags; no lower layer knows a config file exists.

use std::path::{Path, PathBuf};

/// Each layer and the modules it must not name.
const FORBIDDEN: &[(&str, &[&str])] = &[
    (
        "error",
        &[
            "redact", "domain", "db", "redis", "ops", "worker", "demo", "config", "ctx", "render",
            "tui",
        ],
    ),
    (
        "redact",
        &[
            "error", "domain", "db", "redis", "ops", "worker", "demo", "config", "ctx", "render",
            "tui",
        ],
    ),
    (
        "domain",
        &[
            "db", "redis", "ops", "worker", "demo", "config", "ctx", "render", "tui",
        ],
    ),
    (
        "db",
        &[
            "redis", "ops", "worker", "demo", "config", "ctx", "render", "tui",
        ],
    ),
    (
        "redis",
        &[
            "db", "ops", "worker", "demo", "config", "ctx", "render", "tui",
        ],
    ),
    ("ops", &["worker", "demo", "config", "ctx", "render", "tui"]),
    ("worker", &["demo", "config", "ctx", "render", "tui"]),
    ("demo", &["ops", "worker", "config", "ctx", "render", "tui"]),
    (
        "render",
        &["db", "redis", "worker", "demo", "config", "ctx", "tui"],
    ),
    ("config", &["ops", "worker", "demo", "ctx", "render", "tui"]),
    ("ctx", &["ops", "worker", "demo", "render", "tui"]),
];

/// The `.rs` files of a top-level module: `src/<m>.rs` and everything under `src/<m>/`.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let single = src.join(format!("{module}.rs"));
    if single.is_file() {
        out.push(single);
    }
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// The top-level modules a source text names through `crate::`, including grouped imports
/// (`use crate::{db, redis::X}`).
fn named_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(inner.split(',').filter_map(|part| {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty()).then_some(name)
            }));
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

#[test]
fn no_layer_names_a_layer_above_it() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (layer, forbidden) in FORBIDDEN {
        let files = files_of(&src, layer);
        assert!(!files.is_empty(), "layer {layer} has no source files");
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read source");
            for name in named_modules(&text) {
                if forbidden.contains(&name.as_str()) {
                    violations.push(format!("{} names crate::{name}", file.display()));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layer violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scan_sees_plain_and_grouped_paths() {
    let names = named_modules("use crate::db::Db;\nuse crate::{redis::X, tui};\nx(crate::ops::f)");
    assert_eq!(names, ["db", "redis", "tui", "ops"]);
}

#[test]
fn the_library_does_not_hold_the_command_line() {
    // The binary owns them; were they declared in lib.rs, the library could name them again.
    let lib = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read lib.rs");
    assert!(
        !lib.contains("mod commands"),
        "commands belongs to the binary"
    );
    assert!(!lib.contains("mod cli"), "cli belongs to the binary");
}

//! The ```rust blocks of README.md and docs/*.md cannot drift from the API:
//! each must appear verbatim (modulo indentation) in an example under
//! rust/examples/, which `cargo test` builds, and every example is compiled
//! into this test as well and run against the test Redis.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use slidelimit::{blocking, Algorithm, Options, Policy};

// Each example as a module, so that its `main` can run here.
mod readme {
    include!("../examples/readme.rs");

    pub fn run() -> slidelimit::Result<()> {
        main()
    }
}

/// The examples run by a test of this file; an example missing here fails.
const RUN: &[&str] = &["readme"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// (doc, line of the fence, lines) of every ```rust block (any info string
/// starting with `rust`) in README.md and docs/*.md.
fn rust_blocks() -> Vec<(String, usize, Vec<String>)> {
    let mut docs = vec![root().join("README.md")];
    let mut guides: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guides.sort();
    docs.extend(guides);

    let mut blocks = Vec::new();
    for doc in docs {
        let text = fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
        let name = doc.strip_prefix(root()).unwrap().display().to_string();
        // Inside a fenced block: whether it is Rust, its fence's line, its lines.
        let mut open: Option<(bool, usize, Vec<String>)> = None;
        for (i, line) in text.lines().enumerate() {
            let fence = line.trim_start().strip_prefix("```");
            match (open.take(), fence) {
                (None, Some(info)) => open = Some((info.starts_with("rust"), i + 1, Vec::new())),
                (None, None) => {}
                (Some((true, at, body)), Some(_)) => blocks.push((name.clone(), at, body)),
                (Some((false, ..)), Some(_)) => {}
                (Some((rust, at, mut body)), None) => {
                    body.push(line.to_owned());
                    open = Some((rust, at, body));
                }
            }
        }
        assert!(open.is_none(), "{name}: a fenced block is never closed");
    }
    blocks
}

/// Whether `block` is a run of consecutive lines of `source`, each with the
/// same extra indentation (blank lines match blank lines).
fn contains_verbatim(source: &str, block: &[String]) -> bool {
    let lines: Vec<&str> = source.lines().collect();
    let Some(first) = block.iter().position(|l| !l.trim().is_empty()) else {
        return false;
    };
    (0..lines.len().saturating_sub(block.len() - 1)).any(|start| {
        let window = &lines[start..start + block.len()];
        let Some(indent) = window[first].strip_suffix(block[first].as_str()) else {
            return false;
        };
        indent.trim().is_empty()
            && window.iter().zip(block).all(|(have, want)| {
                if want.trim().is_empty() {
                    have.trim().is_empty()
                } else {
                    have.strip_prefix(indent) == Some(want.as_str())
                }
            })
    })
}

fn examples() -> Vec<(String, String)> {
    let dir = root().join("rust/examples");
    let mut found: Vec<(String, String)> = fs::read_dir(&dir)
        .expect("read rust/examples/")
        .map(|e| e.expect("rust/examples/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, fs::read_to_string(&p).expect("read an example"))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_rust_block_of_the_docs_is_in_an_example() {
    let blocks = rust_blocks();
    assert!(
        blocks.iter().any(|(doc, _, _)| doc == "README.md"),
        "README.md has a ```rust block"
    );
    let examples = examples();
    let mut drifted = Vec::new();
    for (doc, line, block) in &blocks {
        if !examples
            .iter()
            .any(|(_, source)| contains_verbatim(source, block))
        {
            drifted.push(format!("{doc}:{line}"));
        }
    }
    assert!(
        drifted.is_empty(),
        "these ```rust blocks are in no example under rust/examples/ (copy the block \
         into one, verbatim, so that it is compiled and run): {drifted:?}"
    );
}

#[test]
fn every_example_is_run() {
    let names: Vec<String> = examples().into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        names, RUN,
        "rust/examples/ and the examples that tests/docs.rs runs"
    );
}

#[test]
fn readme_acquires_on_the_redis_of_redis_url() {
    let url = common::redis_url();
    let policy = Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000).unwrap();
    let check = blocking::Limiter::connect(&url, policy, Options::default()).unwrap();
    check.reset("tenant-17").unwrap();
    // A peek answers as an acquire would, so it counts itself.
    let before = check.peek("tenant-17", 1).unwrap().remaining;
    assert_eq!(before, 599);

    // The snippet reads REDIS_URL; no other test of this binary reads the
    // environment.
    std::env::set_var("REDIS_URL", &url);
    readme::run().expect("the README's Rust snippet runs");

    // Its acquire took one permit of the README's policy on this server.
    assert_eq!(check.peek("tenant-17", 1).unwrap().remaining, before - 1);
    check.reset("tenant-17").unwrap();
}

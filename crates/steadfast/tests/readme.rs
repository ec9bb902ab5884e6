//! The READMEs a newcomer copies from stay true: the code they show is the
//! code the doctests compile (no hidden lines), the root README's examples
//! are the tour's (the crate README, which is the API docs' front page), both
//! state the same dependency lines, and every `cargo run --example` or
//! `cargo bench --bench` command in the READMEs, `BENCHMARKS.md` and
//! `ARCHITECTURE.md` names a target that exists.
//!
//! The doctests themselves (`cargo test -p steadfast --doc`) compile and run
//! every example of the tour through `src/lib.rs`'s front page; the root
//! README's are the tour's, block for block (info string included), so they
//! run there too. (The root README is not in the published package, so the
//! crate cannot include it; this file reads the workspace's documents, and is
//! left out of the package for that reason: see `exclude` in `Cargo.toml`.)

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    let path = workspace().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks of `markdown` whose info string starts with `lang`
/// (`rust`, `rust,no_run`, `toml`...), as (info string, body).
fn blocks<'a>(markdown: &'a str, lang: &str) -> Vec<(&'a str, String)> {
    let mut out = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        if info.split(',').next() == Some(lang) {
            out.push((info, body.join("\n")));
        }
    }
    out
}

const READMES: [&str; 2] = ["README.md", "crates/steadfast/README.md"];

#[test]
fn rust_examples_hide_no_lines() {
    for readme in READMES {
        let text = read(readme);
        let examples = blocks(&text, "rust");
        assert!(!examples.is_empty(), "{readme} shows no Rust example");
        for (info, body) in examples {
            assert!(
                !info.contains("ignore"),
                "{readme}: an example that is not compiled ({info})"
            );
            for line in body.lines() {
                let trimmed = line.trim_start();
                assert!(
                    !(trimmed == "#" || trimmed.starts_with("# ")),
                    "{readme}: a hidden line, so the code a reader copies is not the code \
                     that is tested: {line:?}"
                );
            }
            assert!(
                body.contains("fn main()"),
                "{readme}: an example that is not a whole program:\n{body}"
            );
        }
    }
}

#[test]
fn the_root_readme_shows_the_tours_examples_and_dependencies() {
    let (root, tour) = (read(READMES[0]), read(READMES[1]));
    // The root README's examples are tested as the tour's doctests: each is
    // one of the tour's, with the same info string, so it is run (or, if
    // `no_run`, only compiled) exactly as it would be as a doctest of its own.
    let tour_examples = blocks(&tour, "rust");
    for (info, example) in blocks(&root, "rust") {
        assert!(
            tour_examples.contains(&(info, example.clone())),
            "README.md has an example ({info}) the tour (crates/steadfast/README.md) does not \
             have, with that info string:\n{example}"
        );
    }
    let dependencies =
        |text: &str| -> Vec<String> { blocks(text, "toml").into_iter().map(|b| b.1).collect() };
    assert_eq!(dependencies(&root), dependencies(&tour));
    assert_eq!(dependencies(&tour).len(), 1, "one dependency block");
}

/// The documents that give `cargo run --example` and `cargo bench --bench`
/// commands.
fn documents_with_commands() -> Vec<String> {
    let mut docs = vec![
        "README.md".to_owned(),
        "BENCHMARKS.md".to_owned(),
        "ARCHITECTURE.md".to_owned(),
    ];
    let crates = std::fs::read_dir(workspace().join("crates")).expect("crates/");
    for entry in crates.flatten() {
        if entry.path().join("README.md").is_file() {
            let name = entry.file_name().to_string_lossy().into_owned();
            docs.push(format!("crates/{name}/README.md"));
        }
    }
    docs
}

#[test]
fn every_example_and_bench_command_names_a_target() {
    let mut checked = 0;
    for doc in documents_with_commands() {
        let text = read(&doc);
        for line in text.lines() {
            for (flag, dir) in [("--example ", "examples"), ("--bench ", "benches")] {
                let Some((before, after)) = line.split_once(flag) else {
                    continue;
                };
                let package = before
                    .split_once("-p ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .unwrap_or_else(|| panic!("{doc}: no `-p` in {line:?}"));
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let file = workspace().join(format!("crates/{package}/{dir}/{name}.rs"));
                assert!(file.is_file(), "{doc}: {line:?}: no {}", file.display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} commands found");
}

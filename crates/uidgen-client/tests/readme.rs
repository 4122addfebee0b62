//! The README's client example is `examples/async_ids.rs` between its `README start` and
//! `README end` markers, which `cargo test` builds: this keeps the README's copy equal to it.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

/// The lines between the markers, without their common indentation.
fn example_lines() -> Vec<String> {
    let source = include_str!("../examples/async_ids.rs");
    let start = source.find("// README start\n").unwrap() + "// README start\n".len();
    let end = source.find("    // README end").unwrap();
    source[start..end]
        .lines()
        .map(|line| line.strip_prefix("    ").unwrap_or(line).to_owned())
        .collect()
}

#[test]
fn readme_client_example_is_the_compiled_example() {
    let readme = include_str!("../../../README.md");
    let example = example_lines().join("\n");
    // `ignore` for the root crate's README doctests: this snippet is compiled as the example.
    let block = format!("```rust,ignore\n{example}\n```");
    assert!(
        readme.contains(&block),
        "README.md's client example differs from examples/async_ids.rs; copy this block into it:\n{block}"
    );
}

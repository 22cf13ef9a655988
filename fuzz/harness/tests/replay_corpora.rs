//! Replays every committed fuzz input on stable, with no fuzzer: each file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through its target's harness
//! function, so `cargo test --workspace` catches a regression of any bug the fuzzer once found.

use kig_fuzz_harness::{Target, TARGETS};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files of `dir`, sorted so failures name the same first input every run.
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target` on every input; returns the inputs it panicked on (their panics are printed).
fn replay(target: Target, files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .filter(|file| {
            let data = std::fs::read(file).expect("a readable input");
            std::panic::catch_unwind(|| target(&data)).is_err()
        })
        .map(|file| file.display().to_string())
        .collect()
}

#[test]
fn every_committed_corpus_input_replays() {
    let (mut counts, mut failed) = (Vec::new(), Vec::new());
    for (name, target) in TARGETS {
        let files = inputs(&fuzz_dir().join("corpus").join(name));
        // A missing or emptied corpus must not pass by replaying nothing.
        assert!(!files.is_empty(), "fuzz/corpus/{name} is missing or empty");
        failed.extend(replay(*target, &files));
        counts.push(format!("{name}: {}", files.len()));
    }
    println!("replayed corpus inputs: {}", counts.join(", "));
    assert!(failed.is_empty(), "panicked on:\n{}", failed.join("\n"));
}

#[test]
fn every_committed_regression_input_replays() {
    let (mut counts, mut failed) = (Vec::new(), Vec::new());
    for (name, target) in TARGETS {
        // Regressions exist only for targets that found a bug; the directory may be absent.
        let files = inputs(&fuzz_dir().join("regressions").join(name));
        failed.extend(replay(*target, &files));
        counts.push(format!("{name}: {}", files.len()));
    }
    println!("replayed regression inputs: {}", counts.join(", "));
    assert!(failed.is_empty(), "panicked on:\n{}", failed.join("\n"));
}

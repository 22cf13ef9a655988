//! Reads what the trace and the matrix work on from a checkout: the spec's markdown, every Rust
//! source file, and the committed result sets. The only part of `traceability` that touches the
//! file system.

use super::sources::SourceFile;
use super::spec::{Spec, SpecText};
use anyhow::Context as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The spec's directory, from the repository root.
pub const SPEC_DIR: &str = "docs/spec";

/// Directories never searched for sources: build output, version control, and the fuzz
/// corpus (inputs, not code).
const SKIPPED_DIRS: &[&str] = &["target", ".git", "corpus"];

/// The repository root: the workspace directory above this crate.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the conformance crate is inside the workspace")
        .to_path_buf()
}

/// Reads and parses every `docs/spec/*.md`.
pub fn load_spec(root: &Path) -> anyhow::Result<Spec> {
    let dir = root.join(SPEC_DIR);
    let mut files = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "md") {
            let name = path.file_name().expect("a file").to_string_lossy().into_owned();
            let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            files.push((format!("{SPEC_DIR}/{name}"), text));
        }
    }
    files.sort();
    let texts: Vec<SpecText<'_>> = files.iter().map(|(path, text)| SpecText { path, text }).collect();
    Ok(Spec::parse(&texts))
}

/// Reads every `.rs` file under `root`, in path order.
pub fn load_sources(root: &Path) -> anyhow::Result<Vec<SourceFile>> {
    let mut sources = Vec::new();
    collect_sources(root, root, &mut sources)?;
    sources.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(sources)
}

fn collect_sources(root: &Path, dir: &Path, sources: &mut Vec<SourceFile>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // `target` is a symlink to a shared build directory: never follow it, nor anything hidden.
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                collect_sources(root, &path, sources)?;
            }
        } else if kind.is_file() && name.ends_with(".rs") {
            let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let relative = path.strip_prefix(root).expect("under the root");
            let relative: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            sources.push(SourceFile::new(relative.join("/"), text));
        }
    }
    Ok(())
}

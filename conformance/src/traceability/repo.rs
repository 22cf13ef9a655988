//! Reads what the trace and the matrix work on from a checkout: the spec's markdown, every Rust
//! source file, and the committed result sets. The only part of `traceability` that touches the
//! file system.

use super::cases::{self, ListedCase};
use super::matrix::{self, ResultSet};
use super::sources::SourceFile;
use super::spec::{Spec, SpecText};
use crate::results::RunResults;
use anyhow::Context as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The spec's directory, from the repository root.
pub const SPEC_DIR: &str = "docs/spec";

/// The generated conformance matrix, from the repository root.
pub const MATRIX_PATH: &str = "docs/conformance.md";
/// The committed result set of the cases on an in-process gateway on the embedded model.
pub const EMBEDDED_RESULTS_PATH: &str = "docs/conformance/embedded.json";
/// The committed result set of the cases on a gateway in front of a real Iggy server.
pub const IGGY_RESULTS_PATH: &str = "docs/conformance/real-iggy.json";
/// The committed result set of the cluster tier (`make cluster-tier`): the cluster cases on three
/// real Iggy nodes, with the part of the suite it runs through the cluster.
pub const CLUSTER_RESULTS_PATH: &str = "docs/conformance/cluster.json";

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

/// Everything the matrix is rendered from.
pub struct MatrixInputs {
    pub spec: Spec,
    pub cases: Vec<ListedCase>,
    pub embedded: Option<RunResults>,
    pub iggy: Option<RunResults>,
    pub cluster: Option<RunResults>,
}

impl MatrixInputs {
    /// The matrix these inputs render.
    pub fn render(&self) -> String {
        matrix::render(
            &self.spec,
            &self.cases,
            &ResultSet {
                label: "embedded model",
                path: EMBEDDED_RESULTS_PATH,
                results: self.embedded.as_ref(),
            },
            &ResultSet {
                label: "real Iggy",
                path: IGGY_RESULTS_PATH,
                results: self.iggy.as_ref(),
            },
            &ResultSet {
                label: "real Iggy cluster",
                path: CLUSTER_RESULTS_PATH,
                results: self.cluster.as_ref(),
            },
        )
    }
}

/// Reads the spec, the suite's case list and the committed result sets (each `None` when its
/// file is absent).
pub fn load_matrix_inputs(root: &Path) -> anyhow::Result<MatrixInputs> {
    Ok(MatrixInputs {
        spec: load_spec(root)?,
        cases: cases::listed_cases(),
        embedded: load_results(&root.join(EMBEDDED_RESULTS_PATH))?,
        iggy: load_results(&root.join(IGGY_RESULTS_PATH))?,
        cluster: load_results(&root.join(CLUSTER_RESULTS_PATH))?,
    })
}

/// docs/conformance.md as the checkout at `root` renders it.
pub fn render_matrix(root: &Path) -> anyhow::Result<String> {
    Ok(load_matrix_inputs(root)?.render())
}

/// A result set, or `None` when its file does not exist.
pub fn load_results(path: &Path) -> anyhow::Result<Option<RunResults>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

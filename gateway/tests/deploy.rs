//! What can be checked of gateway/deploy/ without a Docker engine (docs/operating.md,
//! "Container"): the compose file runs the pinned Iggy image and passes the gateway only flags
//! it has; the Dockerfile builds what `make build` builds; the Grafana dashboard queries only
//! exported metrics; docs/operating.md names every exported metric.

use clap::{CommandFactory, Parser};
use kafka_iggy_gateway::config::Args;
use kafka_iggy_gateway::metrics::{metrics, RequestLabels};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// The Iggy server the gateway is tested against (conformance's real_iggy::DEFAULT_IMAGE).
const PINNED_IGGY_IMAGE: &str = "apache/iggy:0.9.0-edge.5";

fn repo_file(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The lines of one service of a compose file (services are indented by two spaces).
fn service_block<'a>(compose: &'a str, service: &str) -> Vec<&'a str> {
    let mut lines = compose.lines().skip_while(|l| l.trim_end() != format!("  {service}:"));
    assert!(lines.next().is_some(), "no service {service}");
    lines
        .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > 2)
        .collect()
}

/// The items of the YAML block list under `key:` in the `service:` block of a compose file.
fn compose_list(compose: &str, service: &str, key: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut in_list = false;
    for line in service_block(compose, service) {
        let indent = line.len() - line.trim_start().len();
        if line.trim_end() == format!("    {key}:") {
            in_list = true;
        } else if in_list {
            match line.trim_start().strip_prefix("- ") {
                Some(item) if indent >= 6 => items.push(item.trim().to_string()),
                _ => break,
            }
        }
    }
    items
}

#[test]
fn compose_runs_the_pinned_iggy_image_and_the_gateway_on_the_iggy_backend() {
    let compose = repo_file("gateway/deploy/compose.yaml");
    let images: Vec<&str> = compose
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .collect();
    assert!(images.contains(&PINNED_IGGY_IMAGE), "images: {images:?}");
    assert!(
        images
            .iter()
            .all(|i| !i.starts_with("apache/iggy") || *i == PINNED_IGGY_IMAGE),
        "another Iggy image: {images:?}"
    );
    let command = compose_list(&compose, "gateway", "command");
    let backend = command.iter().position(|a| a == "--backend").expect("--backend is set");
    assert_eq!(command[backend + 1], "iggy");
    let iggy_address = command
        .iter()
        .position(|a| a == "--iggy-address")
        .expect("--iggy-address");
    assert!(
        command[iggy_address + 1].starts_with("iggy:"),
        "the compose service name"
    );
    for service in ["iggy", "gateway"] {
        let block = service_block(&compose, service);
        assert!(
            block.iter().any(|l| l.trim_end() == "    healthcheck:"),
            "{service} has no health check"
        );
    }
    let depends = service_block(&compose, "gateway").join("\n");
    assert!(
        depends.contains("condition: service_healthy"),
        "the gateway waits for a healthy Iggy"
    );
}

#[test]
fn compose_passes_the_gateway_only_flags_its_command_line_documents() {
    let compose = repo_file("gateway/deploy/compose.yaml");
    let command = compose_list(&compose, "gateway", "command");
    let flags: Vec<&String> = command.iter().filter(|a| a.starts_with("--")).collect();
    assert!(flags.len() >= 5, "{command:?}");
    let cli = Args::command();
    let known: BTreeSet<String> = cli
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    for flag in flags {
        assert!(known.contains(flag), "{flag} is no flag of kafka-iggy-gateway --help");
    }
    // Every value parses as the gateway would parse it.
    let mut argv = vec!["kafka-iggy-gateway".to_string()];
    argv.extend(command);
    let args = Args::try_parse_from(&argv).unwrap_or_else(|e| panic!("the compose command does not parse: {e}"));
    assert_eq!(args.metrics_listen, Some("0.0.0.0:9100".parse().unwrap()));
}

#[test]
fn dockerfile_builds_the_release_binary_make_build_builds_and_runs_it_unprivileged() {
    let dockerfile = repo_file("gateway/deploy/Dockerfile");
    let makefile = repo_file("Makefile");
    let cargo_words = |line: &str| -> Vec<String> {
        let start = line.find("cargo build").expect("a cargo build");
        line[start..]
            .split_whitespace()
            .take_while(|w| *w != "&&" && *w != "\\")
            .map(str::to_string)
            .collect()
    };
    let make_build = makefile
        .lines()
        .skip_while(|l| !l.starts_with("build:"))
        .find(|l| l.contains("cargo build"))
        .map(cargo_words)
        .expect("make build runs cargo build");
    let docker_build = dockerfile
        .lines()
        .find(|l| l.starts_with("RUN cargo build"))
        .map(cargo_words)
        .expect("the Dockerfile runs cargo build");
    // The same profile: --release in both, and no other --profile.
    for words in [&make_build, &docker_build] {
        assert!(words.contains(&"--release".to_string()), "{words:?}");
        assert!(!words.iter().any(|w| w.starts_with("--profile")), "{words:?}");
    }
    // The gateway package, one of those make build builds.
    let packages = |words: &[String]| -> Vec<String> {
        words
            .windows(2)
            .filter(|w| w[0] == "-p")
            .map(|w| w[1].clone())
            .collect()
    };
    assert_eq!(packages(&docker_build), vec!["kafka-iggy-gateway".to_string()]);
    assert!(packages(&make_build).contains(&"kafka-iggy-gateway".to_string()));
    // What is copied out is that build's binary.
    assert!(dockerfile.contains("target/release/kafka-iggy-gateway"));
    // Two stages, and the last runs as a numbered, non-root user.
    assert_eq!(dockerfile.lines().filter(|l| l.starts_with("FROM ")).count(), 2);
    let user = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    let uid = user.split(':').next().unwrap();
    assert!(uid.parse::<u32>().is_ok_and(|u| u != 0), "USER {user}");
    // Its environment names variables the gateway reads.
    let cli = Args::command();
    let env_vars: BTreeSet<String> = cli
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .collect();
    for name in dockerfile
        .split_whitespace()
        .filter_map(|w| w.split_once('=').map(|(n, _)| n))
        .filter(|n| n.starts_with("IGGY_KAFKA_"))
    {
        assert!(env_vars.contains(name), "{name} is no variable the gateway reads");
    }
}

/// Every metric family's name and the sample names a scrape can hold for it, after recording
/// into each one once.
fn exported_names() -> (BTreeSet<String>, BTreeSet<String>) {
    let m = metrics();
    let produce = RequestLabels::peek(&[0, 0, 0, 9, 0, 0, 0, 1], false);
    m.record_request(&produce, 12, Duration::from_millis(1), true);
    m.add_sent_bytes(1);
    m.add_produced_records(1);
    m.add_fetched_records(1);
    m.record_error_code(3);
    m.record_decompression_refusal();
    m.record_backend_call("append", Duration::from_millis(1), true);
    m.limit_hit("LIMIT-CONNECTIONS-1");
    m.set_groups(1, 1);
    let _open = m.connection_opened();
    let scrape = m.encode();
    let mut families = BTreeSet::new();
    let mut samples = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut words = rest.split_whitespace();
            let (name, kind) = (words.next().unwrap(), words.next().unwrap());
            families.insert(name.to_string());
            match kind {
                "counter" => {
                    samples.insert(format!("{name}_total"));
                }
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        samples.insert(format!("{name}{suffix}"));
                    }
                }
                _ => {
                    samples.insert(name.to_string());
                }
            }
        }
    }
    (families, samples)
}

#[test]
fn the_dashboard_queries_only_exported_metrics() {
    let (_, samples) = exported_names();
    let dashboard: serde_json::Value =
        serde_json::from_str(&repo_file("gateway/deploy/grafana-dashboard.json")).expect("valid JSON");
    let mut queried = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("a PromQL expression");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("kafka_iggy_gateway_") {
                    queried.insert(word.to_string());
                }
            }
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    let unknown: Vec<_> = queried.difference(&samples).collect();
    assert!(
        unknown.is_empty(),
        "queried, not exported: {unknown:?}; exported: {samples:?}"
    );
}

#[test]
fn operating_md_documents_every_exported_metric() {
    let (families, samples) = exported_names();
    let doc = repo_file("docs/operating.md");
    for family in &families {
        let documented = doc.contains(&format!("`{family}`"))
            || samples
                .iter()
                .filter(|s| s.starts_with(family.as_str()))
                .any(|s| doc.contains(&format!("`{s}`")));
        assert!(documented, "docs/operating.md does not name {family}");
    }
}

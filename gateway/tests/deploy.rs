//! What can be checked of gateway/deploy/ without a Docker engine (docs/operating.md,
//! "Container" and "On an Iggy cluster"): the compose files run the pinned Iggy image and pass
//! the gateway only flags it has; the cluster compose file starts its three nodes one after
//! another from one roster, and its two gateways list every node and each other; the Dockerfile
//! builds what `make build` builds; the Grafana dashboard queries only exported metrics;
//! docs/operating.md names every exported metric.

use clap::{CommandFactory, Parser};
use kafka_iggy_gateway::config::{Args, BackendKind, Config, FileConfig};
use kafka_iggy_gateway::metrics::{metrics, RequestLabels};
use serde_json::Value;
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

/// Checks that `command` passes only flags of the gateway's command line, and parses it as the
/// gateway would.
fn parse_documented_flags(command: &[String]) -> Args {
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
    argv.extend(command.iter().cloned());
    Args::try_parse_from(&argv).unwrap_or_else(|e| panic!("the compose command does not parse: {e}"))
}

#[test]
fn compose_passes_the_gateway_only_flags_its_command_line_documents() {
    let compose = repo_file("gateway/deploy/compose.yaml");
    let command = compose_list(&compose, "gateway", "command");
    let args = parse_documented_flags(&command);
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

// ---- The cluster compose file (docs/operating.md, "On an Iggy cluster") ----

const CLUSTER_COMPOSE: &str = "gateway/deploy/compose-cluster.yaml";
const CLUSTER_CONFIG: &str = "gateway/deploy/iggy-cluster.toml";
/// The cluster config's path relative to the compose file, as its volumes name it.
const CLUSTER_CONFIG_MOUNTED: &str = "./iggy-cluster.toml";
const GATEWAYS: [&str; 2] = ["gateway-a", "gateway-b"];

/// Reads the YAML subset gateway/deploy/ is written in: block mappings and sequences (a
/// sequence item may open a mapping, `- key: value`), flow sequences of scalars, plain, single-
/// and double-quoted scalars (all read as strings; empty is null), and full-line comments.
/// Anything else (anchors, tags, block scalars, flow mappings, inline comments, tabs) panics, so
/// a file that leaves the subset fails here rather than being misread.
fn parse_yaml(text: &str) -> Value {
    let mut lines: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        assert!(!line.contains('\t'), "a tab in {line:?}");
        let content = line.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        // `- key: value` is a sequence item holding a mapping whose keys sit two columns in.
        match content.strip_prefix("- ") {
            Some(rest) if yaml_key(rest).is_some() => {
                lines.push((indent, "-".into()));
                lines.push((indent + 2, rest.into()));
            }
            _ => lines.push((indent, content.into())),
        }
    }
    let mut at = 0;
    let value = yaml_block(&lines, &mut at, 0);
    assert_eq!(at, lines.len(), "not read from {:?} on", lines.get(at));
    value
}

fn is_item(line: &str) -> bool {
    line == "-" || line.starts_with("- ")
}

/// `key: value` or `key:` (a mapping entry), else `None` (a scalar).
fn yaml_key(line: &str) -> Option<(&str, &str)> {
    if line.starts_with(['"', '\'', '[', '{']) {
        return None;
    }
    let (key, value) = match line.split_once(": ") {
        Some((key, value)) => (key, value.trim()),
        None => (line.strip_suffix(':')?, ""),
    };
    (!key.is_empty() && !key.contains(' ')).then_some((key, value))
}

fn yaml_block(lines: &[(usize, String)], at: &mut usize, indent: usize) -> Value {
    let items = is_item(&lines[*at].1);
    let mut map = serde_json::Map::new();
    let mut seq = Vec::new();
    while let Some((line_indent, line)) = lines.get(*at) {
        if *line_indent < indent {
            break;
        }
        assert_eq!(*line_indent, indent, "unexpected indentation at {line:?}");
        assert_eq!(is_item(line), items, "a mapping and a sequence mixed at {line:?}");
        *at += 1;
        let deeper = |at: &mut usize| match lines.get(*at) {
            Some((next, _)) if *next > indent => yaml_block(lines, at, *next),
            _ => Value::Null,
        };
        if items {
            seq.push(match line.strip_prefix("- ") {
                Some(scalar) => yaml_scalar(scalar),
                None => deeper(at),
            });
        } else {
            let (key, value) = yaml_key(line).unwrap_or_else(|| panic!("not `key: value`: {line:?}"));
            let value = if value.is_empty() {
                deeper(at)
            } else {
                yaml_scalar(value)
            };
            assert!(map.insert(key.to_string(), value).is_none(), "{key} twice");
        }
    }
    if items {
        Value::Array(seq)
    } else {
        Value::Object(map)
    }
}

fn yaml_scalar(text: &str) -> Value {
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or_else(|| panic!("unclosed {text:?}"));
        let mut items = Vec::new();
        let mut rest = inner.trim();
        while !rest.is_empty() {
            let (item, after) = yaml_flow_item(rest);
            items.push(Value::String(item));
            rest = after.trim_start();
            rest = match rest.strip_prefix(',') {
                Some(r) => r.trim_start(),
                None if rest.is_empty() => rest,
                None => panic!("expected a comma in {text:?} at {rest:?}"),
            };
        }
        return Value::Array(items);
    }
    if text.starts_with(['"', '\'']) {
        let (item, after) = yaml_flow_item(text);
        assert!(after.trim().is_empty(), "after a quoted scalar: {after:?}");
        return Value::String(item);
    }
    assert!(
        !text.starts_with(['{', '&', '*', '!', '|', '>']),
        "outside the subset: {text:?}"
    );
    assert!(!text.contains(" #"), "an inline comment: {text:?}");
    Value::String(text.to_string())
}

/// One scalar at the start of `text` (quoted, or plain up to a comma), and what follows it.
fn yaml_flow_item(text: &str) -> (String, &str) {
    let mut chars = text.char_indices();
    match chars.next() {
        Some((_, '"')) => {
            let mut out = String::new();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => return (out, &text[i + 1..]),
                    '\\' => match chars.next() {
                        Some((_, e @ ('\\' | '"'))) => out.push(e),
                        other => panic!("an escape outside the subset in {text:?}: {other:?}"),
                    },
                    c => out.push(c),
                }
            }
            panic!("unclosed string {text:?}")
        }
        Some((_, '\'')) => {
            let mut out = String::new();
            let body = &text[1..];
            let mut i = 0;
            while let Some(j) = body[i..].find('\'') {
                out.push_str(&body[i..i + j]);
                if body[i + j + 1..].starts_with('\'') {
                    out.push('\'');
                    i += j + 2;
                } else {
                    return (out, &body[i + j + 1..]);
                }
            }
            panic!("unclosed string {text:?}")
        }
        _ => {
            let end = text.find(',').unwrap_or(text.len());
            (text[..end].trim().to_string(), &text[end..])
        }
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).to_string())
        .collect()
}

/// The value after `flag` in `args`.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).map(|i| {
        args.get(i + 1)
            .unwrap_or_else(|| panic!("{flag} without a value"))
            .as_str()
    })
}

/// One `[[cluster.nodes]]` entry of the cluster config.
#[derive(Debug)]
struct IggyNode {
    name: String,
    ip: String,
    replica_id: i64,
    tcp: i64,
}

fn cluster_config() -> toml::Table {
    toml::from_str(&repo_file(CLUSTER_CONFIG)).expect("the cluster config is TOML")
}

fn cluster_nodes(config: &toml::Table) -> Vec<IggyNode> {
    let nodes = config["cluster"]["nodes"].as_array().expect("[[cluster.nodes]]");
    nodes
        .iter()
        .map(|n| {
            let ports = n["ports"].as_table().expect("ports");
            // The gateway speaks TCP; every other client transport is off, and in cluster mode
            // an enabled one would need a port here (docs/operating.md).
            let mut names: Vec<&str> = ports.keys().map(String::as_str).collect();
            names.sort();
            assert_eq!(names, ["tcp", "tcp_replica"], "{n}");
            IggyNode {
                name: n["name"].as_str().expect("name").to_string(),
                ip: n["ip"].as_str().expect("ip").to_string(),
                replica_id: n["replica_id"].as_integer().expect("replica_id"),
                tcp: ports["tcp"].as_integer().expect("tcp port"),
            }
        })
        .collect()
}

fn cluster_compose() -> Value {
    parse_yaml(&repo_file(CLUSTER_COMPOSE))
}

/// The services `depends_on` names, each with its condition.
fn depends_on(service: &Value) -> Vec<(String, String)> {
    match service.get("depends_on") {
        None => Vec::new(),
        Some(d) => d
            .as_object()
            .expect("depends_on as a mapping, with conditions")
            .iter()
            .map(|(name, how)| (name.clone(), how["condition"].as_str().unwrap_or("").to_string()))
            .collect(),
    }
}

/// A gateway service's command, checked against the gateway's flags and resolved as it would
/// start with it.
fn gateway_config(service: &Value) -> Config {
    let args = parse_documented_flags(&strings(&service["command"]));
    Config::resolve(args, FileConfig::default()).unwrap_or_else(|e| panic!("the gateway would not start: {e:#}"))
}

#[test]
fn the_yaml_reader_agrees_with_the_line_reader_on_compose_yaml() {
    let compose = repo_file("gateway/deploy/compose.yaml");
    let parsed = parse_yaml(&compose);
    assert_eq!(
        strings(&parsed["services"]["gateway"]["command"]),
        compose_list(&compose, "gateway", "command")
    );
    assert_eq!(parsed["services"]["iggy"]["image"], PINNED_IGGY_IMAGE);
    assert_eq!(parsed["services"]["iggy"]["healthcheck"]["test"][0], "CMD");
    let quoted = parse_yaml("a: [\"x \\\\r\\\"y\", 'it''s', plain]\nb:\n  - k: v\n    l: w\n  - x\nc:\n");
    assert_eq!(quoted["a"], serde_json::json!(["x \\r\"y", "it's", "plain"]));
    assert_eq!(quoted["b"], serde_json::json!([{"k": "v", "l": "w"}, "x"]));
    assert_eq!(quoted["c"], Value::Null);
}

#[test]
fn cluster_nodes_run_the_pinned_image_from_one_read_only_config_each_with_its_replica_id() {
    let config = cluster_config();
    assert_eq!(config["cluster"]["enabled"].as_bool(), Some(true));
    for transport in ["http", "quic", "websocket"] {
        assert_eq!(config[transport]["enabled"].as_bool(), Some(false), "{transport} is on");
    }
    let nodes = cluster_nodes(&config);
    let mut ids: Vec<i64> = nodes.iter().map(|n| n.replica_id).collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2], "three nodes, replica ids 0..3");
    let compose = cluster_compose();
    let services = compose["services"].as_object().expect("services");
    let iggy_services: Vec<&String> = services
        .iter()
        .filter(|(_, s)| s["image"].as_str().is_some_and(|i| i.starts_with("apache/iggy")))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        iggy_services.len(),
        nodes.len(),
        "one service per roster node: {iggy_services:?}"
    );
    let subnet = &compose["networks"]["iggy-cluster"]["ipam"]["config"][0];
    let prefix = subnet["subnet"]
        .as_str()
        .expect("a subnet")
        .strip_suffix(".0/24")
        .expect("a /24");
    let dynamic_from: u8 = subnet["ip_range"]
        .as_str()
        .and_then(|r| {
            r.strip_prefix(prefix)?
                .strip_prefix('.')?
                .strip_suffix("/25")?
                .parse()
                .ok()
        })
        .expect("an ip_range of the subnet's upper half");
    let mut data_volumes = BTreeSet::new();
    for node in &nodes {
        let service = &services
            .get(&node.name)
            .unwrap_or_else(|| panic!("no service named like node {}", node.name));
        assert_eq!(service["image"], PINNED_IGGY_IMAGE, "{}", node.name);
        assert_eq!(
            strings(&service["command"]),
            ["--replica-id".to_string(), node.replica_id.to_string()],
            "{} starts as its roster entry",
            node.name
        );
        let env = &service["environment"];
        let config_path = env["IGGY_CONFIG_PATH"].as_str().expect("IGGY_CONFIG_PATH");
        // Root credentials are required once the cluster is enabled.
        assert!(env["IGGY_ROOT_USERNAME"].is_string() && env["IGGY_ROOT_PASSWORD"].is_string());
        let volumes = strings(&service["volumes"]);
        assert!(
            volumes.contains(&format!("{CLUSTER_CONFIG_MOUNTED}:{config_path}:ro")),
            "{}: the shared config, read-only, where IGGY_CONFIG_PATH points: {volumes:?}",
            node.name
        );
        let data: Vec<&String> = volumes.iter().filter(|v| v.ends_with(":/app/local_data")).collect();
        assert_eq!(data.len(), 1, "{}: one data volume: {volumes:?}", node.name);
        let volume = data[0].split(':').next().unwrap().to_string();
        assert!(compose["volumes"].get(&volume).is_some(), "{volume} is not declared");
        assert!(
            data_volumes.insert(volume),
            "{}: a data volume of another node",
            node.name
        );
        // The roster's ip is the node's own fixed address, out of the dynamic range.
        assert_eq!(
            service["networks"]["iggy-cluster"]["ipv4_address"], node.ip,
            "{}: the address the roster names",
            node.name
        );
        let host: u8 = node
            .ip
            .strip_prefix(prefix)
            .and_then(|h| h.strip_prefix('.')?.parse().ok())
            .unwrap_or_else(|| panic!("{} is outside {prefix}.0/24", node.ip));
        assert!(
            (2..dynamic_from).contains(&host),
            "{} may be handed to another container",
            node.ip
        );
        let health = strings(&service["healthcheck"]["test"]);
        assert_eq!(
            flag_value(&health, "--tcp-server-address"),
            Some(format!("{}:{}", node.ip, node.tcp).as_str()),
            "{} checks its own roster address",
            node.name
        );
    }
}

#[test]
fn cluster_nodes_start_one_after_another() {
    let nodes = cluster_nodes(&cluster_config());
    let compose = cluster_compose();
    let mut by_id: Vec<&IggyNode> = nodes.iter().collect();
    by_id.sort_by_key(|n| n.replica_id);
    for (i, node) in by_id.iter().enumerate() {
        let service = &compose["services"][&node.name];
        let health = strings(&service["healthcheck"]["test"]);
        if i == 0 {
            // DIFF-14: started at once, the nodes can split; the first waits for nothing.
            assert!(depends_on(service).is_empty(), "{} waits for nothing", node.name);
            // A lone node takes no login, so the first node's check must not need one, or the
            // second never starts.
            assert!(
                !health.iter().any(|a| a == "--username"),
                "{} cannot log in alone: {health:?}",
                node.name
            );
        } else {
            assert_eq!(
                depends_on(service),
                [(by_id[i - 1].name.clone(), "service_healthy".to_string())],
                "{} waits for the node before it",
                node.name
            );
            // From the second node on, healthy means a login succeeds: a primary is elected.
            assert!(health.iter().any(|a| a == "--username"), "{}: {health:?}", node.name);
        }
    }
    for gateway in GATEWAYS {
        let mut waits = depends_on(&compose["services"][gateway]);
        waits.sort();
        let mut all: Vec<(String, String)> = nodes
            .iter()
            .map(|n| (n.name.clone(), "service_healthy".to_string()))
            .collect();
        all.sort();
        assert_eq!(waits, all, "{gateway} waits for every node");
    }
}

#[test]
fn cluster_gateways_list_every_node_and_each_other() {
    let config = cluster_config();
    let nodes = cluster_nodes(&config);
    let roster: Vec<String> = nodes.iter().map(|n| format!("{}:{}", n.ip, n.tcp)).collect();
    let heartbeat_s: u64 = config["cluster"]["heartbeat_timeout"]
        .as_str()
        .and_then(|t| t.strip_suffix('s')?.parse().ok())
        .expect("heartbeat_timeout in whole seconds");
    let compose = cluster_compose();
    let mut peer_lists = Vec::new();
    let mut host_ports = BTreeSet::new();
    for gateway in GATEWAYS {
        let service = &compose["services"][gateway];
        assert!(service.get("healthcheck").is_some(), "{gateway} has no health check");
        let c = gateway_config(service);
        assert_eq!(c.backend, BackendKind::Iggy, "{gateway}");
        // CLUSTER-ROSTER-1: every node, as the cluster's metadata names it, and nothing else.
        let members: Vec<&str> = c.iggy_address.split(',').map(str::trim).collect();
        assert_eq!(
            members, roster,
            "{gateway}'s --iggy-address is the roster's TCP endpoints"
        );
        // CLUSTER-FAILOVER-2: the bound outlasts an election.
        assert!(
            c.iggy_failover_timeout.as_secs() >= 2 * heartbeat_s,
            "{gateway}: failover timeout {:?} against a {heartbeat_s} s heartbeat timeout",
            c.iggy_failover_timeout
        );
        // What clients and the other gateway are told: this service's name, on the port it
        // listens on and publishes as it is.
        assert_eq!(c.advertised.host, gateway, "{gateway} advertises its service name");
        assert_eq!(c.advertised.port, i32::from(c.listen.port()), "{gateway}");
        let ports = strings(&service["ports"]);
        let kafka = format!("{0}:{0}", c.advertised.port);
        assert!(ports.contains(&kafka), "{gateway} publishes {kafka}: {ports:?}");
        let metrics = c.metrics_listen.expect("a metrics listener").port();
        let published_metrics = ports
            .iter()
            .find_map(|p| p.strip_suffix(&format!(":{metrics}")))
            .unwrap_or_else(|| panic!("{gateway} does not publish its metrics port: {ports:?}"));
        for host_port in [c.advertised.port.to_string(), published_metrics.to_string()] {
            assert!(
                host_ports.insert(host_port.clone()),
                "host port {host_port} published twice"
            );
        }
        // Its own entry in the peer list is what it advertises.
        let me = c
            .peers
            .iter()
            .find(|p| p.id == i32::from(c.instance_id))
            .expect("itself");
        assert_eq!(*me, c.advertised, "{gateway}: its peer entry");
        peer_lists.push(c.peers);
    }
    // One peer list for both (GROUP-COORDINATOR-1), naming both, each by what it advertises.
    assert_eq!(peer_lists[0], peer_lists[1], "the gateways' peer lists differ");
    assert_eq!(peer_lists[0].len(), GATEWAYS.len());
    let hosts: BTreeSet<&str> = peer_lists[0].iter().map(|p| p.host.as_str()).collect();
    assert_eq!(hosts, GATEWAYS.into_iter().collect());
}

#[test]
fn operating_md_says_how_to_run_the_cluster_compose_file() {
    let doc = repo_file("docs/operating.md");
    assert!(doc.contains(&format!("docker compose -f {CLUSTER_COMPOSE} up --build")));
    assert!(doc.contains(CLUSTER_CONFIG));
}

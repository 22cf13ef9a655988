//! Runs the conformance suite against `--bootstrap HOST:PORT`, or against an in-process gateway
//! on the embedded backend when none is given. Exits non-zero when a case fails. Against an outside
//! endpoint, `--max-frame-size` and `--instance-id` tell the suite what it may assume.

use kafka_iggy_conformance::endpoint::{Endpoint, LocalGateway};
use kafka_iggy_conformance::{cases, runner};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut bootstrap = None;
    let mut filter = None;
    let mut max_frame_size = None;
    let mut instance_id = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bootstrap" => bootstrap = args.next(),
            "--filter" => filter = args.next(),
            // What the suite may assume of an outside endpoint; cases needing it skip otherwise.
            "--max-frame-size" => max_frame_size = args.next().map(|v| v.parse()).transpose()?,
            "--instance-id" => instance_id = args.next().map(|v| v.parse()).transpose()?,
            other => anyhow::bail!(
                "unknown argument {other}; usage: conformance [--bootstrap HOST:PORT [--max-frame-size N] [--instance-id N]] [--filter TEXT]"
            ),
        }
    }
    let local;
    let endpoint = match bootstrap {
        Some(bootstrap) => Endpoint {
            max_frame_size,
            instance_id,
            ..Endpoint::at(bootstrap)
        },
        None => {
            local = LocalGateway::start().await?;
            println!(
                "conformance: started an embedded-backend gateway on {}",
                local.endpoint.bootstrap
            );
            local.endpoint.clone()
        }
    };
    println!("conformance: running against {}", endpoint.bootstrap);
    let report = runner::run(&endpoint, &cases::all(), filter.as_deref()).await;
    if !report.failed.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}

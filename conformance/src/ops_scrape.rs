//! Reading a gateway's operations listener (docs/operating.md) from outside: one HTTP GET, and
//! the sum of a metric's samples in a Prometheus text scrape. For the suite's metrics check and
//! the benches that report what the gateway counted.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `GET path` over one HTTP/1.1 connection; the status and the body.
pub async fn get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response.get(9..12).unwrap_or_default().parse()?;
    let (_, body) = response.split_once("\r\n\r\n").unwrap_or_default();
    Ok((status, body.to_string()))
}

/// The sum of the samples of `name` whose labels contain `label` (`""` for every sample).
///
/// ```
/// let scrape = "m_total{api=\"Produce\",version=\"9\"} 2\nm_total{api=\"Produce\",version=\"10\"} 3\nm_total{api=\"Fetch\",version=\"12\"} 7\nm_total_x 1\n";
/// assert_eq!(kafka_iggy_conformance::ops_scrape::sum(scrape, "m_total", "api=\"Produce\""), 5.0);
/// assert_eq!(kafka_iggy_conformance::ops_scrape::sum(scrape, "m_total", ""), 12.0);
/// ```
pub fn sum(scrape: &str, name: &str, label: &str) -> f64 {
    scrape
        .lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                && line.contains(label)
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

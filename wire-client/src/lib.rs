//! A raw Kafka wire client on kafka-protocol's client side, and the request helpers the
//! conformance cases and the simulations share.
//!
//! - [`WireClient`]: speaks any version it is told to, and can send frames no real client would
//!   (oversized, malformed, unknown keys), which is what the protocol cases need. Generic over the
//!   stream, so the simulations run it over turmoil's.
//! - [`offsets`]: raw OffsetCommit and OffsetFetch requests, the committed-offset traffic the
//!   group cases and the simulated committing consumer both send.
//!
//! It depends on kafka-protocol, tokio and bytes only, never on rdkafka: the simulations link it
//! without building librdkafka.

pub mod offsets;

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest response frame the client accepts.
pub const MAX_RESPONSE_FRAME: usize = 256 * 1024 * 1024;

pub struct WireClient<S> {
    stream: S,
    next_correlation_id: i32,
}

impl WireClient<tokio::net::TcpStream> {
    pub async fn connect(addr: &str) -> anyhow::Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Self::new(stream))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> WireClient<S> {
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Writes `frame` behind its size prefix.
    pub async fn send_frame(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(&(frame.len() as i32).to_be_bytes()).await?;
        self.stream.write_all(frame).await?;
        self.stream.flush().await
    }

    /// Writes raw bytes with no framing (to send a size prefix alone, say).
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Reads one response frame; `None` when the server closed the connection.
    pub async fn recv_frame(&mut self) -> anyhow::Result<Option<Bytes>> {
        let mut size = [0u8; 4];
        match self.stream.read_exact(&mut size).await {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        }
        let size = i32::from_be_bytes(size);
        if size < 0 || size as usize > MAX_RESPONSE_FRAME {
            bail!("response frame size {size} out of range");
        }
        let mut body = BytesMut::zeroed(size as usize);
        self.stream.read_exact(&mut body).await?;
        Ok(Some(body.freeze()))
    }

    /// Encodes a request frame for `key` at `version`, returning it and its correlation id.
    pub fn encode_request<Req: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<(i32, Bytes)> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut buf = encode_request_header(key, version, correlation_id)?;
        request.encode(&mut buf, version)?;
        Ok((correlation_id, buf.freeze()))
    }

    /// Decodes a response frame for `key` at `version`, checking its correlation id.
    pub fn decode_response<Resp: Decodable>(
        key: ApiKey,
        version: i16,
        correlation_id: i32,
        mut frame: Bytes,
    ) -> anyhow::Result<Resp> {
        let header_version = if key == ApiKey::ApiVersions {
            0
        } else {
            key.response_header_version(version)
        };
        let header = ResponseHeader::decode(&mut frame, header_version)?;
        if header.correlation_id != correlation_id {
            bail!(
                "response correlation id {} for request {correlation_id}",
                header.correlation_id
            );
        }
        let response = Resp::decode(&mut frame, version)?;
        if !frame.is_empty() {
            bail!(
                "{} bytes left after decoding the {key:?} v{version} response",
                frame.len()
            );
        }
        Ok(response)
    }

    /// Sends a request and waits for its response.
    pub async fn request<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> anyhow::Result<Resp> {
        let (correlation_id, frame) = self.encode_request(key, version, request)?;
        self.send_frame(&frame).await?;
        let response = self
            .recv_frame()
            .await?
            .with_context(|| format!("connection closed instead of answering {key:?} v{version}"))?;
        Self::decode_response(key, version, correlation_id, response)
    }

    /// Sends a request that gets no response (Produce with acks=0).
    pub async fn send_only<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> anyhow::Result<()> {
        let (_, frame) = self.encode_request(key, version, request)?;
        self.send_frame(&frame).await?;
        Ok(())
    }

    /// A SASL PLAIN login, SaslHandshake v1 then SaslAuthenticate v2: SaslAuthenticate's answer,
    /// whatever its error code; a refused mechanism is an error.
    pub async fn sasl_plain(
        &mut self,
        user: &str,
        password: &str,
    ) -> anyhow::Result<kafka_protocol::messages::SaslAuthenticateResponse> {
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest, SaslHandshakeResponse};
        let handshake: SaslHandshakeResponse = self
            .request(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
            )
            .await?;
        anyhow::ensure!(
            handshake.error_code == 0,
            "SaslHandshake answered {}",
            handshake.error_code
        );
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(format!("\0{user}\0{password}")));
        self.request(ApiKey::SaslAuthenticate, 2, &request).await
    }

    /// Whether the server has closed the connection: reads until end of stream.
    pub async fn closed_by_server(&mut self) -> anyhow::Result<bool> {
        Ok(self.recv_frame().await?.is_none())
    }
}

/// The request header this client writes for `key` at `version`, in the header version the key
/// and version call for; a request body follows it.
pub fn encode_request_header(key: ApiKey, version: i16, correlation_id: i32) -> anyhow::Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("kig-wire")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version))?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};

    /// Reads one size-prefixed request from `server` and returns its header and body.
    async fn read_request(server: &mut tokio::io::DuplexStream) -> (RequestHeader, Bytes) {
        let mut size = [0u8; 4];
        server.read_exact(&mut size).await.unwrap();
        let mut frame = BytesMut::zeroed(i32::from_be_bytes(size) as usize);
        server.read_exact(&mut frame).await.unwrap();
        let mut frame = frame.freeze();
        let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let header = RequestHeader::decode(&mut frame, key.request_header_version(version)).unwrap();
        (header, frame)
    }

    /// Writes an ApiVersions v0 answer carrying `correlation_id` to `server`.
    async fn answer_api_versions(server: &mut tokio::io::DuplexStream, correlation_id: i32) {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut body, 0)
            .unwrap();
        ApiVersionsResponse::default().encode(&mut body, 0).unwrap();
        server.write_all(&(body.len() as i32).to_be_bytes()).await.unwrap();
        server.write_all(&body).await.unwrap();
    }

    #[tokio::test]
    async fn a_request_is_framed_and_its_answer_matched_by_correlation_id() {
        let (client_end, mut server) = tokio::io::duplex(4096);
        let mut client = WireClient::new(client_end);
        let serve = tokio::spawn(async move {
            let (header, body) = read_request(&mut server).await;
            assert_eq!(header.request_api_key, ApiKey::ApiVersions as i16);
            assert_eq!(header.request_api_version, 0);
            assert_eq!(header.correlation_id, 1);
            assert_eq!(header.client_id.as_deref(), Some("kig-wire"));
            assert!(body.is_empty(), "ApiVersions v0 has an empty body");
            answer_api_versions(&mut server, header.correlation_id).await;
            server
        });
        let response: ApiVersionsResponse = client
            .request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
            .await
            .unwrap();
        assert_eq!(response.error_code, 0);
        drop(serve.await.unwrap());
        assert!(client.closed_by_server().await.unwrap(), "the server side was dropped");
    }

    #[tokio::test]
    async fn an_answer_to_another_correlation_id_is_an_error() {
        let (client_end, mut server) = tokio::io::duplex(4096);
        let mut client = WireClient::new(client_end);
        let serve = tokio::spawn(async move {
            let (header, _) = read_request(&mut server).await;
            answer_api_versions(&mut server, header.correlation_id + 7).await;
            server
        });
        let answer = client
            .request::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
            .await;
        assert!(answer
            .unwrap_err()
            .to_string()
            .contains("correlation id 8 for request 1"));
        drop(serve.await.unwrap());
    }

    #[tokio::test]
    async fn a_frame_size_beyond_the_limit_is_refused_before_reading_it() {
        let (client_end, mut server) = tokio::io::duplex(64);
        let mut client = WireClient::new(client_end);
        server
            .write_all(&((MAX_RESPONSE_FRAME + 1) as i32).to_be_bytes())
            .await
            .unwrap();
        let refused = client.recv_frame().await.unwrap_err();
        assert!(refused.to_string().contains("out of range"), "{refused}");
        // Correlation ids count up per request encoded.
        let (first, _) = client
            .encode_request(ApiKey::Metadata, 12, &MetadataRequest::default())
            .unwrap();
        let (second, _) = client
            .encode_request(ApiKey::Metadata, 12, &MetadataRequest::default())
            .unwrap();
        assert_eq!((first, second), (1, 2));
    }
}

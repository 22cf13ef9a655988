//! A handle on the backend behind a gateway, to act on it as a native Iggy client does: write
//! messages that never passed through the gateway (the staged-migration case of
//! MAP-READ-NATIVE-1) and read back what the gateway stored (ENV-MARK-1). The suite holds one only
//! when it runs the gateway itself: on the embedded model, or on a real server reached with the
//! Iggy SDK; against an outside endpoint the cases that need it skip.

use anyhow::Context;
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, Consumer, Credentials, Identifier, IggyClient, IggyMessage, MessageClient,
    Partitioning, PollingStrategy, TcpClient, TcpClientConfig,
};
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, ReadLimits};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Why a case that needs a [`NativeHandle`] skips without one.
pub const NEEDS_NATIVE: &str = "needs a backend handle: run the suite in process or with --iggy";

pub type NativeFuture<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + Send + 'a>>;

/// An Iggy client beside the gateway, on the gateway's own Iggy (or model).
pub trait NativeBackend: Send + Sync {
    /// "embedded" or "iggy", for messages.
    fn kind(&self) -> &'static str;

    /// Appends `messages` to one partition of an Iggy topic in one send, as an Iggy producer does.
    fn send<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> NativeFuture<'a, ()>;

    /// Up to `count` stored messages of one partition from `offset` on, as an Iggy consumer reads them.
    fn read<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        offset: u64,
        count: u32,
    ) -> NativeFuture<'a, Vec<IggyMessage>>;
}

/// A [`NativeBackend`] and the Iggy stream that the gateway maps unlisted Kafka topics to
/// (TOPIC-MAPPING-1), so that cases name topics by their Kafka names.
#[derive(Clone)]
pub struct NativeHandle {
    stream: String,
    backend: Arc<dyn NativeBackend>,
}

impl fmt::Debug for NativeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeHandle")
            .field("stream", &self.stream)
            .field("backend", &self.backend.kind())
            .finish()
    }
}

impl NativeHandle {
    pub fn new(stream: impl Into<String>, backend: Arc<dyn NativeBackend>) -> Self {
        Self {
            stream: stream.into(),
            backend,
        }
    }

    pub fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// One send of `messages` to `partition` of the Iggy topic behind Kafka topic `topic`.
    pub async fn send(&self, topic: &str, partition: u32, messages: Vec<IggyMessage>) -> anyhow::Result<()> {
        self.backend
            .send(&self.stream, topic, partition, messages)
            .await
            .with_context(|| format!("native send to {}/{topic}/{partition} on {}", self.stream, self.kind()))
    }

    /// The stored messages of `partition` of Kafka topic `topic` from `offset` on, at most `count`.
    pub async fn read(&self, topic: &str, partition: u32, offset: u64, count: u32) -> anyhow::Result<Vec<IggyMessage>> {
        self.backend
            .read(&self.stream, topic, partition, offset, count)
            .await
            .with_context(|| format!("native read of {}/{topic}/{partition} on {}", self.stream, self.kind()))
    }
}

/// The model's root view is what an Iggy client logged in as root sees.
impl NativeBackend for EmbeddedBackend {
    fn kind(&self) -> &'static str {
        "embedded"
    }

    fn send<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        messages: Vec<IggyMessage>,
    ) -> NativeFuture<'a, ()> {
        Box::pin(async move {
            Backend::append(self, stream, topic, partition, messages).await?;
            Ok(())
        })
    }

    fn read<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        offset: u64,
        count: u32,
    ) -> NativeFuture<'a, Vec<IggyMessage>> {
        Box::pin(async move {
            let limits = ReadLimits {
                max_messages: count,
                max_bytes: u64::MAX,
            };
            Ok(Backend::read(self, stream, topic, partition, offset, limits).await?)
        })
    }
}

/// The consumer name the native reader polls under; it stores no offset (auto-commit off).
const NATIVE_READER: &str = "kig-conformance-native-reader";

/// An Iggy SDK client of its own on a real server, logged in as the given user.
pub struct IggySdkNative {
    client: IggyClient,
    reader: Consumer,
}

impl IggySdkNative {
    pub async fn connect(address: &str, username: &str, password: &str) -> anyhow::Result<Self> {
        let config = TcpClientConfig {
            server_address: address.to_string(),
            auto_login: AutoLogin::Enabled(Credentials::UsernamePassword(
                username.to_string(),
                password.to_string().into(),
            )),
            ..TcpClientConfig::default()
        };
        let client = IggyClient::create(ClientWrapper::Tcp(TcpClient::create(Arc::new(config))?), None, None);
        client
            .connect()
            .await
            .with_context(|| format!("connecting to Iggy at {address}"))?;
        Ok(Self {
            client,
            reader: Consumer::new(Identifier::named(NATIVE_READER)?),
        })
    }
}

impl NativeBackend for IggySdkNative {
    fn kind(&self) -> &'static str {
        "iggy"
    }

    fn send<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        mut messages: Vec<IggyMessage>,
    ) -> NativeFuture<'a, ()> {
        Box::pin(async move {
            let (s, t) = (Identifier::named(stream)?, Identifier::named(topic)?);
            self.client
                .send_messages(&s, &t, &Partitioning::partition_id(partition), &mut messages)
                .await?;
            Ok(())
        })
    }

    fn read<'a>(
        &'a self,
        stream: &'a str,
        topic: &'a str,
        partition: u32,
        offset: u64,
        count: u32,
    ) -> NativeFuture<'a, Vec<IggyMessage>> {
        Box::pin(async move {
            let (s, t) = (Identifier::named(stream)?, Identifier::named(topic)?);
            let polled = self
                .client
                .poll_messages(
                    &s,
                    &t,
                    Some(partition),
                    &self.reader,
                    &PollingStrategy::offset(offset),
                    count,
                    false,
                )
                .await?;
            Ok(polled.messages)
        })
    }
}

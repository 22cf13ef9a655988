//! Users, permissions and personal access tokens set up for the authorization cases, on the
//! embedded model (as its root user) or on a real Iggy server (through the SDK, as root). The
//! cases never reach either except through a Kafka client; this is their fixture.

use anyhow::Context;
use iggy::prelude::{
    AutoLogin, Client, ClientWrapper, Credentials, Identifier, IggyClient, IggyExpiry, Permissions,
    PersonalAccessTokenClient, StreamClient, TcpClient, TcpClientConfig, TopicClient, TopicCreateOptions, UserClient,
    UserStatus,
};
use kafka_iggy_gateway::backend::embedded::EmbeddedBackend;
use kafka_iggy_gateway::backend::{Backend, TopicSpec};
use std::sync::Arc;

/// Where users are made.
#[derive(Clone)]
pub enum Provisioner {
    /// The model's root view.
    Embedded(Arc<EmbeddedBackend>),
    /// A real server, reached as its root user.
    Iggy {
        address: String,
        username: String,
        password: String,
    },
}

async fn sdk_client(address: &str, credentials: Credentials) -> anyhow::Result<IggyClient> {
    let config = TcpClientConfig {
        server_address: address.to_string(),
        auto_login: AutoLogin::Enabled(credentials),
        ..TcpClientConfig::default()
    };
    let client = IggyClient::create(ClientWrapper::Tcp(TcpClient::create(Arc::new(config))?), None, None);
    client
        .connect()
        .await
        .with_context(|| format!("connecting to Iggy at {address}"))?;
    Ok(client)
}

impl Provisioner {
    async fn root(&self) -> anyhow::Result<Option<IggyClient>> {
        match self {
            Provisioner::Embedded(_) => Ok(None),
            Provisioner::Iggy {
                address,
                username,
                password,
            } => Ok(Some(
                sdk_client(
                    address,
                    Credentials::UsernamePassword(username.clone(), password.clone().into()),
                )
                .await?,
            )),
        }
    }

    /// Creates `topic` with one partition in `stream` (and the stream), as root; returns the
    /// numeric stream and topic ids that permissions name.
    pub async fn topic(&self, stream: &str, topic: &str) -> anyhow::Result<(usize, usize)> {
        let spec = TopicSpec {
            partitions: 1,
            message_expiry_us: None,
        };
        match self {
            Provisioner::Embedded(model) => {
                model.ensure_stream(stream).await?;
                model.create_topic(stream, topic, spec).await?;
                model.topic_ids(stream, topic).context("the topic just created")
            }
            Provisioner::Iggy { .. } => {
                let root = self.root().await?.expect("a real server has a root client");
                let s = Identifier::named(stream)?;
                if root.get_stream(&s).await?.is_none() {
                    root.create_stream(stream).await?;
                }
                let stream_id = root.get_stream(&s).await?.context("the stream")?.id as usize;
                let options = TopicCreateOptions {
                    partitions_count: Some(1),
                    ..TopicCreateOptions::default()
                };
                root.create_topic(&s, topic, &options).await?;
                let topic_id = root
                    .get_topic(&s, &Identifier::named(topic)?)
                    .await?
                    .context("the topic just created")?
                    .id as usize;
                let _ = root.shutdown().await;
                Ok((stream_id, topic_id))
            }
        }
    }

    /// Creates an active user with `permissions`, as root.
    pub async fn user(&self, username: &str, password: &str, permissions: Permissions) -> anyhow::Result<()> {
        match self {
            Provisioner::Embedded(model) => {
                model.create_user(username, password, UserStatus::Active, Some(permissions))?;
            }
            Provisioner::Iggy { .. } => {
                let root = self.root().await?.expect("a real server has a root client");
                root.create_user(username, password, UserStatus::Active, Some(permissions))
                    .await?;
                let _ = root.shutdown().await;
            }
        }
        Ok(())
    }

    /// Replaces `username`'s permissions, as root.
    pub async fn permissions(&self, username: &str, permissions: Permissions) -> anyhow::Result<()> {
        match self {
            Provisioner::Embedded(model) => model.update_permissions(username, Some(permissions))?,
            Provisioner::Iggy { .. } => {
                let root = self.root().await?.expect("a real server has a root client");
                root.update_permissions(&Identifier::named(username)?, Some(permissions))
                    .await?;
                let _ = root.shutdown().await;
            }
        }
        Ok(())
    }

    /// A personal access token that `username` makes for itself.
    pub async fn token(&self, username: &str, password: &str, name: &str) -> anyhow::Result<String> {
        match self {
            Provisioner::Embedded(model) => {
                let login = kafka_iggy_gateway::auth::credentials::Credentials::password(username, password);
                let (as_user, _) = model.open_session(&login).await?;
                Ok(as_user.create_personal_access_token(name, None)?)
            }
            Provisioner::Iggy { address, .. } => {
                let user = sdk_client(
                    address,
                    Credentials::UsernamePassword(username.to_string(), password.to_string().into()),
                )
                .await?;
                let raw = user.create_personal_access_token(name, IggyExpiry::NeverExpire).await?;
                let _ = user.shutdown().await;
                Ok(raw.token)
            }
        }
    }
}

//! The administration the auth differential drives on both backends ([`Admin`]): users,
//! permissions and personal access tokens, on the embedded model and over the Iggy SDK.

use super::*;

/// What root does to users on one side: the embedded model's inherent admin methods, or the
/// SDK as root on a real server ([`IggyAdmin`]). Users are named, never numbered, so both sides
/// are driven alike.
pub trait Admin: Send + Sync {
    fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn update_permissions(
        &self,
        username: &str,
        permissions: Option<Permissions>,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn update_user_status(
        &self,
        username: &str,
        status: UserStatus,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    fn delete_user(&self, username: &str) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// A personal access token (never expiring) that the user makes for itself, logged in with
    /// its password.
    fn create_token(
        &self,
        username: &str,
        password: &str,
        name: &str,
    ) -> impl Future<Output = Result<String, BackendError>> + Send;

    /// The numeric stream and topic ids, which permissions name.
    fn topic_ids(&self, stream: &str, topic: &str)
        -> impl Future<Output = Result<(usize, usize), BackendError>> + Send;
}

/// The model's admin: its root view's inherent methods.
impl Admin for kafka_iggy_gateway::backend::embedded::EmbeddedBackend {
    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<(), BackendError> {
        self.create_user(username, password, status, permissions).map(|_| ())
    }

    async fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        self.update_permissions(username, permissions)
    }

    async fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        self.update_user_status(username, status)
    }

    async fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        self.delete_user(username)
    }

    async fn create_token(&self, username: &str, password: &str, name: &str) -> Result<String, BackendError> {
        let (user, _) = self.open_session(&Login::password(username, password)).await?;
        user.create_personal_access_token(name, None)
    }

    async fn topic_ids(&self, stream: &str, topic: &str) -> Result<(usize, usize), BackendError> {
        self.topic_ids(stream, topic)
            .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(format!("{stream}/{topic}")).into())
    }
}

/// A real server's admin: an SDK client logged in as root.
pub struct IggyAdmin {
    pub(super) address: String,
    pub(super) root: iggy::prelude::IggyClient,
}

pub(super) async fn sdk_client(
    address: &str,
    username: &str,
    password: &str,
) -> Result<iggy::prelude::IggyClient, BackendError> {
    use iggy::prelude::{AutoLogin, Client, ClientWrapper, Credentials, IggyClient, TcpClient, TcpClientConfig};
    let config = TcpClientConfig {
        server_address: address.to_string(),
        auto_login: AutoLogin::Enabled(Credentials::UsernamePassword(
            username.to_string(),
            password.to_string().into(),
        )),
        ..TcpClientConfig::default()
    };
    let client = IggyClient::create(
        ClientWrapper::Tcp(TcpClient::create(std::sync::Arc::new(config))?),
        None,
        None,
    );
    match tokio::time::timeout(CALL_TIMEOUT, client.connect()).await {
        Ok(Ok(())) => Ok(client),
        Ok(Err(e)) => {
            let _ = client.shutdown().await;
            Err(e.into())
        }
        Err(_) => {
            let _ = client.shutdown().await;
            Err(iggy_common::IggyError::CannotEstablishConnection.into())
        }
    }
}

pub(super) fn user_id(username: &str) -> Result<iggy_common::Identifier, BackendError> {
    Ok(iggy_common::Identifier::named(username)?)
}

impl IggyAdmin {
    /// Logs in to the server at `address` as root (`username`, `password`).
    pub async fn connect(address: &str, username: &str, password: &str) -> Result<Self, BackendError> {
        Ok(Self {
            address: address.to_string(),
            root: sdk_client(address, username, password).await?,
        })
    }

    pub async fn shutdown(self) {
        use iggy::prelude::Client;
        let _ = self.root.shutdown().await;
    }
}

impl Admin for IggyAdmin {
    async fn create_user(
        &self,
        username: &str,
        password: &str,
        status: UserStatus,
        permissions: Option<Permissions>,
    ) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        self.root.create_user(username, password, status, permissions).await?;
        Ok(())
    }

    async fn update_permissions(&self, username: &str, permissions: Option<Permissions>) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self.root.update_permissions(&user_id(username)?, permissions).await?)
    }

    async fn update_user_status(&self, username: &str, status: UserStatus) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self
            .root
            .update_user(
                &user_id(username)?,
                None,
                Some(status),
                &iggy_common::UserUpdateOptions::default(),
            )
            .await?)
    }

    async fn delete_user(&self, username: &str) -> Result<(), BackendError> {
        use iggy::prelude::UserClient;
        Ok(self.root.delete_user(&user_id(username)?).await?)
    }

    async fn create_token(&self, username: &str, password: &str, name: &str) -> Result<String, BackendError> {
        use iggy::prelude::{Client, IggyExpiry, PersonalAccessTokenClient};
        let user = sdk_client(&self.address, username, password).await?;
        let raw = user.create_personal_access_token(name, IggyExpiry::NeverExpire).await;
        let _ = user.shutdown().await;
        Ok(raw?.token)
    }

    async fn topic_ids(&self, stream: &str, topic: &str) -> Result<(usize, usize), BackendError> {
        use iggy::prelude::TopicClient;
        let (s, t) = (
            iggy_common::Identifier::named(stream)?,
            iggy_common::Identifier::named(topic)?,
        );
        let details = self
            .root
            .get_topic(&s, &t)
            .await?
            .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(format!("{stream}/{topic}")))?;
        let stream_id = {
            use iggy::prelude::StreamClient;
            self.root
                .get_stream(&s)
                .await?
                .ok_or_else(|| iggy_common::IggyError::ResourceNotFound(stream.to_string()))?
                .id
        };
        Ok((stream_id as usize, details.id as usize))
    }
}

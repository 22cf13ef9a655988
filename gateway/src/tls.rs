//! TLS (docs/spec/auth.md, "TLS"): the settings of the Kafka listener's TLS (certificate, key,
//! and the CA client certificates must be signed by), the rustls server configuration built from
//! them, and the settings of the gateway's own connection to Iggy over TLS. The handshake itself
//! runs in `server`, in each connection's task.

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The Kafka listener's TLS. Unset (the default) serves plaintext. The same struct is read from
/// the command line (flattened into `Args`) and from the TOML file's `[tls]` table.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSettings {
    /// PEM certificate chain the listener presents, leaf first; with --tls-key, the listener
    /// speaks TLS only.
    #[arg(long, env = "IGGY_KAFKA_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    #[arg(long, env = "IGGY_KAFKA_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates; when set, every client must present a certificate signed by one of
    /// them.
    #[arg(long, env = "IGGY_KAFKA_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
}

impl TlsSettings {
    /// Each setting from `self` where set, else from `file`.
    pub fn or(self, file: TlsSettings) -> TlsSettings {
        TlsSettings {
            tls_cert: self.tls_cert.or(file.tls_cert),
            tls_key: self.tls_key.or(file.tls_key),
            tls_client_ca: self.tls_client_ca.or(file.tls_client_ca),
        }
    }
}

/// AUTH-TLS-3: the gateway's connection to Iggy over TLS; the Iggy SDK's `TcpClientConfig`
/// takes them as `tls_enabled`, `tls_domain` and `tls_ca_file`, and validates the server's
/// certificate whenever TLS is on. The same struct is read from the command line and from the
/// TOML file's `[iggy_tls]` table.
#[derive(Debug, Clone, Default, clap::Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IggyTlsSettings {
    /// Connect to Iggy over TLS (default false).
    #[arg(long, env = "IGGY_KAFKA_IGGY_TLS")]
    pub iggy_tls: Option<bool>,
    /// The name Iggy's certificate is checked against (default: the host of --iggy-address).
    #[arg(long, env = "IGGY_KAFKA_IGGY_TLS_DOMAIN")]
    pub iggy_tls_domain: Option<String>,
    /// PEM CA certificate Iggy's certificate must be signed by (default: the system's roots).
    #[arg(long, env = "IGGY_KAFKA_IGGY_TLS_CA")]
    pub iggy_tls_ca: Option<PathBuf>,
}

impl IggyTlsSettings {
    /// Each setting from `self` where set, else from `file`.
    pub fn or(self, file: IggyTlsSettings) -> IggyTlsSettings {
        IggyTlsSettings {
            iggy_tls: self.iggy_tls.or(file.iggy_tls),
            iggy_tls_domain: self.iggy_tls_domain.or(file.iggy_tls_domain),
            iggy_tls_ca: self.iggy_tls_ca.or(file.iggy_tls_ca),
        }
    }

    /// Whether the connection to Iggy uses TLS.
    pub fn enabled(&self) -> bool {
        self.iggy_tls.unwrap_or(false)
    }
}

/// The crypto provider every TLS configuration uses: aws-lc-rs, which the Iggy SDK already
/// links. Named explicitly because the build also links ring, and rustls picks no process-wide
/// default when both are present.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Every certificate in the PEM file at `path`; at least one.
fn read_certificates(path: &Path, what: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the {what} {}", path.display()))?;
    if certs.is_empty() {
        bail!("the {what} {} holds no PEM certificate", path.display());
    }
    Ok(certs)
}

/// The listener's rustls configuration, or `None` when no certificate is configured (plaintext).
/// A certificate without a key, a key without a certificate, a client CA without either, and a
/// file that cannot be read or holds no usable PEM are errors naming the setting and the file.
pub fn server_config(settings: &TlsSettings) -> anyhow::Result<Option<Arc<ServerConfig>>> {
    let (cert_path, key_path) = match (&settings.tls_cert, &settings.tls_key) {
        (None, None) => {
            if let Some(ca) = &settings.tls_client_ca {
                bail!(
                    "tls_client_ca {} is set but tls_cert and tls_key are not: client certificates need a TLS listener",
                    ca.display()
                );
            }
            return Ok(None);
        }
        (Some(cert), Some(key)) => (cert, key),
        (Some(cert), None) => bail!("tls_cert {} is set without tls_key", cert.display()),
        (None, Some(key)) => bail!("tls_key {} is set without tls_cert", key.display()),
    };
    let chain = read_certificates(cert_path, "tls_cert")?;
    let key = PrivateKeyDer::from_pem_file(key_path)
        .with_context(|| format!("reading the tls_key {} (a PEM private key)", key_path.display()))?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("the TLS provider supports no protocol version")?;
    let builder = match &settings.tls_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca_path) => {
            // AUTH-TLS-2: only a client whose certificate chains to one of these CAs completes
            // the handshake; WebPkiClientVerifier refuses anonymous clients by default.
            let mut roots = RootCertStore::empty();
            for ca in read_certificates(ca_path, "tls_client_ca")? {
                roots.add(ca).with_context(|| {
                    format!("the tls_client_ca {} holds an unusable certificate", ca_path.display())
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .with_context(|| format!("building a client verifier from {}", ca_path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).with_context(|| {
        format!(
            "the tls_cert {} and tls_key {} are not a usable certificate and key",
            cert_path.display(),
            key_path.display()
        )
    })?;
    Ok(Some(Arc::new(config)))
}

/// A throwaway PKI for tests: a CA, a server certificate for 127.0.0.1 and localhost, and a
/// client certificate, written as PEM files to a fresh directory removed on drop.
#[cfg(test)]
pub(crate) mod test_pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct Pki {
        pub dir: PathBuf,
        pub ca: PathBuf,
        pub server_cert: PathBuf,
        pub server_key: PathBuf,
        pub client_cert: PathBuf,
        pub client_key: PathBuf,
    }

    impl Drop for Pki {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    static NEXT: AtomicU64 = AtomicU64::new(0);

    pub fn generate() -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "kig-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "kig test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca_key = KeyPair::generate().expect("key");
        let ca_cert = ca_params.self_signed(&ca_key).expect("CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>, cn: &str| {
            let mut params = CertificateParams::new(names).expect("params");
            params.distinguished_name.push(DnType::CommonName, cn);
            let key = KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, &issuer).expect("signed");
            (cert.pem(), key.serialize_pem())
        };
        let (server_pem, server_key_pem) = leaf(vec!["127.0.0.1".into(), "localhost".into()], "localhost");
        let (client_pem, client_key_pem) = leaf(vec!["client.test".into()], "client");
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write");
            path
        };
        Pki {
            ca: write("ca.pem", &ca_cert.pem()),
            server_cert: write("server.pem", &server_pem),
            server_key: write("server.key", &server_key_pem),
            client_cert: write("client.pem", &client_pem),
            client_key: write("client.key", &client_key_pem),
            dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_pki::{generate, Pki};
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::ClientConfig;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn settings(pki: &Pki, client_ca: bool) -> TlsSettings {
        TlsSettings {
            tls_cert: Some(pki.server_cert.clone()),
            tls_key: Some(pki.server_key.clone()),
            tls_client_ca: client_ca.then(|| pki.ca.clone()),
        }
    }

    /// A client trusting the test CA, presenting the test client certificate when `with_cert`.
    fn client_config(pki: &Pki, with_cert: bool) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(&pki.ca).unwrap()).unwrap();
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = if with_cert {
            let chain = CertificateDer::pem_file_iter(&pki.client_cert)
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(&pki.client_key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(config)
    }

    /// Runs a handshake over an in-memory pipe, then one byte each way (a TLS 1.3 server
    /// refuses a client certificate only after the client's handshake has finished, so the
    /// first read is what shows a refusal). Ok when both sides got through.
    async fn exchange(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> Result<(), String> {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let server_side = async move {
            let mut tls = tokio_rustls::TlsAcceptor::from(server)
                .accept(server_io)
                .await
                .map_err(|e| format!("server: {e}"))?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte)
                .await
                .map_err(|e| format!("server read: {e}"))?;
            tls.write_all(&byte).await.map_err(|e| format!("server write: {e}"))?;
            tls.flush().await.map_err(|e| format!("server flush: {e}"))?;
            Ok::<_, String>(())
        };
        let client_side = async move {
            let name = ServerName::try_from("localhost").unwrap();
            let mut tls = tokio_rustls::TlsConnector::from(client)
                .connect(name, client_io)
                .await
                .map_err(|e| format!("client: {e}"))?;
            tls.write_all(&[7]).await.map_err(|e| format!("client write: {e}"))?;
            tls.flush().await.map_err(|e| format!("client flush: {e}"))?;
            let mut byte = [0u8; 1];
            tls.read_exact(&mut byte)
                .await
                .map_err(|e| format!("client read: {e}"))?;
            assert_eq!(byte, [7]);
            Ok::<_, String>(())
        };
        let (server, client) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            tokio::join!(server_side, client_side)
        })
        .await
        .expect("the exchange ends within 30 s");
        server.and(client)
    }

    #[tokio::test]
    async fn auth_tls_1_a_client_trusting_the_ca_completes_a_handshake() {
        let pki = generate();
        let server = server_config(&settings(&pki, false)).unwrap().expect("TLS configured");
        exchange(server, client_config(&pki, false)).await.unwrap();
    }

    #[test]
    fn auth_tls_1_no_certificate_means_plaintext() {
        assert!(server_config(&TlsSettings::default()).unwrap().is_none());
    }

    #[test]
    fn auth_tls_1_a_certificate_without_its_key_is_refused_naming_the_file() {
        let pki = generate();
        let err = server_config(&TlsSettings {
            tls_cert: Some(pki.server_cert.clone()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("tls_key") && text.contains(&pki.server_cert.display().to_string()),
            "{text}"
        );
        let err = server_config(&TlsSettings {
            tls_key: Some(pki.server_key.clone()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        assert!(
            format!("{err:#}").contains(&pki.server_key.display().to_string()),
            "{err:#}"
        );
    }

    #[test]
    fn auth_tls_1_garbage_or_missing_pem_files_are_refused_naming_the_file() {
        let pki = generate();
        let garbage = pki.dir.join("garbage.pem");
        std::fs::write(&garbage, "not a PEM file\n").unwrap();
        let missing = pki.dir.join("missing.pem");
        for (cert, key, named) in [
            (&garbage, &pki.server_key, &garbage),
            (&pki.server_cert, &garbage, &garbage),
            (&missing, &pki.server_key, &missing),
            (&pki.server_cert, &missing, &missing),
            // A key that is not the certificate's.
            (&pki.server_cert, &pki.client_key, &pki.server_cert),
        ] {
            let err = server_config(&TlsSettings {
                tls_cert: Some(cert.clone()),
                tls_key: Some(key.clone()),
                tls_client_ca: None,
            })
            .unwrap_err();
            let text = format!("{err:#}");
            assert!(text.contains(&named.display().to_string()), "{text}");
        }
        let err = server_config(&TlsSettings {
            tls_client_ca: Some(garbage.clone()),
            ..settings(&pki, false)
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains(&garbage.display().to_string()), "{err:#}");
    }

    #[tokio::test]
    async fn auth_tls_2_with_a_client_ca_a_client_without_a_certificate_is_refused() {
        let pki = generate();
        let server = server_config(&settings(&pki, true)).unwrap().unwrap();
        let err = exchange(server, client_config(&pki, false)).await.unwrap_err();
        assert!(err.contains("server"), "the server refuses the client: {err}");
    }

    #[tokio::test]
    async fn auth_tls_2_with_a_client_ca_a_client_with_a_ca_signed_certificate_is_accepted() {
        let pki = generate();
        let server = server_config(&settings(&pki, true)).unwrap().unwrap();
        exchange(server, client_config(&pki, true)).await.unwrap();
    }

    #[tokio::test]
    async fn auth_tls_2_a_client_certificate_from_another_ca_is_refused() {
        let pki = generate();
        let other = generate();
        let server = server_config(&settings(&pki, true)).unwrap().unwrap();
        // Trusts the server's CA but presents a certificate of another CA.
        let mut client = (*client_config(&pki, false)).clone();
        let chain = vec![CertificateDer::from_pem_file(&other.client_cert).unwrap()];
        let key = PrivateKeyDer::from_pem_file(&other.client_key).unwrap();
        client.client_auth_cert_resolver = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(RootCertStore::empty())
            .with_client_auth_cert(chain, key)
            .unwrap()
            .client_auth_cert_resolver;
        assert!(exchange(server, Arc::new(client)).await.is_err());
    }

    #[test]
    fn auth_tls_2_a_client_ca_without_a_listener_certificate_is_refused() {
        let pki = generate();
        let err = server_config(&TlsSettings {
            tls_client_ca: Some(pki.ca.clone()),
            ..TlsSettings::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("tls_client_ca"), "{err}");
    }

    #[test]
    fn auth_tls_3_iggy_tls_settings_merge_flag_over_file_and_default_off() {
        assert!(!IggyTlsSettings::default().enabled());
        let flag = IggyTlsSettings {
            iggy_tls: Some(true),
            ..IggyTlsSettings::default()
        };
        let file = IggyTlsSettings {
            iggy_tls: Some(false),
            iggy_tls_domain: Some("iggy.example".into()),
            iggy_tls_ca: None,
        };
        let merged = flag.or(file);
        assert!(merged.enabled(), "the flag wins");
        assert_eq!(
            merged.iggy_tls_domain.as_deref(),
            Some("iggy.example"),
            "the file fills in"
        );
    }
}

impl IggyTlsSettings {
    /// What the SDK backend connects with (AUTH-TLS-3); the domain defaults to the address's
    /// host there.
    pub fn to_backend(&self) -> crate::backend::iggy::IggyTls {
        crate::backend::iggy::IggyTls {
            enabled: self.iggy_tls.unwrap_or(false),
            domain: self.iggy_tls_domain.clone().unwrap_or_default(),
            ca_file: self.iggy_tls_ca.as_ref().map(|p| p.display().to_string()),
        }
    }
}

//! A throwaway PKI for TLS tests (docs/spec/auth.md, "TLS"): a CA, a server certificate for
//! 127.0.0.1 and localhost, and a client certificate, all signed by the CA and written as PEM
//! files to a fresh directory that is removed when the [`Pki`] is dropped.

use anyhow::Context;
use kafka_iggy_gateway::tls::TlsSettings;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The PEM files of one generated PKI. Keys are PKCS#8.
#[derive(Debug)]
pub struct Pki {
    pub dir: PathBuf,
    /// The CA certificate: what clients trust, and what the gateway's client CA is set to.
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Pki {
    /// Generates a CA and its server and client certificates under a fresh temporary directory.
    pub fn generate() -> anyhow::Result<Pki> {
        let dir = std::env::temp_dir().join(format!(
            "kig-pki-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "kafka-iggy test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: &[&str], cn: &str, usage: ExtendedKeyUsagePurpose| -> anyhow::Result<(String, String)> {
            let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
            params.distinguished_name.push(DnType::CommonName, cn);
            params.use_authority_key_identifier_extension = true;
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &issuer)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let (server_pem, server_key) = leaf(
            &["127.0.0.1", "localhost"],
            "localhost",
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (client_pem, client_key) = leaf(
            &["client.kafka-iggy.test"],
            "kafka-iggy test client",
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            Ok(path)
        };
        Ok(Pki {
            ca: write("ca.pem", &ca_cert.pem())?,
            server_cert: write("server.pem", &server_pem)?,
            server_key: write("server.key", &server_key)?,
            client_cert: write("client.pem", &client_pem)?,
            client_key: write("client.key", &client_key)?,
            dir,
        })
    }

    /// The gateway's TLS settings: this PKI's server certificate and key and, when
    /// `require_client_certificates`, this PKI's CA as the client CA.
    pub fn server_settings(&self, require_client_certificates: bool) -> TlsSettings {
        TlsSettings {
            tls_cert: Some(self.server_cert.clone()),
            tls_key: Some(self.server_key.clone()),
            tls_client_ca: require_client_certificates.then(|| self.ca.clone()),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

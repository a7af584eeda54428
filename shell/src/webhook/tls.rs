//! rustls server configuration (ring provider only) from PEM.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::ShellError;

/// A TLS server config serving `cert_pem` with `key_pem` (PKCS#1, PKCS#8 or SEC1).
pub fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<ServerConfig>, ShellError> {
    let err = |e: &dyn std::fmt::Display| ShellError::Certificate(e.to_string());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| err(&e))?;
    if certs.is_empty() {
        return Err(ShellError::Certificate("no certificate in PEM".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| err(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(&e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| err(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::cert;

    #[test]
    fn d22_minted_rsa_pkcs1_bundle_is_servable() {
        let now = jiff::Timestamp::now();
        let names = cert::service_dns_names("svc", "ns");
        let b = cert::mint(&names, now, cert::VALIDITY, 2048).expect("mint");
        assert!(
            b.key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"),
            "PKCS#1 like Go"
        );
        assert!(b.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(b.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(b.ca_pem, b.cert_pem);
        assert!(b.not_after > now + jiff::SignedDuration::from_hours(364 * 24));
        server_config(&b.cert_pem, &b.key_pem).expect("rustls loads the PKCS#1 key");
    }

    #[test]
    fn placeholder_is_servable() {
        let (c, k) = cert::placeholder().expect("placeholder");
        server_config(&c, &k).expect("loads");
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(server_config("nope", "nope").is_err());
    }
}

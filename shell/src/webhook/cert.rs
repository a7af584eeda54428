//! Self-signed webhook certificates like the Go operator's: an RSA-4096 CA (`O=NVIDIA,
//! CN=webhooks-ca`) and an RSA-4096 leaf for the webhook Service, PEM, key in PKCS#1
//! (`RSA PRIVATE KEY`) so any operator version can read the Secret (06-operations.md §2.6, D22).
//! Validity is exact to the second (`WEBHOOK_CERT_VALIDITY`), so tests can rotate within minutes.

use std::io::Read;
use std::time::Duration;

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PKCS_RSA_SHA256, SerialNumber,
};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::{EncodePrivateKey, LineEnding};

use crate::error::ShellError;

/// Default validity of minted certificates (`WEBHOOK_CERT_VALIDITY`).
pub const VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);

/// RSA modulus size of minted keys (parity with the Go operator).
pub const RSA_BITS: usize = 4096;

/// A CA certificate and the serving certificate + key it signed, all PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertBundle {
    /// CA certificate (`ca.crt`, injected as `caBundle`).
    pub ca_pem: String,
    /// Serving certificate (`tls.crt`).
    pub cert_pem: String,
    /// Serving key, PKCS#1 (`tls.key`).
    pub key_pem: String,
    /// The serving certificate's NotAfter.
    pub not_after: Timestamp,
}

/// DNS names of the webhook Service, as the apiserver dials it.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}.svc"),
    ]
}

/// Clock skew allowance: certificates are valid from this long before they are minted.
const BACKDATE: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// Mints a new CA and a serving certificate for `names` (DNS names or IP addresses; the first
/// is the subject's CN), valid from a minute ago until `now + validity`.
pub fn mint(
    names: &[String],
    now: Timestamp,
    validity: Duration,
    bits: usize,
) -> Result<CertBundle, ShellError> {
    let err = |e: &dyn std::fmt::Display| ShellError::Certificate(e.to_string());
    let first = names
        .first()
        .ok_or_else(|| ShellError::Certificate("no name for the serving certificate".into()))?;
    let not_after = now
        .checked_add(jiff::SignedDuration::try_from(validity).map_err(|e| err(&e))?)
        .map_err(|e| err(&e))?;
    let now = now - BACKDATE;

    let (_, ca_key) = rsa_key(bits)?;
    let mut ca = base_params(vec![], now, not_after)?;
    ca.distinguished_name
        .push(DnType::OrganizationName, "NVIDIA");
    ca.distinguished_name
        .push(DnType::CommonName, "webhooks-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let issuer = CertifiedIssuer::self_signed(ca, ca_key).map_err(|e| err(&e))?;

    let (leaf_rsa, leaf_key) = rsa_key(bits)?;
    let mut leaf = base_params(names.to_vec(), now, not_after)?;
    leaf.distinguished_name
        .push(DnType::CommonName, first.clone());
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let cert = leaf.signed_by(&leaf_key, &issuer).map_err(|e| err(&e))?;
    let key_pem = leaf_rsa
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| err(&e))?
        .to_string();
    Ok(CertBundle {
        ca_pem: issuer.pem(),
        cert_pem: cert.pem(),
        key_pem,
        not_after,
    })
}

/// A short-lived (about a day) self-signed ECDSA certificate so the server can start before the Secret is read.
pub fn placeholder() -> Result<(String, String), ShellError> {
    self_signed_serving(&["foo.bar.svc".to_string()])
}

/// A self-signed ECDSA serving certificate for `names`, valid for a year (the HTTPS metrics
/// endpoint's certificate, like controller-runtime's default; scrapers skip verification or
/// pin it). Returns (certificate PEM, key PEM).
pub fn self_signed_serving(names: &[String]) -> Result<(String, String), ShellError> {
    let key = KeyPair::generate().map_err(|e| ShellError::Certificate(e.to_string()))?;
    let now = Timestamp::now();
    let params = base_params(
        names.to_vec(),
        now - BACKDATE,
        now + jiff::SignedDuration::from_hours(24 * 365),
    )?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| ShellError::Certificate(e.to_string()))?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn base_params(
    names: Vec<String>,
    not_before: Timestamp,
    not_after: Timestamp,
) -> Result<CertificateParams, ShellError> {
    let mut p =
        CertificateParams::new(names).map_err(|e| ShellError::Certificate(e.to_string()))?;
    p.distinguished_name = DistinguishedName::new();
    p.not_before = offset_time(not_before)?;
    p.not_after = offset_time(not_after)?;
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let mut serial = [0u8; 8];
    fill_random(&mut serial)?;
    serial[0] &= 0x7f; // below 2^63, positive
    p.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(p)
}

/// `t` to the second, as rcgen's time type.
fn offset_time(t: Timestamp) -> Result<time::OffsetDateTime, ShellError> {
    time::OffsetDateTime::from_unix_timestamp(t.as_second())
        .map_err(|e| ShellError::Certificate(e.to_string()))
}

/// An RSA key as the rsa crate's key (for PKCS#1 export) and as an rcgen signing key.
fn rsa_key(bits: usize) -> Result<(rsa::PrivateKey, KeyPair), ShellError> {
    let err = |e: &dyn std::fmt::Display| ShellError::Certificate(e.to_string());
    let key = rsa::PrivateKey::new(&mut UrandomRng, bits).map_err(|e| err(&e))?;
    let pkcs8 = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| err(&e))?;
    let pair =
        KeyPair::from_pkcs8_pem_and_sign_algo(&pkcs8, &PKCS_RSA_SHA256).map_err(|e| err(&e))?;
    Ok((key, pair))
}

fn fill_random(buf: &mut [u8]) -> Result<(), ShellError> {
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| ShellError::Certificate(format!("reading /dev/urandom: {e}")))
}

/// The operating system's random source for RSA key generation.
struct UrandomRng;

impl rsa::rand_core::TryRng for UrandomRng {
    type Error = std::io::Error;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.try_fill_bytes(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.try_fill_bytes(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(dst))
    }
}

impl rsa::rand_core::TryCryptoRng for UrandomRng {}

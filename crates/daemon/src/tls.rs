//! TLS for replication links (`tls yes`, issue 7): rustls with the ring provider, mutual
//! authentication by pinned certificates, no certificate authority.
//!
//! Each host has its own certificate and key (`tls-certificate`, `tls-key` in its `on`
//! section) and its peers pin the SHA-256 of that certificate (`tls-fingerprint` in the same
//! `on` section, so one file serves every node). The connecting side accepts exactly the
//! pinned certificate of the peer it dialled; the listening side accepts any pinned
//! certificate of the resource's peers, and once the peer names itself in its Hello, the
//! link is refused unless the certificate it presented is that peer's ([`check_peer`]).
//! Handshake signatures are verified with rustls' own routines; names and validity dates are
//! not checked (the pin is the identity, as with SSH host keys).
//!
//! Invariants:
//! - A TLS link carries nothing of tandem's (not even the Hello) before the TLS handshake
//!   succeeded with a pinned certificate on both sides.
//! - A certificate pinned for one peer never authenticates another peer.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName, Error as TlsError, ServerConfig,
    SignatureScheme,
};
use sha2::{Digest, Sha256};

/// The server name every link uses: the pin, not the name, identifies the peer.
const SERVER_NAME: &str = "tandem";

/// The TLS settings of one resource on this node.
pub(crate) struct TlsSetup {
    server: Arc<ServerConfig>,
    clients: BTreeMap<u8, Arc<ClientConfig>>,
    pins: BTreeMap<u8, [u8; 32]>,
}

impl std::fmt::Debug for TlsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSetup")
            .field("peers", &self.pins.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The SHA-256 of a certificate's DER bytes.
pub(crate) fn fingerprint(certificate: &[u8]) -> [u8; 32] {
    Sha256::digest(certificate).into()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsSetup {
    /// Loads this host's certificate and key and pins each peer's fingerprint (node id, name,
    /// pin).
    pub(crate) fn new(
        certificate: &Path,
        key: &Path,
        peers: &[(u8, &str, [u8; 32])],
    ) -> Result<TlsSetup, String> {
        let chain = CertificateDer::pem_file_iter(certificate)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|error| format!("tls-certificate {}: {error}", certificate.display()))?;
        if chain.is_empty() {
            return Err(format!(
                "tls-certificate {}: no certificate in the file",
                certificate.display()
            ));
        }
        let key_der = PrivateKeyDer::from_pem_file(key)
            .map_err(|error| format!("tls-key {}: {error}", key.display()))?;
        let provider = provider();
        let algorithms = provider.signature_verification_algorithms;
        let pins: BTreeMap<u8, [u8; 32]> =
            peers.iter().map(|&(node, _, pin)| (node, pin)).collect();
        let named = peers
            .iter()
            .map(|&(_, name, pin)| (name.to_string(), pin))
            .collect();
        let clients_verifier = Arc::new(PinnedClients {
            pins: named,
            algorithms,
        });
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?
            .with_client_cert_verifier(clients_verifier)
            .with_single_cert(chain.clone(), key_der.clone_key())
            .map_err(|error| format!("tls-certificate/tls-key: {error}"))?;
        let mut clients = BTreeMap::new();
        for (&node, &pin) in &pins {
            let verifier = Arc::new(PinnedServer { pin, algorithms });
            let client = ClientConfig::builder_with_provider(Arc::clone(&provider))
                .with_safe_default_protocol_versions()
                .map_err(|error| error.to_string())?
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_client_auth_cert(chain.clone(), key_der.clone_key())
                .map_err(|error| format!("tls-certificate/tls-key: {error}"))?;
            clients.insert(node, Arc::new(client));
        }
        Ok(TlsSetup {
            server: Arc::new(server),
            clients,
            pins,
        })
    }

    /// Runs the client side of the TLS handshake towards `peer`.
    pub(crate) async fn connect(
        &self,
        peer: u8,
        stream: tokio::net::TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
        let config = self
            .clients
            .get(&peer)
            .ok_or_else(|| format!("no tls-fingerprint pinned for node {peer}"))?;
        let name = ServerName::try_from(SERVER_NAME).map_err(|error| error.to_string())?;
        tokio_rustls::TlsConnector::from(Arc::clone(config))
            .connect(name, stream)
            .await
            .map_err(|error| format!("TLS handshake: {error}"))
    }

    /// Runs the server side of the TLS handshake.
    pub(crate) async fn accept(
        &self,
        stream: tokio::net::TcpStream,
    ) -> Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>, String> {
        tokio_rustls::TlsAcceptor::from(Arc::clone(&self.server))
            .accept(stream)
            .await
            .map_err(|error| format!("TLS handshake: {error}"))
    }

    /// Whether the certificate a peer presented (`presented`: its fingerprint) is the one
    /// pinned for the node it claims to be.
    pub(crate) fn check_peer(&self, node: u8, presented: Option<[u8; 32]>) -> Result<(), String> {
        let pinned = self
            .pins
            .get(&node)
            .ok_or_else(|| format!("no tls-fingerprint pinned for node {node}"))?;
        match presented {
            Some(presented) if presented == *pinned => Ok(()),
            Some(presented) => Err(format!(
                "node {node} presented the certificate {} but {} is pinned for it",
                config::format_fingerprint(&presented),
                config::format_fingerprint(pinned)
            )),
            None => Err(format!("node {node} presented no certificate")),
        }
    }
}

/// The fingerprint of the end-entity certificate a TLS peer presented.
pub(crate) fn presented(state: &rustls::CommonState) -> Option<[u8; 32]> {
    state
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| fingerprint(cert))
}

fn mismatch(presented: &[u8; 32], wanted: &str) -> TlsError {
    TlsError::General(format!(
        "certificate {} is not {wanted}",
        config::format_fingerprint(presented)
    ))
}

/// The connecting side: exactly one pinned certificate.
#[derive(Debug)]
struct PinnedServer {
    pin: [u8; 32],
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let presented = fingerprint(end_entity);
        if presented != self.pin {
            return Err(mismatch(
                &presented,
                &format!("the pinned {}", config::format_fingerprint(&self.pin)),
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The listening side: any of the resource's pinned certificates (the Hello then has to
/// match, see [`TlsSetup::check_peer`]).
#[derive(Debug)]
struct PinnedClients {
    /// Peer name and pinned fingerprint.
    pins: Vec<(String, [u8; 32])>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for PinnedClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: UnixTime,
    ) -> Result<ClientCertVerified, TlsError> {
        let presented = fingerprint(end_entity);
        if !self.pins.iter().any(|(_, pin)| *pin == presented) {
            let pinned: Vec<String> = self
                .pins
                .iter()
                .map(|(name, pin)| format!("{name} {}", config::format_fingerprint(pin)))
                .collect();
            return Err(mismatch(
                &presented,
                &format!(
                    "pinned for any peer of this resource (pinned: {})",
                    pinned.join(", ")
                ),
            ));
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `tandem tls-keygen`: a new self-signed certificate and key for `name`, written to
/// `DIR/NAME.crt` and `DIR/NAME.key` (mode 0600); returns the `tls-fingerprint` line.
pub fn keygen(dir: &Path, name: &str) -> Result<String, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if name.is_empty() || name.contains('/') {
        return Err(format!("invalid host name '{name}'"));
    }
    let certified =
        rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string(), name.to_string()])
            .map_err(|error| error.to_string())?;
    let (cert_path, key_path) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    for path in [&cert_path, &key_path] {
        if path.exists() {
            return Err(format!(
                "{} exists; remove it first (nothing was written)",
                path.display()
            ));
        }
    }
    let write = |path: &Path, text: &str, mode: u32| -> Result<(), String> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        file.write_all(text.as_bytes())
            .map_err(|error| format!("{}: {error}", path.display()))
    };
    write(&key_path, &certified.key_pair.serialize_pem(), 0o600)?;
    write(&cert_path, &certified.cert.pem(), 0o644)?;
    let line = format!(
        "tls-fingerprint {};",
        config::format_fingerprint(&fingerprint(certified.cert.der()))
    );
    Ok(format!(
        "tls-certificate {};\ntls-key {};\n{line}",
        cert_path.display(),
        key_path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(dir: &Path, name: &str) -> [u8; 32] {
        let lines = keygen(dir, name).expect("keygen");
        let fp = lines
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("tls-fingerprint "))
            .and_then(|l| l.strip_suffix(';'))
            .expect("line");
        config::parse_fingerprint(fp).expect("fingerprint")
    }

    async fn handshake(
        dir: &Path,
        client_pin: [u8; 32],
        server_pins: &[(u8, &str, [u8; 32])],
    ) -> Result<Option<[u8; 32]>, String> {
        let server = TlsSetup::new(&dir.join("bob.crt"), &dir.join("bob.key"), server_pins)?;
        let client = TlsSetup::new(
            &dir.join("alice.crt"),
            &dir.join("alice.key"),
            &[(1, "bob", client_pin)],
        )?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let accept = async {
            let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
            let tls = server.accept(stream).await?;
            Ok::<_, String>(presented(tls.get_ref().1))
        };
        let connect = async {
            let stream = tokio::net::TcpStream::connect(address)
                .await
                .map_err(|e| e.to_string())?;
            client.connect(1, stream).await.map(|_| ())
        };
        let (accepted, connected) = tokio::join!(accept, connect);
        connected?;
        accepted
    }

    #[tokio::test]
    async fn pinned_certificates_connect_and_anything_else_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let alice = identity(dir.path(), "alice");
        let bob = identity(dir.path(), "bob");
        let presented = handshake(dir.path(), bob, &[(0, "alice", alice)])
            .await
            .expect("both pinned");
        assert_eq!(
            presented,
            Some(alice),
            "the server sees alice's certificate"
        );
        let wrong_server = handshake(dir.path(), alice, &[(0, "alice", alice)]).await;
        assert!(
            wrong_server.is_err(),
            "the client pinned another certificate than bob's"
        );
        let wrong_client = handshake(dir.path(), bob, &[(0, "alice", bob)]).await;
        assert!(wrong_client.is_err(), "the server does not pin alice");
        let setup = TlsSetup::new(
            &dir.path().join("bob.crt"),
            &dir.path().join("bob.key"),
            &[(0, "alice", alice), (2, "carol", bob)],
        )
        .expect("setup");
        assert!(setup.check_peer(0, Some(alice)).is_ok());
        let error = setup
            .check_peer(2, Some(alice))
            .expect_err("alice's certificate claiming node 2");
        assert!(error.contains("is pinned for it"), "{error}");
        assert!(setup.check_peer(0, None).is_err());
    }

    #[test]
    fn keygen_never_overwrites_and_bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        identity(dir.path(), "alice");
        let again = keygen(dir.path(), "alice").expect_err("exists");
        assert!(again.contains("exists"), "{again}");
        let mode = std::fs::metadata(dir.path().join("alice.key"))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .expect("key");
        assert_eq!(mode, 0o600);
        std::fs::write(dir.path().join("junk.crt"), "not a certificate").expect("write");
        let error = TlsSetup::new(
            &dir.path().join("junk.crt"),
            &dir.path().join("alice.key"),
            &[],
        )
        .expect_err("junk");
        assert!(error.contains("junk.crt"), "{error}");
        let error = TlsSetup::new(
            &dir.path().join("alice.crt"),
            &dir.path().join("missing.key"),
            &[],
        )
        .expect_err("missing");
        assert!(error.contains("missing.key"), "{error}");
        assert!(keygen(dir.path(), "a/b").is_err());
    }
}

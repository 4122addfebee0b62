//! TLS for `uidgen serve` (`[tls]`): rustls over ring, no system OpenSSL. The PEM files are read
//! once at start; a file that cannot be read or holds no usable certificate or key stops the
//! start with the key named. HTTP gets a [`TlsListener`] (handshakes off the accept loop, so a
//! slow or silent client holds up no one else), gRPC tonic's own TLS from the same files.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use uidgen_worker::StateDir;

use crate::config::tls::TlsSettings;

/// How long a client may take to finish the TLS handshake before its connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server to take them.
const ACCEPTED_QUEUE: usize = 64;

/// What both servers serve TLS with, read from `tls.cert` and `tls.key`.
#[derive(Clone)]
pub(crate) struct Tls {
    /// HTTP's rustls configuration.
    http: Arc<ServerConfig>,
    /// gRPC's: tonic builds its own from the same PEM text.
    grpc: tonic::transport::ServerTlsConfig,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// Read and check the files (relative paths in the state directory `dir`).
    pub(crate) fn load(settings: &TlsSettings, dir: &StateDir) -> anyhow::Result<Self> {
        let cert_path = dir.resolve(&settings.cert);
        let key_path = dir.resolve(&settings.key);
        let cert_pem = std::fs::read(&cert_path).with_context(|| {
            format!(
                "invalid config key `tls.cert`: cannot read {}",
                cert_path.display()
            )
        })?;
        let key_pem = std::fs::read(&key_path).with_context(|| {
            format!(
                "invalid config key `tls.key`: cannot read {}",
                key_path.display()
            )
        })?;
        let certs = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                anyhow::anyhow!(
                    "invalid config key `tls.cert`: {} is not PEM certificates: {e}",
                    cert_path.display()
                )
            })?;
        if certs.is_empty() {
            anyhow::bail!(
                "invalid config key `tls.cert`: {} holds no PEM certificate",
                cert_path.display()
            );
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            anyhow::anyhow!(
                "invalid config key `tls.key`: {} holds no PEM private key (PKCS#8, PKCS#1 or \
                 SEC1): {e}",
                key_path.display()
            )
        })?;
        let mut http = ServerConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            anyhow::anyhow!(
                "invalid config key `tls.key`: it does not serve {} ({e})",
                cert_path.display()
            )
        })?;
        // HTTP/2 first, as the plain port offers it (prior knowledge) too.
        http.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let identity = tonic::transport::Identity::from_pem(cert_pem, key_pem);
        Ok(Self {
            http: Arc::new(http),
            grpc: tonic::transport::ServerTlsConfig::new().identity(identity),
        })
    }

    /// gRPC's TLS configuration.
    pub(crate) fn grpc(&self) -> tonic::transport::ServerTlsConfig {
        self.grpc.clone()
    }

    /// `listener` serving TLS: connections come out handshaken.
    pub(crate) fn listen(&self, listener: TcpListener) -> io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
        tokio::spawn(accept_loop(
            listener,
            TlsAcceptor::from(Arc::clone(&self.http)),
            tx,
        ));
        Ok(TlsListener {
            local,
            accepted: rx,
        })
    }
}

/// Accept TCP connections and handshake each in its own task until the [`TlsListener`] goes.
async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let accepted = tokio::select! {
            () = tx.closed() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors and the like: wait rather than spin, as axum does.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // An answer must not wait for the client's delayed ACK (see the gRPC server).
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, peer)).await;
                }
                // Plain HTTP to this port, a scanner, a client that trusts another CA.
                Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// An HTTP listener whose connections are TLS, for `axum::serve`.
#[derive(Debug)]
pub(crate) struct TlsListener {
    local: SocketAddr,
    accepted: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends once this listener is gone, so this never comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

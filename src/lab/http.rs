//! Small blocking calls to the lab's components (readiness, raw GETs), made
//! with kube's own HTTPS client on a runtime of their own: the callers are
//! plain threads or tests that already run inside another runtime.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use http_body_util::BodyExt;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Runs `work` to completion on a current-thread runtime in a thread of its
/// own, so it may be called from sync code and from inside another runtime.
pub fn block_on<T: Send>(work: impl Future<Output = T> + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|runtime| runtime.block_on(work))
                    .map_err(|e| format!("cannot start a runtime: {e}"))
            })
            .join()
            .map_err(|_| "the request thread panicked".to_string())?
    })
}

/// A client for the cluster a kubeconfig names.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client, String> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(15));
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// An anonymous client for a component's own HTTPS port (self-signed).
fn anonymous(url: &str) -> Result<kube::Client, String> {
    let mut config = kube::Config::new(url.parse().map_err(|e| format!("{url}: {e}"))?);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// `GET path`: the status code and the body, or why there is none.
pub async fn get(client: &kube::Client, path: &str) -> Result<(u16, String), String> {
    let request = http::Request::get(path).body(kube::client::Body::empty()).map_err(|e| e.to_string())?;
    let response = client.send(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Whether `GET url/path` answers 200, without credentials.
pub fn anonymous_ok(url: &str, path: &str) -> bool {
    block_on(async {
        match anonymous(url) {
            Ok(client) => get(&client, path).await.is_ok_and(|(status, _)| status == 200),
            Err(_) => false,
        }
    })
    .unwrap_or(false)
}

/// Whether a plain-HTTP `GET` on loopback answers with a body containing `needle`.
pub fn plain_ok(port: u16, path: &str, needle: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body);
    body.contains(needle)
}

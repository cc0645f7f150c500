//! Plain HTTP GETs with a bounded body: the agents and dcgm-exporter read
//! directly at their pod IPs, and a Prometheus at a URL.

/// `GET http://ip:port/path`, with the token when there is one (HTTP/1.1,
/// one connection).
pub async fn direct_get(ip: &str, port: u16, path: &str, token: Option<&str>) -> Result<String, String> {
    get(ip, port, path, token, MAX_AGENT_BODY).await
}

/// `GET http://host:port/path`, its body refused past `max` bytes.
pub async fn get_limited(host: &str, port: u16, path: &str, max: usize) -> Result<String, String> {
    get(host, port, path, None, max).await
}

async fn get(host: &str, port: u16, path: &str, token: Option<&str>, max: usize) -> Result<String, String> {
    let stream = tokio::net::TcpStream::connect((host, port)).await.map_err(|e| format!("{host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    tokio::spawn(async move {
        // The connection ends with the response; its error is the request's.
        let _ = conn.await;
    });
    let mut req = http::Request::get(path).header(http::header::HOST, format!("{host}:{port}"));
    if let Some(token) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let req = req.body(http_body_util::Empty::<bytes::Bytes>::new()).map_err(|e| e.to_string())?;
    let response = sender.send_request(req).await.map_err(|e| format!("{host}:{port}: {e}"))?;
    let status = response.status();
    let text = read_limited_to(response.into_body(), &format!("{host}:{port}"), max).await?;
    if status.is_success() { Ok(text) } else { Err(format!("{host}:{port} answered {status}: {}", first_line(&text))) }
}

/// The most an agent's answer may be: its own limit is 4 MiB, and an agent
/// that streams without end must cost the cockpit no more than this.
pub const MAX_AGENT_BODY: usize = 8 << 20;

/// A response body, refused past [`MAX_AGENT_BODY`] rather than read on.
pub async fn read_limited<B>(body: B, from: &str) -> Result<String, String>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    read_limited_to(body, from, MAX_AGENT_BODY).await
}

/// A response body, refused past `max` bytes rather than read on.
pub async fn read_limited_to<B>(body: B, from: &str, max: usize) -> Result<String, String>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt;
    let bytes = http_body_util::Limited::new(body, max).collect().await.map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() {
            format!("{from} sent more than {} MiB; not read further", max >> 20)
        } else {
            format!("{from}: {e}")
        }
    })?;
    Ok(String::from_utf8_lossy(&bytes.to_bytes()).trim().to_string())
}

/// An error body's first line, at most 200 characters.
pub fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").chars().take(200).collect()
}

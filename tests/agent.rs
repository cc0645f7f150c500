//! The node agent over HTTP on loopback, with the fake backend serving the
//! fixtures in tests/fixtures/agent/: snapshot and stream contents, the
//! token (401 without it or with a wrong one), and the limits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on broken fixtures

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use kgpu::agent::fake::{FakeBackend, FakeXids};
use kgpu::agent::server::Limits;
use kgpu::agent::wire::{AgentSnapshot, StreamEvent};
use kgpu::agent::{Options, Running, start};

const TOKEN: &str = "test-token-0123456789abcdef";
const XID_GPU: &str = "GPU-adb24b25-1db1-436e-d958-ddee5da83d07";

async fn agent(fixture: &str, limits: Limits) -> (Running, FakeXids) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent").join(fixture);
    let (backend, xids) = FakeBackend::from_file(&path).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let opts = Options {
        node: "gpu-node-1".into(),
        token: TOKEN.as_bytes().to_vec(),
        pod_resources_socket: "/nonexistent/kubelet.sock".into(),
        interval: Duration::from_millis(200),
        limits,
    };
    let running = start(opts, Box::new(backend), listener).unwrap();
    // Until the first reading is in.
    let mut latest = running.latest.clone();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !latest.borrow_and_update().nvml.available && latest.borrow().gpus.is_empty() {
            if latest.borrow().nvml.reason.as_deref() != Some("starting") {
                break;
            }
            latest.changed().await.unwrap();
        }
    })
    .await
    .unwrap();
    (running, xids)
}

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut req = http::Request::get(path).header("host", addr.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let response = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply { status: parts.status, headers: parts.headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// `n` GETs of /healthz one after another, with `headers`: their statuses.
async fn futures_statuses(addr: SocketAddr, n: usize, headers: &[(&str, &str)]) -> Vec<StatusCode> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(addr, "/healthz", headers).await.status);
    }
    out
}

#[tokio::test]
async fn a_flood_without_the_token_does_not_starve_a_cockpit_with_it() {
    let (running, _xids) = agent("h100-mig-all-balanced.json", Limits::default()).await;
    // 200 requests without a token, then (same address, as through the
    // API server's proxy) 20 with it: every one of the 20 is served.
    let flood = futures_statuses(running.addr, 200, &[]).await;
    assert!(flood.iter().all(|s| *s == StatusCode::UNAUTHORIZED || *s == StatusCode::TOO_MANY_REQUESTS));
    let cockpit = futures_statuses(running.addr, 20, &[("x-kgpu-token", TOKEN)]).await;
    assert_eq!(cockpit, vec![StatusCode::OK; 20], "the cockpit's requests");
}

/// A connection to `addr` from the loopback address `from` (another client).
async fn connect_from(from: &str, addr: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

/// One client holding a thousand idle connections takes at most its share:
/// another is answered every time (it used to get 1 answer in 19 tries).
#[tokio::test]
async fn one_client_holding_many_connections_cannot_lock_out_another() {
    use tokio::io::AsyncReadExt;
    let (running, _xids) = agent("h100-mig-all-balanced.json", Limits::default()).await;
    let mut idle = Vec::new();
    for _ in 0..1_000 {
        idle.push(connect_from("127.0.0.2", running.addr).await);
    }
    let cockpit = futures_statuses(running.addr, 20, &[("x-kgpu-token", TOKEN)]).await;
    assert_eq!(cockpit, vec![StatusCode::OK; 20], "the other client's requests");
    // Past its share, the hoarder's connections were closed as they came.
    let mut closed = 0;
    for c in &mut idle {
        let mut buf = [0u8; 16];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(20), c.read(&mut buf)).await {
            closed += 1;
        }
    }
    let kept = 1_000 - closed;
    assert_eq!(kept, Limits::default().max_connections_per_client, "connections the hoarder keeps");
}

#[tokio::test]
async fn slow_or_huge_headers_cost_a_bounded_buffer_and_time() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = Limits { header_timeout: Duration::from_secs(1), ..Limits::default() };
    let (running, _xids) = agent("h100-mig-all-balanced.json", limits).await;
    // 300 connections that start their headers and never finish them, from
    // another address than the cockpit's.
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut c = connect_from("127.0.0.2", running.addr).await;
        c.write_all(b"GET /v1/snapshot HTTP/1.1\r\nhost: x\r\nx-pad: ").await.unwrap();
        slow.push(c);
    }
    // A cockpit is still served meanwhile.
    assert_eq!(get(running.addr, "/healthz", &[("x-kgpu-token", TOKEN)]).await.status, StatusCode::OK);
    // Headers larger than the read buffer are refused, not buffered.
    let mut huge = tokio::net::TcpStream::connect(running.addr).await.unwrap();
    let mut request = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', 380 << 10));
    let _ = huge.write_all(&request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), huge.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer}");
    // After the header timeout, the slow ones have been closed by the agent.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut closed = 0;
    for c in &mut slow {
        let mut buf = [0u8; 256];
        match tokio::time::timeout(Duration::from_millis(200), c.read(&mut buf)).await {
            Ok(Ok(_)) | Ok(Err(_)) => closed += 1,
            Err(_) => {}
        }
    }
    assert_eq!(closed, 300, "every slow client was cut off");
}

#[tokio::test]
async fn the_snapshot_carries_the_gpus_mig_placements_and_clear_states() {
    let (running, _xids) = agent("h100-mig-all-balanced.json", Limits::default()).await;
    let reply = get(running.addr, "/v1/snapshot", &[("authorization", &bearer())]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.headers["content-type"], "application/json");
    let snap: AgentSnapshot = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(snap.node, "gpu-node-1");
    assert_eq!(snap.backend, "fake");
    assert_eq!(snap.driver_version.as_deref(), Some("570.124.06"));
    let gpu = &snap.gpus[0];
    assert_eq!(gpu.uuid, "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4");
    let mig = gpu.mig.as_ref().unwrap();
    let layout: Vec<(&str, u32, u32)> = mig
        .instances
        .iter()
        .map(|i| (i.profile.as_str(), i.placement.unwrap().start, i.placement.unwrap().size))
        .collect();
    assert_eq!(layout, [("1g.10gb", 0, 1), ("1g.10gb", 1, 1), ("2g.20gb", 2, 2), ("3g.40gb", 4, 4)]);
    assert_eq!(gpu.health, "healthy");
    // No kubelet socket here: a state, said plainly.
    assert!(!snap.pod_resources.available);
    assert!(snap.pod_resources.reason.as_deref().unwrap().starts_with("no kubelet pod-resources socket"));

    // The same token in the header the pod proxy lets through.
    let via_proxy_header = get(running.addr, "/v1/snapshot", &[("x-kgpu-token", TOKEN)]).await;
    assert_eq!(via_proxy_header.status, StatusCode::OK);
    let health = get(running.addr, "/healthz", &[("authorization", &bearer())]).await;
    assert_eq!((health.status, health.body.as_str()), (StatusCode::OK, "ok"));
}

#[tokio::test]
async fn no_driver_is_reported_not_crashed_on() {
    let (running, _xids) = agent("no-driver.json", Limits::default()).await;
    let reply = get(running.addr, "/v1/snapshot", &[("authorization", &bearer())]).await;
    let snap: AgentSnapshot = serde_json::from_str(&reply.body).unwrap();
    assert!(!snap.nvml.available);
    assert!(snap.nvml.reason.unwrap().contains("no NVIDIA driver"));
    assert!(snap.gpus.is_empty());
}

#[tokio::test]
async fn every_request_needs_the_token() {
    let (running, _xids) = agent("h100-mig-all-balanced.json", Limits::default()).await;
    for path in ["/v1/snapshot", "/v1/events", "/healthz"] {
        let none = get(running.addr, path, &[]).await;
        assert_eq!(none.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(none.headers["www-authenticate"], "Bearer realm=\"kgpu-agent\"");
        let wrong = get(running.addr, path, &[("authorization", "Bearer test-token-0123456789abcdeX")]).await;
        assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{path}");
        let short = get(running.addr, path, &[("x-kgpu-token", "test")]).await;
        assert_eq!(short.status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // Read-only: nothing but GET.
    let stream = tokio::net::TcpStream::connect(running.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let post = http::Request::post("/v1/snapshot")
        .header("host", running.addr.to_string())
        .header("authorization", bearer())
        .body(Empty::<Bytes>::new())
        .unwrap();
    assert_eq!(sender.send_request(post).await.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);
}

/// Through the API server's pod proxy every cockpit comes from the API
/// server's address; the proxy names each in `X-Forwarded-For` (it appends
/// the address it was asked from: seen on the real API server). One client
/// spending its rate there does not spend another's.
#[tokio::test]
async fn behind_the_proxy_one_client_cannot_spend_anothers_rate() {
    let (running, _xids) = agent("h100-mig-all-balanced.json", Limits::default()).await;
    let hoarder =
        futures_statuses(running.addr, 60, &[("x-kgpu-token", TOKEN), ("x-forwarded-for", "10.0.0.66")]).await;
    assert!(hoarder.contains(&StatusCode::TOO_MANY_REQUESTS), "the hoarder is limited: {hoarder:?}");
    // What a client wrote before the proxy's own entry is not who it is.
    let forged = [("x-kgpu-token", TOKEN), ("x-forwarded-for", "10.0.0.7, 10.0.0.66")];
    assert_eq!(futures_statuses(running.addr, 3, &forged).await, vec![StatusCode::TOO_MANY_REQUESTS; 3]);
    let cockpit = futures_statuses(running.addr, 20, &[("x-kgpu-token", TOKEN), ("x-forwarded-for", "10.0.0.7")]).await;
    assert_eq!(cockpit, vec![StatusCode::OK; 20], "the other cockpit's requests");
}

/// A direct client that makes up a new `X-Forwarded-For` for each request
/// gets at most its address's share, not a fresh rate each time.
#[tokio::test]
async fn made_up_forwarded_clients_share_their_address_allowance() {
    let limits = Limits { requests_per_second: 1, burst: 2, ..Limits::default() };
    let (running, _xids) = agent("h100-mig-all-balanced.json", limits).await;
    let started = std::time::Instant::now();
    let mut served = 0u64;
    for i in 0..100 {
        let from = format!("10.1.{}.{}", i / 250, i % 250 + 1);
        let reply = get(running.addr, "/healthz", &[("x-kgpu-token", TOKEN), ("x-forwarded-for", &from)]).await;
        served += u64::from(reply.status == StatusCode::OK);
    }
    // The address's share: 8 clients' burst, then 8 clients' rate.
    let most = 16 + 8 * (started.elapsed().as_secs() + 1);
    assert!(served <= most, "{served} served, at most {most}");
    assert!(served >= 16, "{served} served");
}

#[tokio::test]
async fn limits_are_enforced() {
    // Rate: a burst of 3, then 1 per second.
    let limits = Limits { requests_per_second: 1, burst: 3, ..Limits::default() };
    let (running, _xids) = agent("h100-mig-all-balanced.json", limits).await;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(get(running.addr, "/healthz", &[("authorization", &bearer())]).await.status);
    }
    assert_eq!(&statuses[..3], [StatusCode::OK; 3]);
    assert_eq!(statuses[4], StatusCode::TOO_MANY_REQUESTS);
    let limited = get(running.addr, "/healthz", &[("authorization", &bearer())]).await;
    assert_eq!(limited.headers["retry-after"], "1");
    // Wrong tokens have their own bucket: guessing is as slow, and never costs a cockpit its turns.
    let guesses: Vec<StatusCode> =
        futures_statuses(running.addr, 5, &[("authorization", "Bearer guess-0000000000")]).await;
    assert_eq!(&guesses[..3], [StatusCode::UNAUTHORIZED; 3]);
    assert_eq!(guesses[4], StatusCode::TOO_MANY_REQUESTS);

    // Response size: a snapshot beyond the limit is refused, not cut.
    let limits = Limits { max_body_bytes: 512, ..Limits::default() };
    let (running, _xids) = agent("xid79-8gpu.json", limits).await;
    let big = get(running.addr, "/v1/snapshot", &[("authorization", &bearer())]).await;
    assert_eq!(big.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(big.body.contains("exceeds the 512-byte response limit"), "{}", big.body);

    // Streams: one at a time here; the second is refused while the first is open.
    let limits = Limits { max_streams: 1, ..Limits::default() };
    let (running, _xids) = agent("h100-mig-all-balanced.json", limits).await;
    let first = open_stream(running.addr).await;
    let second = get(running.addr, "/v1/events", &[("authorization", &bearer())]).await;
    assert_eq!(second.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(second.body.contains("at most 1 event streams"), "{}", second.body);
    drop(first);
    // Closing the first frees its place.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _third = open_stream(running.addr).await;
}

/// An open event stream: its body, read frame by frame.
struct Stream {
    body: hyper::body::Incoming,
    buffer: String,
}

async fn open_stream(addr: SocketAddr) -> Stream {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("/v1/events")
        .header("host", addr.to_string())
        .header("authorization", bearer())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    Stream { body: response.into_body(), buffer: String::new() }
}

impl Stream {
    /// The next event: (name, data).
    async fn next(&mut self) -> (String, StreamEvent) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::new();
                let mut data = String::new();
                for line in raw.lines() {
                    if let Some(n) = line.strip_prefix("event: ").or_else(|| line.strip_prefix("event:")) {
                        name = n.to_string();
                    } else if let Some(d) = line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")) {
                        data.push_str(d);
                    }
                }
                if data.is_empty() {
                    continue; // keep-alive comment
                }
                return (name, serde_json::from_str(&data).unwrap());
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("an event within 10s")
                .expect("the stream is open")
                .unwrap();
            if let Ok(chunk) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&chunk));
            }
        }
    }
}

#[tokio::test]
async fn the_stream_sends_the_snapshot_then_xids_as_they_happen() {
    let (running, xids) = agent("xid79-8gpu.json", Limits::default()).await;
    let mut stream = open_stream(running.addr).await;
    let (name, first) = stream.next().await;
    assert_eq!(name, "snapshot");
    let StreamEvent::Snapshot { snapshot } = first else { panic!("{first:?}") };
    assert_eq!(snapshot.gpus.len(), 8);
    // The recorded history is the agent's own business: it starts clean.
    assert!(snapshot.gpus.iter().all(|g| g.health == "healthy" && g.xids.is_empty()));

    xids.inject(XID_GPU, 79);
    let (name, event) = stream.next().await;
    assert_eq!(name, "xid");
    let StreamEvent::Xid { gpu, xid } = event else { panic!("{event:?}") };
    assert_eq!((gpu.as_str(), xid.code), (XID_GPU, 79));
    assert!(xid.meaning.as_deref().unwrap().to_lowercase().contains("fallen off the bus"), "{:?}", xid.meaning);
    // Then the snapshot that shows it: that GPU is unhealthy now.
    let (name, event) = stream.next().await;
    assert_eq!(name, "snapshot");
    let StreamEvent::Snapshot { snapshot } = event else { panic!("{event:?}") };
    let hit = snapshot.gpus.iter().find(|g| g.uuid == XID_GPU).unwrap();
    assert!(hit.health.starts_with("unhealthy: Xid 79"), "{}", hit.health);
    assert_eq!(hit.xids.len(), 1);
    assert!(snapshot.gpus.iter().filter(|g| g.uuid != XID_GPU).all(|g| g.health == "healthy"));
}

/// The token that opens a node's agent is derived from the cluster's key
/// and the node's name (HMAC-SHA256, as `openssl dgst -hmac` computes it).
#[test]
fn a_node_token_is_the_hmac_of_the_node_name_under_the_key() {
    // printf 'kgpu-agent/v1:%s' gpu-01 | openssl dgst -sha256 -hmac live-test-token-6f1c0e2b9a7d4e38 -hex
    assert_eq!(
        kgpu::agent::wire::node_token("live-test-token-6f1c0e2b9a7d4e38", "gpu-01"),
        "313b86324f083d68d56a9da18d72273a39349c757369f604ba5b46d9d2cb818f"
    );
}

/// The agent binary accepts only its own node's token: not another node's
/// (a token seen on the way to one node opens no other), and not the key.
#[tokio::test]
async fn an_agent_accepts_only_its_own_nodes_token() {
    const KEY: &str = "cluster-key-5b0d9c2e7f14a6b3";
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("token");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let port = kgpu::lab::cluster::free_port().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent/h100-mig-all-balanced.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kgpu"))
        .args(["agent", "--listen", &format!("127.0.0.1:{port}"), "--node-name", "gpu-a", "--backend"])
        .arg(format!("fake:{}", fixture.display()))
        .arg("--token-file")
        .arg(&key_file)
        .env("KGPU_DATA_DIR", dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let with = |token: String| async move { get(addr, "/v1/snapshot", &[("x-kgpu-token", &token)]).await.status };
    let own = with(kgpu::agent::wire::node_token(KEY, "gpu-a")).await;
    let other = with(kgpu::agent::wire::node_token(KEY, "gpu-b")).await;
    let key = with(KEY.to_string()).await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((own, other, key), (StatusCode::OK, StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED));
}

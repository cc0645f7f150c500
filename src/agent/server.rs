//! The agent's HTTP side: read-only, token-protected, rate-limited per
//! client, with bounded connections.
//!
//! - `GET /v1/snapshot` — the latest snapshot (JSON).
//! - `GET /v1/events` — server-sent events: the snapshot first, then a new
//!   snapshot whenever something changed and each XID as it happens.
//! - `GET /healthz` — `ok`.
//!
//! Every request needs the token: `Authorization: Bearer <token>`, or
//! `X-Kgpu-Token: <token>` — the API server's pod proxy authenticates the
//! caller with its own Authorization header and drops it before proxying,
//! so the cockpit sends the agent's token in the second header.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::Stream;
use hyper_util::rt::{TokioIo, TokioTimer};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};
use tower::ServiceExt;

use super::wire::{AgentSnapshot, StreamEvent};

pub const TOKEN_HEADER: &str = "x-kgpu-token";

#[derive(Clone, Debug)]
pub struct Limits {
    /// Sustained requests per second, per client (and, apart, per client
    /// presenting a wrong token).
    pub requests_per_second: u32,
    /// Requests allowed in a burst above that rate.
    pub burst: u32,
    /// Event streams open at once.
    pub max_streams: usize,
    /// Largest response body; a snapshot beyond it is refused, not cut.
    pub max_body_bytes: usize,
    /// Connections open at once; more are closed as they arrive.
    pub max_connections: usize,
    /// Connections one client (address) may hold open at once, so that one
    /// holding many idle ones cannot lock the others out. (Through the pod
    /// proxy every cockpit arrives from the API server's address.)
    pub max_connections_per_client: usize,
    /// How long a connection may take to send a request's headers.
    pub header_timeout: Duration,
    /// A connection's read buffer: larger headers are refused (431).
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            requests_per_second: 10,
            burst: 20,
            max_streams: 4,
            max_body_bytes: 4 << 20,
            max_connections: 512,
            max_connections_per_client: 64,
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 16 << 10,
        }
    }
}

/// The address a request came from (the API server's, through the pod proxy).
#[derive(Clone, Copy, Debug)]
struct Peer(IpAddr);

/// Serves `app` on `listener` within `limits`: a client that never finishes
/// its headers is cut off after `header_timeout`, each connection reads at
/// most `max_header_bytes` ahead, and past `max_connections` (or a client's
/// `max_connections_per_client`) new ones are closed.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let clients = Arc::new(Mutex::new(HashMap::new()));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait rather than spin.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(client) = ClientSlot::take(&clients, peer.ip(), limits.max_connections_per_client) else {
            tracing::debug!("{peer} holds {} connections: closing its next", limits.max_connections_per_client);
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("{} connections open: closing one from {peer}", limits.max_connections);
            continue;
        };
        let app = app.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer.ip()));
                app.clone().oneshot(req.map(axum::body::Body::new))
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!("connection from {peer}: {e}");
            }
            drop((slot, client));
        });
    }
}

/// One of a client's open connections, given back when it closes.
struct ClientSlot {
    clients: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl ClientSlot {
    fn take(clients: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, most: usize) -> Option<ClientSlot> {
        let mut open = clients.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.entry(ip).or_insert(0);
        if *held >= most.max(1) {
            return None;
        }
        *held += 1;
        Some(ClientSlot { clients: clients.clone(), ip })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = open.get_mut(&self.ip) {
            *held -= 1;
            if *held == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// A token bucket: `burst` requests at once, refilled at the sustained rate.
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Takes one request's token if there is one, refilling at `rate` up to `burst`.
    fn take(&mut self, now: Instant, rate: u32, burst: u32) -> bool {
        let refill = now.duration_since(self.last).as_secs_f64() * f64::from(rate);
        self.tokens = (self.tokens + refill).min(f64::from(burst.max(1)));
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Who is asking: the connection's address and, behind a proxy, the client
/// the proxy names last in `X-Forwarded-For` (the API server appends the
/// address it was asked from, so its own last entry cannot be forged
/// through it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Client {
    peer: IpAddr,
    forwarded_for: Option<IpAddr>,
}

/// A client's bucket, and apart one per client for wrong tokens: a flood of
/// guesses is slowed without taking a cockpit's turns. Behind the API
/// server's pod proxy every cockpit arrives from its address: each
/// forwarded client has its own bucket, and all of one address share
/// [`PEER_SHARE`] buckets' worth, so a client that forges `X-Forwarded-For`
/// on a direct connection gains at most that.
#[derive(Default)]
struct Buckets {
    authenticated: HashMap<Client, Bucket>,
    refused: HashMap<Client, Bucket>,
    peers: HashMap<IpAddr, Bucket>,
}

/// Clients remembered at most; idle ones are forgotten first.
const MAX_CLIENTS: usize = 4096;
/// What one address may ask in all, in clients' rates: the API server
/// speaks for every cockpit that reads this agent through it.
const PEER_SHARE: u32 = 8;

fn bucket<K: std::hash::Hash + Eq + Copy>(
    map: &mut HashMap<K, Bucket>,
    key: K,
    burst: u32,
    now: Instant,
) -> &mut Bucket {
    if map.len() >= MAX_CLIENTS && !map.contains_key(&key) {
        map.retain(|_, b| now.duration_since(b.last) < Duration::from_secs(60));
        if map.len() >= MAX_CLIENTS {
            map.clear();
        }
    }
    map.entry(key).or_insert(Bucket { tokens: f64::from(burst.max(1)), last: now })
}

impl Buckets {
    fn take(&mut self, authenticated: bool, client: Client, limits: &Limits) -> bool {
        let now = Instant::now();
        let map = if authenticated { &mut self.authenticated } else { &mut self.refused };
        if !bucket(map, client, limits.burst, now).take(now, limits.requests_per_second, limits.burst) {
            return false;
        }
        // Forwarded clients of one address share its allowance (refusals
        // have their own buckets only: they never reach the snapshot).
        if authenticated && client.forwarded_for.is_some() {
            let (rate, burst) = (limits.requests_per_second * PEER_SHARE, limits.burst * PEER_SHARE);
            return bucket(&mut self.peers, client.peer, burst, now).take(now, rate, burst);
        }
        true
    }
}

/// The client a request speaks for: its address, and the last address in
/// `X-Forwarded-For` when there is one.
fn client_of(peer: IpAddr, headers: &HeaderMap) -> Client {
    let forwarded_for = headers
        .get_all("x-forwarded-for")
        .iter()
        .next_back()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|last| last.trim().parse::<IpAddr>().ok());
    Client { peer, forwarded_for }
}

#[derive(Clone)]
struct AppState {
    token: Arc<[u8]>,
    latest: watch::Receiver<Arc<AgentSnapshot>>,
    events: broadcast::Sender<StreamEvent>,
    buckets: Arc<Mutex<Buckets>>,
    streams: Arc<Semaphore>,
    limits: Limits,
}

pub fn router(
    token: &[u8],
    latest: watch::Receiver<Arc<AgentSnapshot>>,
    events: broadcast::Sender<StreamEvent>,
    limits: Limits,
) -> Router {
    let state = AppState {
        token: Arc::from(token),
        latest,
        events,
        buckets: Arc::new(Mutex::new(Buckets::default())),
        streams: Arc::new(Semaphore::new(limits.max_streams)),
        limits,
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/snapshot", get(serve_snapshot))
        .route("/v1/events", get(serve_events))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn presented_token(headers: &HeaderMap) -> Option<&[u8]> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::as_bytes);
    bearer.or_else(|| headers.get(TOKEN_HEADER).map(HeaderValue::as_bytes))
}

/// The token, then the client's rate: a right token draws on the client's
/// own bucket, a wrong one on the client's bucket of refusals (so guessing
/// is slow, and never costs a cockpit its turns).
async fn guard(State(st): State<AppState>, req: Request, next: Next) -> Response {
    // Constant time in the token's content (a length mismatch fails early).
    let authenticated = presented_token(req.headers()).is_some_and(|t| bool::from(t.ct_eq(&st.token)));
    let peer = req.extensions().get::<Peer>().map_or(IpAddr::from([0, 0, 0, 0]), |p| p.0);
    let client = client_of(peer, req.headers());
    let allowed = st.buckets.lock().unwrap_or_else(PoisonError::into_inner).take(authenticated, client, &st.limits);
    if !allowed {
        let mut response = (StatusCode::TOO_MANY_REQUESTS, "too many requests\n").into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    }
    if authenticated {
        return next.run(req).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "a valid agent token is required\n").into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"kgpu-agent\""));
    response
}

fn too_large(size: usize, limit: usize) -> Response {
    tracing::warn!("snapshot of {size} bytes exceeds the {limit}-byte response limit");
    (StatusCode::SERVICE_UNAVAILABLE, format!("snapshot of {size} bytes exceeds the {limit}-byte response limit\n"))
        .into_response()
}

async fn serve_snapshot(State(st): State<AppState>) -> Response {
    let snap = st.latest.borrow().clone();
    match serde_json::to_vec(&*snap) {
        Ok(body) if body.len() > st.limits.max_body_bytes => too_large(body.len(), st.limits.max_body_bytes),
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding the snapshot: {e}\n")).into_response(),
    }
}

async fn serve_events(State(st): State<AppState>) -> Response {
    let Ok(permit) = st.streams.clone().try_acquire_owned() else {
        return (StatusCode::SERVICE_UNAVAILABLE, format!("at most {} event streams at once\n", st.limits.max_streams))
            .into_response();
    };
    let first = StreamEvent::Snapshot { snapshot: Box::new((*st.latest.borrow().clone()).clone()) };
    let stream = event_stream(first, st.events.subscribe(), permit, st.limits.max_body_bytes);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

/// The stream: `first`, then what the collector broadcasts. The permit is
/// held for as long as the client listens.
fn event_stream(
    first: StreamEvent,
    rx: broadcast::Receiver<StreamEvent>,
    permit: OwnedSemaphorePermit,
    max_bytes: usize,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = (Some(first), rx, permit);
    futures::stream::unfold(state, move |(mut first, mut rx, permit)| async move {
        loop {
            let next = match first.take() {
                Some(e) => e,
                None => match rx.recv().await {
                    Ok(e) => e,
                    // A slow reader missed events: the next snapshot catches it up.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            };
            let name = match &next {
                StreamEvent::Snapshot { .. } => "snapshot",
                StreamEvent::Xid { .. } => "xid",
            };
            let Ok(data) = serde_json::to_string(&next) else { continue };
            if data.len() > max_bytes {
                tracing::warn!("an event of {} bytes exceeds the response limit; skipped", data.len());
                continue;
            }
            return Some((Ok(Event::default().event(name).data(data)), (None, rx, permit)));
        }
    })
}

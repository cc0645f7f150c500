//! The agent's HTTP side: read-only, token-protected, rate-limited.
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

use std::convert::Infallible;
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
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast, watch};

use super::wire::{AgentSnapshot, StreamEvent};

pub const TOKEN_HEADER: &str = "x-kgpu-token";

#[derive(Clone, Debug)]
pub struct Limits {
    /// Sustained requests per second (all clients together).
    pub requests_per_second: u32,
    /// Requests allowed in a burst above that rate.
    pub burst: u32,
    /// Event streams open at once.
    pub max_streams: usize,
    /// Largest response body; a snapshot beyond it is refused, not cut.
    pub max_body_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { requests_per_second: 10, burst: 20, max_streams: 4, max_body_bytes: 4 << 20 }
    }
}

/// A token bucket: `burst` requests at once, refilled at the sustained rate.
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Clone)]
struct AppState {
    token: Arc<[u8]>,
    latest: watch::Receiver<Arc<AgentSnapshot>>,
    events: broadcast::Sender<StreamEvent>,
    bucket: Arc<Mutex<Bucket>>,
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
        bucket: Arc::new(Mutex::new(Bucket { tokens: f64::from(limits.burst), last: Instant::now() })),
        streams: Arc::new(Semaphore::new(limits.max_streams)),
        limits,
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/snapshot", get(serve_snapshot))
        .route("/v1/events", get(serve_events))
        // Layers run outside in: the rate limit first (it also slows down
        // token guessing), then the token check.
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn_with_state(state.clone(), rate_limit))
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

async fn authenticate(State(st): State<AppState>, req: Request, next: Next) -> Response {
    // Constant time in the token's content (a length mismatch fails early).
    let ok = presented_token(req.headers()).is_some_and(|t| bool::from(t.ct_eq(&st.token)));
    if ok {
        return next.run(req).await;
    }
    let mut response = (StatusCode::UNAUTHORIZED, "a valid agent token is required\n").into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"kgpu-agent\""));
    response
}

async fn rate_limit(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let allowed = {
        let mut b = st.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.duration_since(b.last).as_secs_f64() * f64::from(st.limits.requests_per_second);
        b.tokens = (b.tokens + refill).min(f64::from(st.limits.burst.max(1)));
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    };
    if allowed {
        return next.run(req).await;
    }
    let mut response = (StatusCode::TOO_MANY_REQUESTS, "too many requests\n").into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
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

//! The floor a cockpit's first complete view is measured against: the raw
//! paginated LIST of the same objects, read and dropped.

use std::time::Instant;

/// The floor: every page of pods and of nodes read (side by side, as the
/// cockpit lists its feeds) and dropped, through the same client library.
pub async fn raw_list(kubeconfig: &std::path::Path) -> f64 {
    let target = kgpu::sources::kube::client::Target { kubeconfig: Some(kubeconfig.to_path_buf()), context: None };
    let (client, _) = kgpu::sources::kube::client::connect(&target).await.unwrap();
    let t0 = Instant::now();
    let pages = |path: &'static str| {
        let client = client.clone();
        async move {
            let mut token = String::new();
            loop {
                let uri = if token.is_empty() {
                    format!("{path}?limit=500")
                } else {
                    format!("{path}?limit=500&continue={token}")
                };
                let body = client.request_text(http::Request::get(uri).body(Vec::new()).unwrap()).await.unwrap();
                // The token is all a client needs from the page.
                token = body
                    .split_once(r#""continue":""#)
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(t, _)| t.to_string())
                    .unwrap_or_default();
                if token.is_empty() {
                    break;
                }
            }
        }
    };
    futures::join!(pages("/api/v1/pods"), pages("/api/v1/nodes"));
    t0.elapsed().as_secs_f64()
}

//! What a tool costs the cluster: the API server's CPU time (from /proc)
//! and the requests it has answered (its own `apiserver_request_total`).

/// `apiserver_request_total` by series (verb, resource, code, …): each
/// request the server has finished (a watch counts when it ends).
pub fn requests_by_series(metrics: &str) -> std::collections::BTreeMap<String, f64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("apiserver_request_total"))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse::<f64>().ok()?))
        })
        .collect()
}

/// One reading of the API server: CPU seconds and requests answered.
#[derive(Clone)]
pub struct Reading {
    pub cpu: f64,
    pub requests: std::collections::BTreeMap<String, f64>,
    pub at: std::time::Instant,
}

impl Reading {
    fn total(&self) -> f64 {
        self.requests.values().sum()
    }
}

pub struct Meter {
    pub pid: u32,
    pub client: kube::Client,
}

impl Meter {
    pub async fn read(&self) -> Reading {
        let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = self.client.request_text(req).await.unwrap_or_default();
        Reading {
            cpu: super::terminal::cpu_seconds(self.pid),
            requests: requests_by_series(&text),
            at: std::time::Instant::now(),
        }
    }
}

/// CPU share of one core and requests per second between two readings; the
/// second reading's own scrape of /metrics is not counted.
pub fn rates(before: &Reading, after: &Reading) -> (f64, f64) {
    let secs = (after.at - before.at).as_secs_f64().max(1e-9);
    ((after.cpu - before.cpu) / secs, (after.total() - before.total() - 1.0).max(0.0) / secs)
}

/// The series that grew most between two readings, with their counts: what
/// a tool asked the server for.
pub fn busiest(before: &Reading, after: &Reading, n: usize) -> Vec<(String, f64)> {
    let mut grown: Vec<(String, f64)> = after
        .requests
        .iter()
        .map(|(k, v)| (k.clone(), v - before.requests.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d > 0.0)
        .collect();
    grown.sort_by(|a, b| b.1.total_cmp(&a.1));
    grown.truncate(n);
    grown
}

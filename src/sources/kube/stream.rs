//! The whole of a collection streamed over a watch (KEP-3157 WatchList):
//! `sendInitialEvents=true` makes the API server send every object as an
//! ADDED event, from its watch cache, then a bookmark annotated
//! `k8s.io/initial-events-end` with the resourceVersion of that state. No
//! page is ever built or held, on the server or here: each object is decoded
//! and converted as it arrives.
//!
//! Servers that cannot stream refuse the request before it starts: 1.27–1.31
//! and 1.33 with the `WatchList` gate off ("sendInitialEvents is forbidden
//! for watch unless the WatchList feature gate is enabled") and older ones
//! ("resourceVersionMatch is forbidden for watch") answer 422. The caller
//! then lists by pages ([`super::pages`]) for the rest of the session.

use std::fmt::Debug;

use futures::StreamExt;
use kube::Resource;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::core::Status;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use super::pages::{Listed, Read};

/// The annotation of the bookmark that ends the initial state.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Why a streamed list did not come.
#[derive(Debug)]
pub enum Unstreamed {
    /// The server cannot stream a list (its words): list by pages instead.
    Refused(String),
    /// Anything else: the same error a paged list could have met.
    Failed(watcher::Error),
}

/// Whether an error status says the server does not stream lists, rather
/// than that something went wrong: the request is invalid to it, or its
/// words name the parameters (an aggregated API server has gates of its own
/// and may say so with another code).
fn refusal(status: &Status) -> Option<String> {
    let names_them = ["sendInitialEvents", "resourceVersionMatch"].iter().any(|p| status.message.contains(p));
    (matches!(status.code, 400 | 422) || names_them).then(|| format!("HTTP {}: {}", status.code, status.message))
}

/// Streams the collection `api` names, converting each object as it comes;
/// gives the objects in the server's order and the resourceVersion to watch
/// from. `api`'s client should give up on a silent read: the server sends
/// without pause until the end of the initial state.
pub async fn list<K, C>(api: &Api<K>, watch_seconds: u32, convert: C) -> Result<Listed, Unstreamed>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Fn(&K) -> Read,
{
    let params = WatchParams::default().timeout(watch_seconds).initial_events();
    // No resourceVersion: the state as of now (a consistent read).
    let stream = match api.watch(&params, "").await {
        Ok(stream) => stream,
        Err(kube::Error::Api(status)) => {
            return Err(match refusal(&status) {
                Some(why) => Unstreamed::Refused(why),
                None => Unstreamed::Failed(watcher::Error::WatchStartFailed(kube::Error::Api(status))),
            });
        }
        Err(e) => return Err(Unstreamed::Failed(watcher::Error::WatchStartFailed(e))),
    };
    futures::pin_mut!(stream);
    let mut listed = Listed::default();
    while let Some(event) = stream.next().await {
        match event.map_err(|e| Unstreamed::Failed(watcher::Error::WatchFailed(e)))? {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => listed.add(std::iter::once(convert(&o))),
            // Not sent before the end of the initial state; nothing to undo.
            WatchEvent::Deleted(_) => {}
            WatchEvent::Bookmark(b) => {
                if b.metadata.annotations.get(INITIAL_EVENTS_END).is_some_and(|v| v == "true") {
                    if b.metadata.resource_version.is_empty() {
                        return Err(Unstreamed::Failed(watcher::Error::NoResourceVersion));
                    }
                    listed.resource_version = b.metadata.resource_version;
                    return Ok(listed);
                }
            }
            WatchEvent::Error(status) => {
                return Err(match refusal(&status) {
                    Some(why) => Unstreamed::Refused(why),
                    None => Unstreamed::Failed(watcher::Error::WatchError(status)),
                });
            }
        }
    }
    // A server that took the request but never said where its state ends
    // does not stream lists, whatever it accepted.
    Err(Unstreamed::Refused("the watch ended without marking the end of its initial state".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> Status {
        Status::failure(message, "Invalid").with_code(code)
    }

    /// The servers' own words (apimachinery's ValidateListOptions): 1.33 and
    /// 1.27–1.31 with the gate off, and the servers before streaming.
    #[test]
    fn a_server_that_cannot_stream_is_told_from_one_that_failed() {
        let refused = [
            status(
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"#,
            ),
            status(
                422,
                r#"ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch"#,
            ),
            status(400, "bad request"),
            status(500, "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
        ];
        for s in &refused {
            assert_eq!(refusal(s), Some(format!("HTTP {}: {}", s.code, s.message)));
        }
        // Not a refusal to stream: asked again as any list would be.
        for s in [
            status(403, "pods is forbidden"),
            status(410, "too old resource version"),
            status(500, "etcdserver: leader changed"),
        ] {
            assert_eq!(refusal(&s), None, "{}", s.message);
        }
    }
}

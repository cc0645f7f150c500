//! The paginated list a feed starts from, with the next page asked for while
//! this one decodes.
//!
//! kube-rs's watcher reads a page, decodes it, hands its objects out one by
//! one and only then asks for the next, copying each body twice on the way
//! (chunks → bytes → String): on a 100,000-pod fleet the server's time for
//! 200 pages and their transfer add up to the decoding. A list body starts
//! with its metadata, so the continue token is read first ([`head`]), the
//! next page is asked for at once, and the page decodes (sonic-rs, see
//! [`decode`]) and converts in a task of its own; [`AHEAD`] bounds what is
//! held meanwhile. Pages still come out in the server's order, so the list
//! is exactly the one kube-rs reads. At 100,000 pods on the benchmarks'
//! loopback server the first complete view went from 2.9 to 2.0 s.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;

use http_body_util::BodyExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::ListParams;
use kube::core::{Request, Status};
use kube::runtime::watcher;
use kube::{Client, Error};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio::task::JoinHandle;

use crate::model::Object;

/// Objects a page asks for, as client-go and kubectl do.
pub const PAGE_SIZE: u32 = 500;

/// Pages decoding while the next one is read: two keep both cores busy, and
/// at most three bodies (about 6 MB of pods) are held at once.
const AHEAD: usize = 2;

/// One object of a page, converted, or why it could not be.
pub type Read = Result<Object, String>;

/// A complete list: its objects in the server's order, why the others
/// could not be read, and the resourceVersion to watch from.
#[derive(Debug, Default)]
pub struct Listed {
    pub objects: Vec<Object>,
    pub skipped: Vec<String>,
    pub resource_version: String,
}

impl Listed {
    pub(super) fn add(&mut self, reads: impl IntoIterator<Item = Read>) {
        for read in reads {
            match read {
                Ok(object) => self.objects.push(object),
                Err(reason) => self.skipped.push(reason),
            }
        }
    }
}

/// A page decoding in a task of its own: what it read, and its body's buffer
/// to read a later page into.
type Decoding = JoinHandle<(Result<Vec<Read>, serde_json::Error>, Vec<u8>)>;

/// Lists a collection page by page.
pub async fn list<K, C>(client: &Client, url: &str, convert: C) -> Result<Listed, watcher::Error>
where
    K: DeserializeOwned + Send + 'static,
    C: Fn(&K) -> Read + Copy + Send + 'static,
{
    let request = Request::new(url);
    let mut listed = Listed::default();
    let mut decoding: VecDeque<Decoding> = VecDeque::new();
    // Bodies' buffers, read into again: a page's body (about 2 MB of pods)
    // grown by doubling in fresh memory cost as much as a tenth of the list.
    let mut buffers: Vec<Vec<u8>> = Vec::new();
    let mut token: Option<String> = None;
    let resource_version = loop {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let http = request.list(&params).map_err(|e| failed(Error::BuildRequest(e)))?;
        let body = fetch(client, http, buffers.pop().unwrap_or_default()).await.map_err(failed)?;
        let meta = head(&body).map_err(|e| failed(Error::SerdeError(e)))?;
        if token.is_none() {
            listed.objects.reserve(room_for(&meta));
        }
        decoding.push_back(tokio::spawn(async move { (decode(&body, convert), body) }));
        while decoding.len() >= AHEAD {
            let (reads, buffer) = next_page(&mut decoding).await?;
            listed.add(reads);
            buffers.push(buffer);
        }
        token = meta.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break meta.resource_version.filter(|v| !v.is_empty());
        }
    };
    while !decoding.is_empty() {
        listed.add(next_page(&mut decoding).await?.0);
    }
    listed.resource_version = resource_version.ok_or(watcher::Error::NoResourceVersion)?;
    Ok(listed)
}

/// The room a list needs, from its first page: the server says how many
/// are left, and a million objects (320 bytes each as they travel to the
/// model) grown by doubling would be copied over and over, and held twice
/// at the last doubling. The count is a hint, not a promise: an absurd one
/// reserves no more than the largest fleet kgpu is measured at. A list of
/// one page (no count) reserves nothing: its objects say how many they are.
fn room_for(first: &ListMeta) -> usize {
    const MOST: usize = 1_000_000;
    match first.remaining_item_count.and_then(|n| usize::try_from(n).ok()) {
        Some(left) if left > 0 => left.min(MOST) + PAGE_SIZE as usize,
        _ => 0,
    }
}

fn failed(e: Error) -> watcher::Error {
    watcher::Error::InitialListFailed(e)
}

/// Waits for the oldest page to decode; hands its buffer back.
async fn next_page(decoding: &mut VecDeque<Decoding>) -> Result<(Vec<Read>, Vec<u8>), watcher::Error> {
    match decoding.pop_front() {
        None => Ok(Default::default()),
        Some(task) => match task.await {
            Ok((decoded, buffer)) => Ok((decoded.map_err(|e| failed(Error::SerdeError(e)))?, buffer)),
            Err(join) => Err(failed(Error::Service(Box::new(join)))),
        },
    }
}

/// The body of a request, read whole into `bytes` (emptied first); an error
/// status is the server's `Status` (or its text), as kube-rs reports it.
async fn fetch(client: &Client, request: http::Request<Vec<u8>>, mut bytes: Vec<u8>) -> Result<Vec<u8>, Error> {
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let status = response.status();
    let expected = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = response.into_body();
    bytes.clear();
    // A lying header must not reserve gigabytes.
    bytes.reserve(expected.min(64 << 20));
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    if status.is_client_error() || status.is_server_error() {
        let status = serde_json::from_slice::<Status>(&bytes).unwrap_or_else(|_| {
            Status::failure(String::from_utf8_lossy(&bytes).trim(), "Failed to parse error data")
                .with_code(status.as_u16())
        });
        return Err(Error::Api(status.boxed()));
    }
    Ok(bytes)
}

/// A list's metadata, read from the front of its body: the API server
/// writes `metadata` before `items`, so this reads a few hundred bytes (a
/// body with the items first is read through to its metadata).
fn head(body: &[u8]) -> Result<ListMeta, serde_json::Error> {
    struct Head<'a>(&'a mut Option<ListMeta>);
    impl<'de> Visitor<'de> for Head<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "metadata" {
                    *self.0 = Some(map.next_value()?);
                    // The rest is the items, decoded elsewhere: stop here.
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }
    let mut meta = None;
    // Stopping early leaves the object unclosed, which the deserializer
    // reports after the visitor returns: once the metadata is read, that
    // error says nothing about it.
    let read = de::Deserializer::deserialize_map(&mut serde_json::Deserializer::from_slice(body), Head(&mut meta));
    match (meta, read) {
        (Some(meta), _) => Ok(meta),
        (None, Err(e)) => Err(e),
        (None, Ok(())) => Err(de::Error::missing_field("metadata")),
    }
}

/// A page's items, decoded and converted one by one as they are read (a
/// page's decoded items are never all held at once). sonic-rs rather than
/// serde_json: the same serde types, read about twice as fast (it skips
/// what kgpu does not read with SIMD); the watch's events, one object each,
/// stay with kube-rs's serde_json. `tests/fuzz.rs` checks both read any page
/// alike.
pub fn decode<K: DeserializeOwned, T>(body: &[u8], convert: impl Fn(&K) -> T) -> Result<Vec<T>, serde_json::Error> {
    fn error(e: impl fmt::Display) -> serde_json::Error {
        de::Error::custom(e)
    }
    // Checked here, once, so that sonic-rs reads a `str` and need not.
    let text = std::str::from_utf8(body).map_err(error)?;
    let mut out = Vec::new();
    let mut reader = sonic_rs::Deserializer::from_str(text);
    let page = Page(Items { convert: &convert, out: &mut out, item: PhantomData });
    de::Deserializer::deserialize_map(&mut reader, page).map_err(error)?;
    reader.end().map_err(error)?;
    Ok(out)
}

/// A list body: its `items` converted, the rest skipped. As a struct of
/// `items: Option<Vec<K>>` reads it: a missing or null `items` is no items,
/// a repeated one an error.
struct Page<'a, K, T, C>(Items<'a, K, T, C>);

impl<'de, K: DeserializeOwned, T, C: Fn(&K) -> T> Visitor<'de> for Page<'_, K, T, C> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut items = Some(self.0);
        // A list has four keys or so: a String each, as in `head`.
        while let Some(key) = map.next_key::<String>()? {
            match (key == "items", items.take()) {
                (false, unread) => {
                    items = unread;
                    map.next_value::<IgnoredAny>()?;
                }
                (true, Some(unread)) => map.next_value_seed(unread)?,
                (true, None) => return Err(de::Error::duplicate_field("items")),
            }
        }
        Ok(())
    }
}

/// A list's `items`, each converted into `out` as soon as it is read.
struct Items<'a, K, T, C> {
    convert: &'a C,
    out: &'a mut Vec<T>,
    item: PhantomData<fn() -> K>,
}

impl<'de, K: DeserializeOwned, T, C: Fn(&K) -> T> DeserializeSeed<'de> for Items<'_, K, T, C> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, K: DeserializeOwned, T, C: Fn(&K) -> T> Visitor<'de> for Items<'_, K, T, C> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items")
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.out.reserve(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<K>()? {
            self.out.push((self.convert)(&item));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[test]
    fn the_head_is_read_without_the_items() {
        let body = br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc"},"items":[{"broken"#;
        let meta = head(body).unwrap();
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        assert_eq!(meta.continue_.as_deref(), Some("abc"));
        // Items first: read through to the metadata.
        let late = br#"{"items":[{"a":1}],"metadata":{"resourceVersion":"7"}}"#;
        assert_eq!(head(late).unwrap().resource_version.as_deref(), Some("7"));
        assert!(head(br#"{"items":[]}"#).is_err());
        assert!(head(b"<html>").is_err());
        assert!(head(br#"{"metadata":{"resourceVersion":7}}"#).is_err());
    }

    #[test]
    fn a_list_reserves_what_its_first_page_says_is_left_within_reason() {
        let meta = |left: Option<i64>| ListMeta { remaining_item_count: left, ..Default::default() };
        assert_eq!(room_for(&meta(None)), 0);
        assert_eq!(room_for(&meta(Some(0))), 0);
        assert_eq!(room_for(&meta(Some(-3))), 0);
        assert_eq!(room_for(&meta(Some(99_500))), 100_000);
        assert_eq!(room_for(&meta(Some(i64::MAX))), 1_000_500);
    }

    /// What JSON allows and `Value` never writes: escaped keys and values,
    /// a surrogate pair, repeated and unordered label keys, odd spacing.
    #[test]
    fn escapes_and_repeated_keys_read_as_serde_json_reads_them() {
        use crate::sources::kube::{convert, lean};
        let pod = r#" { "metadata" : { "n\u0061me" : "p\/1\u00e9",  "namespace":"team-\ud83d\ude00",
            "uid":"0b1f7c4e-2d5a-4c1e-9f3a-7e6d5c4b3a29", "creationTimestamp":"2026-11-30T09:00:00Z",
            "labels" : {"kueue.x-k8s.io/queue-name":"first","a\tb":"x\"y","kueue.x-k8s.io/queue-name":"q\n"}},
            "spec":{"nodeName":"gpu-1","containers":[{"name":"m","resources":{"requests":{"nvidia.com/gpu":"2"}}}]},
            "status":{"phase":"Running"} } "#;
        let body = format!(r#"{{"metadata":{{"resourceVersion":"1"}},"items":[{pod}]}}"#);
        let read = |p: &lean::Pod| convert::pod(p).map(Object::Pod);
        let listed = decode(body.as_bytes(), read).unwrap();
        let watched = read(&serde_json::from_str(pod).unwrap());
        assert_eq!(format!("{listed:?}"), format!("{:?}", [watched]));
        let Ok(Object::Pod(p)) = &listed[0] else { panic!("{listed:?}") };
        assert_eq!((&*p.name, p.namespace.as_str()), ("p/1é", "team-😀"));
        // Of a repeated key, the last one, as the API server reads it.
        assert_eq!(p.queue.as_ref().map(|q| q.as_str()), Some("q\n"));
    }

    #[test]
    fn a_page_converts_each_item_and_null_items_are_none() {
        let body = br#"{"metadata":{},"items":[{"n":1},{"n":-1}]}"#;
        #[derive(Deserialize)]
        struct Item {
            n: i64,
        }
        let convert = |i: &Item| if i.n > 0 { Ok(i.n) } else { Err(format!("n is {}", i.n)) };
        assert_eq!(decode(body, convert).unwrap(), [Ok(1), Err("n is -1".to_string())]);
        assert!(decode(br#"{"items":null}"#, convert).unwrap().is_empty());
        assert!(decode(br#"{"kind":"List"}"#, convert).unwrap().is_empty());
        assert!(decode(br#"{"items":[{"n":"x"}]}"#, convert).is_err());
        // As a struct with an `items` field reads it: a repeat is an error,
        // other keys are skipped wherever they are, trailing text fails.
        assert!(decode(br#"{"items":[],"items":[{"n":1}]}"#, convert).is_err());
        assert_eq!(decode(br#"{"items":[{"n":2}],"metadata":{"x":[1]}} "#, convert).unwrap(), [Ok(2)]);
        assert!(decode(br#"{"items":[]} {"#, convert).is_err());
        assert!(decode(b"{\"items\":[],\"k\":\"\xff\"}", convert).is_err());
        assert!(decode(br#"[]"#, convert).is_err());
    }
}

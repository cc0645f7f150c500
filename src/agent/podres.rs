//! Which pod holds which GPU: the kubelet's pod-resources API (`v1`,
//! gRPC on the unix socket `/var/lib/kubelet/pod-resources/kubelet.sock`).
//! Only the messages and fields kgpu reads are declared; protobuf skips
//! the others (CPU ids, memory, DRA claims).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Endpoint, Uri};

use super::wire::PodRef;

pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub namespace: String,
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    #[prost(string, tag = "1")]
    pub resource_name: String,
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

/// The GPU assignments in a List response: every device of an
/// `nvidia.com/...` resource (whole GPUs, MIG profiles, shared GPUs).
pub fn assignments(response: &ListPodResourcesResponse) -> Vec<PodRef> {
    let mut out = Vec::new();
    for pod in &response.pod_resources {
        for container in &pod.containers {
            for devices in container.devices.iter().filter(|d| d.resource_name.starts_with("nvidia.com/")) {
                for id in &devices.device_ids {
                    out.push(PodRef {
                        namespace: pod.namespace.clone(),
                        name: pod.name.clone(),
                        container: container.name.clone(),
                        device: id.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Asks the kubelet. `Err` says why the mapping is unavailable.
pub async fn list(socket: &Path) -> Result<Vec<PodRef>, String> {
    if !socket.exists() {
        return Err(format!(
            "no kubelet pod-resources socket at {} (mount /var/lib/kubelet/pod-resources into the agent)",
            socket.display()
        ));
    }
    let path: PathBuf = socket.to_path_buf();
    let channel = Endpoint::try_from("http://localhost")
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
        }))
        .await
        .map_err(|e| format!("cannot connect to the kubelet at {}: {e}", socket.display()))?;
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(16 << 20);
    grpc.ready().await.map_err(|e| format!("kubelet pod-resources: {e}"))?;
    let response = grpc
        .unary(
            tonic::Request::new(ListPodResourcesRequest {}),
            http::uri::PathAndQuery::from_static("/v1.PodResourcesLister/List"),
            tonic_prost::ProstCodec::<ListPodResourcesRequest, ListPodResourcesResponse>::default(),
        )
        .await
        .map_err(|status| format!("kubelet pod-resources List: {}", status.message()))?;
    Ok(assignments(response.get_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn gpu_devices_are_read_and_unknown_fields_skipped() {
        let response = ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "train-0".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    name: "main".into(),
                    devices: vec![
                        ContainerDevices {
                            resource_name: "nvidia.com/gpu".into(),
                            device_ids: vec!["GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4".into()],
                        },
                        ContainerDevices { resource_name: "rdma/hca".into(), device_ids: vec!["mlx5_0".into()] },
                    ],
                }],
            }],
        };
        let mut bytes = response.encode_to_vec();
        // A newer kubelet's extra field (ListPodResourcesResponse has only
        // field 1 here): field 7, varint 1.
        bytes.extend_from_slice(&[0x38, 0x01]);
        let back = ListPodResourcesResponse::decode(bytes.as_slice()).unwrap();
        let pods = assignments(&back);
        assert_eq!(pods.len(), 1, "only nvidia.com resources");
        assert_eq!(pods[0].device, "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4");
        assert_eq!((pods[0].namespace.as_str(), pods[0].name.as_str()), ("ml", "train-0"));
    }

    #[tokio::test]
    async fn an_absent_socket_is_a_clear_state() {
        let err = list(Path::new("/nonexistent/kubelet.sock")).await.unwrap_err();
        assert!(err.starts_with("no kubelet pod-resources socket"), "{err}");
    }
}

//! The lab's API objects: CRDs (installed and Established, or deleted),
//! namespaces and applied documents.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::super::{LabError, http, kwok, pki};
use super::Cluster;

impl Cluster {
    /// The CRDs of the groups asked for, and KWOK's Stage CRD and stages
    /// (once; later calls find them installed).
    pub(super) fn install_wanted_crds(&self, progress: &mut dyn FnMut(&str)) -> Result<(), LabError> {
        let mut groups = self.options.crd_groups.clone();
        if self.options.kueue && !groups.contains(&"kueue") {
            groups.push("kueue");
        }
        if self.options.kwok {
            groups.push("kwok");
        }
        let marker = self.dir.join(".crds-installed");
        if marker.exists() || groups.is_empty() {
            return Ok(());
        }
        let t0 = Instant::now();
        let files: Vec<PathBuf> = groups.iter().flat_map(|g| self.binaries.crd_files(g)).collect();
        self.install_crds(&files)?;
        if self.options.kwok {
            self.apply_documents(kwok::STAGES)?;
        }
        pki::write(&marker, "")?;
        progress(&format!("CRDs installed ({}) in {:.1}s", groups.join(", "), t0.elapsed().as_secs_f64()));
        Ok(())
    }

    /// Server-side applies CRD files and waits until each is Established.
    pub fn install_crds(&self, files: &[PathBuf]) -> Result<(), LabError> {
        let mut docs = Vec::new();
        for f in files {
            let text = fs::read_to_string(f).map_err(|source| LabError::Io { path: f.clone(), source })?;
            let doc: serde_json::Value =
                serde_yaml::from_str(&text).map_err(|e| LabError::Api(format!("{}: {e}", f.display())))?;
            docs.push(doc);
        }
        let kubeconfig = self.kubeconfig.clone();
        http::block_on(async move {
            let client = http::client(&kubeconfig).await.map_err(LabError::Api)?;
            let crds = crd_api(&client);
            let params = PatchParams::apply("kgpu-lab").force();
            let mut names = Vec::new();
            for doc in &docs {
                let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
                crds.patch(&name, &params, &Patch::Apply(doc))
                    .await
                    .map_err(|e| LabError::Api(format!("applying CRD {name}: {e}")))?;
                names.push(name);
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            for name in names {
                loop {
                    let established = crds.get(&name).await.is_ok_and(|crd| {
                        crd.data["status"]["conditions"]
                            .as_array()
                            .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
                    });
                    if established {
                        break;
                    }
                    if Instant::now() > deadline {
                        return Err(LabError::Api(format!("CRD {name} not Established after 60s")));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            Ok(())
        })
        .map_err(LabError::Api)?
    }

    /// Deletes the CRDs of these files (to test a cluster without them).
    pub fn delete_crds(&self, files: &[PathBuf]) -> Result<(), LabError> {
        let mut names = Vec::new();
        for f in files {
            let text = fs::read_to_string(f).map_err(|source| LabError::Io { path: f.clone(), source })?;
            let doc: serde_json::Value =
                serde_yaml::from_str(&text).map_err(|e| LabError::Api(format!("{}: {e}", f.display())))?;
            if let Some(name) = doc["metadata"]["name"].as_str() {
                names.push(name.to_string());
            }
        }
        let kubeconfig = self.kubeconfig.clone();
        http::block_on(async move {
            let client = http::client(&kubeconfig).await.map_err(LabError::Api)?;
            let crds = crd_api(&client);
            for name in names {
                match crds.delete(&name, &Default::default()).await {
                    Ok(_) | Err(kube::Error::Api(_)) => {}
                    Err(e) => return Err(LabError::Api(format!("deleting CRD {name}: {e}"))),
                }
            }
            Ok(())
        })
        .map_err(LabError::Api)?
    }

    /// Server-side applies a multi-document YAML of cluster-scoped or
    /// namespaced custom objects whose CRDs are installed (KWOK stages).
    pub(super) fn apply_documents(&self, yaml: &str) -> Result<(), LabError> {
        let docs = crate::sources::kube::apply::parse_yaml(yaml).map_err(|e| LabError::Api(e.to_string()))?;
        let kubeconfig = self.kubeconfig.clone();
        http::block_on(async move {
            let client = http::client(&kubeconfig).await.map_err(LabError::Api)?;
            let params = PatchParams::apply("kgpu-lab").force();
            for doc in &docs {
                let (Some(api_version), Some(kind), Some(name)) =
                    (doc["apiVersion"].as_str(), doc["kind"].as_str(), doc["metadata"]["name"].as_str())
                else {
                    return Err(LabError::Api("a document without apiVersion, kind or metadata.name".into()));
                };
                let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
                let plural = format!("{}s", kind.to_ascii_lowercase());
                let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                api.patch(name, &params, &Patch::Apply(doc))
                    .await
                    .map_err(|e| LabError::Api(format!("applying {kind} {name}: {e}")))?;
            }
            Ok(())
        })
        .map_err(LabError::Api)?
    }

    pub(super) fn create_namespace(&self, name: &str) -> Result<(), LabError> {
        let kubeconfig = self.kubeconfig.clone();
        let name = name.to_string();
        http::block_on(async move {
            let client = http::client(&kubeconfig).await.map_err(LabError::Api)?;
            let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
            let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            api.patch(&name, &PatchParams::apply("kgpu-lab"), &Patch::Apply(&ns))
                .await
                .map(|_| ())
                .map_err(|e| LabError::Api(format!("creating namespace {name}: {e}")))
        })
        .map_err(LabError::Api)?
    }
}

fn crd_api(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, "customresourcedefinitions"))
}

//! The lab's binaries: etcd, kube-apiserver, kube-scheduler,
//! kube-controller-manager, kubectl, KWOK and the Kueue manager, built from
//! their Go modules by `tests/cluster/build.sh` and cached outside the repo.
//!
//! The build inputs (the script and the wrapper modules' go.mod/go.sum) are
//! compiled into kgpu, so an installed binary builds its lab anywhere Go and
//! the module proxy are reachable, without the repository.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::LabError;

/// The files build.sh reads, by their path under tests/cluster.
const INPUTS: &[(&str, &str)] = &[
    ("build.sh", include_str!("../../tests/cluster/build.sh")),
    ("k8s/go.mod", include_str!("../../tests/cluster/k8s/go.mod")),
    ("k8s/go.sum", include_str!("../../tests/cluster/k8s/go.sum")),
    ("etcd/go.mod", include_str!("../../tests/cluster/etcd/go.mod")),
    ("etcd/go.sum", include_str!("../../tests/cluster/etcd/go.sum")),
    ("extras/go.mod", include_str!("../../tests/cluster/extras/go.mod")),
    ("extras/go.sum", include_str!("../../tests/cluster/extras/go.sum")),
    ("extras/deps.go", include_str!("../../tests/cluster/extras/deps.go")),
    ("kwok/go.mod", include_str!("../../tests/cluster/kwok/go.mod")),
    ("kwok/go.sum", include_str!("../../tests/cluster/kwok/go.sum")),
];

/// Where the built binaries and the collected CRDs are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binaries {
    pub bin: PathBuf,
    pub crds: PathBuf,
}

impl Binaries {
    pub fn of(cache_dir: &Path) -> Binaries {
        Binaries { bin: cache_dir.join("bin"), crds: cache_dir.join("crds") }
    }

    /// CRD files of one group directory (`kueue`, `volcano`, `kwok`), sorted.
    pub fn crd_files(&self, group: &str) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.crds.join(group))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }
}

/// `$KGPU_CP_CACHE`, else `~/.cache/kgpu`: binaries, build inputs and the lab's state.
pub fn cache_root() -> Result<PathBuf, LabError> {
    if let Some(dir) = std::env::var_os("KGPU_CP_CACHE").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".cache/kgpu"))
        .ok_or_else(|| LabError::Build("neither KGPU_CP_CACHE nor HOME is set: nowhere to keep the binaries".into()))
}

/// Builds what is missing (minutes, once; progress on stderr) or finds the
/// cached build (instant), and returns where it is.
pub fn ensure(cache_root: &Path) -> Result<Binaries, LabError> {
    let inputs = materialise(cache_root)?;
    let out = Command::new("bash")
        .arg(inputs.join("build.sh"))
        .env("KGPU_CP_CACHE", cache_root)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| LabError::Build(format!("cannot run bash for the lab's build script: {e}")))?;
    if !out.status.success() {
        return Err(LabError::Build(
            "building the lab's binaries failed (the build script said why, above): it needs Go >= 1.26 and, once, the Go module proxy".into(),
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout.lines().last().unwrap_or("").trim();
    if dir.is_empty() {
        return Err(LabError::Build("the build script printed no directory".into()));
    }
    Ok(Binaries::of(Path::new(dir)))
}

/// Writes the embedded build inputs to a directory named after their
/// content, once: concurrent callers (test binaries) never see a half-written
/// copy, because each writes its own and renames it into place.
fn materialise(cache_root: &Path) -> Result<PathBuf, LabError> {
    let mut hasher = DefaultHasher::new();
    INPUTS.hash(&mut hasher);
    let dir = cache_root.join("build-inputs").join(format!("{:016x}", hasher.finish()));
    if dir.join("build.sh").is_file() {
        return Ok(dir);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LabError::Io { path, source }
    };
    let tmp = cache_root.join("build-inputs").join(format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (name, text) in INPUTS {
        let path = tmp.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // Another process put its identical copy there first.
        Err(_) if dir.join("build.sh").is_file() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(LabError::Io { path: dir, source: e }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_inputs_are_written_once_by_content() {
        let root = tempfile::tempdir().unwrap();
        let a = materialise(root.path()).unwrap();
        let b = materialise(root.path()).unwrap();
        assert_eq!(a, b);
        for (name, text) in INPUTS {
            assert_eq!(std::fs::read_to_string(a.join(name)).unwrap(), *text, "{name}");
        }
        let leftovers: Vec<_> = std::fs::read_dir(root.path().join("build-inputs")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary copies are left behind");
    }
}

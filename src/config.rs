//! Where kgpu keeps its files. Order for the config dir: `KGPU_CONFIG_DIR`,
//! then `$XDG_CONFIG_HOME/kgpu` (on any OS), then the platform's config dir
//! from `directories`. Logs and the audit log go to `KGPU_DATA_DIR`, else the
//! platform's local data dir. `kgpu --print-paths` shows them.

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
}

impl Paths {
    /// Pure: resolves from an environment lookup and the platform defaults.
    pub fn resolve(
        env: impl Fn(&str) -> Option<String>,
        platform_config: Option<PathBuf>,
        platform_data: Option<PathBuf>,
    ) -> Paths {
        let non_empty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let config_dir = non_empty("KGPU_CONFIG_DIR")
            .or_else(|| non_empty("XDG_CONFIG_HOME").map(|x| x.join("kgpu")))
            .or(platform_config);
        let data_dir = non_empty("KGPU_DATA_DIR").or(platform_data);
        Paths { config_dir, data_dir }
    }

    pub fn from_env() -> Paths {
        let dirs = directories::ProjectDirs::from("", "", "kgpu");
        Paths::resolve(
            |k| std::env::var(k).ok(),
            dirs.as_ref().map(|d| d.config_dir().to_path_buf()),
            dirs.as_ref().map(|d| d.data_local_dir().to_path_buf()),
        )
    }

    pub fn themes_dir(&self) -> Option<PathBuf> {
        self.config_dir.as_ref().map(|d| d.join("themes"))
    }

    pub fn log_file(&self) -> Option<PathBuf> {
        self.data_dir.as_ref().map(|d| d.join("kgpu.log"))
    }

    pub fn audit_log(&self) -> Option<PathBuf> {
        self.data_dir.as_ref().map(|d| d.join("audit.jsonl"))
    }

    pub fn describe(&self) -> String {
        let show =
            |p: Option<PathBuf>| p.map_or_else(|| "(none: no home directory)".to_string(), |p| p.display().to_string());
        format!(
            "config dir:  {}\nthemes dir:  {}\nlog file:    {}\naudit log:   {}\n",
            show(self.config_dir.clone()),
            show(self.themes_dir()),
            show(self.log_file()),
            show(self.audit_log())
        )
    }

    pub fn config_dir(&self) -> Option<&Path> {
        self.config_dir.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn override_then_xdg_then_platform() {
        let platform = Some(PathBuf::from("/platform/config"));
        let data = Some(PathBuf::from("/platform/data"));
        let p = Paths::resolve(
            env(&[("KGPU_CONFIG_DIR", "/o"), ("XDG_CONFIG_HOME", "/x")]),
            platform.clone(),
            data.clone(),
        );
        assert_eq!(p.config_dir, Some(PathBuf::from("/o")));
        let p = Paths::resolve(env(&[("XDG_CONFIG_HOME", "/x")]), platform.clone(), data.clone());
        assert_eq!(p.config_dir, Some(PathBuf::from("/x/kgpu")));
        let p = Paths::resolve(env(&[("XDG_CONFIG_HOME", "")]), platform.clone(), data.clone());
        assert_eq!(p.config_dir, platform);
        assert_eq!(p.audit_log(), Some(PathBuf::from("/platform/data/audit.jsonl")));
        let p = Paths::resolve(env(&[("KGPU_DATA_DIR", "/d")]), None, data);
        assert_eq!(p.log_file(), Some(PathBuf::from("/d/kgpu.log")));
    }
}

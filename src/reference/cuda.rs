//! CUDA ↔ driver tables, from `assets/reference/`:
//! - `cuda-driver-table.tsv`: CUDA release notes Table 3 (driver bundled
//!   with each toolkit release, Linux x86_64);
//! - `minor-version-compat.tsv`: minor-version compatibility ranges per major;
//! - `datacenter-driver-branches.tsv`: data-center driver branches.

use std::sync::OnceLock;

use crate::model::{CudaVersion, DriverVersion};

/// One row of Table 3: the toolkit release and the driver it needs natively.
#[derive(Debug, Clone)]
pub struct ToolkitRow {
    /// The row's first cell, verbatim: `CUDA 12.4 Update 1`.
    pub release: String,
    pub cuda: CudaVersion,
    pub min_driver: DriverVersion,
}

/// Minor-version compatibility for one CUDA major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinorCompatRange {
    pub major: u32,
    /// Minimum driver branch for the whole major family (`>= 525`).
    pub min_branch: u32,
    /// Drivers from here on are native for the family (`< 580`), if bounded.
    pub upper_branch: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverBranch {
    pub branch: u32,
    pub designation: String,
    pub end_of_life: String,
    pub max_cuda_major: u32,
}

pub struct Tables {
    pub toolkits: Vec<ToolkitRow>,
    pub minor_compat: Vec<MinorCompatRange>,
    pub branches: Vec<DriverBranch>,
}

/// The oldest and newest driver branch the tables know (a toolkit's
/// bundled driver or a data-center branch).
pub fn known_branches() -> (u32, u32) {
    let t = tables();
    let majors = t.toolkits.iter().map(|r| r.min_driver.major).chain(t.branches.iter().map(|b| b.branch));
    majors.fold((u32::MAX, 0), |(lo, hi), m| (lo.min(m), hi.max(m)))
}

/// An upgrade target outside every branch kgpu knows is a typo, or a driver
/// whose CUDA support kgpu cannot judge: refused rather than planned for.
pub fn check_target(v: &crate::model::DriverVersion) -> Result<(), String> {
    let (oldest, newest) = known_branches();
    if (oldest..=newest).contains(&v.major) {
        return Ok(());
    }
    Err(format!(
        "no NVIDIA driver branch R{} is known to kgpu (it knows R{oldest} to R{newest}); pass a published data-center driver like 570.124.06",
        v.major
    ))
}

pub fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        toolkits: parse_toolkits(include_str!("../../assets/reference/cuda-driver-table.tsv")),
        minor_compat: parse_minor(include_str!("../../assets/reference/minor-version-compat.tsv")),
        branches: parse_branches(include_str!("../../assets/reference/datacenter-driver-branches.tsv")),
    })
}

fn first_number_run(s: &str) -> Option<&str> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let rest = &s[start..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    Some(rest[..end].trim_end_matches('.'))
}

fn parse_toolkits(text: &str) -> Vec<ToolkitRow> {
    let (_, rows) = super::tsv_rows(text);
    rows.into_iter()
        .filter_map(|row| {
            let release = row.first()?.trim();
            let linux = row.get(1)?;
            let cuda = CudaVersion::parse(first_number_run(release)?)?;
            let min_driver = DriverVersion::parse(first_number_run(linux)?)?;
            Some(ToolkitRow { release: release.to_string(), cuda, min_driver })
        })
        .collect()
}

fn parse_minor(text: &str) -> Vec<MinorCompatRange> {
    let (_, rows) = super::tsv_rows(text);
    rows.into_iter()
        .filter_map(|row| {
            let major = first_number_run(row.first()?)?.split('.').next()?.parse().ok()?;
            let min_branch = first_number_run(row.get(1)?)?.parse().ok()?;
            let upper = row.get(2).and_then(|c| {
                let c = c.trim();
                if c.starts_with('<') { first_number_run(c).and_then(|n| n.parse().ok()) } else { None }
            });
            Some(MinorCompatRange { major, min_branch, upper_branch: upper })
        })
        .collect()
}

fn parse_branches(text: &str) -> Vec<DriverBranch> {
    let (_, rows) = super::tsv_rows(text);
    rows.into_iter()
        .filter_map(|row| {
            let branch = row.first()?.trim().trim_start_matches('R').parse().ok()?;
            let max_cuda_major = first_number_run(row.get(3)?)?.parse().ok()?;
            Some(DriverBranch {
                branch,
                designation: row.get(1)?.trim().to_string(),
                end_of_life: row.get(2)?.trim().to_string(),
                max_cuda_major,
            })
        })
        .collect()
}

impl Tables {
    /// The driver a CUDA `major.minor` needs natively: the GA row of that
    /// release (the oldest driver among its rows), e.g. 12.4 → 550.54.14.
    pub fn native_min_driver(&self, cuda: CudaVersion) -> Option<&ToolkitRow> {
        self.toolkits.iter().filter(|r| r.cuda == cuda).min_by(|a, b| a.min_driver.cmp(&b.min_driver))
    }

    /// The newest CUDA a driver runs natively, by Table 3.
    pub fn max_native_cuda(&self, driver: &DriverVersion) -> Option<CudaVersion> {
        self.toolkits.iter().filter(|r| r.min_driver <= *driver).map(|r| r.cuda).max()
    }

    pub fn minor_compat(&self, major: u32) -> Option<&MinorCompatRange> {
        self.minor_compat.iter().find(|r| r.major == major)
    }

    pub fn branch(&self, branch: u32) -> Option<&DriverBranch> {
        self.branches.iter().find(|b| b.branch == branch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table3_rows_parse() {
        let t = tables();
        assert_eq!(t.toolkits.len(), 49, "every Linux row of Table 3");
        // "CUDA 12.4 GA	>=550.54.14"
        let r = t.native_min_driver(CudaVersion::new(12, 4)).unwrap();
        assert_eq!(r.min_driver.to_string(), "550.54.14");
        assert_eq!(r.release, "CUDA 12.4 GA");
        // "CUDA 12.8 GA	>=570.26"
        assert_eq!(t.native_min_driver(CudaVersion::new(12, 8)).unwrap().min_driver.to_string(), "570.26");
        // "CUDA 11.0.3 Update 1	>= 450.51.06" (spacing kept in the table)
        assert!(
            t.toolkits.iter().any(|r| r.release == "CUDA 11.0.3 Update 1" && r.min_driver.to_string() == "450.51.06")
        );
        // "CUDA 13.0 GA	>=580.65.06"
        let d = DriverVersion::parse("580.65.06").unwrap();
        assert_eq!(t.max_native_cuda(&d), Some(CudaVersion::new(13, 0)));
        let d = DriverVersion::parse("550.54.15").unwrap();
        assert_eq!(t.max_native_cuda(&d), Some(CudaVersion::new(12, 4)));
    }

    #[test]
    fn minor_version_ranges_parse() {
        let t = tables();
        assert_eq!(t.minor_compat(12), Some(&MinorCompatRange { major: 12, min_branch: 525, upper_branch: Some(580) }));
        assert_eq!(t.minor_compat(13), Some(&MinorCompatRange { major: 13, min_branch: 580, upper_branch: None }));
        assert_eq!(t.minor_compat(11).map(|r| r.min_branch), Some(450));
    }

    #[test]
    fn branches_parse() {
        let t = tables();
        let r535 = t.branch(535).unwrap();
        assert_eq!(r535.max_cuda_major, 12);
        assert_eq!(r535.designation, "Long Term Support Branch");
        assert_eq!(t.branch(580).unwrap().max_cuda_major, 13);
        assert_eq!(t.branches.len(), 5);
    }
}

//! MIG geometry: profiles, placements and the mig-parted configs.
//!
//! Source: `assets/reference/mig-profiles.tsv` (compiled from real
//! `nvidia-smi mig -lgipp` output and GFD labels) and
//! `assets/reference/mig-parted-config-default.yaml` (NVIDIA/mig-parted).
//! A GPU has 8 memory slices and 7 compute slices. A profile occupies
//! `size` memory slices starting at one of its allowed `starts`; an instance
//! fits when its memory slices are free and the compute slices stay ≤ 7.

use std::collections::BTreeMap;
use std::sync::OnceLock;

pub const MEMORY_SLICES: u8 = 8;
pub const COMPUTE_SLICES: u8 = 7;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// `1g.10gb`, `1g.10gb+me`.
    pub name: String,
    pub nvsmi_id: u32,
    pub compute: u8,
    pub size: u8,
    pub starts: Vec<u8>,
    pub max_instances: u8,
}

#[derive(Debug, Clone)]
pub struct Geometry {
    /// `A100-40GB`, `A100-80GB`, `H100-80GB`, `H200-141GB`.
    pub model: String,
    pub profiles: Vec<Profile>,
}

/// An instance already on a GPU (memory start, size, compute slices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub start: u8,
    pub size: u8,
    pub compute: u8,
}

impl Geometry {
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// Whole-GPU-ish profiles people request, without the `+me` variants.
    pub fn plain_profiles(&self) -> impl Iterator<Item = &Profile> {
        self.profiles.iter().filter(|p| !p.name.contains('+'))
    }

    /// Places every profile in `wanted` next to `existing`, searching all
    /// allowed starts (not greedily in order: `nvidia-smi mig -cgi 19,19,14,9`
    /// fails where `9,19,14,19` works). Returns the starts, in `wanted` order.
    pub fn place(&self, existing: &[Placed], wanted: &[&Profile]) -> Option<Vec<u8>> {
        let mut order: Vec<usize> = (0..wanted.len()).collect();
        // Large, constrained profiles first: prunes the search early.
        order.sort_by_key(|&i| (std::cmp::Reverse(wanted[i].size), wanted[i].starts.len()));
        let mut occupied = existing.to_vec();
        let mut starts = vec![0u8; wanted.len()];
        if place_from(&order, 0, wanted, &mut occupied, &mut starts) { Some(starts) } else { None }
    }

    /// How many more instances of `profile` fit next to `existing`.
    pub fn free_count(&self, existing: &[Placed], profile: &Profile) -> u32 {
        let used_same =
            existing.iter().filter(|p| p.size == profile.size && p.compute == profile.compute).count() as u32;
        let mut n = 0u32;
        while used_same + n < profile.max_instances as u32 {
            let wanted: Vec<&Profile> = std::iter::repeat_n(profile, (n + 1) as usize).collect();
            if self.place(existing, &wanted).is_none() {
                break;
            }
            n += 1;
        }
        n
    }
}

fn fits(occupied: &[Placed], start: u8, profile: &Profile) -> bool {
    let end = start + profile.size;
    if end > MEMORY_SLICES {
        return false;
    }
    let compute: u8 = occupied.iter().map(|p| p.compute).sum();
    if compute + profile.compute > COMPUTE_SLICES {
        return false;
    }
    occupied.iter().all(|p| end <= p.start || p.start + p.size <= start)
}

fn place_from(
    order: &[usize],
    depth: usize,
    wanted: &[&Profile],
    occupied: &mut Vec<Placed>,
    starts: &mut [u8],
) -> bool {
    let Some(&index) = order.get(depth) else {
        return true;
    };
    let profile = wanted[index];
    for &start in &profile.starts {
        if fits(occupied, start, profile) {
            occupied.push(Placed { start, size: profile.size, compute: profile.compute });
            starts[index] = start;
            if place_from(order, depth + 1, wanted, occupied, starts) {
                return true;
            }
            occupied.pop();
        }
    }
    false
}

pub fn geometries() -> &'static [Geometry] {
    static GEOMETRIES: OnceLock<Vec<Geometry>> = OnceLock::new();
    GEOMETRIES.get_or_init(|| parse_profiles(include_str!("../../assets/reference/mig-profiles.tsv")))
}

fn parse_profiles(text: &str) -> Vec<Geometry> {
    let (_, rows) = super::tsv_rows(text);
    let mut by_model: BTreeMap<String, Vec<Profile>> = BTreeMap::new();
    for row in rows {
        let [model, name, id, compute, size, starts, max, ..] = row.as_slice() else {
            continue;
        };
        let (Ok(nvsmi_id), Ok(compute), Ok(size), Ok(max_instances)) =
            (id.parse(), compute.parse(), size.parse(), max.parse())
        else {
            continue;
        };
        let starts: Vec<u8> = starts.split(',').filter_map(|s| s.trim().parse().ok()).collect();
        by_model.entry(model.to_string()).or_default().push(Profile {
            name: name.to_string(),
            nvsmi_id,
            compute,
            size,
            starts,
            max_instances,
        });
    }
    by_model.into_iter().map(|(model, profiles)| Geometry { model, profiles }).collect()
}

/// The geometry model for a GPU product name as GFD (`NVIDIA-H100-80GB-HBM3`,
/// `A100-SXM4-40GB`) or NVML (`NVIDIA H100 80GB HBM3`) spells it.
pub fn model_for_product(product: &str) -> Option<&'static str> {
    let p = product.to_ascii_uppercase();
    if p.contains("H200") {
        Some("H200-141GB")
    } else if p.contains("H100") && p.contains("80GB") && !p.contains("NVL") {
        Some("H100-80GB")
    } else if p.contains("A100") && p.contains("80GB") {
        Some("A100-80GB")
    } else if p.contains("A100") && p.contains("40GB") {
        Some("A100-40GB")
    } else {
        None
    }
}

pub fn geometry_for_product(product: &str) -> Option<&'static Geometry> {
    let model = model_for_product(product)?;
    geometries().iter().find(|g| g.model == model)
}

/// PCI device IDs that the default mig-parted config uses in its
/// `device-filter`s, per model (from the comments in that file).
fn device_ids(model: &str) -> &'static [&'static str] {
    match model {
        "H100-80GB" => &["0x233010DE", "0x233110DE", "0x232210DE"],
        "A100-80GB" => &["0x20B210DE", "0x20B510DE"],
        "A100-40GB" => &["0x20B010DE", "0x20B110DE"],
        "H200-141GB" => &["0x233510DE", "0x233B10DE"],
        _ => &[],
    }
}

/// A mig-parted config as it applies to one GPU model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigConfig {
    pub name: String,
    pub mig_enabled: bool,
    /// profile → instances per GPU
    pub devices: Vec<(String, u32)>,
}

#[derive(serde::Deserialize)]
struct ConfigFile {
    #[serde(rename = "mig-configs")]
    mig_configs: BTreeMap<String, Vec<ConfigEntry>>,
}

#[derive(serde::Deserialize)]
struct ConfigEntry {
    #[serde(rename = "device-filter", default)]
    device_filter: Option<serde_yaml::Value>,
    #[serde(rename = "mig-enabled", default)]
    mig_enabled: bool,
    #[serde(rename = "mig-devices", default)]
    mig_devices: BTreeMap<String, u32>,
}

fn config_file() -> Option<&'static ConfigFile> {
    static FILE: OnceLock<Option<ConfigFile>> = OnceLock::new();
    FILE.get_or_init(|| {
        serde_yaml::from_str(include_str!("../../assets/reference/mig-parted-config-default.yaml")).ok()
    })
    .as_ref()
}

fn filter_matches(filter: &Option<serde_yaml::Value>, ids: &[&str]) -> bool {
    match filter {
        None => true,
        Some(serde_yaml::Value::String(s)) => ids.iter().any(|id| id.eq_ignore_ascii_case(s)),
        Some(serde_yaml::Value::Sequence(seq)) => {
            seq.iter().filter_map(|v| v.as_str()).any(|s| ids.iter().any(|id| id.eq_ignore_ascii_case(s)))
        }
        Some(_) => false,
    }
}

/// The configs of the default mig-parted file that apply to `model`: the
/// entry whose device-filter names the model's GPU (or that has no filter),
/// and only when every profile it asks for exists on that GPU.
pub fn configs_for_model(model: &str) -> Vec<MigConfig> {
    let Some(file) = config_file() else {
        return Vec::new();
    };
    let Some(geometry) = geometries().iter().find(|g| g.model == model) else {
        return Vec::new();
    };
    let ids = device_ids(model);
    let mut out = Vec::new();
    for (name, entries) in &file.mig_configs {
        let filtered: Vec<&ConfigEntry> =
            entries.iter().filter(|e| e.device_filter.is_some() && filter_matches(&e.device_filter, ids)).collect();
        let chosen = filtered.first().copied().or_else(|| entries.iter().find(|e| e.device_filter.is_none()));
        let Some(entry) = chosen else { continue };
        if entry.mig_enabled && entry.mig_devices.is_empty() && name != "all-enabled" {
            continue;
        }
        if !entry.mig_devices.keys().all(|p| geometry.profile(p).is_some()) {
            continue;
        }
        out.push(MigConfig {
            name: name.clone(),
            mig_enabled: entry.mig_enabled,
            devices: entry.mig_devices.iter().map(|(p, n)| (p.clone(), *n)).collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> &'static Geometry {
        geometry_for_product("NVIDIA-H100-80GB-HBM3").unwrap()
    }

    #[test]
    fn every_row_of_the_table_parses() {
        let models: Vec<&str> = geometries().iter().map(|g| g.model.as_str()).collect();
        assert_eq!(models, ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"]);
        // 7 profiles per model in profiles.tsv
        assert!(geometries().iter().all(|g| g.profiles.len() == 7));
        let p = h100().profile("3g.40gb").unwrap();
        assert_eq!((p.nvsmi_id, p.compute, p.size, p.starts.clone(), p.max_instances), (9, 3, 4, vec![0, 4], 2));
    }

    #[test]
    fn product_names_map_to_models() {
        assert_eq!(model_for_product("NVIDIA-H100-80GB-HBM3"), Some("H100-80GB"));
        assert_eq!(model_for_product("A100-SXM4-40GB"), Some("A100-40GB"));
        assert_eq!(model_for_product("NVIDIA-A100-SXM4-80GB"), Some("A100-80GB"));
        assert_eq!(model_for_product("NVIDIA H200"), Some("H200-141GB"));
        assert_eq!(model_for_product("Tesla-T4"), None);
    }

    #[test]
    fn placement_searches_instead_of_replaying_order() {
        // MIG User Guide: `-cgi 19,19,14,9` failed with Insufficient Resources
        // when placed greedily; the set itself fits (1g 0:1, 1g 1:1, 2g 2:2, 3g 4:4).
        let g = geometry_for_product("A100-SXM4-40GB").unwrap();
        let one = g.profile("1g.5gb").unwrap();
        let two = g.profile("2g.10gb").unwrap();
        let three = g.profile("3g.20gb").unwrap();
        let starts = g.place(&[], &[one, one, two, three]).unwrap();
        assert_eq!(starts[3], 4, "3g must take slices 4..8");
        let sizes = [1u8, 1, 2, 4];
        let mut used = [false; 8];
        for (start, size) in starts.iter().zip(sizes) {
            for slot in *start..start + size {
                assert!(!used[slot as usize], "overlap at {slot}: {starts:?}");
                used[slot as usize] = true;
            }
        }
    }

    #[test]
    fn counts_what_still_fits() {
        let g = h100();
        let one = g.profile("1g.10gb").unwrap();
        let three = g.profile("3g.40gb").unwrap();
        let four = g.profile("4g.40gb").unwrap();
        assert_eq!(g.free_count(&[], one), 7);
        assert_eq!(g.free_count(&[], three), 2);
        // all-balanced on H100: 1g at 0 and 1, 2g at 2, 3g at 4: full.
        let balanced = [
            Placed { start: 0, size: 1, compute: 1 },
            Placed { start: 1, size: 1, compute: 1 },
            Placed { start: 2, size: 2, compute: 2 },
            Placed { start: 4, size: 4, compute: 3 },
        ];
        assert_eq!(g.free_count(&balanced, one), 0, "compute slices 7 of 7 used");
        // One 3g at 4:4 leaves 0..4: a 4g only starts at 0 but 4+3 = 7 compute: fits.
        let one_three = [Placed { start: 4, size: 4, compute: 3 }];
        assert_eq!(g.free_count(&one_three, four), 1);
        assert_eq!(g.free_count(&one_three, three), 1);
    }

    #[test]
    fn mig_parted_configs_per_model() {
        let h100 = configs_for_model("H100-80GB");
        let names: Vec<&str> = h100.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"all-disabled"));
        assert!(names.contains(&"all-1g.10gb"));
        assert!(names.contains(&"all-3g.40gb"));
        assert!(!names.contains(&"all-3g.20gb"), "an A100-40GB profile");
        let balanced = h100.iter().find(|c| c.name == "all-balanced").unwrap();
        assert_eq!(balanced.devices, vec![("1g.10gb".into(), 2), ("2g.20gb".into(), 1), ("3g.40gb".into(), 1)]);
        let a100_40 = configs_for_model("A100-40GB");
        let one_g = a100_40.iter().find(|c| c.name == "all-1g.10gb").unwrap();
        assert_eq!(one_g.devices, vec![("1g.10gb".into(), 4)], "4 on A100-40GB via device-filter");
        let h200 = configs_for_model("H200-141GB");
        let balanced = h200.iter().find(|c| c.name == "all-balanced").unwrap();
        assert_eq!(balanced.devices, vec![("1g.18gb".into(), 2), ("2g.35gb".into(), 1), ("3g.71gb".into(), 1)]);
    }
}

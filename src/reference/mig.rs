//! MIG geometry: profiles, placements and the mig-parted configs.
//!
//! Source: `assets/reference/mig-profiles.tsv` (compiled from real
//! `nvidia-smi mig -lgipp` output and GFD labels) and
//! `assets/reference/mig-parted-config-default.yaml` (NVIDIA/mig-parted).
//! Most MIG GPUs have 8 memory slices and 7 compute slices; the A30 has 4
//! and 4 (each geometry knows its own, from its whole-GPU profile). A
//! profile occupies `size` memory slices starting at one of its allowed
//! `starts`; an instance fits when its memory slices are free and the
//! compute slices stay within the GPU's.

use std::collections::BTreeMap;
use std::sync::OnceLock;

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
    /// `A100-40GB`, `A100-80GB`, `H100-80GB`, `H100-94GB`, `H200-141GB`, `A30-24GB`, ...
    pub model: String,
    pub profiles: Vec<Profile>,
    /// Memory slices of the GPU (8; 4 on an A30).
    pub memory_slices: u8,
    /// Compute slices of the GPU (7; 4 on an A30).
    pub compute_slices: u8,
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
        if self.place_from(&order, 0, wanted, &mut occupied, &mut starts) { Some(starts) } else { None }
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

impl Geometry {
    fn fits(&self, occupied: &[Placed], start: u8, profile: &Profile) -> bool {
        let end = start + profile.size;
        if end > self.memory_slices {
            return false;
        }
        let compute: u8 = occupied.iter().map(|p| p.compute).sum();
        if compute + profile.compute > self.compute_slices {
            return false;
        }
        occupied.iter().all(|p| end <= p.start || p.start + p.size <= start)
    }

    fn place_from(
        &self,
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
            if self.fits(occupied, start, profile) {
                occupied.push(Placed { start, size: profile.size, compute: profile.compute });
                starts[index] = start;
                if self.place_from(order, depth + 1, wanted, occupied, starts) {
                    return true;
                }
                occupied.pop();
            }
        }
        false
    }
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
    by_model
        .into_iter()
        .map(|(model, profiles)| {
            // The whole-GPU profile spans every slice.
            let memory_slices =
                profiles.iter().map(|p| p.starts.iter().max().unwrap_or(&0) + p.size).max().unwrap_or(8);
            let compute_slices = profiles.iter().map(|p| p.compute).max().unwrap_or(7);
            Geometry { model, profiles, memory_slices, compute_slices }
        })
        .collect()
}

/// GPU products (as NVML names them, GFD's spelling, without the `NVIDIA-`
/// prefix) → their MIG geometry. Exact names: a substring would take
/// GH200 for H200, the H100 NVL for an 80GB H100, or read a single-strategy
/// suffix (`-MIG-3g.40gb`) as the product. Sources: NVIDIA's driver product
/// names, mig-parted's device filters, the MIG User Guide (see the TSV).
const PRODUCTS: [(&str, &str); 26] = [
    ("A100-SXM4-40GB", "A100-40GB"),
    ("A100-PCIE-40GB", "A100-40GB"),
    ("A800-40GB-ACTIVE", "A100-40GB"),
    ("A100-SXM4-80GB", "A100-80GB"),
    ("A100-80GB-PCIE", "A100-80GB"),
    ("A800-SXM4-80GB", "A100-80GB"),
    ("A800-80GB-PCIE", "A100-80GB"),
    ("A800-80GB-PCIE-LC", "A100-80GB"),
    ("H100-80GB-HBM3", "H100-80GB"),
    ("H100-SXM5-80GB", "H100-80GB"),
    ("H100-PCIE", "H100-80GB"),
    ("H800", "H100-80GB"),
    ("H800-PCIE", "H100-80GB"),
    ("H100-NVL", "H100-94GB"),
    ("H800-NVL", "H100-94GB"),
    // The H100 SXM5 94GB: NVML calls it just "NVIDIA H100".
    ("H100", "H100-94GB"),
    ("GH200-480GB", "H100-96GB"),
    ("GH200-120GB", "H100-96GB"),
    ("H100-96GB", "H100-96GB"),
    ("H20", "H100-96GB"),
    ("H200", "H200-141GB"),
    ("H200-NVL", "H200-141GB"),
    ("H200-SXM-141GB", "H200-141GB"),
    ("GH200-144G-HBM3E", "GH200-144GB"),
    ("B200", "B200-180GB"),
    ("A30", "A30-24GB"),
];

/// The product a GFD label or an NVML name describes: spaces as dashes,
/// without `-SHARED` (time-slicing) or `-MIG-<profile>` / `-MIG-INVALID`
/// (single strategy), without the `NVIDIA-` prefix old drivers omit.
fn normalised_product(product: &str) -> String {
    let mut p = product.trim().replace(' ', "-").to_ascii_uppercase();
    if let Some(stripped) = p.strip_suffix("-SHARED") {
        p = stripped.to_string();
    }
    if let Some(at) = p.find("-MIG-") {
        p.truncate(at);
    }
    p.strip_prefix("NVIDIA-").map(str::to_string).unwrap_or(p)
}

/// The geometry model for a GPU product name as GFD (`NVIDIA-H100-80GB-HBM3`,
/// `A100-SXM4-40GB`, `NVIDIA-H100-NVL-MIG-1g.12gb`) or NVML (`NVIDIA H100
/// 80GB HBM3`) spells it; `None` for GPUs without MIG or not known here.
pub fn model_for_product(product: &str) -> Option<&'static str> {
    let p = normalised_product(product);
    PRODUCTS.iter().find(|(name, _)| *name == p).map(|(_, model)| *model)
}

/// GFD's label for a single-strategy node whose MIG configuration is not
/// valid (`<product>-MIG-INVALID`): a real fault, its GPUs not advertised.
pub fn is_invalid_mig_product(product: &str) -> bool {
    product.trim().to_ascii_uppercase().ends_with("-MIG-INVALID")
}

/// The share of a GPU one instance of `profile` holds: its compute slices
/// out of its GPU's (7; 4 on an A30), from the product's geometry where
/// known, else read from the profile's name (`3g.40gb`: 3) out of 7.
pub fn compute_share(profile: &str, geometry: Option<&Geometry>) -> f64 {
    if let Some((g, known)) = geometry.and_then(|g| Some((g, g.profile(profile)?))) {
        return (f64::from(known.compute) / f64::from(g.compute_slices.max(1))).clamp(0.0, 1.0);
    }
    let slices = profile.split('g').next().and_then(|n| n.parse::<f64>().ok()).unwrap_or(1.0);
    (slices / 7.0).clamp(0.0, 1.0)
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
        "H100-94GB" => &["0x232110DE", "0x233A10DE"],
        "H100-96GB" => &["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"],
        "GH200-144GB" => &["0x234810DE"],
        "B200-180GB" => &["0x290110DE"],
        "A30-24GB" => &["0x20B710DE"],
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

/// The names of the mig-parted configs valid for a GPU product (GFD's
/// `nvidia.com/gpu.product`); empty when the product has no known geometry.
pub fn config_names_for_product(product: Option<&str>) -> Vec<String> {
    product.and_then(model_for_product).map(configs_for_model).unwrap_or_default().into_iter().map(|c| c.name).collect()
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
    #[test]
    fn each_geometry_knows_its_slices_and_the_a30_has_four() {
        for g in geometries() {
            let (m, c) = if g.model == "A30-24GB" { (4, 4) } else { (8, 7) };
            assert_eq!((g.memory_slices, g.compute_slices), (m, c), "{}", g.model);
        }
        let a30 = geometries().iter().find(|g| g.model == "A30-24GB").unwrap();
        let four = a30.profile("4g.24gb").unwrap();
        let one = a30.profile("1g.6gb").unwrap();
        assert!(a30.place(&[], &[four]).is_some());
        assert!(a30.place(&[], &[four, one]).is_none(), "the whole A30 leaves nothing");
        assert_eq!(a30.free_count(&[], one), 4);
        // +me profiles are their own: one per GPU.
        let h100 = geometry_for_product("NVIDIA-H100-80GB-HBM3").unwrap();
        assert_eq!(h100.profile("1g.10gb+me").unwrap().max_instances, 1);
        assert_eq!(h100.profile("1g.10gb").unwrap().max_instances, 7);
    }

    use super::*;

    fn h100() -> &'static Geometry {
        geometry_for_product("NVIDIA-H100-80GB-HBM3").unwrap()
    }

    #[test]
    fn every_row_of_the_table_parses() {
        let models: Vec<&str> = geometries().iter().map(|g| g.model.as_str()).collect();
        assert_eq!(
            models,
            [
                "A100-40GB",
                "A100-80GB",
                "A30-24GB",
                "B200-180GB",
                "GH200-144GB",
                "H100-80GB",
                "H100-94GB",
                "H100-96GB",
                "H200-141GB"
            ]
        );
        // 7 profiles per model in profiles.tsv (the A30: 5)
        assert!(geometries().iter().all(|g| g.profiles.len() == if g.model == "A30-24GB" { 5 } else { 7 }));
        // Every product maps to a model with a geometry.
        for (product, model) in PRODUCTS {
            assert!(geometries().iter().any(|g| g.model == model), "{product} → {model}");
        }
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
        // Exact products, not substrings.
        assert_eq!(model_for_product("NVIDIA-GH200-480GB"), Some("H100-96GB"), "GH200 is not H200");
        assert_eq!(model_for_product("NVIDIA-GH200-144G-HBM3e"), Some("GH200-144GB"));
        assert_eq!(model_for_product("NVIDIA-H100-NVL"), Some("H100-94GB"), "the NVL is not an 80GB H100");
        assert_eq!(model_for_product("NVIDIA-H100-PCIe"), Some("H100-80GB"));
        assert_eq!(model_for_product("NVIDIA-H800"), Some("H100-80GB"));
        assert_eq!(model_for_product("NVIDIA-A800-80GB-PCIe-MIG-2g.20gb-SHARED"), Some("A100-80GB"));
        assert_eq!(model_for_product("NVIDIA-A800-40GB-Active"), Some("A100-40GB"));
        assert_eq!(model_for_product("NVIDIA-H20"), Some("H100-96GB"));
        assert_eq!(model_for_product("NVIDIA-GB200"), None, "GB200 is not B200");
        assert_eq!(model_for_product("NVIDIA-A30"), Some("A30-24GB"));
        // A single-strategy label's profile is not the product.
        assert_eq!(model_for_product("NVIDIA-H100-PCIe-MIG-7g.80gb"), Some("H100-80GB"));
        assert_eq!(model_for_product("A100-SXM4-40GB-MIG-1g.5gb"), Some("A100-40GB"));
        assert!(is_invalid_mig_product("NVIDIA-A100-SXM4-40GB-MIG-INVALID"));
        assert!(!is_invalid_mig_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"));
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

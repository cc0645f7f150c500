//! XID meanings, from `assets/reference/xid.tsv` (NVIDIA Xid catalog and
//! k8s-device-plugin's ignore list).

use std::sync::OnceLock;

#[derive(Debug, Clone)]
pub struct Xid {
    pub code: u32,
    pub mnemonic: String,
    pub description: String,
    pub immediate_action: String,
    /// k8s-device-plugin does not mark the GPU unhealthy for this XID.
    pub ignored_by_device_plugin: bool,
}

pub fn table() -> &'static [Xid] {
    static TABLE: OnceLock<Vec<Xid>> = OnceLock::new();
    TABLE.get_or_init(|| parse(include_str!("../../assets/reference/xid.tsv")))
}

pub fn lookup(code: u32) -> Option<&'static Xid> {
    table().iter().find(|x| x.code == code)
}

fn parse(text: &str) -> Vec<Xid> {
    let (header, rows) = super::tsv_rows(text);
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    let (Some(code), Some(mnemonic), Some(description), Some(action), Some(ignored)) = (
        col("xid"),
        col("catalog_mnemonic"),
        col("catalog_description"),
        col("catalog_immediate_action"),
        col("k8s_device_plugin_ignored"),
    ) else {
        return Vec::new();
    };
    rows.into_iter()
        .filter_map(|row| {
            Some(Xid {
                code: row.get(code)?.trim().parse().ok()?,
                mnemonic: row.get(mnemonic)?.trim().to_string(),
                description: row.get(description)?.trim().to_string(),
                immediate_action: row.get(action)?.trim().to_string(),
                ignored_by_device_plugin: row.get(ignored)?.trim().starts_with("yes"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_with_device_plugin_ignores() {
        assert_eq!(table().len(), 41);
        let ignored: Vec<u32> = table().iter().filter(|x| x.ignored_by_device_plugin).map(|x| x.code).collect();
        assert_eq!(ignored, vec![13, 31, 43, 45, 68, 109]);
        let x79 = lookup(79).unwrap();
        assert!(x79.description.to_lowercase().contains("fallen off the bus"), "{x79:?}");
    }
}

//! Reference data that ships inside kgpu, parsed from the verbatim tables in
//! `assets/reference/` (copied from `shared/fixtures/real`, source lines kept).
//! Pure and immutable: parsed once, on first use.

pub mod cuda;
pub mod mig;
pub mod scheduler;
pub mod xid;

/// Rows of a `#`-commented TSV with a header line: yields (header, rows).
pub(crate) fn tsv_rows(text: &str) -> (Vec<&str>, Vec<Vec<&str>>) {
    let mut lines = text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty());
    let header = lines.next().map(|h| h.split('\t').collect()).unwrap_or_default();
    let rows = lines.map(|l| l.split('\t').collect()).collect();
    (header, rows)
}

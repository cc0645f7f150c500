//! NVIDIA driver and CUDA version numbers.

use std::cmp::Ordering;
use std::fmt;

/// A driver version such as `550.54.15` or `570.26`. Compared numerically,
/// component by component (`550.107.02` > `550.54.15`); displayed as written.
#[derive(Clone, Debug)]
pub struct DriverVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    text: super::Sym,
}

impl DriverVersion {
    pub fn parse(text: &str) -> Option<DriverVersion> {
        let t = text.trim();
        let mut parts = t.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = match parts.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        let patch = match parts.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        Some(DriverVersion { major, minor, patch, text: super::Sym::new(t) })
    }

    pub fn from_parts(major: &str, minor: Option<&str>, patch: Option<&str>) -> Option<DriverVersion> {
        let mut text = major.trim().to_string();
        for p in [minor, patch].into_iter().flatten() {
            text.push('.');
            text.push_str(p.trim());
        }
        DriverVersion::parse(&text)
    }

    pub fn as_str(&self) -> &str {
        self.text.as_str()
    }

    /// The driver branch, `R550` for 550.54.15.
    pub fn branch(&self) -> u32 {
        self.major
    }

    fn key(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }
}

impl PartialEq for DriverVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for DriverVersion {}
impl PartialOrd for DriverVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for DriverVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}
impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CUDA version, `12.4`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

impl CudaVersion {
    pub const fn new(major: u32, minor: u32) -> CudaVersion {
        CudaVersion { major, minor }
    }

    /// `12.4`, `12.4.1` (patch ignored), `12`.
    pub fn parse(text: &str) -> Option<CudaVersion> {
        let mut parts = text.trim().split('.');
        let major = parts.next()?.trim().parse().ok()?;
        let minor = match parts.next() {
            Some(p) => p.trim().parse().ok()?,
            None => 0,
        };
        Some(CudaVersion { major, minor })
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_compare_numerically() {
        let a = DriverVersion::parse("550.107.02").unwrap();
        let b = DriverVersion::parse("550.54.15").unwrap();
        assert!(a > b);
        assert_eq!(a.to_string(), "550.107.02");
        let c = DriverVersion::parse("570.26").unwrap();
        assert_eq!((c.major, c.minor, c.patch), (570, 26, 0));
        assert!(DriverVersion::parse("abc").is_none());
        assert!(DriverVersion::parse("1.2.3.4").is_none());
        assert_eq!(
            DriverVersion::from_parts("550", Some("54"), Some("15")).unwrap(),
            DriverVersion::parse("550.54.15").unwrap()
        );
    }

    #[test]
    fn cuda_versions() {
        assert_eq!(CudaVersion::parse("12.4"), Some(CudaVersion::new(12, 4)));
        assert_eq!(CudaVersion::parse("12.4.1"), Some(CudaVersion::new(12, 4)));
        assert_eq!(CudaVersion::parse("11"), Some(CudaVersion::new(11, 0)));
        assert!(CudaVersion::new(12, 8) > CudaVersion::new(12, 4));
        assert_eq!(CudaVersion::parse("x"), None);
    }
}

//! Kubernetes resource quantities (`500m`, `16Gi`, `1e3`, `8`) reduced to
//! integers in each resource's base unit: millicores for `cpu`, bytes for
//! memory-like resources, whole units for everything else (GPUs, MIG slices,
//! pods). Rounding is upwards, as the API server rounds requests.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    #[error("quantity '{0}' is empty")]
    Empty(String),
    #[error("quantity '{0}' is not a number with an optional suffix")]
    Malformed(String),
    #[error("quantity '{0}' is negative")]
    Negative(String),
    #[error("quantity '{0}' is too large (kgpu takes at most 2^53)")]
    Overflow(String),
    #[error("quantity '{0}' is not a whole number, as an extended resource's must be")]
    Fractional(String),
}

/// How a resource is counted in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// `cpu`: stored in millicores.
    Milli,
    /// Everything else: stored in whole units (bytes for memory).
    Whole,
}

pub fn unit_of(resource: &str) -> Unit {
    if resource == "cpu" { Unit::Milli } else { Unit::Whole }
}

/// Parses `text` as a quantity of `resource` in the model's base unit.
/// Extended resources (`nvidia.com/gpu`, MIG slices) are counted in whole
/// devices: the API server refuses `1.5` of them, and so does kgpu rather
/// than round it.
pub fn parse(resource: &str, text: &str) -> Result<u64, QuantityError> {
    let (value, exact) = parse_exact(unit_of(resource), text)?;
    if !exact && is_extended(resource) {
        return Err(QuantityError::Fractional(text.to_string()));
    }
    Ok(value)
}

/// A resource named with a domain outside Kubernetes' own (`nvidia.com/gpu`).
fn is_extended(resource: &str) -> bool {
    resource.split_once('/').is_some_and(|(domain, _)| {
        domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io") && !resource.starts_with("hugepages-")
    })
}

pub fn parse_with_unit(unit: Unit, text: &str) -> Result<u64, QuantityError> {
    parse_exact(unit, text).map(|(value, _)| value)
}

/// The value in `unit`, rounded up, and whether it needed no rounding.
fn parse_exact(unit: Unit, text: &str) -> Result<(u64, bool), QuantityError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(QuantityError::Empty(text.to_string()));
    }
    let malformed = || QuantityError::Malformed(text.to_string());
    let overflow = || QuantityError::Overflow(text.to_string());
    let (negative, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let number_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(malformed());
    }
    // mantissa = digits / 10^places
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: u128 = digits.parse().map_err(|_| overflow())?;
    let mut places = frac_part.len() as i32;

    // multiplier = num * 2^pow2 * 10^pow10
    let (pow2, mut pow10): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().map_err(|_| malformed())?;
            if !(-30..=30).contains(&exp) {
                return Err(overflow());
            }
            (0, exp)
        }
        _ => return Err(malformed()),
    };
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative(text.to_string()));
    }
    if unit == Unit::Milli {
        pow10 += 3;
    }
    places -= pow10;
    let mut value = mantissa.checked_shl(pow2).ok_or_else(overflow)?;
    if pow2 > 0 && value >> pow2 != mantissa {
        return Err(overflow());
    }
    let mut exact = true;
    if places <= 0 {
        for _ in 0..(-places) {
            value = value.checked_mul(10).ok_or_else(overflow)?;
        }
    } else {
        let divisor = 10u128.checked_pow(places as u32).ok_or_else(overflow)?;
        exact = value % divisor == 0;
        value = value.div_ceil(divisor);
    }
    if value > MAX_QUANTITY as u128 {
        return Err(overflow());
    }
    u64::try_from(value).map(|v| (v, exact)).map_err(|_| overflow())
}

/// The largest amount kgpu takes (2^53, 8 PiB of bytes or 9·10^15 devices):
/// beyond any real node, the largest integer a JSON reader keeps exactly,
/// and small enough that sums over a fleet of 65,000 nodes stay in 64 bits
/// (where they would not, the sums saturate).
pub const MAX_QUANTITY: u64 = 1 << 53;

/// Formats a base-unit amount for people: `8`, `500m`, `64Gi`.
pub fn format(resource: &str, value: u64) -> String {
    match unit_of(resource) {
        Unit::Milli => {
            if value.is_multiple_of(1000) {
                (value / 1000).to_string()
            } else {
                format!("{value}m")
            }
        }
        Unit::Whole if is_bytes(resource) => format_bytes(value),
        Unit::Whole => value.to_string(),
    }
}

fn is_bytes(resource: &str) -> bool {
    matches!(resource, "memory" | "ephemeral-storage") || resource.starts_with("hugepages-")
}

pub fn format_bytes(value: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
    for (suffix, shift) in UNITS {
        let unit = 1u64 << shift;
        if value >= unit && value.is_multiple_of(unit) {
            return format!("{}{suffix}", value >> shift);
        }
    }
    for (suffix, shift) in UNITS {
        let unit = 1u64 << shift;
        if value >= unit * 10 {
            return format!("{}{suffix}", value.div_ceil(unit));
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_in_millicores() {
        assert_eq!(parse("cpu", "500m"), Ok(500));
        assert_eq!(parse("cpu", "2"), Ok(2000));
        assert_eq!(parse("cpu", "0.5"), Ok(500));
        assert_eq!(parse("cpu", "1.0001"), Ok(1001), "rounds up like the API server");
        assert_eq!(parse("cpu", "100u"), Ok(1));
        assert_eq!(parse("cpu", "256"), Ok(256_000));
    }

    #[test]
    fn memory_in_bytes() {
        assert_eq!(parse("memory", "1Ki"), Ok(1024));
        assert_eq!(parse("memory", "16Gi"), Ok(16 << 30));
        assert_eq!(parse("memory", "1Ti"), Ok(1 << 40));
        assert_eq!(parse("memory", "20G"), Ok(20_000_000_000));
        assert_eq!(parse("memory", "1e3"), Ok(1000));
        assert_eq!(parse("memory", "2097152Ki"), Ok(2 << 30));
        assert_eq!(parse("memory", "1.5Gi"), Ok(3 << 29));
    }

    #[test]
    fn counts() {
        assert_eq!(parse("nvidia.com/gpu", "8"), Ok(8));
        assert_eq!(parse("nvidia.com/mig-1g.10gb", "16"), Ok(16));
        assert_eq!(parse("pods", "110"), Ok(110));
        assert_eq!(parse("nvidia.com/gpu", "0"), Ok(0));
        assert_eq!(parse("nvidia.com/gpu", "8.0"), Ok(8), "whole, however written");
        assert_eq!(parse("nvidia.com/gpu", "1e1"), Ok(10));
    }

    #[test]
    fn fractional_or_overflowing_devices_are_refused_not_rounded_or_wrapped() {
        assert_eq!(parse("nvidia.com/gpu", "1.5"), Err(QuantityError::Fractional("1.5".into())));
        assert_eq!(parse("nvidia.com/gpu", "500m"), Err(QuantityError::Fractional("500m".into())));
        assert_eq!(parse("nvidia.com/mig-1g.10gb", "0.1"), Err(QuantityError::Fractional("0.1".into())));
        assert!(matches!(parse("nvidia.com/gpu", "18446744073709551616"), Err(QuantityError::Overflow(_))));
        assert!(matches!(parse("nvidia.com/gpu", "1e30"), Err(QuantityError::Overflow(_))));
        assert!(matches!(parse("memory", "99999999999Ei"), Err(QuantityError::Overflow(_))));
        // The bound: 2^53 is taken, one more is not; 8 PiB of memory is, 1 EiB is not.
        assert_eq!(parse("nvidia.com/gpu", "9007199254740992"), Ok(MAX_QUANTITY));
        assert!(matches!(parse("nvidia.com/gpu", "9007199254740993"), Err(QuantityError::Overflow(_))));
        assert_eq!(parse("memory", "8Pi"), Ok(MAX_QUANTITY));
        assert!(matches!(parse("memory", "1Ei"), Err(QuantityError::Overflow(_))));
        // Kubernetes' own resources still round up, as the API server does.
        assert_eq!(parse("memory", "0.5"), Ok(1));
        assert_eq!(parse("cpu", "0.0001"), Ok(1));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(matches!(parse("cpu", ""), Err(QuantityError::Empty(_))));
        assert!(matches!(parse("cpu", "abc"), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse("cpu", "1.2.3"), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse("cpu", "5Zi"), Err(QuantityError::Malformed(_))));
        assert!(matches!(parse("cpu", "-1"), Err(QuantityError::Negative(_))));
        assert!(matches!(parse("memory", "99999999999Ei"), Err(QuantityError::Overflow(_))));
        assert!(matches!(parse("memory", "1e999"), Err(QuantityError::Overflow(_))));
        assert_eq!(parse("cpu", "-0"), Ok(0));
    }

    #[test]
    fn formats_for_people() {
        assert_eq!(format("cpu", 500), "500m");
        assert_eq!(format("cpu", 4000), "4");
        assert_eq!(format("memory", 64 << 30), "64Gi");
        assert_eq!(format("nvidia.com/gpu", 8), "8");
    }
}

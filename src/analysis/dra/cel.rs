//! DRA device selectors, evaluated with a maintained CEL implementation
//! (the `cel` crate) in the environment Kubernetes gives them: `device`
//! with `driver`, `attributes[domain][name]` and `capacity[domain][name]`,
//! plus Kubernetes' `quantity()` and `semver()` libraries, which the crate
//! lacks (registered here as opaque values with their methods).

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, Program, Value};

use crate::model::dra::{AttributeValue, Device};

/// A Kubernetes quantity in its base unit (bytes, count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Quantity(i128);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Semver(semver::Version);

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn parse_quantity(text: &str) -> Option<Quantity> {
    crate::model::quantity::parse_with_unit(crate::model::quantity::Unit::Whole, text).ok().map(|v| Quantity(v as i128))
}

/// Kubernetes' semver accepts what `semver` does, `v`-prefixed too.
fn parse_semver(text: &str) -> Option<semver::Version> {
    semver::Version::parse(text.strip_prefix('v').unwrap_or(text)).ok()
}

fn error(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// `a` against `b`, both quantities or both versions.
fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    if let (Value::Opaque(a), Value::Opaque(b)) = (a, b) {
        if let (Some(a), Some(b)) = (a.downcast_ref::<Quantity>(), b.downcast_ref::<Quantity>()) {
            return Ok(a.cmp(b));
        }
        if let (Some(a), Some(b)) = (a.downcast_ref::<Semver>(), b.downcast_ref::<Semver>()) {
            return Ok(a.0.cmp_precedence(&b.0));
        }
    }
    Err(error(function, "compares two quantities or two versions"))
}

/// A name the environment could not declare (it clashes with the
/// standard library's): logged, and CEL then fails on calls to it.
fn declared<E: std::fmt::Debug>(r: Result<(), E>) {
    if let Err(e) = r {
        tracing::warn!("CEL environment: {e:?}");
    }
}

/// The root environment: Kubernetes' quantity and semver libraries.
fn environment() -> Context<'static, 'static> {
    let mut ctx = Context::default();
    let r = ctx.add_function("quantity", |text: Arc<String>| -> Result<Value, ExecutionError> {
        parse_quantity(&text)
            .map(|q| Value::Opaque(Arc::new(q)))
            .ok_or_else(|| error("quantity", format!("'{text}' is not a quantity")))
    });
    declared(r);
    let r = ctx.add_function("isQuantity", |text: Arc<String>| parse_quantity(&text).is_some());
    declared(r);
    let r = ctx.add_function("semver", |text: Arc<String>| -> Result<Value, ExecutionError> {
        parse_semver(&text)
            .map(|v| Value::Opaque(Arc::new(Semver(v))))
            .ok_or_else(|| error("semver", format!("'{text}' is not a semantic version")))
    });
    declared(r);
    let r = ctx.add_function("isSemver", |text: Arc<String>| parse_semver(&text).is_some());
    declared(r);
    let r = ctx.add_function(
        "compareTo",
        |cel::extractors::This(a): cel::extractors::This<Value>, b: Value| -> Result<i64, ExecutionError> {
            Ok(compare("compareTo", &a, &b)? as i64)
        },
    );
    declared(r);
    let r = ctx.add_function(
        "isGreaterThan",
        |cel::extractors::This(a): cel::extractors::This<Value>, b: Value| -> Result<bool, ExecutionError> {
            Ok(compare("isGreaterThan", &a, &b)?.is_gt())
        },
    );
    declared(r);
    let r = ctx.add_function(
        "isLessThan",
        |cel::extractors::This(a): cel::extractors::This<Value>, b: Value| -> Result<bool, ExecutionError> {
            Ok(compare("isLessThan", &a, &b)?.is_lt())
        },
    );
    declared(r);
    let r = ctx.add_function(
        "asInteger",
        |cel::extractors::This(a): cel::extractors::This<Value>| -> Result<i64, ExecutionError> {
            match &a {
                Value::Opaque(o) => o
                    .downcast_ref::<Quantity>()
                    .and_then(|q| i64::try_from(q.0).ok())
                    .ok_or_else(|| error("asInteger", "not a quantity that fits in an int")),
                _ => Err(error("asInteger", "not a quantity")),
            }
        },
    );
    declared(r);
    ctx
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

/// `{domain: {name: value}}` from qualified names (`domain/name`).
fn by_domain<'v, T: 'v>(items: impl Iterator<Item = (&'v str, T)>, value: impl Fn(T) -> Value) -> Value {
    let mut domains: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
    for (qualified, v) in items {
        let (domain, name) = qualified.rsplit_once('/').unwrap_or(("", qualified));
        domains.entry(Key::from(domain.to_string())).or_default().insert(Key::from(name.to_string()), value(v));
    }
    Value::Map(Map {
        map: Arc::new(domains.into_iter().map(|(k, v)| (k, Value::Map(Map { map: Arc::new(v) }))).collect()),
    })
}

fn device_value(driver: &str, device: &Device) -> Value {
    let attributes = by_domain(device.attributes.iter().map(|(k, v)| (k.as_str(), v)), |v| match v {
        AttributeValue::Int(i) => Value::Int(*i),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::String(s) => string(s),
        AttributeValue::Version(s) => match parse_semver(s) {
            Some(v) => Value::Opaque(Arc::new(Semver(v))),
            None => string(s),
        },
    });
    let capacity = by_domain(device.capacity.iter().map(|(k, v)| (k.as_str(), *v)), |v| {
        Value::Opaque(Arc::new(Quantity(v as i128)))
    });
    let mut fields: HashMap<Key, Value> = HashMap::new();
    fields.insert(Key::from("driver".to_string()), string(driver));
    fields.insert(Key::from("attributes".to_string()), attributes);
    fields.insert(Key::from("capacity".to_string()), capacity);
    fields.insert(Key::from("allowMultipleAllocations".to_string()), Value::Bool(false));
    Value::Map(Map { map: Arc::new(fields) })
}

/// Why a selector did not give an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorError {
    /// It does not compile.
    Invalid(String),
    /// It failed on this device (a missing attribute, a wrong type): the
    /// scheduler fails the pod's scheduling attempt on such an error.
    Runtime(String),
}

/// Selectors compiled once per analysis, evaluated once per device: the
/// allocator's search asks the same expressions of the same devices for
/// every node's room, every plan trial and every pending pod. One
/// `Selectors` serves one snapshot: results are kept by the device's address.
pub struct Selectors {
    root: Context<'static, 'static>,
    programs: HashMap<Box<str>, usize>,
    compiled: Vec<Result<Program, String>>,
    results: HashMap<(usize, usize), bool>,
}

impl Default for Selectors {
    fn default() -> Self {
        Selectors { root: environment(), programs: HashMap::new(), compiled: Vec::new(), results: HashMap::new() }
    }
}

impl Selectors {
    /// Whether `device` of `driver` satisfies every expression.
    pub fn all_match<'e>(
        &mut self,
        expressions: impl IntoIterator<Item = &'e str>,
        driver: &str,
        device: &Device,
    ) -> Result<bool, SelectorError> {
        let mut value = None;
        let at = std::ptr::from_ref(device) as usize;
        for expression in expressions {
            let id = match self.programs.get(expression) {
                Some(id) => *id,
                None => {
                    self.compiled.push(Program::compile(expression).map_err(|e| e.to_string()));
                    self.programs.insert(expression.into(), self.compiled.len() - 1);
                    self.compiled.len() - 1
                }
            };
            let program = self.compiled[id].as_ref().map_err(|e| SelectorError::Invalid(e.clone()))?;
            let matched = match self.results.get(&(id, at)) {
                Some(matched) => *matched,
                None => {
                    let mut scope = self.root.new_inner_scope();
                    let device = value.get_or_insert_with(|| device_value(driver, device)).clone();
                    scope.add_variable_from_value("device", device);
                    let matched = match program.execute(&scope) {
                        Ok(Value::Bool(b)) => b,
                        Ok(other) => return Err(SelectorError::Runtime(format!("evaluates to {other:?}, not a bool"))),
                        Err(e) => return Err(SelectorError::Runtime(e.to_string())),
                    };
                    self.results.insert((id, at), matched);
                    matched
                }
            };
            if !matched {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Sym;

    fn gpu(product: &str, memory: u64) -> Device {
        Device {
            name: Sym::new("gpu-0"),
            attributes: Box::new([
                (Sym::new("gpu.nvidia.com/type"), AttributeValue::String("gpu".into())),
                (Sym::new("gpu.nvidia.com/productName"), AttributeValue::String(product.into())),
                (Sym::new("gpu.nvidia.com/driverVersion"), AttributeValue::Version("580.159.4".into())),
                (Sym::new("gpu.nvidia.com/index"), AttributeValue::Int(0)),
            ]),
            capacity: Box::new([(Sym::new("gpu.nvidia.com/memory"), memory)]),
            taints: Box::new([]),
            consumes: Box::new([]),
        }
    }

    #[test]
    fn selectors_read_attributes_capacities_quantities_and_versions() {
        let mut s = Selectors::default();
        let d = gpu("NVIDIA H200", 143_771 * 1024 * 1024);
        let yes = |s: &mut Selectors, e: &str| s.all_match([e], "gpu.nvidia.com", &d);
        assert_eq!(yes(&mut s, "device.driver == 'gpu.nvidia.com'"), Ok(true));
        assert_eq!(yes(&mut s, "device.attributes['gpu.nvidia.com'].type == 'gpu'"), Ok(true));
        assert_eq!(yes(&mut s, "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')"), Ok(false));
        assert_eq!(yes(&mut s, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"), Ok(true));
        assert_eq!(yes(&mut s, "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('80Gi'))"), Ok(false));
        assert_eq!(
            yes(&mut s, "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))"),
            Ok(true)
        );
        assert_eq!(yes(&mut s, "device.attributes['gpu.nvidia.com'].index < 4"), Ok(true));
        // A missing attribute is an error, not a quiet false.
        assert!(matches!(
            yes(&mut s, "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"),
            Err(SelectorError::Runtime(_))
        ));
        assert!(matches!(yes(&mut s, "device.driver =="), Err(SelectorError::Invalid(_))));
    }
}

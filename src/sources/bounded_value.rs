//! A JSON value read from JSON or YAML under a budget proportional to the
//! text: each node costs one, each string and key its bytes. Plain text
//! cannot overspend it (every node takes at least a byte to write), but a
//! YAML alias repeats its anchor's whole tree for two bytes, so 460 KB of
//! `*a` stood for 3.3 GiB; past the budget the read stops with a clear error.

use std::cell::Cell;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// What `text_len` bytes may build: four times their size, and 64 KiB more
/// for the smallest files.
pub fn budget_for(text_len: usize) -> Cell<u64> {
    Cell::new((text_len as u64).saturating_mul(4).saturating_add(64 << 10))
}

/// The message past the budget (YAML aliases are the only way there).
pub const OVER_BUDGET: &str =
    "expands to more than four times its own size (YAML aliases repeating anchors?); kgpu does not expand it";

/// Reads one value, spending `budget`.
pub struct Bounded<'a>(pub &'a Cell<u64>);

impl Bounded<'_> {
    fn spend<E: de::Error>(&self, cost: usize) -> Result<(), E> {
        let left = self.0.get();
        let cost = cost as u64;
        if cost > left {
            return Err(E::custom(OVER_BUDGET));
        }
        self.0.set(left - cost);
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.spend(1)?;
        // NaN and infinities (YAML's .nan, .inf) have no JSON number.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.spend(1 + v.len())?;
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.spend(1 + v.len())?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.spend(1)?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Bounded(self.0).deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.spend(1)?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Bounded(self.0))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.spend(1)?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.spend(key.len())?;
            let v = map.next_value_seed(Bounded(self.0))?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_yaml(text: &str) -> Result<Vec<Value>, String> {
        let budget = budget_for(text.len());
        let mut out = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(text) {
            out.push(Bounded(&budget).deserialize(doc).map_err(|e| e.to_string())?);
        }
        Ok(out)
    }

    #[test]
    fn plain_documents_read_as_serde_json_reads_them() {
        let json = r#"{"a": [1, -2, 2.5, true, null, "x"], "b": {"c": {}}, "d": []}"#;
        let budget = budget_for(json.len());
        let mut de = serde_json::Deserializer::from_str(json);
        let got = Bounded(&budget).deserialize(&mut de).unwrap();
        assert_eq!(got, serde_json::from_str::<Value>(json).unwrap());
        let yaml = "kind: Pod\nmetadata:\n  name: p\n  labels: {a: b}\nspec:\n  containers:\n  - name: c\n    args: [1, '2']\n";
        assert_eq!(read_yaml(yaml).unwrap()[0]["spec"]["containers"][0]["args"], serde_json::json!([1, "2"]));
        // The densest plain YAML spends less than its budget: null items, empty maps.
        assert!(read_yaml(&"-\n".repeat(100_000)).is_ok());
        assert!(read_yaml(&format!("[{}]", "{},".repeat(100_000))).is_ok());
    }

    #[test]
    fn aliases_that_expand_past_the_budget_are_refused() {
        // One wide anchor read 2,000 times: 2 million nodes from 12 KB, and
        // too few aliases for serde_yaml's own limit (100 per event).
        let text = format!("a: &a [{}]\nb: [{}]\n", "x,".repeat(1000), "*a,".repeat(2000));
        let err = read_yaml(&text).unwrap_err();
        assert!(err.contains("four times its own size"), "{err}");
        // Each level doubles: 2^30 leaves from a few hundred bytes.
        let mut text = String::from("a0: &a0 [x, x]\n");
        for i in 1..=30 {
            text.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}]\n", p = i - 1));
        }
        assert!(read_yaml(&text).is_err());
        // A few aliases are fine.
        let ok = read_yaml("base: &b {gpu: 8}\nn1: *b\nn2: *b\n").unwrap();
        assert_eq!(ok[0]["n2"]["gpu"], 8);
    }
}

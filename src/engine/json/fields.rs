//! The field reader: a JSON object read field by field, strictly, with errors that name the
//! field — how the providers read a provider spec and the rarer stream chunks, one small reader
//! in the .wasm instead of a derived deserializer per struct.

use serde_json::Value;

/// A JSON object read field by field, strictly: a field that is there (and not `null`) must
/// have its type. What the providers read this way (a provider spec, the rarer stream chunks)
/// costs the .wasm one small reader instead of a derived deserializer per struct.
#[derive(Clone, Copy)]
pub(crate) struct Fields<'a>(pub(crate) &'a serde_json::Map<String, Value>);

// A build with fewer wire formats (cargo features) uses fewer of these.
#[allow(dead_code)]
impl<'a> Fields<'a> {
    /// `v` as an object, or an error saying what it is.
    pub(crate) fn of(v: &'a Value, what: &str) -> Result<Fields<'a>, String> {
        v.as_object().map(Fields).ok_or_else(|| format!("{what} must be a JSON object"))
    }

    /// The field `key` read by `read`, or an error naming the field and what it must be.
    pub(crate) fn get<T>(
        &self,
        key: &str,
        what: &str,
        read: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => read(v).map(Some).ok_or_else(|| format!("`{key}` must be {what}")),
        }
    }

    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, String> {
        self.get(key, "a string", Value::as_str)
    }

    /// [`Fields::str`], copied.
    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, String> {
        self.get(key, "a string", |v| v.as_str().map(str::to_owned))
    }

    pub(crate) fn u64(&self, key: &str) -> Result<Option<u64>, String> {
        self.get(key, "a non-negative integer", Value::as_u64)
    }

    pub(crate) fn object(&self, key: &str) -> Result<Option<Fields<'a>>, String> {
        self.get(key, "an object", |v| v.as_object().map(Fields))
    }

    pub(crate) fn list(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        self.get(key, "a list", Value::as_array)
    }

    /// The field whatever its type (`None` when absent or `null`).
    pub(crate) fn any(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }
}

/// A provider spec: the constructor's options as the JS layer sends them (`null` is the same
/// as absent).
pub(crate) struct Spec(serde_json::Map<String, Value>);

impl Spec {
    pub(crate) fn parse(text: &str) -> Result<Spec, serde_json::Error> {
        match serde_json::from_str::<Value>(text)? {
            Value::Object(fields) => Ok(Spec(fields)),
            _ => Err(serde::de::Error::custom("a provider spec must be a JSON object")),
        }
    }

    pub(crate) fn get<T>(
        &self,
        key: &str,
        what: &str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, serde_json::Error> {
        Fields(&self.0).get(key, what, read).map_err(serde::de::Error::custom)
    }

    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, serde_json::Error> {
        Fields(&self.0).string(key).map_err(serde::de::Error::custom)
    }

    pub(crate) fn object(&self, key: &str) -> Result<Option<serde_json::Map<String, Value>>, serde_json::Error> {
        self.get(key, "an object", |v| v.as_object().cloned())
    }
}

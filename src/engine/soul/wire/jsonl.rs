//! kimi-cli's `wire.jsonl`: a metadata line (the protocol version), then one record a merged
//! message, `{"timestamp": <seconds>, "message": {"type", "payload"}}`; and reading it back.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::WireMessage;

/// kimi-cli's wire protocol version, written in the recording's first line (the JS layer's
/// `WIRE_PROTOCOL_VERSION` is this one).
pub const WIRE_PROTOCOL_VERSION: &str = "1.10";

/// The first line of `wire.jsonl`.
pub fn metadata_line() -> String {
    format!("{{\"type\":\"metadata\",\"protocol_version\":\"{WIRE_PROTOCOL_VERSION}\"}}")
}

/// One record line of `wire.jsonl`: `{"timestamp": <seconds>, "message": …}`.
pub fn record_line(timestamp_s: f64, message: &WireMessage) -> String {
    #[derive(Serialize)]
    struct Record<'a> {
        timestamp: f64,
        message: &'a WireMessage,
    }
    serde_json::to_string(&Record { timestamp: timestamp_s, message }).unwrap_or_default()
}

/// The `message` of a `wire.jsonl` line, as its raw JSON text, when the line is a record of a
/// message (`{type: string, payload: object}`); `None` for the metadata line, blank lines and
/// lines that are not records (a damaged line, a write cut short).
pub fn record_message(line: &str) -> Option<&serde_json::value::RawValue> {
    #[derive(Deserialize)]
    struct Record<'a> {
        #[serde(borrow)]
        message: &'a serde_json::value::RawValue,
    }
    let r: Record<'_> = serde_json::from_str(line).ok()?;
    // Checked through a `Value` (its reader is in the .wasm anyway), not a derived shape.
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(r.message.get()) else { return None };
    (m.get("type").is_some_and(Value::is_string) && m.get("payload").is_some_and(Value::is_object)).then_some(r.message)
}

/// Reads `wire.jsonl` back into messages (the records [`record_message`] accepts).
pub fn read_wire_record(jsonl: &str) -> Vec<WireMessage> {
    jsonl.lines().filter_map(record_message).filter_map(|m| serde_json::from_str(m.get()).ok()).collect()
}

/// The same messages as the JSON text of an array, each exactly as it was recorded (for a
/// reader with an exact number parser of its own: JavaScript's `JSON.parse`).
pub fn wire_record_json(jsonl: &str) -> String {
    let mut out = String::from("[");
    for m in jsonl.lines().filter_map(record_message) {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(m.get());
    }
    out.push(']');
    out
}

//! `UiChunkerCore`: the core's UI message chunker (`engine::ui_stream`) for `UIMessageChunker`
//! and the Worker's session. Messages cross as JSON text, chunks come back as the JSON text of an
//! array.

use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::engine::ui_stream::{UiChunker, UiEnd};

#[wasm_bindgen]
pub struct UiChunkerCore {
    chunker: UiChunker,
}

fn array(chunks: Vec<String>) -> String {
    format!("[{}]", chunks.join(","))
}

#[wasm_bindgen]
impl UiChunkerCore {
    #[wasm_bindgen(constructor)]
    pub fn new(message_id: Option<String>) -> UiChunkerCore {
        UiChunkerCore { chunker: UiChunker::new(message_id) }
    }

    pub fn start(&mut self) -> String {
        array(self.chunker.start())
    }

    /// The chunks of one wire message (`{type, payload}` as JSON text; anything else makes none).
    pub fn push(&mut self, message: &str) -> String {
        match serde_json::from_str::<Value>(message) {
            Ok(v) => array(self.chunker.push_value(&v)),
            Err(_) => array(self.chunker.start()),
        }
    }

    /// The chunks of one `wire.jsonl` record line.
    #[wasm_bindgen(js_name = pushLine)]
    pub fn push_line(&mut self, line: &str) -> String {
        array(self.chunker.push_line(line))
    }

    /// The chunks that end the message: `cancelled` (the abort's reason), else `error` (its
    /// words), else `finish` (`pause`: an approval the client answers next).
    pub fn end(&mut self, cancelled: Option<String>, error: Option<String>, pause: bool) -> String {
        array(self.chunker.end(&UiEnd { cancelled, error, pause }))
    }
}

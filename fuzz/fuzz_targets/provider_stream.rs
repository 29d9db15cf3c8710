//! SSE + every provider's stream decoder + message assembly, as the engine runs them
//! (`SseEventSource` under `generate`: events of a learned shape read from the bytes as sent,
//! the rest decoded), never panic on any bytes, and the outcome does not depend on where the
//! bytes are split. The first byte picks the provider.
#![no_main]
use std::cell::RefCell;
use std::collections::VecDeque;

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{generate, ByteSource, SseEventSource};
use kosong_wasm::engine::message::{StreamedMessagePart, ToolCall};
use kosong_wasm::engine::providers::HttpProvider;
use libfuzzer_sys::fuzz_target;

fn provider(pick: u8) -> HttpProvider {
    let kind = ["openai", "kimi", "anthropic", "openai_responses", "gemini"][pick as usize % 5];
    HttpProvider::from_json(&format!("{{\"kind\":\"{kind}\",\"model\":\"m\"}}")).unwrap()
}

/// A body that hands over its chunks one read each.
struct Chunks(VecDeque<Vec<u8>>);

impl ByteSource for Chunks {
    type Error = ChatProviderError;
    async fn read_into(&mut self, buf: &mut Vec<u8>) -> Result<bool, ChatProviderError> {
        match self.0.pop_front() {
            Some(c) => {
                *buf = c;
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

fn outcome(p: &HttpProvider, chunks: &[&[u8]]) -> String {
    let body = Chunks(chunks.iter().map(|c| c.to_vec()).collect());
    let mut src = SseEventSource::new(body, p.decoder());
    let seen = RefCell::new(Vec::new());
    let out = futures::executor::block_on(generate(
        &mut src,
        |part: &StreamedMessagePart| {
            seen.borrow_mut().push(format!("{part:?}"));
            Ok(None)
        },
        |call: &ToolCall| {
            seen.borrow_mut().push(format!("complete {}", call.id));
            Ok(None)
        },
    ));
    format!("{:?} {out:?}", seen.into_inner())
}

fuzz_target!(|data: &[u8]| {
    let [pick, cut, rest @ ..] = data else { return };
    let p = provider(*pick);
    let at = (*cut as usize) % (rest.len() + 1);
    assert_eq!(outcome(&p, &[&rest[..at], &rest[at..]]), outcome(&p, &[rest]));
});

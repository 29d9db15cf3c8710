//! SSE + every provider's stream decoder + message assembly, as the engine runs them
//! (`SseEventSource` under `generate`: events of a learned shape read from the bytes as sent,
//! the rest decoded), never panic on any bytes, and the outcome does not depend on where the
//! bytes are split. The first byte picks the provider.
#![no_main]
use std::cell::RefCell;
use std::collections::VecDeque;

use kosong_wasm::engine::error::ChatProviderError;
use kosong_wasm::engine::generate::{generate, ByteSource, SseEventSource, Unheard};
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

/// The parts heard (none when `hear` is off), and the calls handed on with the outcome.
fn outcome(p: &HttpProvider, chunks: &[&[u8]], hear: bool) -> (Vec<String>, String) {
    let body = Chunks(chunks.iter().map(|c| c.to_vec()).collect());
    let mut src = SseEventSource::new(body, p.decoder());
    let parts = RefCell::new(Vec::new());
    let calls = RefCell::new(Vec::new());
    let on_call = |call: &ToolCall| {
        calls.borrow_mut().push(format!("complete {} {:?}", call.id, call.function.arguments));
        Ok(None)
    };
    let out = if hear {
        let on_part = |part: &StreamedMessagePart| {
            parts.borrow_mut().push(format!("{part:?} before {}", calls.borrow().len()));
            Ok(None)
        };
        futures::executor::block_on(generate(&mut src, on_part, on_call))
    } else {
        futures::executor::block_on(generate(&mut src, Unheard, on_call))
    };
    (parts.into_inner(), format!("{:?} {out:?}", calls.into_inner()))
}

fuzz_target!(|data: &[u8]| {
    let [pick, cut, rest @ ..] = data else { return };
    let p = provider(*pick);
    let at = (*cut as usize) % (rest.len() + 1);
    let whole = outcome(&p, &[rest], true);
    assert_eq!(outcome(&p, &[&rest[..at], &rest[at..]], true), whole);
    // Parts joined where nobody hears them: the same message, calls and outcome.
    assert_eq!(outcome(&p, &[&rest[..at], &rest[at..]], false).1, whole.1);
    assert_eq!(outcome(&p, &[rest], false).1, whole.1);
});

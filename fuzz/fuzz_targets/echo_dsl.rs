//! The echo DSL parser never panics on any script.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(script) = std::str::from_utf8(data) {
        if let Ok(s) = kosong_wasm::engine::providers::echo::parse_echo_script(script) {
            let _ = s.events();
        }
    }
});

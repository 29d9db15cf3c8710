// Cloudflare Workers (workerd): the bundler hands over the compiled module; ready on import.
import module from "./wasm/kosong_wasm_bg.wasm";
import { initSync } from "./wasm/kosong_wasm.js";
import { _markReady } from "./api.js";

_markReady(initSync({ module }));

export * from "./api.js";
export * from "./soul.js";
export * from "./chaos.js";

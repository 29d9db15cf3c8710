// Cloudflare Workers (workerd): the bundler hands over the compiled module; ready on import.
import module from "./wasm/kosong_wasm_bg.wasm";
import { initSync } from "./wasm/kosong_wasm.js";
import { markReady } from "./internal.js";

markReady(initSync({ module }));

export * from "./index.js";

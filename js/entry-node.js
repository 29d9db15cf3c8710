// Node ≥ 20: ready on import (reads the packaged .wasm synchronously).
import { readFileSync } from "node:fs";
import { initSync } from "./wasm/kosong_wasm.js";
import { markReady } from "./internal.js";

markReady(initSync({ module: readFileSync(new URL("./wasm/kosong_wasm_bg.wasm", import.meta.url)) }));

export * from "./index.js";

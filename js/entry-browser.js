// Browsers and bundlers: call `await init()` once before anything else.
export * from "./index.js";

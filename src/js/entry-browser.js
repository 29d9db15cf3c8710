// Browsers and bundlers: call `await init()` once before anything else.
export * from "./api.js";
export * from "./soul.js";
export * from "./chaos.js";

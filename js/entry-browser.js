// Browsers and bundlers: call `await init()` once before anything else.
export * from "./index.js";
// Node's files have no place here: this one name is the browser's own (see session-file-browser.js).
export { FileSessionStore } from "./session-file-browser.js";

// FileSessionStore in the browser entry: its files are Node's (a browser keeps sessions in
// IndexedDBSessionStore), so its code stays out of a browser bundle and the name refuses clearly.
export class FileSessionStore {
  constructor() {
    throw new TypeError("FileSessionStore keeps a session in files and runs in Node; in a browser, keep it in an IndexedDBSessionStore (or a SessionStore of your own)");
  }
}

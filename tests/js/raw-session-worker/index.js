// A Worker that hands every request to an AgentSession as it came, with no checks of its own in
// front: what the package's Durable Object does by itself with malformed and oversized bodies.
import { AgentSession } from "kosong-wasm/cloudflare";
import { ScriptedProvider } from "kosong-wasm";

export class RawSession extends AgentSession {
  agentOptions() {
    return { provider: new ScriptedProvider(["text: ok"]), systemPrompt: "" };
  }
}

export default {
  fetch(request, env) {
    return env.RAW.get(env.RAW.idFromName("one")).fetch(request);
  },
};

// A React page on the AI SDK's `useChat`, as a Next.js or Vite app has it, talking to the
// kosong-wasm Worker: the only change is where the chat id and the token come from.
import { createElement as h, useState } from "react";
import { createRoot } from "react-dom/client";
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";

function Part({ part, respond }) {
  if (part.type === "text") return h("p", { className: "text" }, part.text);
  if (!part.type.startsWith("tool-")) return null;
  const name = part.type.slice(5);
  return h(
    "div",
    { className: "tool", "data-name": name, "data-state": part.state },
    h("b", null, name),
    " ",
    h("code", null, JSON.stringify(part.input ?? null)),
    part.state === "output-available" ? h("span", { className: "output" }, String(part.output)) : null,
    part.state === "approval-requested"
      ? h("span", null,
          h("button", { className: "approve", onClick: () => respond({ id: part.approval.id, approved: true }) }, "Approve"),
          h("button", { className: "deny", onClick: () => respond({ id: part.approval.id, approved: false, reason: "not now" }) }, "Deny"))
      : null,
  );
}

function Chat({ session, token }) {
  const [transport] = useState(() => new DefaultChatTransport({ headers: { authorization: `Bearer ${token}` } }));
  const { messages, sendMessage, status, error, addToolApprovalResponse } = useChat({
    id: session,
    transport,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  return h(
    "main",
    null,
    h("ul", { id: "messages" }, messages.map((m) => h("li", { key: m.id, className: m.role }, m.parts.map((p, i) => h(Part, { key: i, part: p, respond: addToolApprovalResponse }))))),
    h(
      "form",
      { onSubmit: (e) => { e.preventDefault(); sendMessage({ text: input }); setInput(""); } },
      h("input", { id: "q", value: input, onChange: (e) => setInput(e.target.value) }),
      h("button", { id: "send" }, "Send"),
    ),
    h("p", { id: "status" }, status),
    error ? h("p", { id: "error" }, error.message) : null,
  );
}

const { session, token } = await (await fetch("/session", { method: "POST" })).json();
createRoot(document.getElementById("root")).render(h(Chat, { session, token }));
document.body.dataset.ready = "true";

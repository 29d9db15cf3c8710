// The demo's tools: real JavaScript functions with visible effects. Each tells the wire when
// it starts (`DemoToolStart`), so the timeline can draw its bar — in a live run and in a
// replayed recording alike.

const CITIES = [
  { city: "Paris", country: "France", weather: "18 °C, light rain", population: 2_102_650, fact: "The Eiffel Tower grows about 15 cm in summer heat." },
  { city: "Tokyo", country: "Japan", weather: "24 °C, clear", population: 14_094_034, fact: "Shinjuku station serves over 3 million people a day." },
  { city: "Nairobi", country: "Kenya", weather: "21 °C, partly cloudy", population: 4_397_073, fact: "It has a national park inside the city limits." },
  { city: "Lima", country: "Peru", weather: "19 °C, overcast", population: 10_092_000, fact: "It almost never rains there." },
  { city: "Oslo", country: "Norway", weather: "6 °C, windy", population: 709_037, fact: "Its city hall hosts the Nobel Peace Prize ceremony." },
  { city: "Sydney", country: "Australia", weather: "22 °C, sunny", population: 5_450_496, fact: "Its opera house roof has over a million tiles." },
  { city: "Cairo", country: "Egypt", weather: "29 °C, sunny", population: 10_230_350, fact: "Its metro was the first in Africa." },
  { city: "Montréal", country: "Canada", weather: "3 °C, snow", population: 1_762_949, fact: "It has 33 km of underground walkways." },
];

/** Waits `ms`, or rejects when `signal` aborts (the tool stops at once). */
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** A small arithmetic parser: + - * / ^ ( ) and numbers. No `eval`. */
export function calculate(expression) {
  const src = String(expression);
  let i = 0;
  const peek = () => src[i];
  const skip = () => {
    while (src[i] === " ") i++;
  };
  const fail = (why) => {
    throw new Error(`${why} at position ${i} of "${src}"`);
  };
  const number = () => {
    skip();
    const m = /^\d+(\.\d+)?([eE][+-]?\d+)?/.exec(src.slice(i));
    if (!m) fail("expected a number");
    i += m[0].length;
    return Number(m[0]);
  };
  const atom = () => {
    skip();
    if (peek() === "(") {
      i++;
      const v = sum();
      skip();
      if (peek() !== ")") fail("expected )");
      i++;
      return v;
    }
    if (peek() === "-") {
      i++;
      return -atom();
    }
    return number();
  };
  const power = () => {
    const base = atom();
    skip();
    if (peek() === "^") {
      i++;
      return base ** power();
    }
    return base;
  };
  const product = () => {
    let v = power();
    for (;;) {
      skip();
      if (peek() === "*") (i++, (v *= power()));
      else if (peek() === "/") (i++, (v /= power()));
      else return v;
    }
  };
  const sum = () => {
    let v = product();
    for (;;) {
      skip();
      if (peek() === "+") (i++, (v += product()));
      else if (peek() === "-") (i++, (v -= product()));
      else return v;
    }
  };
  const v = sum();
  skip();
  if (i < src.length) fail("unexpected character");
  return v;
}

/** The tools; `onNote(text)` shows a saved note on the page. */
export function demoTools({ onNote, toolError }) {
  const started = (ctx) => ctx.send?.({ type: "DemoToolStart", payload: { tool_call_id: ctx.toolCallId } });
  return [
    {
      name: "search",
      description: "Searches a small local database of cities (weather, population, a fact). Slow, like a real search.",
      // Read-only: a turn that goes on after a reload runs it again rather than calling it interrupted.
      idempotent: true,
      parameters: { type: "object", properties: { query: { type: "string", description: "A city or country" } }, required: ["query"] },
      handler: async ({ query }, ctx) => {
        started(ctx);
        await pause(1500, ctx.signal);
        const q = String(query).toLowerCase();
        const hits = CITIES.filter((c) => q.includes(c.city.toLowerCase()) || q.includes(c.country.toLowerCase()) || c.city.toLowerCase().includes(q));
        if (hits.length === 0) return `No city matches "${query}".`;
        return hits.map((c) => `${c.city} (${c.country}): ${c.weather}; population ${c.population.toLocaleString("en")}. ${c.fact}`).join("\n");
      },
    },
    {
      name: "clock",
      description: "The current time in an IANA time zone.",
      idempotent: true,
      parameters: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
      handler: async ({ timezone }, ctx) => {
        started(ctx);
        await pause(300, ctx.signal);
        return `${timezone}: ${new Date().toLocaleTimeString("en-GB", { timeZone: timezone })}`;
      },
    },
    {
      name: "calculator",
      description: "Evaluates an arithmetic expression (+ - * / ^ and parentheses).",
      idempotent: true,
      parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
      handler: async ({ expression }, ctx) => {
        started(ctx);
        return `${expression} = ${calculate(expression)}`;
      },
    },
    {
      name: "save_note",
      description: "Saves a note in the page's notes panel. Asks the user first.",
      parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      handler: async ({ text }, ctx) => {
        started(ctx);
        const ok = ctx.requestApproval ? await ctx.requestApproval({ action: "save_note", description: `Save the note “${text}”` }) : true;
        // Refused: kimi-cli's rejection (with the user's feedback, if any) — without feedback it ends the turn.
        if (!ok) return ctx.rejection ? ctx.rejection() : toolError({ message: "The user declined to save the note.", brief: "Declined" });
        onNote(text);
        return `Saved the note: ${text}`;
      },
    },
  ];
}

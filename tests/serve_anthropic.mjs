// serve_anthropic.mjs - the official `@anthropic-ai/sdk` client against `kiln serve`'s Messages API
// (a model with a Jinja chat template that knows tools): a message with a system prompt, the same
// streamed (its text must equal the non-streamed text at temperature 0, its events in order), stop
// sequences, count_tokens, a conversation with tool_use and tool_result blocks, tool_choice "tool"
// (every tool_use block must name the tool and its input match the schema; noted, not failed, when
// the server says it cannot force a tool call), and bad requests refused with 400.
// usage: node serve_anthropic.mjs BASE_URL
import Anthropic from "@anthropic-ai/sdk";

const [baseURL] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: "secret", maxRetries: 0, timeout: 120000 });
let fails = 0, passes = 0;
const check = (what, cond, detail) => {
  if (cond) passes++;
  else { fails++; console.error(`FAIL: ${what}`, detail === undefined ? "" : JSON.stringify(detail)); }
};
const textOf = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");

// the template opens a thinking block unless told not to: off here, on further below
const base = { model: "kjv", max_tokens: 16, temperature: 0, system: "Be brief.", thinking: { type: "disabled" },
  messages: [{ role: "user", content: "Who made the heaven?" }] };
const m = await client.messages.create(base);
check("message shape", m.type === "message" && m.role === "assistant" && m.content.length === 1 &&
      m.content[0].type === "text" && textOf(m).length > 0, m);
check("stop_reason max_tokens", m.stop_reason === "max_tokens" && m.stop_sequence === null, m);
check("usage", m.usage.output_tokens === 16 && m.usage.input_tokens + m.usage.cache_read_input_tokens > 0, m.usage);

const stream = client.messages.stream(base);
const types = [];
stream.on("streamEvent", (e) => types.push(e.type));
const final = await stream.finalMessage();
check("streamed text = text", textOf(final) === textOf(m), [textOf(final), textOf(m)]);
check("streamed stop_reason and usage", final.stop_reason === "max_tokens" && final.usage.output_tokens === 16, final);
check("event order", types[0] === "message_start" && types[1] === "content_block_start" &&
      types.at(-3) === "content_block_stop" && types.at(-2) === "message_delta" && types.at(-1) === "message_stop" &&
      types.slice(2, -3).every((t) => t === "content_block_delta"), types);

// a stop sequence taken from the answer: the text ends before it
const words = textOf(m).trim().split(/\s+/);
const stop = words.length > 2 ? words[2] : words[0];
const s = await client.messages.create({ ...base, max_tokens: 32, stop_sequences: [stop] });
check("stop_sequence", s.stop_reason === "stop_sequence" && s.stop_sequence === stop && !textOf(s).includes(stop) &&
      textOf(m).startsWith(textOf(s)), [stop, s, textOf(m)]);

// thinking on with a budget of 4 tokens: a thinking block (at most 4 tokens, then the server closes
// it), then the text; streamed as thinking_delta events in block 0, text_delta in block 1
const think = { ...base, max_tokens: 24, thinking: { type: "enabled", budget_tokens: 4 } };
const th = await client.messages.create(think);
check("thinking block first, then text", th.content.length === 2 && th.content[0].type === "thinking" &&
      th.content[0].thinking.length > 0 && th.content[1].type === "text" && th.content[1].text.length > 0, th);
const thEvents = [];
const ts = client.messages.stream(think);
ts.on("streamEvent", (e) => thEvents.push(e));
const thFinal = await ts.finalMessage();
check("streamed thinking = thinking", JSON.stringify(thFinal.content) === JSON.stringify(th.content), [thFinal.content, th.content]);
check("thinking_delta in block 0, text_delta in block 1",
      thEvents.some((e) => e.type === "content_block_delta" && e.index === 0 && e.delta.type === "thinking_delta") &&
      thEvents.some((e) => e.type === "content_block_delta" && e.index === 1 && e.delta.type === "text_delta"), thEvents);

const n0 = await client.messages.countTokens({ model: "kjv", messages: base.messages });
const n1 = await client.messages.countTokens({ model: "kjv", system: base.system, messages: base.messages });
check("count_tokens", n0.input_tokens > 0 && n1.input_tokens > n0.input_tokens, [n0, n1]);

const tools = [{ name: "get_weather", description: "Weather in a city.",
  input_schema: { type: "object", properties: { city: { type: "string", maxLength: 20 } }, required: ["city"],
    additionalProperties: false } }];
const history = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: [{ type: "text", text: "Let me look." },
    { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } }] },
  { role: "user", content: [{ type: "tool_result", tool_use_id: "call_1", content: "Sunny, 21 C" }] },
];
const t0 = await client.messages.countTokens({ model: "kjv", tools, messages: history.slice(0, 1) });
const t1 = await client.messages.countTokens({ model: "kjv", tools, messages: history });
check("count_tokens: tool_use and tool_result are in the prompt", t1.input_tokens > t0.input_tokens + 10, [t0, t1]);
const after = await client.messages.create({ model: "kjv", max_tokens: 8, temperature: 0, tools, messages: history,
  thinking: { type: "disabled" } });
check("a reply after a tool result", after.type === "message" && after.content.length >= 1, after);

try {
  const forced = await client.messages.create({ model: "kjv", max_tokens: 200, temperature: 0, tools,
    tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true }, messages: history.slice(0, 1), thinking: { type: "disabled" } });
  const uses = forced.content.filter((b) => b.type === "tool_use");
  check("tool_choice tool: a tool_use block", uses.length >= 1 && forced.stop_reason === "tool_use", forced);
  for (const u of uses)
    check("tool_use names the tool, input matches the schema", u.name === "get_weather" && typeof u.input.city === "string" &&
          Object.keys(u.input).every((k) => k === "city") && u.id.length > 0, u);
} catch (e) {
  if (e.status === 400 && /grammar|required|tool_choice/i.test(e.message)) console.log(`note: forced tool call refused: ${e.message}`);
  else check("tool_choice tool", false, String(e));
}

for (const [what, body] of [
  ["an image block", { ...base, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] }],
  ["metadata (not implemented)", { ...base, metadata: { user_id: "u1" } }],
  ["an unknown field", { ...base, top_kk: 3 }],
  ["no max_tokens", { model: "kjv", messages: base.messages }],
  ["a system role in messages", { ...base, messages: [{ role: "system", content: "x" }] }],
]) {
  try {
    await client.messages.create(body);
    check(`${what}: refused`, false);
  } catch (e) {
    check(`${what}: 400`, e.status === 400, String(e));
  }
}

console.log(`serve_anthropic: ${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

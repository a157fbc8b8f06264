// serve_openai_tools.mjs - the official `openai` client asks kiln serve (a model with a Jinja chat
// template) for tool calls, two tools offered: tool_choice "required" (streamed and not) and each
// function by name give calls that name an offered tool (the named one) and whose arguments parse
// as JSON and match the tool's schema (required keys present, types, enums, bounds, lengths, no keys
// the schema does not define); "auto" and "none" give replies the client reads (the KJV model writes
// text, not calls). The server holds the calls with its grammar engine: the model cannot call by itself.
// usage: node serve_openai_tools.mjs BASE_URL MODEL_ID
import OpenAI from "openai";

const [baseURL, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "secret", maxRetries: 0, timeout: 120000 });
let fails = 0, passes = 0;
const check = (what, cond, detail) => {
  if (cond) passes++;
  else { fails++; console.error(`FAIL: ${what}`, detail === undefined ? "" : JSON.stringify(detail)); }
};
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 20 }, days: { type: "integer", minimum: 1, maximum: 7 } },
                  required: ["city"], additionalProperties: false } } },
  { type: "function", function: { name: "search", description: "Search the scriptures.",
    parameters: { type: "object", properties: { query: { type: "string", maxLength: 30 }, book: { type: "string", enum: ["Genesis", "Exodus"] } },
                  required: ["query", "book"], additionalProperties: false } } },
];
const schemaOf = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));
function matches(schema, v) {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  for (const k of schema.required || []) if (!(k in v)) return false;
  for (const [k, x] of Object.entries(v)) {
    const p = schema.properties[k];
    if (!p) return false;
    if (p.type === "string" && (typeof x !== "string" || x.length > p.maxLength)) return false;
    if (p.type === "integer" && !Number.isInteger(x)) return false;
    if (p.enum && !p.enum.includes(x)) return false;
    if (p.minimum !== undefined && x < p.minimum) return false;
    if (p.maximum !== undefined && x > p.maximum) return false;
  }
  return true;
}
function checkCalls(label, calls) {
  check(`${label}: at least one call`, Array.isArray(calls) && calls.length > 0, calls);
  for (const c of calls || []) {
    check(`${label}: an id`, typeof c.id === "string" && c.id.length > 0, c);
    const schema = schemaOf[c.function?.name];
    check(`${label}: calls an offered tool`, !!schema, c);
    let args = null;
    try { args = JSON.parse(c.function.arguments); } catch (e) { check(`${label}: arguments parse as JSON`, false, c); }
    if (schema && args) check(`${label}: arguments match the schema`, matches(schema, args), args);
  }
}
const messages = [{ role: "user", content: "What is the weather in Jerusalem, and where does Genesis speak of light?" }];
const req = { model: modelId, messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 400,
              temperature: 0.7, seed: 3 };
const r = await client.chat.completions.create(req);
check("finish_reason tool_calls", r.choices[0].finish_reason === "tool_calls", r.choices[0]);
check("content null beside the calls", r.choices[0].message.content === null, r.choices[0].message);
checkCalls("whole", r.choices[0].message.tool_calls);
const calls = [];
let finish = null;
for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
  const ch = chunk.choices[0];
  if (!ch) continue;
  finish = ch.finish_reason ?? finish;
  for (const d of ch.delta?.tool_calls || []) {
    calls[d.index] ??= { id: "", function: { name: "", arguments: "" } };
    if (d.id) calls[d.index].id = d.id;
    if (d.function?.name) calls[d.index].function.name += d.function.name;
    if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
  }
}
check("streamed finish_reason tool_calls", finish === "tool_calls", finish);
checkCalls("streamed", calls);
for (const name of ["get_weather", "search"]) {
  const r = await client.chat.completions.create({ ...req, tool_choice: { type: "function", function: { name } } });
  const tc = r.choices[0].message.tool_calls || [];
  check(`a named function (${name}) is the one called`, tc.length > 0 && tc.every((c) => c.function.name === name), tc);
  checkCalls(`named ${name}`, tc);
}
for (const tool_choice of ["auto", "none"]) {
  const a = await client.chat.completions.create({ ...req, tool_choice, max_tokens: 12 });
  const m = a.choices[0].message;
  check(`${tool_choice}: a reply the client reads`, typeof m.content === "string" || (m.tool_calls || []).length > 0, m);
  if (tool_choice === "none") check("none: no calls", !m.tool_calls, m);
}
console.log(`serve_openai_tools: ${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

// serve_responses.mjs - the official `openai` npm client's Responses API against `kiln serve`
// (a model with a Jinja chat template that knows tools): text with instructions, the same streamed
// (the deltas must make the text, the events end in response.completed or .incomplete with the
// same output), a conversation with function_call and function_call_output items and function
// tools, and fields kiln does not implement refused with 400.
// usage: node serve_responses.mjs BASE_URL
import OpenAI from "openai";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "secret", maxRetries: 0, timeout: 120000 });
let fails = 0, passes = 0;
const check = (what, cond, detail) => {
  if (cond) passes++;
  else { fails++; console.error(`FAIL: ${what}`, detail === undefined ? "" : JSON.stringify(detail)); }
};

const base = { model: "kjv", instructions: "Be brief.", input: "Who made the heaven?", max_output_tokens: 12, temperature: 0 };
const r = await client.responses.create(base);
check("response shape", r.object === "response" && r.output.length >= 1 && r.output.at(-1).type === "message" &&
      r.output.at(-1).content[0].type === "output_text", r);
check("output_text", typeof r.output_text === "string" && r.output_text.length > 0, r.output_text);
check("status incomplete at max_output_tokens", r.status === "incomplete" &&
      r.incomplete_details?.reason === "max_output_tokens", r);
check("usage", r.usage.output_tokens === 12 && r.usage.input_tokens > 0 &&
      r.usage.total_tokens === r.usage.input_tokens + 12, r.usage);

let text = "", last = null;
const types = [];
for await (const e of await client.responses.create({ ...base, stream: true })) {
  types.push(e.type);
  if (e.type === "response.output_text.delta") text += e.delta;
  last = e;
}
const lastText = last?.response?.output?.filter((o) => o.type === "message").map((o) => o.content[0].text).join("");
check("streamed deltas = output_text", text === r.output_text, [text, r.output_text]);
check("events: created first, incomplete last with the same text", types[0] === "response.created" &&
      last.type === "response.incomplete" && lastText === r.output_text, types);
check("sequence of item events", types.includes("response.output_item.added") && types.includes("response.content_part.added") &&
      types.includes("response.output_text.done") && types.includes("response.output_item.done"), types);

const tools = [{ type: "function", name: "get_weather", description: "Weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const history = [
  { role: "user", content: "Weather in Paris?" },
  { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"city\":\"Paris\"}" },
  { type: "function_call_output", call_id: "call_1", output: "Sunny, 21 C" },
];
const after = await client.responses.create({ model: "kjv", input: history, tools, max_output_tokens: 6, temperature: 0 });
check("a reply after a function call's output", after.object === "response" && after.output.length >= 1, after);
for (const item of after.output.filter((o) => o.type === "function_call"))
  check("function_call items name the tool, arguments parse", item.name === "get_weather" && typeof JSON.parse(item.arguments) === "object", item);

for (const [what, body] of [
  ["previous_response_id (responses are not stored)", { ...base, previous_response_id: "resp_1" }],
  ["an unknown field", { ...base, max_output_tokenz: 3 }],
  ["an image part", { ...base, input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x/y.png" }] }] }],
  ["a web search tool", { ...base, tools: [{ type: "web_search" }] }],
]) {
  try {
    await client.responses.create(body);
    check(`${what}: refused`, false);
  } catch (e) {
    check(`${what}: 400`, e.status === 400, String(e));
  }
}
console.log(`serve_responses: ${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

// serve_openai.mjs - the official `openai` npm client against `kiln serve`:
// completion (one prompt and a list) and chat, streamed and not; the streamed text must equal the
// non-streamed text (temperature 0). usage: node serve_openai.mjs BASE_URL MODEL_ID
import OpenAI from "openai";

const [baseURL, modelId] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "secret", maxRetries: 0, timeout: 60000 });
let fails = 0, passes = 0;
const check = (what, cond, detail) => {
  if (cond) passes++;
  else { fails++; console.error(`FAIL: ${what}`, detail === undefined ? "" : JSON.stringify(detail)); }
};

const models = await client.models.list();
check("models.list names the model", models.data.length === 1 && models.data[0].id === modelId, models.data);

const cp = { model: modelId, prompt: "And God said", max_tokens: 16, temperature: 0 };
const c = await client.completions.create(cp);
check("completion text", typeof c.choices[0].text === "string" && c.choices[0].text.length > 0, c);
check("completion finish_reason", c.choices[0].finish_reason === "length", c.choices[0]);
check("completion usage", c.usage.prompt_tokens === 4 && c.usage.completion_tokens === 16 && c.usage.total_tokens === 20, c.usage);
let streamed = "", finish = null;
for await (const chunk of await client.completions.create({ ...cp, stream: true })) {
  streamed += chunk.choices[0]?.text ?? "";
  finish = chunk.choices[0]?.finish_reason ?? finish;
}
check("streamed completion = completion", streamed === c.choices[0].text, [streamed, c.choices[0].text]);
check("streamed completion finish_reason", finish === "length", finish);

const two = await client.completions.create({ ...cp, prompt: ["In the beginning", cp.prompt] });
check("a list of prompts: a choice each, in order", two.choices.length === 2 && two.choices[0].index === 0 &&
      two.choices[1].index === 1 && two.choices[1].text === c.choices[0].text, two.choices);
check("a list of prompts: usage summed", two.usage.completion_tokens === 32, two.usage);

const msgs = [{ role: "system", content: "Be brief." }, { role: "user", content: "Who made the heaven?" }];
const chat = await client.chat.completions.create({ model: modelId, messages: msgs, max_tokens: 16, temperature: 0 });
const reply = chat.choices[0].message;
check("chat reply", reply.role === "assistant" && typeof reply.content === "string" && reply.content.length > 0, chat);
check("chat usage", chat.usage.completion_tokens === 16 && chat.usage.prompt_tokens > 0, chat.usage);
let chatStreamed = "", role = null;
const stream = await client.chat.completions.create({
  model: modelId, messages: msgs, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  const d = chunk.choices[0]?.delta;
  if (d?.role) role = d.role;
  chatStreamed += d?.content ?? "";
}
check("streamed chat = chat", chatStreamed === reply.content, [chatStreamed, reply.content]);
check("streamed chat role", role === "assistant", role);
check("streamed chat usage", usage && usage.completion_tokens === 16, usage);

try {
  await client.chat.completions.create({ model: modelId, messages: [{ role: "wizard", content: "x" }] });
  check("unknown role raises", false);
} catch (e) {
  check("unknown role raises a 400 BadRequestError", e instanceof OpenAI.BadRequestError && e.status === 400 &&
        /role/.test(e.message), String(e));
}
try {
  await new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list();
  check("wrong key raises", false);
} catch (e) {
  check("wrong key raises a 401 AuthenticationError", e instanceof OpenAI.AuthenticationError, String(e));
}
console.log(`serve_openai: ${passes} passed, ${fails} failed`);
process.exit(fails ? 1 : 0);

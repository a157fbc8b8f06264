// serve_openai_embed.mjs BASE_URL MODEL - the official openai client's embeddings.create
// against `kiln serve --embeddings`: one text, a list, base64 (which the client asks for
// by default and decodes itself), usage; exits non-zero on the first difference.
import OpenAI from "openai";
const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: "none" });
const fail = (m) => { console.error(m); process.exit(1); };
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const one = await client.embeddings.create({ model, input: "Hello world", encoding_format: "float" });
if (one.object !== "list" || one.data.length !== 1 || one.data[0].index !== 0) fail("one: " + JSON.stringify(one).slice(0, 200));
if (Math.abs(norm(one.data[0].embedding) - 1) > 1e-4) fail("one: not unit length");
if (!(one.usage.prompt_tokens > 0) || one.usage.total_tokens !== one.usage.prompt_tokens) fail("usage " + JSON.stringify(one.usage));
const list = await client.embeddings.create({ model, input: ["Hello world", "bananas are yellow", "a"] });
if (list.data.length !== 3 || list.data.map((d) => d.index).join() !== "0,1,2") fail("list indexes");
// the client's default is base64, decoded into floats: the same vector as the float answer
const a = one.data[0].embedding, b = list.data[0].embedding;
if (a.length !== b.length || a.some((x, i) => Math.abs(x - b[i]) > 1e-6)) fail("base64 and float differ");
try {
  await client.embeddings.create({ model, input: "x", dimensions: 8 });
  fail("dimensions accepted");
} catch (e) {
  if (e.status !== 400 || !String(e.message).includes("dimensions")) fail("dimensions: " + e);
}
console.log("openai client: embeddings", a.length, "floats, usage", JSON.stringify(list.usage));

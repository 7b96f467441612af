// End-to-end check with the official openai Node client, unchanged:
// node client.mjs BASE_URL GENERATOR_MODEL EMBEDDING_MODEL
// prints one JSON object with what the client returned.
import OpenAI from "openai";

const [base, gen, emb] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base, apiKey: "unused" });
const out = {};

// The client's default encoding_format is base64; it decodes the vector.
const def = await client.embeddings.create({ model: emb, input: "fix the specimen in formalin" });
const flt = await client.embeddings.create({ model: emb, input: "fix the specimen in formalin", encoding_format: "float" });
out.embeddingDefault = Array.from(def.data[0].embedding);
out.embeddingFloat = flt.data[0].embedding;
out.embeddingUsage = def.usage;

let text = "", usage = null, chunks = 0;
const chat = await client.chat.completions.create({
  model: gen, messages: [{ role: "user", content: [{ type: "text", text: "what is eosin?" }] }],
  stream: true, stream_options: { include_usage: true }, max_completion_tokens: 5,
});
for await (const c of chat) {
  chunks++;
  if (c.choices.length) text += c.choices[0].delta.content ?? "";
  if (c.usage) usage = c.usage;
}
out.chatStream = { text, usage, chunks };
const once = await client.chat.completions.create({ model: gen, messages: [{ role: "user", content: "what is eosin?" }], max_completion_tokens: 5 });
out.chatText = once.choices[0].message.content;

text = ""; usage = null; chunks = 0;
const comp = await client.completions.create({ model: gen, prompt: "stain with", max_tokens: 5, stream: true, stream_options: { include_usage: true } });
for await (const c of comp) {
  chunks++;
  if (c.choices.length) text += c.choices[0].text;
  if (c.usage) usage = c.usage;
}
out.completionStream = { text, usage, chunks };

try {
  await client.chat.completions.create({ model: "gpt-nope", messages: [{ role: "user", content: "x" }] });
  out.unknownModel = "accepted";
} catch (e) {
  out.unknownModel = { status: e.status, code: e.code, param: e.param };
}
console.log(JSON.stringify(out));

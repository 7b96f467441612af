// Encodes texts with transformers.js (AutoTokenizer from local folders, no
// network). argv: models root, jobs file [{model, texts}]. Prints
// {model: [[ids…] per text]} (encode with add_special_tokens=true).
import { readFileSync } from "node:fs";
import { env, AutoTokenizer } from "@huggingface/transformers";

env.allowRemoteModels = false;
env.localModelPath = process.argv[2];
const jobs = JSON.parse(readFileSync(process.argv[3], "utf8"));
const out = {};
for (const job of jobs) {
  const tok = await AutoTokenizer.from_pretrained(job.model);
  out[job.model] = job.texts.map((t) => tok.encode(t));
}
console.log(JSON.stringify(out));

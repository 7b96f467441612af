#!/usr/bin/env python3
"""ROC-AUC of label-free word-overlap scores on filter evidence examples.

Not a test: it prints the figures docs/recipes.md ("What the marked filter
reads") compares the trained filter with. Each input is a JSONL file of RAG²
filter examples (question = the instruction, answer = [HELPFUL] or
[NOT_HELPFUL]), e.g. demo-ap's filter/valid.jsonl. Document frequencies come
from the distinct evidence texts of --corpus-examples (demo-ap's
filter/train.jsonl, its ICT examples: corpus chunks, no labels).

Scores, per example:
  level_sum      sum over evidence words of their match-mark level
                 (models/filter.MatchMarks, the default rule)
  level_sum_p5   the same with words compared by their first 5 letters
  icov_p5+lev/50 IDF-weighted share of the question's 5-letter prefixes
                 found in the evidence, plus level_sum_p5 / 50
  level_sum_rare[F]  level_sum with the marks' rare_doc_fractions F (one
                 more per fraction a marked word's document frequency is at
                 or below), for each --rare-doc-fractions given

  scripts/filter-lexical-auc.py --corpus-examples A/filter/train.jsonl [--rare-doc-fractions 0.05,0.005 ...] F.jsonl [F.jsonl ...]
"""
import argparse, json, math, re, unicodedata
from collections import Counter

HEAD, SEP = "Evidence: ", "\n\nQuestion: "
WORD = re.compile(r"[^\W_]+")


def fold(w):
    w = unicodedata.normalize("NFD", w.lower())
    return unicodedata.normalize("NFC", "".join(c for c in w if unicodedata.category(c) != "Mn"))


def split(instruction):
    i, j = instruction.index(HEAD) + len(HEAD), instruction.rindex(SEP)
    ev, q = instruction[i:j], instruction[j + len(SEP):]
    return [fold(w) for w in WORD.findall(ev)], [fold(w) for w in WORD.findall(q)]


def levels(ev, q, prefix, min_chars=3, max_run=5):
    e, qq = [w[:prefix] if prefix else w for w in ev], [w[:prefix] if prefix else w for w in q]
    lv = [0] * len(e)
    for a in range(len(e)):
        for b in range(len(qq)):
            n = 0
            while a + n < len(e) and b + n < len(qq) and e[a + n] == qq[b + n]:
                n += 1
            for k in range(a, a + n):
                lv[k] = max(lv[k], min(n, max_run))
    return [l if l > 1 or len(w) >= min_chars else 0 for l, w in zip(lv, ev)]


def roc_auc(scores, labels):
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus-examples", required=True)
    ap.add_argument("--rare-doc-fractions", action="append", default=[],
                    help="comma-separated fractions; repeat for more sets")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    rare = [tuple(float(x) for x in f.split(",")) for f in a.rare_doc_fractions]
    df, dfw, seen = Counter(), Counter(), set()
    for line in open(a.corpus_examples):
        ins = json.loads(line)["question"]
        ev = ins[ins.index(HEAD) + len(HEAD):ins.rindex(SEP)]
        if ev not in seen:
            seen.add(ev)
            df.update({fold(w)[:5] for w in WORD.findall(ev)})
            dfw.update({fold(w) for w in WORD.findall(ev)})
    idf = lambda p: math.log((len(seen) + 1) / (df.get(p, 0) + 0.5))
    for f in a.files:
        rows = [json.loads(l) for l in open(f)]
        y = [r["answer"].strip() == "[HELPFUL]" for r in rows]
        s = {"level_sum": [], "level_sum_p5": [], "icov_p5+lev/50": []}
        s.update({f"level_sum_rare[{','.join(map(str, fr))}]": [] for fr in rare})
        for r in rows:
            ev, q = split(r["question"])
            lev = levels(ev, q, 0)
            s["level_sum"].append(sum(lev))
            for fr in rare:
                extra = lambda w: sum(dfw[w] <= t * len(seen) for t in fr)
                s[f"level_sum_rare[{','.join(map(str, fr))}]"].append(sum(l + extra(w) for l, w in zip(lev, ev) if l))
            lev5 = sum(levels(ev, q, 5))
            s["level_sum_p5"].append(lev5)
            qs, es = {w[:5] for w in q if len(w) >= 3}, {w[:5] for w in ev}
            icov = sum(idf(p) for p in qs & es) / max(1e-9, sum(idf(p) for p in qs))
            s["icov_p5+lev/50"].append(icov + lev5 / 50)
        print(f"{f}: {len(rows)} examples, {sum(y)} helpful; ROC-AUC " +
              ", ".join(f"{k} {roc_auc(v, y):.3f}" for k, v in s.items()))


if __name__ == "__main__":
    main()

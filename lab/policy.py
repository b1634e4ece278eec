"""The lab's policy: a small causal transformer over the prompt's words (torch, CPU).

Prompt and response are word tokens: ``[BOS] system words [SEP] user words [ANS] tool_1 ...``.
At each response position the next-token logits are restricted to the environment's tools
(an agent can only call a tool its environment exposes). Its ``width`` is the model-size axis;
depth, heads, the MLP ratio and the vocabulary's size (512) are fixed, so the parameters are
(512 + 64) · width embeddings plus ~ 12 · layers · width².

>>> vocab = Vocabulary.from_texts(["World a. Tools: a.x a.y.", "Heat the pot."])
>>> vocab.ids("heat the a.x")
[8, 10, 6]
>>> Policy(len(vocab), width=32).n_params(), Policy(len(vocab), width=64).n_params()
(43904, 136960)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn

SPECIALS = ("<pad>", "<bos>", "<sep>", "<ans>", "<unk>")
PAD, BOS, SEP, ANS, UNK = range(len(SPECIALS))
LAYERS = 2
HEADS = 2
MAX_LEN = 64
VOCAB_SIZE = 512  # fixed, so a width has one parameter count
INIT_STD = 0.02
_WORD = re.compile(r"[a-z]+(?:\.[a-z]+)?")


def words(text: str) -> list[str]:
    """Lower-cased words; ``world.tool`` names stay one word."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Vocabulary:
    index: dict[str, int]

    size: int = VOCAB_SIZE

    @classmethod
    def from_texts(cls, texts: list[str], size: int = VOCAB_SIZE) -> Vocabulary:
        """The texts' words after the special tokens, in a table of ``size`` rows (rows past
        the words are never used: the parameter count does not depend on the data)."""
        found = sorted({w for text in texts for w in words(text)})
        if len(SPECIALS) + len(found) > size:
            raise ValueError(
                f"{len(found)} distinct words do not fit a vocabulary of {size} "
                f"({len(SPECIALS)} special tokens)"
            )
        return cls({w: i for i, w in enumerate((*SPECIALS, *found))}, size)

    def __len__(self) -> int:
        return self.size

    def ids(self, text: str) -> list[int]:
        return [self.index.get(w, UNK) for w in words(text)]


class Policy(nn.Module):
    """Pre-norm causal transformer, tied input/output embeddings."""

    def __init__(self, vocab_size: int, width: int, layers: int = LAYERS, heads: int = HEADS):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(MAX_LEN, width)
        block = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        # small embeddings (GPT-2's 0.02): with tied output weights, N(0, 1) rows would give
        # logits of standard deviation sqrt(width) and a near-deterministic initial policy,
        # so GRPO groups would rarely differ and nothing would be learnt
        nn.init.normal_(self.embed.weight, std=INIT_STD)
        nn.init.normal_(self.position.weight, std=INIT_STD)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, length, vocab) for left-padded ``tokens`` (batch, length)."""
        pad = tokens == PAD
        positions = (~pad).long().cumsum(1).clamp(min=1) - 1
        x = self.embed(tokens) + self.position(positions)
        n = tokens.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        blocked = causal[None] | pad[:, None, :]
        blocked[:, torch.arange(n), torch.arange(n)] = False  # a padding query sees itself
        mask = blocked.repeat_interleave(self.heads, 0)
        x = self.blocks(x, mask=mask)
        return self.norm(x) @ self.embed.weight.T

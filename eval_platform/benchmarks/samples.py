"""A bounded preview of the answers behind a score, as Markdown that the Dagster UI renders in a
materialisation's metadata: a few documents with their exact prompt (its end, where it is long),
answer, what each filter took out of it, the reference and the metrics; and two models side by
side, the documents they score differently first. Whatever the benchmark's size, a preview stays
under `MAX_CHARS`; every document is in the warehouse (`samples`, `item_lineage`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eval_platform.benchmarks.comparison import DocumentValue

FENCE = "~~~~"  # a prompt's own ``` (code in a question) cannot end its block
PREVIEW_DOCUMENTS = 10
PREVIEW_CHARS = 1_500  # of each prompt (its end) and answer
MAX_CHARS = 100_000  # of a whole preview


def _code(text: object) -> str:
    return f"`{str(text).replace('`', 'ʹ')}`" if text not in (None, "") else "–"


def _block(text: str) -> str:
    return f"{FENCE}text\n{_tail(text)}\n{FENCE}"


def _tail(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else f"[… {len(text) - limit} characters before]" + text[-limit:]


def _cell(text: object, width: int = 80) -> str:
    flat = " ".join(str(text).split()) if text is not None else "–"
    flat = flat if len(flat) <= width else flat[: width - 1] + "…"
    return flat.replace("|", "\\|")


def _number(value: object) -> str:
    return "–" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _answer(arguments: Any, responses: Any) -> str:
    if arguments and len(arguments[0]) == 2 and all(isinstance(a[1], str) for a in arguments):
        lines = "\n".join(
            f"| {_cell(a[1])} | {_number(r[0] if isinstance(r, list) else r)} |"
            for a, r in zip(arguments, responses or [], strict=False)
        )
        return f"| continuation | log-likelihood |\n|---|---|\n{lines}"
    if responses and isinstance(responses[0], dict):
        shown = sorted(responses[0].items(), key=lambda kv: -kv[1])
        return "label probabilities: " + ", ".join(f"{_code(label)} {p:.3f}" for label, p in shown)
    if responses and isinstance(responses[0], float | int):
        return "log-likelihoods: " + ", ".join(_number(float(r)) for r in responses)
    texts = [str(t) for r in responses or [] for t in (r if isinstance(r, list) and len(r) > 1 else [_first(r)])]
    if len(texts) > 1 and len(responses or []) == 1:  # one request's k samples
        return f"{len(texts)} samples:\n\n" + "\n\n".join(f"sample {i}:\n\n{_block(t)}" for i, t in enumerate(texts))
    return "generated:\n\n" + "\n\n".join(_block(text) for text in texts)


def _first(response: object) -> object:
    return response[0] if isinstance(response, list) and response else response


def every_document(benchmark: str, models: Sequence[str]) -> str:
    """Where to see every document of the roster models' evaluations of a benchmark, beyond a
    preview: each one's exact prompt, answers and metrics, in the warehouse."""
    quoted = ", ".join("'" + model.replace("'", "''") + "'" for model in models)
    name = benchmark.replace("'", "''")
    return (
        "Every document, with its exact prompt, answers and metrics, is in the warehouse: "
        f"`SELECT * FROM samples WHERE benchmark = '{name}' AND model IN ({quoted})` "
        "(and `item_lineage`, each document's rows through the pipeline)."
    )


def sample_markdown(title: str, samples: Sequence[Mapping[Any, Any]], total: int, where: str) -> str:
    """The first documents of `samples` (rows of `samples`, in order): each filter's answer and
    metrics, the reference, the model's answers and the end of the exact prompt; `total` documents
    in all, all of them in the warehouse (`where`)."""
    parts = [f"## {title}"]
    keyed = groupby(samples, key=lambda s: (s["settings_key"], s["solver"], s["task"], s["doc_id"]))
    for shown, ((settings_key, solver, task, doc_id), filters) in enumerate(keyed):
        if shown == PREVIEW_DOCUMENTS:
            break
        filters = list(filters)
        first = filters[0]
        scored = "\n".join(
            f"- filter {_code(f['filter'])}: answer {_code(_cell(_json(f['filtered_responses']), 60))}, "
            + ", ".join(f"{metric} **{_number(value)}**" for metric, value in _json(f["metrics"]).items())
            for f in filters
        )
        parts.append(
            f"#### {solver} ({settings_key}) · {task} document {doc_id}\n\n{scored}\n"
            f"- reference {_code(_cell(first['target'], 200))}\n\n"
            f"{_answer(_json(first['arguments']), _json(first['responses']))}\n\nprompt:\n\n{_block(first['prompt'])}"
        )
    parts.append(f"_{min(total, PREVIEW_DOCUMENTS)} of {total} documents shown; every one is in {where}_")
    return _bounded("\n\n".join(parts))


def side_by_side(model_a: str, model_b: str, rows: Iterable[DocumentValue], limit: int = 30) -> str:
    """Two models' document values (rows of `load_document_values`) per settings key, solver, task,
    filter and metric, on their common documents: those they score differently first (at most
    `limit` per metric), each side's answer and score beside the other's."""
    by_key: dict[tuple, dict[str, dict[str, DocumentValue]]] = {}
    for row in rows:
        key = (row["settings_key"], row["solver"], row["task"], row["filter"], row["metric"])
        by_key.setdefault(key, {}).setdefault(row["item"], {})[row["model"]] = row
    parts = [f"## {model_a} (a) against {model_b} (b)"]
    for (settings_key, solver, task, filter_name, metric), items in sorted(by_key.items()):
        pairs = [(p[model_a], p[model_b]) for p in items.values() if model_a in p and model_b in p]
        if not pairs:
            continue
        pairs.sort(key=lambda ab: (ab[0]["value"] == ab[1]["value"], str(ab[0]["item"])))
        differing = sum(a["value"] != b["value"] for a, b in pairs)
        lines = [
            f"### {solver} ({settings_key}) / {task} / {metric}"
            + ("" if filter_name == "none" else f",{filter_name}")
            + f": {differing} of {len(pairs)} documents differ (listed first; {min(limit, len(pairs))} shown)",
            "| document | question | reference | a answer | a | b answer | b |",
            "|---|---|---|---|---|---|---|",
        ]
        for a, b in pairs[:limit]:
            mark = "**" if a["value"] != b["value"] else ""
            lines.append(
                f"| {mark}{_cell(a['item'], 40)}{mark} | {_cell(a['question'])} | {_cell(a['reference'], 30)} | "
                f"{_cell(a['predicted'], 30)} | {_number(a['value'])} | {_cell(b['predicted'], 30)} | "
                f"{_number(b['value'])} |"
            )
        parts.append("\n".join(lines))
    return _bounded("\n\n".join(parts if len(parts) > 1 else [*parts, "_no documents in common_"]))


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + "\n\n_[… preview cut at its size bound]_"

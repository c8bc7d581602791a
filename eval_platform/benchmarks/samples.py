"""Every answer in view: a model's items on a benchmark, and two models' items side by side, as
Markdown that the Dagster UI renders in a materialisation's metadata (the `samples` and `items`
entries), like inspect_ai's sample list: each item's exact prompt (few-shot examples included), the
answer (each choice's log-likelihood, the label probabilities, or the generated text with what each
answer filter took out of it), the reference and each metric's value. Side by side, the items the
two models score differently come first."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from typing import Any

FENCE = "~~~~"  # a prompt's own ``` (code in a question) cannot end its block


def _code(text: Any) -> str:
    return f"`{str(text).replace('`', 'ʹ')}`" if text not in (None, "") else "–"


def _block(text: str) -> str:
    return f"{FENCE}text\n{text}\n{FENCE}"


def _cell(text: Any, width: int = 80) -> str:
    flat = " ".join(str(text).split()) if text is not None else "–"
    flat = flat if len(flat) <= width else flat[: width - 1] + "…"
    return flat.replace("|", "\\|")


def _number(value: Any) -> str:
    return "–" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def item_prompt(item: Mapping[str, Any]) -> str:
    """The exact text the model was given: the chat's system and user turns, or the harness's
    context, few-shot examples included (a multiple-input item: each of its contexts)."""
    if item["prompt_format"] != "harness":
        system = f"[system]\n{item['system_prompt']}\n\n" if item["system_prompt"] else ""
        return f"{system}[user]\n{item['user_prompt']}"
    contexts = list(dict.fromkeys(item["harness_contexts"] or [""]))
    if len(contexts) == 1:
        return contexts[0]
    return "\n\n".join(f"[context {i + 1}]\n{c}" for i, c in enumerate(contexts))


def item_answer(item: Mapping[str, Any]) -> str:
    """What the model answered: the generated text, the label probabilities, or each choice's
    log-likelihood (its continuation in the harness's format)."""
    if item["output_text"] is not None:
        return "generated:\n\n" + _block(item["output_text"])
    if item["label_probabilities"]:
        shown = sorted(item["label_probabilities"].items(), key=lambda kv: -kv[1])
        return "label probabilities: " + ", ".join(f"{_code(label)} {p:.3f}" for label, p in shown)
    if item["prompt_format"] == "harness":
        continuations = list(item["harness_continuations"] or [])
        choices = (
            continuations if len(set(continuations)) > 1 else [f"context {i + 1}" for i in range(len(continuations))]
        )
    else:
        choices = list(item["choices"] or [])
    values = list(item["choice_loglikelihoods"] or [])
    rows = "\n".join(f"| {_cell(choice)} | {value:.4f} |" for choice, value in zip(choices, values, strict=False))
    return f"| choice | log-likelihood |\n|---|---|\n{rows}"


def sample_markdown(title: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """Every item of `rows` (one row per item and metric, ordered by run and item: mode, format,
    shots, item): a section per run, then each item with its metrics, answer and prompt."""
    parts = [f"## {title}"]
    for (mode, prompt_format, shots), run in groupby(
        rows, key=lambda r: (r["mode"], r["prompt_format"], r["num_fewshot"])
    ):
        items = [list(metrics) for _, metrics in groupby(run, key=lambda r: r["prompt_id"])]
        parts.append(f"### {mode} / {prompt_format} / {shots}-shot: {len(items)} items")
        for metrics in items:
            first = metrics[0]
            scored = " · ".join(
                f"{m['metric']} **{_number(m['item_score'])}** (answer {_code(m['predicted'])})" for m in metrics
            )
            parts.append(
                f"#### {first['source_row_id']}\n\n{scored} · reference {_code(first['reference'])}\n\n"
                f"{item_answer(first)}\n\nprompt:\n\n{_block(item_prompt(first))}"
            )
    return "\n\n".join(parts if len(parts) > 1 else [*parts, "_no scored items_"])


def side_by_side(model_a: str, model_b: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """Two models' item scores (rows: model, mode, prompt_format, num_fewshot, metric, prompt_id,
    source_row_id, value, predicted, question; a harness document's also its settings_key), per run
    and metric, on their common items: those they score differently first, then the rest, each
    side's answer and score beside the other's."""
    by_key: dict[tuple, dict[str, dict[str, Mapping[str, Any]]]] = {}
    for row in rows:
        key = (row.get("settings_key"), row["mode"], row["prompt_format"], row["num_fewshot"], row["metric"])
        by_key.setdefault(key, {}).setdefault(row["prompt_id"], {})[row["model"]] = row
    parts = [f"## {model_a} (a) against {model_b} (b)"]
    for (settings, mode, prompt_format, shots, metric), items in sorted(by_key.items(), key=lambda kv: str(kv[0])):
        pairs = [(p[model_a], p[model_b]) for p in items.values() if model_a in p and model_b in p]
        if not pairs:
            continue
        pairs.sort(key=lambda ab: (ab[0]["value"] == ab[1]["value"], str(ab[0]["source_row_id"])))
        differing = sum(a["value"] != b["value"] for a, b in pairs)
        run = f"{mode} / {prompt_format} " + (f"({settings})" if settings is not None else f"/ {shots}-shot")
        lines = [
            f"### {run} / {metric}: {differing} of {len(pairs)} items differ (listed first)",
            "| item | question | reference | a answer | a | b answer | b |",
            "|---|---|---|---|---|---|---|",
        ]
        for a, b in pairs:
            mark = "**" if a["value"] != b["value"] else ""
            lines.append(
                f"| {mark}{_cell(a['source_row_id'], 40)}{mark} | {_cell(a['question'])} | "
                f"{_cell(a['reference'], 30)} | {_cell(a['predicted'], 30)} | {_number(a['value'])} | "
                f"{_cell(b['predicted'], 30)} | {_number(b['value'])} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts if len(parts) > 1 else [*parts, "_no items in common_"])


def _json_value(text: Any) -> Any:
    import json

    return json.loads(text) if isinstance(text, str) else text


def harness_sample_markdown(title: str, samples: Sequence[Mapping[str, Any]]) -> str:
    """Every document of a harness evaluation (`harness_samples` rows, one per task, document and
    filter): each filter's answer and metrics, the reference, the model's answers (each choice's
    log-likelihood, or the generated text) and the exact prompt."""
    parts = [f"## {title}"]
    ordered = sorted(samples, key=lambda s: (s["task"], s["doc_id"], s["filter"]))
    for task, documents in groupby(ordered, key=lambda s: s["task"]):
        documents = [list(filters) for _, filters in groupby(documents, key=lambda s: s["doc_id"])]
        parts.append(f"### {task}: {len(documents)} documents")
        for filters in documents:
            first = filters[0]
            scored = "\n".join(
                f"- filter {_code(f['filter'])}: answer {_code(_json_value(f['filtered_responses']))}, "
                + ", ".join(f"{metric} **{_number(value)}**" for metric, value in _json_value(f["metrics"]).items())
                for f in filters
            )
            arguments, responses = _json_value(first["arguments"]), _json_value(first["responses"])
            if arguments and isinstance(arguments[0][1], str):  # log-likelihood requests: one per continuation
                lines = "\n".join(
                    f"| {_cell(a[1])} | {_number(r[0][0] if isinstance(r[0], list) else r[0])} |"
                    for a, r in zip(arguments, responses, strict=False)
                )
                answer = f"| continuation | log-likelihood |\n|---|---|\n{lines}"
            else:
                answer = "generated:\n\n" + "\n\n".join(
                    _block(str(r[0] if isinstance(r, list) else r)) for r in responses
                )
            parts.append(
                f"#### {task} document {first['doc_id']}\n\n{scored}\n- reference {_code(first['target'])}"
                f"\n\n{answer}\n\nprompt:\n\n{_block(first['prompt'])}"
            )
    return "\n\n".join(parts if len(parts) > 1 else [*parts, "_no documents_"])

"""The chat-format solvers of the seed: a dataset's chat prompt (system and user turns) asked three ways.

- `letter`: one forward pass; the first answer token's probabilities over the labels (all kept),
  scored `acc` on the most probable label;
- `choices`: the chat prompt continued by each choice's text, scored `acc` and `acc_norm` (each
  log-likelihood divided by its choice's length);
- `generate`: a greedy answer within the settings' `max_gen_toks` (else the model's
  `max_new_tokens`), whose answer each declared filter takes out (`strict-match`,
  `flexible-extract`), scored `exact_match` under each filter.

Answers stored for the model fingerprint are reused, keyed by the request as `answers` keys the
harness's; the rest are computed and kept in chunks as they come (the job's `Answering`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval_platform.benchmarks.answering import Answering
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings
from eval_platform.benchmarks.documents import Document
from eval_platform.benchmarks.parsers import answer_filter, parser
from eval_platform.benchmarks.records import Evaluation, Sample, request_key
from eval_platform.benchmarks.scoring import argmax_label, length_normalized, results_by_task, with_budget_shares
from eval_platform.benchmarks.solvers.base import SOLVERS, EvaluationJob
from eval_platform.common.models import Chat, GenerationRequest, LoglikelihoodRequest

CHAT_SHOTS = "0-shot"  # a chat prompt has no shots, system instruction or task config of its own


def chat_of(document: Document) -> Chat:
    return Chat(document.system_prompt, document.user_prompt)


def chat_text(document: Document) -> str:
    """The chat as the model was given it: its system and user turns."""
    system = f"[system]\n{document.system_prompt}\n\n" if document.system_prompt else ""
    return f"{system}[user]\n{document.user_prompt}"


def task_of(document: Document) -> str:
    """The task a document's samples are under: its harness task, else its benchmark's name."""
    return document.task or document.benchmark


def doc_ids(documents: Sequence[Document]) -> list[int]:
    """Each document's position within its task, as the harness numbers a task's documents."""
    seen: dict[str, int] = {}
    ids = []
    for document in documents:
        ids.append(seen.get(task_of(document), 0))
        seen[task_of(document)] = ids[-1] + 1
    return ids


class ChatSolver:
    """What the three chat solvers share: they ask a dataset's documents, with its chat format."""

    name = ""

    def refusal(self, benchmark: Benchmark) -> str | None:
        if not benchmark.is_dataset or benchmark.chat is None:
            return "it asks a dataset's chat prompt, and the benchmark declares no dataset with a chat format"
        return None

    def settings_key(self, settings: EvaluationSettings) -> str:
        """`0-shot`, and the limit on the documents where there is one (`0-shot, first 5 documents`)."""
        return CHAT_SHOTS if settings.limit is None else f"{CHAT_SHOTS}, first {settings.limit} documents"

    def evaluate(self, job: EvaluationJob) -> Evaluation:
        answering = job.answering()
        samples = self.samples(job, answering)
        tasks = sorted({sample.task for sample in samples})
        groups = {job.benchmark.name: tasks} if len(tasks) > 1 else {}  # as results_by_task groups them
        results = with_budget_shares(
            results_by_task(samples, job.benchmark.name, 0), samples, answering.answers, groups
        )
        key = self.settings_key(job.settings)
        notes = (
            [
                "sampling settings apply to the harness solver's generations: this solver answers greedily, "
                "once a document (its settings key names no sampling)"
            ]
            if job.settings.sets_sampling
            else []
        )
        return Evaluation(self.name, key, samples, results, answering.answers, answering.model_seconds, notes)

    def samples(self, job: EvaluationJob, answering: Answering) -> list[Sample]:
        raise NotImplementedError

    @staticmethod
    def sample(document: Document, doc_id: int, **fields: Any) -> Sample:
        return Sample(
            task=task_of(document),
            doc_id=doc_id,
            prompt=chat_text(document),
            target=document.real_answer,
            doc=document.doc,
            document_id=document.document_id,
            **{"filter": "none", **fields},
        )


class LetterSolver(ChatSolver):
    """One forward pass: the first answer token's probabilities over the labels, scored `acc` on the likeliest."""

    name = "letter"

    def refusal(self, benchmark: Benchmark) -> str | None:
        if not parser(benchmark.parser or "").multiple_choice:
            return "it asks for a choice's label, and the benchmark's documents have no choices"
        return super().refusal(benchmark)

    def samples(self, job: EvaluationJob, answering: Answering) -> list[Sample]:
        documents = job.documents
        arguments = [[d.system_prompt, d.user_prompt, list(d.labels)] for d in documents]

        def compute(batch: list[list[Any]]) -> list[Any]:
            return job.model.label_probabilities(
                [Chat(system, user) for system, user, _ in batch], [labels for *_, labels in batch], job.batch_size
            )

        distributions = answering.answer("label_probabilities", arguments, compute)
        samples = []
        for document, doc_id, args, distribution in zip(
            documents, doc_ids(documents), arguments, distributions, strict=True
        ):
            predicted = (
                argmax_label(document.labels, [distribution[label] for label in document.labels])
                if distribution
                else None
            )
            samples.append(
                self.sample(
                    document,
                    doc_id,
                    arguments=[args],
                    request_keys=[request_key("label_probabilities", args)],
                    responses=[distribution],
                    filtered_responses=[predicted],
                    metrics={"acc": float(predicted == document.real_answer)},
                )
            )
        return samples


class ChoicesSolver(ChatSolver):
    """The chat prompt continued by each choice's text, scored `acc` and `acc_norm`."""

    name = "choices"

    def refusal(self, benchmark: Benchmark) -> str | None:
        if not parser(benchmark.parser or "").multiple_choice:
            return "it scores each choice, and the benchmark's documents have no choices"
        return super().refusal(benchmark)

    def samples(self, job: EvaluationJob, answering: Answering) -> list[Sample]:
        documents = job.documents
        per_document = [[[d.system_prompt, d.user_prompt, choice] for choice in d.choices] for d in documents]

        def compute(batch: list[list[Any]]) -> list[Any]:
            requests = [LoglikelihoodRequest(Chat(system, user), choice) for system, user, choice in batch]
            return job.model.loglikelihoods(requests, job.batch_size)

        flat = answering.answer("chat_loglikelihood", [args for item in per_document for args in item], compute)
        samples, offset = [], 0
        for document, doc_id, arguments in zip(documents, doc_ids(documents), per_document, strict=True):
            scores = [float(value) for value in flat[offset : offset + len(arguments)]]
            offset += len(arguments)
            predicted = argmax_label(document.labels, scores)
            predicted_norm = argmax_label(document.labels, length_normalized(scores, document.choices))
            samples.append(
                self.sample(
                    document,
                    doc_id,
                    arguments=arguments,
                    request_keys=[request_key("chat_loglikelihood", args) for args in arguments],
                    responses=scores,
                    filtered_responses={"acc": predicted, "acc_norm": predicted_norm},
                    metrics={
                        "acc": float(predicted == document.real_answer),
                        "acc_norm": float(predicted_norm == document.real_answer),
                    },
                )
            )
        return samples


class GenerateSolver(ChatSolver):
    """A greedy answer, whose answer each declared filter takes out, scored `exact_match` under each."""

    name = "generate"

    def refusal(self, benchmark: Benchmark) -> str | None:
        if benchmark.chat is not None and not benchmark.chat.answer_filters:
            return "it scores a generated answer through the chat format's answer_filters, and none is declared"
        return super().refusal(benchmark)

    def settings_key(self, settings: EvaluationSettings) -> str:
        """The chat solvers' key, and the generation budget where the settings set one
        (`0-shot, first 5 documents, 96 new tokens`)."""
        key = super().settings_key(settings)
        return key if settings.max_gen_toks is None else f"{key}, {settings.max_gen_toks} new tokens"

    def samples(self, job: EvaluationJob, answering: Answering) -> list[Sample]:
        documents = job.documents
        budget = job.settings.max_gen_toks or job.max_new_tokens
        arguments = [[d.system_prompt, d.user_prompt, budget] for d in documents]

        def compute(batch: list[list[Any]]) -> list[Any]:
            requests = [GenerationRequest(Chat(system, user), budget) for system, user, budget in batch]
            return job.model.generate(requests, job.batch_size)

        texts = [str(text).strip() for text in answering.answer("chat_generate", arguments, compute)]
        filters = job.benchmark.chat.answer_filters if job.benchmark.chat else ()
        samples = []
        for document, doc_id, args, text in zip(documents, doc_ids(documents), arguments, texts, strict=True):
            for name in filters:
                extracted = answer_filter(name)(text)
                samples.append(
                    self.sample(
                        document,
                        doc_id,
                        filter=name,
                        arguments=[args],
                        request_keys=[request_key("chat_generate", args)],
                        responses=[text],
                        filtered_responses=[extracted],
                        metrics={"exact_match": float(extracted is not None and extracted == document.real_answer)},
                    )
                )
        return samples


for _solver in (LetterSolver(), ChoicesSolver(), GenerateSolver()):
    SOLVERS.add(_solver)

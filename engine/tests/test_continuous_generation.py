"""Greedy generation with continuous batching and shared prefixes (eval_engine/continuous.py),
on the real local model: the texts of one-at-a-time generation, a batch that stays full, a shared
few-shot header encoded once, concurrent callers in one batch."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from prompt_fixtures import generation_prompts

from eval_engine import LOGLIKELIHOOD_TOLERANCE, Chat, GenerationRequest, divergence
from eval_engine.continuous import ROW_BLOCK, ContinuousBatcher, Detokenizer, SlotBatch, cut_at_stop

BUDGET = 24
# How long a thread waits for another to reach the point it is ordered after: a hang guard only (the
# order is kept by events, not by time), so ample on a loaded machine.
ORDER_TIMEOUT_S = 600


def one_at_a_time(model, prompt: str, budget: int, stop: tuple[str, ...]) -> str:
    """transformers' own greedy `generate` on the prompt alone (no batch, no padding)."""
    import torch

    tokens = model.generation_prompt(GenerationRequest(prompt, budget, stop))
    with torch.inference_mode():
        output = model.network.generate(
            input_ids=torch.tensor([tokens]),
            max_new_tokens=budget,
            do_sample=False,
            pad_token_id=model.tokenizer.pad_token_id,
            stop_strings=list(stop) or None,
            tokenizer=model.tokenizer,
        )
    return cut_at_stop(model.tokenizer.decode(output[0, len(tokens) :], skip_special_tokens=True), stop)


def assert_same_texts(model, prompts: list[str], texts: list[str], expected: list[str]) -> None:
    """Equal texts, or texts that part only where the reference's two candidates are a near-tie."""
    for prompt, text, reference in zip(prompts, texts, expected, strict=True):
        if text != reference:
            parted = divergence(model, prompt, reference, text)
            assert parted["gap"] is not None and parted["gap"] < LOGLIKELIHOOD_TOLERANCE, (parted, reference, text)


def fresh_batcher(model, **settings) -> ContinuousBatcher:
    """A batcher of its own, its rows as many as the batch size asks (no budget of cached tokens)."""
    return ContinuousBatcher(model.network, model.batcher.decode, model._lock, cache_tokens=0, **settings)


@pytest.fixture(scope="module")
def prompts():
    """Four GSM8K 5-shot prompts (random exemplars, little shared) and three gsm8k_cot prompts (one
    fixed 8-shot header), in the harness's format."""
    gsm8k, stop = generation_prompts("gsm8k")
    cot, cot_stop = generation_prompts("gsm8k_cot")
    return [(p, stop) for p in gsm8k] + [(p, cot_stop) for p in cot]


@pytest.mark.slow
def test_continuous_batches_give_the_texts_of_one_at_a_time_generation(local_model, prompts):
    batcher = fresh_batcher(local_model)
    tokens = [local_model.generation_prompt(GenerationRequest(p, BUDGET, stop)) for p, stop in prompts]
    texts = batcher.generate(tokens, [BUDGET] * len(prompts), [stop for _, stop in prompts], batch_size=3)
    expected = [one_at_a_time(local_model, p, BUDGET, stop) for p, stop in prompts]
    assert_same_texts(local_model, [p for p, _ in prompts], texts, expected)
    assert max(batcher.occupancy) == 3  # 7 prompts through 3 places: newcomers joined a running batch


@pytest.mark.slow
def test_a_finished_sequence_leaves_at_once_and_a_waiting_one_takes_its_place(local_model, prompts):
    """One long sequence and three of two tokens in a batch of two: in fixed batches the second place
    would sit idle while the long one runs; here each short one runs beside it in turn."""
    batcher = fresh_batcher(local_model)
    prompt, _ = prompts[-1]
    tokens = local_model.generation_prompt(GenerationRequest(prompt, 16, ()))
    texts = batcher.generate([tokens] * 4, [16, 2, 2, 2], [()] * 4, batch_size=2)
    assert len(local_model.encode_piece(texts[0])) > 8  # the long one ran long
    assert batcher.occupancy[2] == 3  # each short one's second token, beside the long one
    assert sum(batcher.occupancy.values()) <= 15  # the long one's steps after its first token, no more


def test_a_sequence_that_leaves_hands_its_row_to_the_last_and_steps_compute_the_rows_in_use():
    import torch

    def prompt_cache(value: float, length: int):  # two layers of [1 row, 3 heads, length, 4]
        return [(torch.full((1, 3, length, 4), value), torch.full((1, 3, length, 4), -value)) for _ in range(2)]

    batch = SlotBatch.for_rows(prompt_cache(0, 1), 2, 16)
    rows = [batch.place(prompt_cache(float(n), 6 - n), 6 - n) for n in range(5)]  # longest first, as they wait
    assert rows == [0, 1, 2, 3, 4] and batch.rows == 5 and batch.computed_rows == 5  # rows added past the first two
    assert batch.free(1) == 4  # the last row moved into the freed one
    assert bool((batch.keys[1][1, :, 4:6] == 4).all()) and bool((batch.values[0][1, :, 4:6] == -4).all())
    assert batch.mask[1, : batch.width].tolist() == [0, 0, 0, 0, 1, 1]  # its two columns, right-aligned
    assert batch.rows == 4 and batch.computed_rows == 4
    assert batch.free(3) is None and batch.rows == 3
    assert batch.computed_rows == ROW_BLOCK  # one row short of a block: a spare row completes it
    cache, mask = batch.next_column()
    assert mask.shape == (ROW_BLOCK, batch.width + 1) and cache.layers[0].keys.shape[0] == ROW_BLOCK


@pytest.mark.slow
def test_a_shared_few_shot_header_is_encoded_once(local_model, prompts):
    cot = [p for p, stop in prompts if stop[0] == "Q:"]
    tokens = [local_model.generation_prompt(GenerationRequest(p, 4, ("Q:",))) for p in cot]
    shared = min(
        next((i for i, (x, y) in enumerate(zip(tokens[0], t, strict=False)) if x != y), len(t)) for t in tokens[1:]
    )
    assert shared > 500  # the eight exemplars
    with_prefixes, without = fresh_batcher(local_model), fresh_batcher(local_model, prefix_sharing=False)
    texts = with_prefixes.generate(tokens, [4] * len(tokens), [("Q:",)] * len(tokens), batch_size=4)
    unshared = without.generate(tokens, [4] * len(tokens), [("Q:",)] * len(tokens), batch_size=4)
    assert_same_texts(local_model, cot, texts, unshared)
    assert without.encoded_tokens == sum(len(t) for t in tokens)
    assert with_prefixes.encoded_tokens == sum(len(t) for t in tokens) - (len(tokens) - 1) * shared
    # held once and read in place: the rows hold what follows it
    assert [len(prefix.tokens) for prefix in with_prefixes.steps.prefixes.values()] == [shared]


@pytest.mark.slow
def test_rows_are_as_many_as_the_budget_of_cached_tokens_holds(local_model, prompts):
    """Packed generation's rows come from a budget of cached tokens, not the batch size."""
    tokens = [local_model.generation_prompt(GenerationRequest(p, 4, stop)) for p, stop in prompts]
    longest = max(len(t) for t in tokens) + 4
    batcher = ContinuousBatcher(
        local_model.network, local_model.batcher.decode, local_model._lock, cache_tokens=5 * longest
    )
    texts = batcher.generate(tokens, [4] * len(tokens), [stop for _, stop in prompts], batch_size=2)
    assert max(batcher.occupancy) == 5  # five rows' worth of tokens, though the batch size is 2
    narrow = fresh_batcher(local_model).generate(tokens, [4] * len(tokens), [stop for _, stop in prompts], batch_size=2)
    assert texts == narrow


@pytest.mark.parametrize(
    "text",
    [
        "Naïve café: 日本語のテキスト 🙂🙂 and  two spaces,\n\nthen new lines; ünïcödé → ∑ ≠ ∞.",
        " Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
    ],
)
def test_the_text_decoded_token_by_token_is_the_text_decoded_whole(local_model, text):
    """Stop sequences are looked for in the text each token adds: at every token, that text is the
    whole decoding so far, but for a character whose bytes have not all come."""
    decode = local_model.batcher.decode
    tokens = local_model.encode_piece(text)
    detokenizer = Detokenizer(decode)
    held_back = 0
    for count in range(1, len(tokens) + 1):
        detokenizer.add(tokens[:count])
        whole = decode(tokens[:count])
        assert detokenizer.text == whole or (whole.endswith("\ufffd") and whole.startswith(detokenizer.text))
        held_back += detokenizer.text != whole
    assert detokenizer.text == text
    assert held_back > 0 if "🙂" in text else held_back == 0  # an emoji's bytes span tokens


@pytest.mark.slow
def test_concurrent_chat_answers_share_one_batch(local_model):
    """As an era's compressions and blind evaluation's answers call it: concurrent `acomplete`s."""
    chats = [
        Chat("", f"Shorten this sentence: the {animal} sat quietly on the old wooden fence all day.")
        for animal in ("cat", "dog", "crow", "goat")
    ]
    expected = [local_model.generate([GenerationRequest(chat, 20)])[0] for chat in chats]
    batcher = local_model.batcher
    batcher.occupancy.clear()

    async def answer_all():
        return await asyncio.gather(*(local_model.acomplete(chat, max_tokens=20) for chat in chats))

    with ThreadPoolExecutor(1) as pool:
        with batcher._driving:  # no caller drives the batch until all four wait: they then share the first one
            answers = pool.submit(asyncio.run, answer_all())
            deadline = time.monotonic() + 120
            while len(batcher._pending) < len(chats) and not answers.done() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(batcher._pending) == len(chats), "the concurrent calls never all reached the batcher"
        completions = answers.result(timeout=600)
    assert_same_texts(
        local_model, [local_model.render(chat) for chat in chats], [c.text for c in completions], expected
    )
    assert max(batcher.occupancy) == len(chats)


def wait_until(condition, what: str, timeout_s: float = ORDER_TIMEOUT_S) -> None:
    """Until `condition()` holds; TimeoutError naming `what` once `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} within {timeout_s:.0f} s")
        time.sleep(0.01)


@pytest.mark.slow
def test_a_chat_answer_asked_while_the_batch_runs_joins_it_at_the_next_step(local_model, monkeypatch):
    """As an era's compressions arrive one after another: the later call runs beside the running
    batch instead of waiting for it to end (the model's lock is held at every step, so a caller that
    waited for it joined only when the batch ended: an era's five concurrent compressions took 16 s
    instead of 7).

    The two threads are ordered by events at the batch's steps, not by a head start: the long
    generation's second step waits until the short call is queued beside it, and once the short one
    has left the batch, the long one's next step waits until the test has seen the short one's
    answer. However slow the machine, the short call joins a running batch, and its answer comes
    while the long one still runs."""
    counting, short = Chat("", "Count from 1 to 100: 1, 2, 3,"), Chat("", "Name a colour.")
    expected = [
        local_model.generate([GenerationRequest(chat, budget)])[0] for chat, budget in ((counting, 48), (short, 4))
    ]
    batcher = local_model.batcher
    batcher.occupancy.clear()
    running, answered = threading.Event(), threading.Event()  # the batch runs; the short answer was seen
    step, seen = batcher.steps.step, {"steps": 0, "queued": False}

    def ordered_step(tokens):
        """A step of the batch (in the thread that drives it, the long generation's), in order."""
        seen["steps"] += 1
        if seen["steps"] == 2:  # the long one runs alone: hold it until the short call waits to join
            running.set()
            wait_until(lambda: bool(batcher._pending) or answered.is_set(), "the short call never reached the batcher")
            seen["queued"] = True
        elif seen["queued"] and len(tokens) == 1 and not batcher._pending:  # the short one has left
            if not answered.wait(ORDER_TIMEOUT_S):
                raise TimeoutError(f"the short answer was not seen within {ORDER_TIMEOUT_S} s")
        return step(tokens)

    monkeypatch.setattr(batcher.steps, "step", ordered_step)
    with ThreadPoolExecutor(1) as pool:
        long_one = pool.submit(local_model.generate, [GenerationRequest(counting, 48)])
        try:
            wait_until(lambda: running.is_set() or long_one.done(), "the long generation never ran a second step")
            assert not long_one.done(), "the long generation ended before the second call was made"
            joined = asyncio.run(local_model.acomplete(short, max_tokens=4))
            finished_first = not long_one.done()
        finally:
            answered.set()  # whatever happened, the long one goes on to its end
        (counted,) = long_one.result(timeout=ORDER_TIMEOUT_S)
    assert_same_texts(
        local_model, [local_model.render(counting), local_model.render(short)], [counted, joined.text], expected
    )
    assert batcher.occupancy[2] >= 1 and finished_first  # its steps ran beside the long one's


@pytest.mark.slow
def test_a_failing_pass_fails_its_callers_instead_of_leaving_them_waiting(local_model, monkeypatch, prompts):
    batcher = fresh_batcher(local_model)
    tokens = [local_model.generation_prompt(GenerationRequest(p, 8, stop)) for p, stop in prompts[:3]]
    calls = {"n": 0}
    forward = local_model.network.forward

    def fails_on_the_third_pass(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("simulated failure")
        return forward(*args, **kwargs)

    monkeypatch.setattr(local_model.network, "forward", fails_on_the_third_pass)
    with pytest.raises(RuntimeError, match="simulated failure"):
        batcher.generate(tokens, [8] * 3, [()] * 3, batch_size=2)
    monkeypatch.setattr(local_model.network, "forward", forward)
    assert batcher.generate(tokens[:1], [2], [()], batch_size=2)  # nothing left behind in the queue
    assert not batcher._pending

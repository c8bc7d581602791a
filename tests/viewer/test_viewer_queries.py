"""The sample viewer's reads on a warehouse the real stores wrote (synthetic evaluations of two
models, tests/synthetic_evaluations.py): pages by position cover every item once in order, either
way; each filter keeps exactly the documents it names (counted here from how the data was made, not
by the viewer); two models' items scored differently come first; the paired statistics; a search
is a value, never SQL; the connection cannot write. And how a sample reads: prompts as turns,
answers by kind, the reasoning block, diffs."""

import duckdb
import pytest
from scipy.stats import binomtest

from eval_platform.benchmarks.records import CHAT_MESSAGES
from eval_platform.viewer.answers import (
    StoredAnswer,
    answer_view,
    prompt_turns,
    split_reasoning,
    text_diff,
)
from eval_platform.viewer.queries import benchmarks as queries
from eval_platform.viewer.queries.benchmarks import Cursor, ItemQuery, Side
from eval_platform.viewer.warehouse import Reader, ViewerInputError, WarehouseSource
from tests import synthetic_evaluations as data

DOCUMENTS = 300
A = Side(data.MODELS[1], data.SETTINGS_KEY, data.SOLVER, "strict-match")  # the new model
B = Side(data.MODELS[0], data.SETTINGS_KEY, data.SOLVER, "strict-match")  # its baseline


def key(document: int) -> tuple[str, int]:
    return data.TASKS[document % len(data.TASKS)], document // len(data.TASKS)


def right(model: str) -> set[tuple[str, int]]:
    return {key(d) for d in range(DOCUMENTS) if data.is_right(model, d, 0)}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("viewer") / "warehouse.duckdb"
    data.write(path, DOCUMENTS)
    reader = Reader(WarehouseSource(str(path)))
    yield reader
    reader.close()


def every_page(conn, b: Side | None, query: ItemQuery, size: int = 7, backwards: bool = False) -> list:
    """Every row, page after page (from the end, page before page, with `backwards`)."""
    rows, position = [], None
    if backwards:
        last = queries.items(conn, data.BENCHMARK, A, b, query, size=10**6).rows[-1].cursor
        position = Cursor(last.same, last.task, last.doc_id + 1)
    while True:
        page = (
            queries.items(conn, data.BENCHMARK, A, b, query, before=position, size=size)
            if backwards
            else queries.items(conn, data.BENCHMARK, A, b, query, after=position, size=size)
        )
        rows = page.rows + rows if backwards else rows + page.rows
        position = page.previous if backwards else page.next
        if position is None:
            return rows


def test_pages_cover_every_item_once_in_order_either_way(source):
    with source.reading() as conn:
        forward = every_page(conn, None, ItemQuery("exact_match"))
        backward = every_page(conn, None, ItemQuery("exact_match"), backwards=True)
        first = queries.items(conn, data.BENCHMARK, A, None, ItemQuery("exact_match"), size=7)
    keys = [(row.task, row.doc_id) for row in forward]
    assert keys == sorted(key(d) for d in range(DOCUMENTS)) and first.total == DOCUMENTS
    assert [(row.task, row.doc_id) for row in backward] == keys
    assert first.previous is None and len(first.rows) == 7


def test_each_filter_keeps_exactly_the_documents_it_names(source):
    a_right, b_right = right(A.model), right(B.model)
    with source.reading() as conn:

        def found(**filters) -> set[tuple[str, int]]:
            b = B if "flipped" in filters else None
            rows = every_page(conn, b, ItemQuery("exact_match", **filters), size=50)
            assert queries.items(conn, data.BENCHMARK, A, b, ItemQuery("exact_match", **filters)).total == len(rows)
            return {(row.task, row.doc_id) for row in rows}

        assert found(outcome="right") == a_right
        assert found(outcome="wrong") == {key(d) for d in range(DOCUMENTS)} - a_right
        assert found(task="subject_03") == {key(d) for d in range(3, DOCUMENTS, len(data.TASKS))}
        assert found(flipped="to_wrong") == b_right - a_right and b_right - a_right
        assert found(flipped="to_right") == a_right - b_right and a_right - b_right
        assert found(flipped="differ") == a_right ^ b_right
        assert found(flipped="to_wrong", task="subject_03", outcome="wrong") == {
            k for k in b_right - a_right if k[0] == "subject_03"
        }
        assert found(search="(PROBLEM 123)") == {key(123)}  # any case, in the document's question
        shot = data.shots(0)[0].split("\n")[0][len("Question: ") :]  # a few-shot example's question
        assert found(search=shot) == set()  # not the document's own text
        assert (
            found(search=shot, whole_prompts=True)
            == {  # unless whole prompts are searched
                key(d) for d in range(DOCUMENTS) if shot in data.prompt(d, 0, data.shots(0))
            }
            != set()
        )
        answer = data.answer_text(A.model, 45, 0).split(".")[0]  # the start of A's answer to document 45
        assert key(45) in found(search=answer)


def test_two_models_list_the_items_they_score_differently_first(source):
    with source.reading() as conn:
        rows = every_page(conn, B, ItemQuery("exact_match"), size=9)
    differ = right(A.model) ^ right(B.model)
    assert [(r.task, r.doc_id) for r in rows[: len(differ)]] == sorted(differ)
    assert all(r.same == 0 and r.value != r.value_b for r in rows[: len(differ)])
    assert all(r.same == 1 for r in rows[len(differ) :]) and len(rows) == DOCUMENTS


def test_the_paired_statistics_now_and_as_stored(source):
    a_right, b_right = right(A.model), right(B.model)
    only_a, only_b = len(a_right - b_right), len(b_right - a_right)
    with source.reading() as conn:
        pooled = queries.items(conn, data.BENCHMARK, A, B, ItemQuery("exact_match")).pooled
        stored = queries.stored_comparisons(conn, data.BENCHMARK, A, B, "exact_match")
        turned = queries.stored_comparisons(conn, data.BENCHMARK, B, A, "exact_match")
    assert pooled is not None and pooled.ci_low is not None and pooled.ci_high is not None
    assert (pooled.items, pooled.only_a, pooled.only_b) == (DOCUMENTS, only_a, only_b)
    assert pooled.accuracy_a == pytest.approx(len(a_right) / DOCUMENTS)
    assert pooled.difference == pytest.approx((len(a_right) - len(b_right)) / DOCUMENTS)
    assert pooled.mcnemar_p == pytest.approx(binomtest(only_a, only_a + only_b, 0.5).pvalue)
    assert pooled.ci_low < pooled.difference < pooled.ci_high
    assert [row.task for row in stored] == sorted(data.TASKS)  # model_comparison's rows, one per task
    assert sum(row.only_a for row in stored) == only_a and sum(row.only_b for row in stored) == only_b
    assert all(row.relation == "B is A's baseline" for row in stored)
    for row, other in zip(stored, turned, strict=True):  # the same rows, read the other way round
        assert (other.only_a, other.only_b, other.relation) == (row.only_b, row.only_a, "A is B's baseline")
        assert other.difference == pytest.approx(-row.difference)
        assert other.ci_low is not None and row.ci_high is not None and other.ci_low == pytest.approx(-row.ci_high)


HOSTILE = "'; DROP TABLE samples; --"


def samples_count(source: Reader) -> int:
    with duckdb.connect(source.source.database, read_only=True) as conn:
        return conn.execute("SELECT count(*) FROM samples").fetchall()[0][0]


def test_a_search_or_a_name_is_a_value_never_sql(source):
    before = samples_count(source)
    with source.reading() as conn:
        assert queries.items(conn, data.BENCHMARK, A, None, ItemQuery("exact_match", search=HOSTILE)).total == 0
        for pattern in ("%", ".*", "\\E.*\\Q", "[a-z]"):  # a pattern's characters are the text's own
            assert queries.items(conn, data.BENCHMARK, A, None, ItemQuery("exact_match", search=pattern)).total == 0
        assert queries.items(conn, data.BENCHMARK, A, None, ItemQuery(HOSTILE)).total == DOCUMENTS  # no such metric
        with pytest.raises(ViewerInputError, match="has no evaluation"):
            queries.run_of(queries.runs(conn, data.BENCHMARK), data.BENCHMARK, HOSTILE, None, None)
        assert queries.runs(conn, HOSTILE) == []
    assert samples_count(source) == before > 0


def test_the_viewer_connection_cannot_write(source):
    with source.reading() as conn, pytest.raises(duckdb.Error, match="read-only"):
        conn.execute("DELETE FROM samples")


def test_a_page_position_that_is_not_one_is_refused():
    assert Cursor.decode(Cursor(1, "a'b", 3).encode()) == Cursor(1, "a'b", 3)
    for text in ("zzz", "WzEsMl0=", "bnVsbA=="):  # not base64 JSON; [1, 2]; null
        with pytest.raises(ViewerInputError, match="not a page position"):
            Cursor.decode(text)


# --- how a sample reads ---------------------------------------------------------------------------


def test_prompts_read_as_the_turns_the_model_was_given():
    chat = prompt_turns("letter", "[system]\nS\n\n[user]\nU", [["S", "U", ["A", "B"]]])
    assert [(t.role, t.text) for t in chat] == [("system", "S"), ("user", "U")]
    messages = CHAT_MESSAGES + '[{"role": "system", "content": "be brief"}, {"role": "user", "content": "<b>hi</b>"}]'
    assert [(t.role, t.text) for t in prompt_turns("harness", messages, [])] == [
        ("system", "be brief"),
        ("user", "<b>hi</b>"),
    ]
    assert [(t.role, t.text) for t in prompt_turns("harness", "Q: 1+1?\nA:", [])] == [("context", "Q: 1+1?\nA:")]


def test_answers_read_by_their_kind():
    loglikelihoods = answer_view(
        [["ctx", " yes"], ["ctx", " no"]],
        [[[-0.5, True]], [[-2.0, False]]],
        ["k1", "k2"],
        {"k1": StoredAnswer("loglikelihood", [-0.5, True])},
        "1",
    )
    assert loglikelihoods.kind == "loglikelihood"
    assert [(c.text, c.loglikelihood, c.greedy, c.highest, c.reference) for c in loglikelihoods.choices] == [
        (" yes", -0.5, True, True, False),
        (" no", -2.0, False, False, True),
    ]
    letter = answer_view([["s", "u", ["A", "B"]]], [{"A": 0.25, "B": 0.75}], ["k"], {}, "B")
    assert (letter.kind, letter.probabilities) == ("label_probabilities", [("B", 0.75), ("A", 0.25)])
    raw = "<think>2 and 2 make 4</think>\n\nThe answer is 4."
    generated = answer_view(
        [["ctx", {"until": ["\n"]}]], [["The answer is 4."]], ["k"], {"k": StoredAnswer("generate_until", raw)}, "4"
    )
    assert generated.kind == "generated" and generated.generated[0].reasoning == "<think>2 and 2 make 4</think>"
    sampled = answer_view(  # one request answered three times: each sample with its own stored raw text
        [["ctx", {"do_sample": True}]],
        [["4", "5", "4"]],
        ["s0", "s1", "s2"],
        {"s1": StoredAnswer("generate_until", "<think>hm</think>5", "end_token")},
        "4",
    )
    assert sampled.kind == "generated" and [g.text for g in sampled.generated] == ["4", "5", "4"]
    assert [g.reasoning for g in sampled.generated] == [None, "<think>hm</think>", None]
    assert [g.ended for g in sampled.generated] == [None, "end_token", None]  # why each ended, where stored
    rolling = answer_view([["a text"]], [[-42.5]], ["k"], {"k": StoredAnswer("loglikelihood_rolling", -42.5)}, None)
    assert (rolling.kind, rolling.values) == ("rolling", [-42.5])


def test_the_reasoning_block_is_only_what_was_stripped():
    assert split_reasoning("  four  ", "four").reasoning is None  # a chat answer is stripped of spaces only
    assert split_reasoning("four", "four").reasoning is None
    assert split_reasoning("thinking... </think> four", "four").reasoning == "thinking... </think>"
    assert split_reasoning("four and more", "five").reasoning is None  # not its end: nothing was stripped


def test_a_diff_holds_both_texts_word_by_word():
    first, second = "Janet lays 16 eggs, so 48 eggs.", "Janet's ducks lay 16 eggs, so 4."
    pieces = text_diff(first, second)
    assert "".join(p.text for p in pieces if p.kind != "added") == first
    assert "".join(p.text for p in pieces if p.kind != "removed") == second
    assert {p.text for p in pieces if p.kind == "same"} >= {" 16 eggs, so "}


def test_a_page_path_keeps_every_value_set_and_quotes_each_part():
    from eval_platform.viewer.links import BENCHMARK, path

    assert path(BENCHMARK, {"doc_id": 0, "q": "a&b=c", "task": None, "flipped": ""}, benchmark="x/y?") == (
        "/benchmarks/x%2Fy%3F?doc_id=0&q=a%26b%3Dc"
    )


def test_a_page_of_a_domain_no_run_has_written_yet_says_so(source, tmp_path):
    """A warehouse written by a platform that knew no evolution store has no `eras` table."""
    import shutil

    from eval_platform.viewer.queries import evolution
    from eval_platform.viewer.warehouse import MissingTableError

    copy = tmp_path / "warehouse.duckdb"
    shutil.copy(source.source.database, copy)
    with duckdb.connect(str(copy)) as conn:
        conn.execute("DROP TABLE eras")
    reader = Reader(WarehouseSource(str(copy)))
    with pytest.raises(MissingTableError, match="no eras table yet"), reader.reading() as conn:
        evolution.eras(conn)
    reader.close()

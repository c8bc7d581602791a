"""A protocol's declaration, bad in each way a hand-edited YAML file is (not YAML, not a mapping, a
field the protocol does not have, a task without its metrics, shots that are not a number), is
refused naming the file and the field; the shipped protocols are accepted."""

import pytest

from eval_platform.benchmarks.declarations import DeclarationError
from eval_platform.benchmarks.protocols import declared_protocols, parse_protocol
from tests.conftest import PROJECT_ROOT

GOOD_TASK = "  - {name: arc_challenge, metrics: [acc_norm], num_fewshot: 25}\n"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("title: T\ntasks: [ {name: arc", "not a protocol declaration: while parsing a flow"),
        ("- arc_challenge\n- mmlu\n", "not a protocol declaration: "),
        (f"title: T\nweights: [1, 2]\ntasks:\n{GOOD_TASK}", "weights: Extra inputs are not permitted"),
        ("title: T\ntasks:\n  - {name: arc_challenge, num_fewshot: 25}\n", "tasks.0.metrics: Field required"),
        (
            "title: T\ntasks:\n  - {name: mmlu, metrics: [acc], num_fewshot: five}\n",
            "tasks.0.num_fewshot: Input should",
        ),
        (f"tasks:\n{GOOD_TASK}", "title: Field required"),
    ],
)
def test_a_protocol_file_that_is_not_a_protocol_is_refused_naming_it_and_the_field(tmp_path, text, said):
    path = tmp_path / "my_protocol.yaml"
    path.write_text(text)
    with pytest.raises(DeclarationError) as refused:
        parse_protocol(path)
    assert str(refused.value).startswith(f"{path}: {said}")
    with pytest.raises(DeclarationError, match="my_protocol.yaml"):  # as the roster and the jobs read the folder
        declared_protocols(tmp_path)


def test_the_shipped_protocols_are_accepted():
    protocols = declared_protocols(PROJECT_ROOT / "data" / "protocols")
    assert {"open_llm_leaderboard_v1", "open_llm_leaderboard_v2"} <= set(protocols)
    assert all(protocol.tasks for protocol in protocols.values())

"""Evolution's input files, bad in each way a hand-edited file is: an era's JSON (not JSON, not an
object, a field the era does not have, a value of the wrong kind) and `gene_pools.json` (a tag
missing, empty or unknown, a gene that is not text) are refused naming the file and the line or
field, and the era sensor's requests fail on them rather than run an era as nobody wrote it."""

import json
import shutil

import pytest

from eval_platform.common.ingestion import DataFileError
from eval_platform.evolution.eras import era_run_config, gene_pool_file
from eval_platform.evolution.genetic import TAGS
from eval_platform.schedules.planner import era_run_requests
from tests.conftest import PROJECT_ROOT

GENE_POOLS = PROJECT_ROOT / "data" / "evolution" / "gene_pools.json"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"population_size": 4,\n "generations": 2', "not JSON: Expecting ',' delimiter at line 2, column 18"),
        ("[1, 2]", "an era's settings are a JSON object, not a list"),
        ('{"population_size": 4, "generatoins": 2}', "generatoins: Extra inputs are not permitted"),
        ('{"population_size": "four"}', "population_size: Input should be a valid integer"),
        ('{"population_size": 0}', "population_size: Input should be greater than 0"),
        ('{"restart": "yes"}', "restart: true or false, not 'yes'"),
    ],
)
def test_an_era_file_that_is_not_an_eras_settings_is_refused_naming_it(tmp_path, text, said):
    path = tmp_path / "bad-era.json"
    path.write_text(text)
    with pytest.raises(DataFileError) as refused:
        era_run_config(path)
    assert str(refused.value).startswith(f"{path}: {said}")
    with pytest.raises(DataFileError, match="bad-era.json"):  # the sensor's and the main command's requests
        era_run_requests(tmp_path, {})


def test_the_shipped_eras_and_gene_pools_are_accepted(tmp_path):
    for path in sorted((PROJECT_ROOT / "data" / "evolution" / "eras").glob("*.json")):
        assert era_run_config(path)["ops"]["evolution_era"]["config"] == json.loads(path.read_text())
    pools = gene_pool_file(GENE_POOLS)
    assert list(pools) == list(TAGS) and all(pools[tag] for tag in TAGS)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda pools: pools.pop("fidelity"), "no genes for tag(s) fidelity"),
        (lambda pools: pools.update(output=[]), "no genes for tag(s) output"),
        (lambda pools: pools.update(tone=["friendly"]), "no prompt tag named tone (the tags: role, "),
        (lambda pools: pools.update(role="Act as an editor."), "role: a list of texts, not a str"),
        (lambda pools: pools["constraints"].append(None), "constraints: gene "),
        (lambda pools: pools["role"].insert(0, "  "), "role: gene 0 is not a non-empty text: '  '"),
    ],
)
def test_gene_pools_that_are_not_five_lists_of_texts_are_refused_naming_the_tag(tmp_path, change, said):
    pools = json.loads(GENE_POOLS.read_text())
    change(pools)
    path = tmp_path / "gene_pools.json"
    path.write_text(json.dumps(pools))
    with pytest.raises(DataFileError) as refused:
        gene_pool_file(path)
    assert str(refused.value).startswith(f"{path}: {said}")


def test_gene_pools_that_are_not_json_are_refused_naming_the_line(tmp_path):
    path = tmp_path / "gene_pools.json"
    shutil.copy(GENE_POOLS, path)
    path.write_text(path.read_text()[:-3])
    with pytest.raises(DataFileError, match=rf"^{path}: not JSON: .* at line \d+, column \d+$"):
        gene_pool_file(path)

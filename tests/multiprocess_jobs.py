"""Jobs importable by Dagster's multiprocess executor: the unpartitioned part of the graph, and an era."""

from dagster import AssetSelection, Definitions, define_asset_job


def _definitions(job):
    from eval_platform.definitions import defs

    return Definitions(
        assets=list(defs().assets), asset_checks=list(defs().asset_checks), jobs=[job], resources=defs().resources
    )


def unpartitioned_graph():
    selection = AssetSelection.groups("evolution_inputs") | AssetSelection.assets(
        "blind_eval_questions", "blind_eval_answers", "blind_eval_sheet"
    )
    return _definitions(define_asset_job("unpartitioned_graph", selection=selection)).resolve_job_def(
        "unpartitioned_graph"
    )


def era_graph():
    from eval_platform.evaluation_assets.partitions import era_partitions

    job = define_asset_job(
        "era_graph", selection=AssetSelection.groups("prompt_evolution"), partitions_def=era_partitions
    )
    return _definitions(job).resolve_job_def("era_graph")

"""A job over the unpartitioned part of the graph, importable by Dagster's multiprocess executor."""

from dagster import AssetSelection, Definitions, define_asset_job


def unpartitioned_graph():
    from eval_platform.definitions import defs

    selection = AssetSelection.groups("prompt_evolution") | AssetSelection.assets(
        "blind_eval_questions", "blind_eval_answers", "blind_eval_sheet")
    job = define_asset_job("unpartitioned_graph", selection=selection)
    return Definitions(assets=list(defs.assets), asset_checks=list(defs.asset_checks), jobs=[job],
                       resources=defs.resources).resolve_job_def("unpartitioned_graph")

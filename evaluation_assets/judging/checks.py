"""Asset checks of judging: every pair judged in both orders; the recorded GPT-4 verdicts give the
figures the LLMBar paper publishes; and, before an era runs, a panel judge whose agreement with
humans is below the era's bound (or unmeasured) is flagged."""

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, asset_check

from eval_platform.common.panels import declared_panels, flag_judges
from eval_platform.environment import environment
from eval_platform.evaluation_assets.checks import check_result
from eval_platform.evaluation_assets.judging.assets import judge_agreement, mt_bench_verdicts, pairwise_verdicts
from eval_platform.evaluation_assets.metadata import markdown_table
from eval_platform.judging.datasets import GPT4_LLMBAR_JUDGE, LLMBAR_SETS
from eval_platform.judging.report import LLMBAR_PUBLISHED
from eval_platform.judging.store import JudgingStore
from eval_platform.resources import WarehouseResource

PUBLISHED_TOLERANCE = 0.005  # percentage points: the published figures' last digit


@asset_check(asset=pairwise_verdicts, description="Every pair a model judged, it judged in both orders.")
def set_pairs_in_both_orders(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(JudgingStore) as store:
        return check_result(store.set_pairs_missing_an_order(), "pair judged in one order only")


@asset_check(asset=mt_bench_verdicts, description="Every MT-Bench pair a model judged, it judged in both orders.")
def mt_bench_pairs_in_both_orders(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(JudgingStore) as store:
        return check_result(store.mt_bench_pairs_missing_an_order(), "pair judged in one order only")


@asset_check(
    asset=judge_agreement,
    description="The recorded GPT-4 verdicts give LLMBar's published accuracy and positional agreement on each set "
    "(Vanilla*, to the last published digit).",
)
def llmbar_figures_reproduced(warehouse: WarehouseResource) -> AssetCheckResult:
    offenders, shown = [], []
    with warehouse.store(JudgingStore) as store:
        for set_name in LLMBAR_SETS:
            measured = {
                m.metric: m.value for m in store.load_agreement_metrics(set_name) if m.judge == GPT4_LLMBAR_JUDGE
            }
            for metric, published in zip(
                ("accuracy", "position_consistency"), LLMBAR_PUBLISHED["Vanilla*"][set_name], strict=True
            ):
                value = measured.get(metric)
                ours = None if value is None else value * 100
                shown.append({"set": set_name, "metric": metric, "published": published, "ours": ours})
                if ours is None or abs(ours - published) > PUBLISHED_TOLERANCE:
                    offenders.append((set_name, metric, published, ours))
    return check_result(offenders, "figure that differs from LLMBar's", figures=markdown_table(pd.DataFrame(shown)))


@asset_check(
    asset=judge_agreement,
    description="Before an era runs: each era's panel judge (data/evolution/eras/) whose agreement with humans on the "
    "era's agreement_set is below its min_judge_agreement, or unmeasured, is flagged.",
)
def flag_panel_judges(warehouse: WarehouseResource) -> AssetCheckResult:
    eras = declared_panels(environment().eras_dir)
    rows, offenders = [], []
    with warehouse.store(JudgingStore) as store:
        measured = {panel.agreement_set: store.load_agreement_metrics(panel.agreement_set) for panel in eras.values()}
    for era, panel in eras.items():
        flags = {
            f.judge: f
            for f in flag_judges(
                measured[panel.agreement_set],
                panel.models,
                panel.agreement_set,
                panel.min_judge_agreement,
                panel.agreement_metric,
            )
        }
        for name, model in panel.judge_panel.items():
            flag = flags[model]
            rows.append({"era": era, "judge": name, "model": model, "status": flag.status, "measured": flag.message})
            if flag.status != "ok":
                offenders.append((era, name, flag.message))
    return check_result(
        offenders,
        "panel judge below its era's bound",
        severity=AssetCheckSeverity.WARN,
        eras=len(eras),
        panel=markdown_table(pd.DataFrame(rows)) if rows else MetadataValue.md("_no era declared_"),
    )

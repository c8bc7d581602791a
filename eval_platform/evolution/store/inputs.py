"""An era's inputs: the source paragraphs (and the lines rejected) and the gene pool."""

from __future__ import annotations

import pandas as pd

from eval_platform.common.warehouse import reads, writes
from eval_platform.evolution.store.schema import EvolutionSchema


class EvolutionInputStore(EvolutionSchema):
    @writes("source_paragraphs", "paragraph_rejections")
    def replace_source_paragraphs(self, paragraphs: pd.DataFrame, rejections: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], source_paragraphs=paragraphs, paragraph_rejections=rejections)

    @reads("source_paragraphs")
    def load_paragraphs(self) -> list[dict[str, str]]:
        return self.rows("SELECT paragraph_id, text FROM source_paragraphs ORDER BY paragraph_id")

    @writes("gene_pool")
    def replace_gene_pool(self, genes: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], gene_pool=genes)

    @reads("gene_pool")
    def load_gene_pool(self) -> list[dict[str, str]]:
        return self.rows("SELECT tag, text FROM gene_pool ORDER BY tag, gene_index")

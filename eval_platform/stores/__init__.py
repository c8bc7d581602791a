"""One store per domain; each owns its tables (DDL, version, migrations) and their reads and writes."""

from eval_platform.stores.benchmark_store import BenchmarkStore
from eval_platform.stores.blind_store import BlindStore
from eval_platform.stores.evolution_store import EvolutionStore
from eval_platform.stores.warehouse import Store, register_stores

ALL_STORES: tuple[type[Store], ...] = (BenchmarkStore, EvolutionStore, BlindStore)
register_stores(ALL_STORES)

__all__ = ["ALL_STORES", "BenchmarkStore", "BlindStore", "EvolutionStore", "Store"]

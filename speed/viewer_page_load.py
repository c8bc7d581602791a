"""Page-load times of the sample viewer on warehouses of 1k, 10k and 100k items.

    python speed/viewer_page_load.py                          (1,000, 10,000 and 100,000 items)
    python speed/viewer_page_load.py --items 1000 --requests 10
    python speed/viewer_page_load.py --folder /tmp/viewer-speed   (keeps the warehouses for the next run)

Each warehouse holds two models' evaluations of a benchmark of generated answers (five-shot prompts
of about 2.8 KB, two filters, 20 tasks) and their comparison, written through the real stores
(tests/synthetic_evaluations.py): 100,000 items are 400,000 samples. The viewer runs as users
start it (`eval-platform viewer`, its own process) and each page is fetched over HTTP, whole: the
time from the request to the last byte of its HTML. Pages of one kind differ (other tasks, other
positions, other words), a few requests of each in turn; the script prints the median and the
95th percentile per kind, and the machine and its load (the figures are this machine's at that
load). "after idle" pages come after a pause longer than the viewer keeps a file open, so each one
opens the file again.
"""

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import cpu_name  # noqa: E402
from eval_platform.viewer.queries.benchmarks import Cursor  # noqa: E402
from eval_platform.viewer.warehouse import HOLD_S  # noqa: E402
from tests import synthetic_evaluations as data  # noqa: E402
from tests.processes import free_port, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
A, B = data.MODELS[1], data.MODELS[0]
NEXT = re.compile(r'rel="next" href="([^"]+)"')


def fetch(url: str) -> tuple[float, str]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        html = response.read().decode()
        assert response.status == 200, url
    return (time.perf_counter() - start) * 1000, html


def page_kinds(items: int) -> dict[str, Callable[[int], str]]:
    """Each kind of page: its path for the n-th request (each n a different page of that kind)."""
    base = f"/benchmarks/{data.BENCHMARK}?"
    per_task = items // len(data.TASKS)

    def task(n: int) -> str:
        return data.TASKS[(n * 7) % len(data.TASKS)]

    def deep(n: int) -> str:
        return Cursor(0, task(n), (per_task * (n % 9 + 1)) // 10).encode()

    return {
        "first page": lambda n: base + urlencode({"model": A, "task": task(n)}),
        "a page deep in": lambda n: base + urlencode({"model": A, "after": deep(n)}),
        "task, A right": lambda n: base + urlencode({"model": A, "task": task(n), "outcome": "right"}),
        "A and B, differing first": lambda n: base + urlencode({"model": A, "against": B, "task": task(n)}),
        "A and B, flipped to wrong": lambda n: (
            base + urlencode({"model": A, "against": B, "flipped": "to_wrong", "after": deep(n)})
        ),  # fmt: skip
        "search questions, answers": lambda n: base + urlencode({"model": A, "q": f"(problem {n * 37 % items})"}),
        "search whole prompts": lambda n: (
            base + urlencode({"model": A, "q": data.WORDS[n % len(data.WORDS)] + " e", "prompts": "whole"})
        ),  # fmt: skip
        "item, A and B": lambda n: (
            f"/benchmarks/{data.BENCHMARK}/item?"
            + urlencode({"model": A, "against": B, "task": task(n), "doc_id": (n * 13) % per_task})
        ),
    }


def measure(viewer: str, items: int, requests: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    kinds = page_kinds(items)
    for path in kinds.values():  # the viewer's first pages import what pages need (scipy, for the paired test)
        fetch(viewer + path(0))
    for n in range(requests):
        for kind, path in kinds.items():
            times.setdefault(kind, []).append(fetch(viewer + path(n))[0])
    url = viewer + f"/benchmarks/{data.BENCHMARK}?" + urlencode({"model": A})
    for _ in range(requests):  # the next pages, as a user pages on
        elapsed, html = fetch(url)
        times.setdefault("next page (following the link)", []).append(elapsed)
        following = NEXT.search(html)
        assert following, f"{url} has no next page"
        url = viewer + following.group(1).replace("&amp;", "&")
    for n in range(requests):
        time.sleep(HOLD_S * 1.5)
        times.setdefault("first page after idle", []).append(fetch(viewer + kinds["first page"](n))[0])
    return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--requests", type=int, default=12, help="requests of each kind of page")
    parser.add_argument("--folder", help="where the warehouses are kept (default: a temporary folder)")
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="viewer-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average at the start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)  # fmt: skip
    rows = []
    for items in args.items:
        warehouse = folder / f"viewer_{items}.duckdb"
        if not warehouse.exists():
            start = time.perf_counter()
            data.write(warehouse, items)
            print(f"{items:,} items: warehouse written in {time.perf_counter() - start:.0f} s "
                  f"({warehouse.stat().st_size / 2**20:.0f} MiB)", flush=True)  # fmt: skip
        port = free_port()
        viewer = f"http://127.0.0.1:{port}"
        environment = {**os.environ, "EVAL_WAREHOUSE": str(warehouse)}
        command = [sys.executable, "-m", "eval_platform.cli", "viewer", "--port", str(port)]
        with running(command, viewer + "/", timeout_s=180, cwd=ROOT, env=environment,
                     stdout=open(os.devnull, "w")):  # fmt: skip
            times = measure(viewer, items, args.requests)
        for kind, values in times.items():
            rows.append((items, kind, statistics.median(values), percentile(values, 0.95), len(values)))
        print(f"{items:,} items measured; load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    print("\n| items | page | median ms | p95 ms | requests |\n|---:|---|---:|---:|---:|")
    for items, kind, median, p95, n in rows:
        print(f"| {items:,} | {kind} | {median:.0f} | {p95:.0f} | {n} |")


if __name__ == "__main__":
    main()

"""An output file plugin: ``category_counts.csv``, per category its prompts and
measured requests, made from the run's summary.

It renders bytes and names its file; loadtest writes it (atomically, before
summary.json). Nothing here is part of loadtest: it uses only the plugin interface a
third party sees.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from loadtest.plugins import RunResults


class CategoryCounts:
    """The ``category_counts`` output."""

    name = "category_counts.csv"
    made_from = frozenset({"summary"})

    def render(self, results: RunResults) -> Iterator[tuple[str, str]]:
        s = results.summary
        if "refused" in s["by_category"]:  # how the test makes an output fail
            raise ValueError("a category named 'refused'")
        text = io.StringIO(newline="")
        w = csv.writer(text)
        w.writerow(["category", "prompts", "measured"])
        prompts: dict[str, int] = {}
        for source, n in s["run"]["prompts"].items():  # "kind:category"
            cat = source.rpartition(":")[2]
            prompts[cat] = prompts.get(cat, 0) + n
        for cat in sorted(set(prompts) | set(s["by_category"])):
            metrics = s["by_category"][cat]["metrics"] if cat in s["by_category"] else {}
            measured = metrics["e2e_ms"]["count"] if "e2e_ms" in metrics else 0
            w.writerow([cat, prompts.get(cat, 0), measured])
        yield self.name, text.getvalue()


COUNTS = CategoryCounts()

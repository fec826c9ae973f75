"""How the fit's own work grows with the run's length: a saved real run repeated end to end.

Run: .venv/bin/python benchmarks/bench_fit.py RUN.json [--hours 1 4 24]

RUN.json is a run `bench_sim_vs_real.py --save` kept (its Prometheus series). Each length is that
run's series repeated back to back, the counters (watermarks, records) carried on from one copy
to the next, and fitted by `fitted_run`, as `autosizer fit` fits what it read. The range queries
are not timed (Prometheus' side; `range_series` reads them in pieces). A fit whose time grows
faster than the run would show here as a rising time per hour.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.simulator.fit import fitted_run  # noqa: E402

COUNTERS = {"high_watermark", "records_total", "records_read"}  # cumulative: carried on, not restarted


def repeated(series: dict, span: float, copies: int) -> dict:
    """The series `copies` times back to back, each copy `span` seconds after the one before."""
    out = {}
    for name, rows in series.items():
        out[name] = []
        for labels, points in rows:
            points = [(float(t), float(v)) for t, v in points]
            grow = points[-1][1] - points[0][1] if name in COUNTERS and points else 0.0
            out[name].append((labels, [(t + i * span, v + i * grow) for i in range(copies) for t, v in points]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run", type=Path, help="a run saved by bench_sim_vs_real.py --save")
    parser.add_argument("--hours", type=float, nargs="+", default=[1.0, 4.0, 24.0])
    args = parser.parse_args()
    saved = json.loads(args.run.read_text())
    start, span = saved["start"], saved["end"] - saved["start"]
    for hours in args.hours:
        copies = max(1, math.ceil(hours * 3600 / span))
        series = repeated(saved["series"], span, copies)
        began = time.perf_counter()
        fitted = fitted_run(series, start, start + copies * span)
        took = time.perf_counter() - began
        print(f"{copies * span / 3600:6.2f} h ({copies} copies, a load of {fitted.load.seconds} s): "
              f"fitted in {took:.2f} s, {took / (copies * span / 3600):.3f} s an hour", flush=True)


if __name__ == "__main__":
    main()

"""Cost of opening and closing one energy window, against the window's length.

For each meter usable here (the CPU-time estimate always; Zeus where NVML or RAPL is
readable) and each window length, times ``begin()`` + ``end()`` around a busy-wait of that
length, many times, and reports the median overhead in microseconds and as a share of
the window. Writes results/meter_overhead.json.

    .venv/bin/python benchmarks/bench_meter_overhead.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from _common import conditions, write_result

from jouleroute.energy import EstimateMeter, ZeusMeter, nvml_usable, rapl_usable

WINDOWS_S = [0.0, 0.001, 0.01, 0.1]


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def overhead(meter, window_s: float, repeats: int) -> dict:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        token = meter.begin()
        t1 = time.perf_counter()
        busy(window_s)
        t2 = time.perf_counter()
        meter.end(token)
        t3 = time.perf_counter()
        samples.append((t1 - t0) + (t3 - t2))
    median = statistics.median(samples)
    return {
        "window_s": window_s,
        "repeats": repeats,
        "overhead_us_median": round(median * 1e6, 2),
        "overhead_us_p90": round(sorted(samples)[int(0.9 * len(samples))] * 1e6, 2),
        "overhead_share_of_window": round(median / window_s, 6) if window_s else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    # Short windows are the point here; silence the meter's short-window warning.
    logging.basicConfig(level=logging.ERROR)
    meters = {"estimate": EstimateMeter()}
    if nvml_usable() or rapl_usable():
        meters["zeus"] = ZeusMeter(min_window_s=0.0)
    else:
        print("Zeus: no NVML GPU and no readable RAPL here; measuring the estimate meter only")
    payload = {"conditions": conditions(), "meters": {}}
    print(f"{'meter':<9} {'window s':>9} {'median us':>10} {'p90 us':>9} {'share':>9}")
    for name, meter in meters.items():
        rows = []
        for window_s in WINDOWS_S:
            repeats = args.repeats if window_s < 0.1 else max(20, args.repeats // 10)
            row = overhead(meter, window_s, repeats)
            rows.append(row)
            share = row["overhead_share_of_window"]
            print(f"{name:<9} {window_s:>9} {row['overhead_us_median']:>10} {row['overhead_us_p90']:>9} {share if share is not None else '-':>9}")
        payload["meters"][name] = {"source": meter.source, "rows": rows}
    print("wrote", write_result("meter_overhead", payload))


if __name__ == "__main__":
    main()

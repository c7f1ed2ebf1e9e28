"""Markdown tables from benchmark JSON reports (so no number in the docs is typed by hand).

Usage:
    python benchmarks/strategies/make_tables.py comparison LABEL=REPORT.json [LABEL=REPORT.json ...]
    python benchmarks/strategies/make_tables.py latency REPORT.json
    python benchmarks/strategies/make_tables.py warm REPORT.json
    python benchmarks/strategies/make_tables.py targets REPORT.json [REPORT.json ...]
    python benchmarks/strategies/make_tables.py targets-against FARM.json KERNEL_TUNER.json STRATEGY [STRATEGY ...]
    python benchmarks/strategies/make_tables.py targets-seeds FARM.json KT.json POOLED.json KT_MORE.json
    python benchmarks/strategies/make_tables.py warm-arms LABEL=REPORT.json@ARM [LABEL=REPORT.json@ARM ...]

``comparison`` merges reports of ``kernelfarm bench-strategies --json`` and
kernel_tuner_replay.py: one table per landscape, one row per (label, strategy); an empty LABEL
keeps the strategy name alone.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any

CHECKPOINTS = ("25", "50", "100", "200")


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _hits(median: float | None, success: float, budget: int) -> str:
    return f"{'>' + str(budget) if median is None else f'{median:g}'} ({100 * success:.0f} %)"


def comparison(pairs: list[str]) -> str:
    rows: dict[str, list[str]] = {}
    headers: dict[str, str] = {}
    for pair in pairs:
        label, _, path = pair.rpartition("=")
        report = json.loads(Path(path).read_text())
        settings = report["settings"]
        for name, entry in report["landscapes"].items():
            headers.setdefault(
                name,
                f"**{name}** ({entry['configs']} configs in the space, {entry['failed_configs']} of the file's fail; "
                f"budget {settings['budget']})",
            )
            for strategy, s in entry["strategies"].items():
                title = f"{label} {strategy}".strip() if label else strategy
                repeats = f"{s['repeats']}"
                batch = settings.get("batch", 1)
                rows.setdefault(name, []).append(
                    f"| {title} | {batch} | {repeats} | "
                    + " | ".join(_fraction(s["frac_at"].get(b)) for b in CHECKPOINTS)
                    + f" | {_hits(s['n90_median'], s['n90_success'], s['budget'])}"
                    + f" | {_hits(s['n95_median'], s['n95_success'], s['budget'])}"
                    + f" | {100 * s['failed_fraction']:.0f} %"
                    + f" | {'-' if s['ask_ms_median'] is None else format(s['ask_ms_median'], '.1f')} |"
                )
    out = []
    for name, lines in rows.items():
        out.append(headers[name] + "\n")
        out.append(
            "| strategy | batch | repeats | frac@25 | frac@50 | frac@100 | frac@200 | evals to 0.90 (share) "
            "| evals to 0.95 (share) | failed evals | ms per ask |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        out.extend(lines)
        out.append("")
    return "\n".join(out)


def latency(path: str) -> str:
    report = json.loads(Path(path).read_text())
    out = [
        f"{report['strategy']}, ask({report['batch']}), one core (ms):\n",
        "| landscape | observations | median | p90 | min |",
        "|---|---|---|---|---|",
    ]
    for name, rows in report["landscapes"].items():
        for r in rows:
            out.append(
                f"| {name} | {r['observations']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} | {r['min_ms']:.1f} |"
            )
    return "\n".join(out) + "\n"


def warm(path: str) -> str:
    report = json.loads(Path(path).read_text())
    budget = report["settings"]["budget"]
    checkpoints = [b for b in CHECKPOINTS if int(b) <= budget]
    out = []
    for name, entry in report["landscapes"].items():
        out.append(f"**{name}**\n")
        out.append(
            "| prior | prior's best on target | "
            + " | ".join(f"frac@{b}" for b in checkpoints)
            + " | evals to 0.90 | evals to 0.95 |"
        )
        out.append("|---" * (4 + len(checkpoints)) + "|")
        for level, s in entry.items():
            best = s.get("prior_best_fraction")
            out.append(
                f"| {level} | {'-' if best is None else f'{best:.3f}'} | "
                + " | ".join(_fraction(s["frac_at"][b]) for b in checkpoints)
                + f" | {_hits(s['n90_median'], s['n90_success'], budget)}"
                + f" | {_hits(s['n95_median'], s['n95_success'], budget)} |"
            )
        out.append("")
    return "\n".join(out)


def targets(paths: list[str], strategy: str = "bayes") -> str:
    """Issue 3's targets: ``strategy`` vs the best Kernel Tuner strategy per metric, per landscape."""
    ours: dict[str, dict[str, Any]] = {}
    random_n95: dict[str, float | None] = {}
    theirs: dict[str, dict[str, dict[str, Any]]] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        for name, entry in report["landscapes"].items():
            for label, s in entry["strategies"].items():
                if label == strategy and report["settings"].get("batch", 1) == 1:
                    ours[name] = s
                elif label == "random":
                    random_n95[name] = s["n95_median"]
                elif label.startswith("kt:"):
                    theirs.setdefault(name, {})[label] = s
    out = [
        f"| landscape | {strategy} frac@100 | best Kernel Tuner frac@100 | {strategy} evals to 0.95 "
        "| best Kernel Tuner evals to 0.95 | targets (>= 0.97, <= 60, better than every KT strategy) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in ours.items():
        kt = theirs.get(name, {})
        best_frac = max(kt.items(), key=lambda item: item[1]["frac_at"]["100"])
        best_n95 = min(kt.items(), key=lambda item: item[1]["n95_median"] or float("inf"))
        n95 = s["n95_median"]
        kt_n95 = best_n95[1]["n95_median"]
        met = (
            s["frac_at"]["100"] >= 0.97
            and n95 is not None
            and n95 <= 60
            and s["frac_at"]["100"] >= best_frac[1]["frac_at"]["100"]
            and (kt_n95 is None or n95 <= kt_n95)
        )
        trivial = (random_n95.get(name) or float("inf")) <= 2
        verdict = "met" if met else "NOT met"
        if trivial:
            verdict = "trivial landscape: random search is within 0.95 in <= 2 evaluations"
        out.append(
            f"| {name} | {s['frac_at']['100']:.3f} | {best_frac[1]['frac_at']['100']:.3f} ({best_frac[0][3:]}) "
            f"| {_hits(n95, s['n95_success'], s['budget'])} "
            f"| {_hits(kt_n95, best_n95[1]['n95_success'], best_n95[1]['budget'])} ({best_n95[0][3:]}) "
            f"| {verdict} |"
        )
    return "\n".join(out) + "\n"


def _landscape_times(folder: Path, name: str, keep: bool) -> list[float | None]:
    from kernelfarm.core.landscape import load_landscape

    path = next(p for p in folder.glob(f"{name}.json*"))
    entries = load_landscape(path).entries.values()
    return [r.mean_ms for r in entries if keep or r.mean_ms is not None]


def scores(traces_path: Path, folder: Path) -> dict[str, dict[str, dict[str, float]]]:
    """mode -> landscape -> strategy -> standardized score (cached next to the traces)."""
    from kernelfarm.tuner.strategy_benchmark.standardized import random_baseline, standardized_score

    if not traces_path.exists() and traces_path.with_name(traces_path.name + ".gz").exists():
        traces_path = traces_path.with_name(traces_path.name + ".gz")  # kept compressed (10 repeats: ~27 MB)
    cache = traces_path.with_name(traces_path.name.split(".")[0] + "_scores.json")
    if cache.exists():
        return json.loads(cache.read_text())
    raw = gzip.decompress(traces_path.read_bytes()) if traces_path.suffix == ".gz" else traces_path.read_bytes()
    data = json.loads(raw)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for mode, per_landscape in data["traces"].items():
        for name, per_strategy in per_landscape.items():
            times = _landscape_times(folder, name, mode == "keep")
            budget = max(len(r["trace"]) for runs in per_strategy.values() for r in runs)
            base = random_baseline(times, budget)
            worst = max(t for t in times if t is not None)
            optimum = min(t for t in times if t is not None)
            out.setdefault(mode, {})[name] = {
                strategy: standardized_score([r["trace"] for r in runs], base, optimum, worst)
                for strategy, runs in per_strategy.items()
            }
    cache.write_text(json.dumps(out, indent=1) + "\n")
    return out


def summary(args: list[str]) -> str:
    """One table per mode from compare_all.py's reports: a row per strategy, over all landscapes.

    Usage: summary OUT_FOLDER LANDSCAPES_FOLDER"""
    folder, landscapes = Path(args[0]), Path(args[1])
    score = scores(folder / "all_traces.json", landscapes)
    out = []
    for mode in ("keep", "drop"):
        path = folder / f"all_{mode}.json"
        if not path.exists():
            continue
        report = json.loads(path.read_text())
        names = list(report["landscapes"])
        strategies: list[str] = []
        for entry in report["landscapes"].values():
            strategies += [s for s in entry["strategies"] if s not in strategies]
        title = "failed configs kept (each costs an evaluation)" if mode == "keep" else "failed configs removed"
        out.append(f"**{title}**, budget {report['settings']['budget']}, {len(names)} landscapes\n")
        out.append(
            "| strategy | repeats | standardized score (mean) | frac@50 (mean) | frac@100 (mean) | frac@100 (worst) "
            "| frac@200 (mean) | landscapes at 0.95 within 100 (median run) | evals to 0.95 (median of medians) "
            "| failed evals | ms per ask |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for strategy in strategies:
            cells = [report["landscapes"][n]["strategies"].get(strategy) for n in names]
            if any(c is None for c in cells):
                continue
            f50 = [c["frac_at"]["50"] for c in cells]
            f100 = [c["frac_at"]["100"] for c in cells]
            f200 = [c["frac_at"]["200"] for c in cells]
            n95 = [c["n95_median"] if c["n95_median"] is not None else float("inf") for c in cells]
            within = sum(1 for n in n95 if n <= 100)
            med = statistics.median(n95)
            std = statistics.fmean(score[mode][n][strategy] for n in names)
            asks = [c["ask_ms_median"] for c in cells if c["ask_ms_median"] is not None]
            rows.append((std, (
                f"| {strategy} | {min(c['repeats'] for c in cells)} | {std:.3f} | {statistics.fmean(f50):.3f} "
                f"| {statistics.fmean(f100):.3f} | {min(f100):.3f} | {statistics.fmean(f200):.3f} "
                f"| {within} / {len(names)} "
                f"| {'>200' if med == float('inf') else f'{med:g}'} "
                f"| {100 * statistics.fmean(c['failed_fraction'] for c in cells):.0f} % "
                f"| {statistics.median(asks) if asks else float('nan'):.1f} |"
            )))  # fmt: skip
        out.extend(row for _, row in sorted(rows, key=lambda r: -r[0]))
        out.append("")
    return "\n".join(out)


def issue17(args: list[str]) -> str:
    """Issue 17's targets per landscape (failed configs kept, first 100 evaluations of the runs).

    Usage: issue17 OUT_FOLDER LANDSCAPES_FOLDER [STRATEGY]"""
    folder, landscapes = Path(args[0]), Path(args[1])
    strategy = args[2] if len(args) > 2 else "bayes"
    score = scores(folder / "all_traces.json", landscapes)["keep"]
    report = json.loads((folder / "all_keep.json").read_text())
    out = [
        f"| landscape | {strategy} frac@100 | best Kernel Tuner frac@100 | {strategy} evals to 0.95 (share) "
        f"| best Kernel Tuner evals to 0.95 (share) | {strategy} score | best Kernel Tuner score "
        "| frac@100 >= max(0.97, best KT) | evals to 0.95 <= 60 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in report["landscapes"].items():
        s = entry["strategies"][strategy]
        kt = {k: v for k, v in entry["strategies"].items() if k.startswith("kt:")}
        best_frac = max(kt.items(), key=lambda item: item[1]["frac_at"]["100"])
        best_n95 = min(kt.items(), key=lambda item: item[1]["n95_median"] or float("inf"))
        best_score = max((score[name][k], k) for k in kt)
        frac = s["frac_at"]["100"]
        n95 = s["n95_median"]
        out.append(
            f"| {name} | {frac:.3f} | {best_frac[1]['frac_at']['100']:.3f} ({best_frac[0][3:]}) "
            f"| {_hits(n95, s['n95_success'], s['budget'])} "
            f"| {_hits(best_n95[1]['n95_median'], best_n95[1]['n95_success'], s['budget'])} ({best_n95[0][3:]}) "
            f"| {score[name][strategy]:.3f} | {best_score[0]:.3f} ({best_score[1][3:]}) "
            f"| {'yes' if frac >= max(0.97, best_frac[1]['frac_at']['100']) - 1e-9 else 'NO'} "
            f"| {'yes' if n95 is not None and n95 <= 60 else 'NO'} |"
        )
    return "\n".join(out) + "\n"


def targets_against(args: list[str]) -> str:
    """Issue 17's two per-landscape targets for farm strategies of one budget-100 run (e.g. the
    leave-one-family-out grid), against the best Kernel Tuner strategy of another run's report
    (its first 100 evaluations: a replay's first 100 do not depend on its budget; the share of
    Kernel Tuner's runs reaching 0.95 is within that run's budget).

    Usage: targets-against FARM_REPORT.json KERNEL_TUNER_REPORT.json STRATEGY [STRATEGY ...]"""
    farm, kt_report = (json.loads(Path(a).read_text()) for a in args[:2])
    strategies = args[2:] or ["bayes"]
    head = "| landscape | best Kernel Tuner frac@100 | best Kernel Tuner evals to 0.95 |"
    head += "".join(f" {s}: frac@100 / evals to 0.95 (share) / targets |" for s in strategies)
    out = [head, "|---|---|---|" + "---|" * len(strategies)]
    met = {s: [0, 0] for s in strategies}
    for name, entry in farm["landscapes"].items():
        kt = {k: v for k, v in kt_report["landscapes"][name]["strategies"].items() if k.startswith("kt:")}
        best_frac = max(kt.items(), key=lambda item: item[1]["frac_at"]["100"])
        best_n95 = min(kt.items(), key=lambda item: item[1]["n95_median"] or float("inf"))
        kt_n95 = best_n95[1]["n95_median"] if (best_n95[1]["n95_median"] or 101) <= 100 else None
        kt_cell = ">100" if kt_n95 is None else _hits(kt_n95, best_n95[1]["n95_success"], 100)
        row = f"| {name} | {best_frac[1]['frac_at']['100']:.3f} ({best_frac[0][3:]}) | {kt_cell} ({best_n95[0][3:]}) |"
        for strategy in strategies:
            s = entry["strategies"][strategy]
            frac, n95 = s["frac_at"]["100"], s["n95_median"]
            ok = [frac >= max(0.97, best_frac[1]["frac_at"]["100"]) - 1e-9, n95 is not None and n95 <= 60]
            met[strategy] = [m + o for m, o in zip(met[strategy], ok, strict=True)]
            marks = " / ".join("yes" if o else "NO" for o in ok)
            row += f" {frac:.3f} / {_hits(n95, s['n95_success'], 100)} / {marks} |"
        out.append(row)
    n = len(farm["landscapes"])
    out.append("")
    for strategy, (frac_met, n95_met) in met.items():
        out.append(
            f"- {strategy}: frac@100 target met on {frac_met} of {n}, evaluations to 0.95 <= 60 on {n95_met} of {n}."
        )
    return "\n".join(out) + "\n"


def _best_kernel_tuner(entry: dict[str, Any]) -> tuple[float, str, float | None, str]:
    """(best frac@100, its strategy, best median evaluations to 0.95 within 100 or None, its strategy)."""
    kt = {k: v for k, v in entry["strategies"].items() if k.startswith("kt:")}
    frac = max(kt.items(), key=lambda item: item[1]["frac_at"]["100"])
    n95 = min(kt.items(), key=lambda item: item[1]["n95_median"] or float("inf"))
    median = n95[1]["n95_median"]
    return frac[1]["frac_at"]["100"], frac[0][3:], median if median is not None and median <= 100 else None, n95[0][3:]


def targets_seeds(args: list[str]) -> str:
    """Issue 17's two per-landscape targets with the usual 10 seeds and with 30, on both sides:
    the farm's ``bayes`` of a budget-100 grid report (FARM.json) against the best Kernel Tuner
    strategy of KT.json (10 seeds), and ``bayes`` of pooled_seeds.py's report
    (POOLED.json) against the best Kernel Tuner strategy of KT_MORE.json (30 seeds).

    Usage: targets-seeds FARM.json KT.json POOLED.json KT_MORE.json"""
    farm, kt10, pooled, kt30 = (json.loads(Path(a).read_text()) for a in args[:4])
    more = pooled["variants"]["bayes"]["landscapes"]
    out = [
        "| landscape | best Kernel Tuner frac@100, 10 seeds / 30 seeds | best Kernel Tuner evals to 0.95, 10 / 30 "
        "| `bayes` frac@100, 10 / 30 seeds | `bayes` evals to 0.95, 10 / 30 | targets met, 10 / 30 seeds |",
        "|---|---|---|---|---|---|",
    ]
    met = [[0, 0], [0, 0]]

    def evals(n: float | None) -> str:
        return ">100" if n is None else f"{n:g}"

    for name in more:
        f10, s10, n10, _ = _best_kernel_tuner(kt10["landscapes"][name])
        f30, s30, n30, _ = _best_kernel_tuner(kt30["landscapes"][name])
        ours10 = farm["landscapes"][name]["strategies"]["bayes"]
        ours = [(ours10["frac_at"]["100"], ours10["n95_median"]), (more[name]["frac_at_100"], more[name]["n95_median"])]
        marks = []
        for i, ((frac, n95), bar) in enumerate(zip(ours, (f10, f30), strict=True)):
            ok = [frac >= max(0.97, bar) - 1e-9, n95 is not None and n95 <= 60]
            met[i] = [m + o for m, o in zip(met[i], ok, strict=True)]
            marks.append("/".join("yes" if o else "NO" for o in ok))
        out.append(
            f"| {name} | {f10:.3f} ({s10}) / {f30:.3f} ({s30}) | {evals(n10)} / {evals(n30)} "
            f"| {ours[0][0]:.3f} / {ours[1][0]:.3f} | {evals(ours[0][1])} / {evals(ours[1][1])} "
            f"| {marks[0]} / {marks[1]} |"
        )
    out.append("")
    out.append(
        f"frac@100 target met on {met[0][0]} of {len(more)} with 10 seeds, {met[1][0]} with 30; "
        f"evaluations to 0.95 <= 60 on {met[0][1]} / {met[1][1]}."
    )
    return "\n".join(out) + "\n"


def family_of(name: str) -> str:
    from kernelfarm.tuner.strategy_benchmark.families import family_of as of

    return of(name)


def pairs(args: list[str]) -> str:
    """warm_start_pairs.py's report: per target, cold / warm / unrelated prior.

    Usage: pairs REPORT.json"""
    report = json.loads(Path(args[0]).read_text())
    budget = int(report["settings"]["budget"])

    def hits(s: dict[str, Any]) -> str:
        n = s["n95_median"]
        return f"{'>' + str(budget) if n is None else f'{n:g}'} ({100 * s['n95_success']:.0f} %)"

    out = [
        "| target | prior from (other GPUs) | prior's best on target | frac@25 cold / warm / unrelated "
        "| evals to 0.95 cold | warm | unrelated | warm <= 20 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, e in report["landscapes"].items():
        sources = ", ".join(s.removeprefix(family_of(s) + "_") for s in e["sources"])
        best = e["warm"]["prior_best_fraction"]
        warm_n = e["warm"]["n95_median"]
        out.append(
            f"| {name} | {sources} | {'-' if best is None else f'{best:.3f}'} "
            f"| {' / '.join(_fraction(e[a]['frac_at']['25']) for a in ('cold', 'warm', 'unrelated'))} "
            f"| {hits(e['cold'])} | {hits(e['warm'])} | {hits(e['unrelated'])} "
            f"| {'yes' if warm_n is not None and warm_n <= 20 else 'NO'} |"
        )
    return "\n".join(out) + "\n"


def pairs_compare(args: list[str]) -> str:
    """Several warm_start_pairs.py reports side by side (the same seeds): per target, evaluations to
    0.95 cold, then warm and unrelated per report, and the unrelated prior's cost over cold summed.

    Usage: pairs-compare LABEL=REPORT.json [LABEL=REPORT.json ...]"""
    runs = [(label, json.loads(Path(path).read_text())) for label, path in (a.split("=", 1) for a in args)]
    budget = int(runs[0][1]["settings"]["budget"])

    def n95(s: dict[str, Any]) -> float:
        return float(s["n95_median"]) if s["n95_median"] is not None else float(budget + 1)

    def cell(s: dict[str, Any]) -> str:
        return f">{budget}" if s["n95_median"] is None else f"{s['n95_median']:g}"

    head = " | ".join(f"{label}: warm / unrelated" for label, _ in runs)
    out = [f"| target | cold | {head} |", "|---|---|" + "---|" * len(runs)]
    totals = {label: [0.0, 0.0, 0, 0, 0, 0] for label, _ in runs}  # costs, hurt counts, warm <= 20, unrelated = cold
    for name in runs[0][1]["landscapes"]:
        cold = runs[0][1]["landscapes"][name]["cold"]
        cells = []
        for label, report in runs:
            e = report["landscapes"][name]
            cells.append(f"{cell(e['warm'])} / {cell(e['unrelated'])}")
            t = totals[label]
            t[0] += max(0.0, n95(e["unrelated"]) - n95(cold))
            t[1] += max(0.0, n95(e["warm"]) - n95(cold))
            t[2] += n95(e["unrelated"]) > n95(cold)
            t[3] += n95(e["warm"]) > n95(cold)
            t[4] += n95(e["warm"]) <= 20
            t[5] += n95(e["unrelated"]) == n95(cold)
        out.append(f"| {name} | {cell(cold)} | " + " | ".join(cells) + " |")
    out.append(
        "| **evaluations lost to the prior, summed over targets (targets where it cost any)** | - | "
        + " | ".join(f"{t[1]:g} ({t[3]}) / {t[0]:g} ({t[2]})" for t in totals.values())
        + " |"
    )
    out.append("| **targets: warm <= 20 / unrelated = cold** | - | "
               + " | ".join(f"{t[4]} / {t[5]}" for t in totals.values()) + " |")  # fmt: skip
    return "\n".join(out) + "\n"


def warm_arms(args: list[str]) -> str:
    """Arms of several warm_start_pairs.py reports side by side (the same targets and seeds): per
    target, the median evaluations to 0.95 of each ``LABEL=REPORT.json@ARM``; last row: on how
    many targets it is <= 20.

    Usage: warm-arms LABEL=REPORT.json@ARM [LABEL=REPORT.json@ARM ...]"""
    columns = []
    for arg in args:
        label, _, rest = arg.partition("=")
        path, _, arm = rest.rpartition("@")
        columns.append((label, json.loads(Path(path).read_text()), arm))
    budget = int(columns[0][1]["settings"]["budget"])
    out = ["| target | " + " | ".join(label for label, _, _ in columns) + " |", "|---|" + "---|" * len(columns)]
    within = [0] * len(columns)
    for name in columns[0][1]["landscapes"]:
        cells = []
        for i, (_, report, arm) in enumerate(columns):
            median = report["landscapes"][name][arm]["n95_median"]
            within[i] += median is not None and median <= 20
            cells.append(f">{budget}" if median is None else f"{median:g}")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out.append("| **targets <= 20** | " + " | ".join(str(w) for w in within) + " |")
    return "\n".join(out) + "\n"


def llm(args: list[str]) -> str:
    """llm_proposers.py's report. Usage: llm REPORT.json"""
    report = json.loads(Path(args[0]).read_text())
    budget = int(report["settings"]["budget"])
    checkpoint = max(b for b in CHECKPOINTS if int(b) <= budget)
    out = [
        f"| landscape | proposer | frac@{checkpoint} | evals to 0.95 (share) | cost vs bayes in evals to 0.95 |",
        "|---|---|---|---|---|",
    ]
    for name, entry in report["landscapes"].items():
        for arm, s in entry.items():
            cost = s.get("n95_cost_vs_bayes")
            frac = s["frac_at"].get(checkpoint)
            out.append(
                f"| {name} | {'none (bayes)' if arm == 'bayes' else arm} | {_fraction(frac)} "
                f"| {_hits(s['n95_median'], s['n95_success'], budget)} "
                f"| {'-' if arm == 'bayes' else ('n/a' if cost is None else f'{100 * cost:+.0f} %')} |"
            )
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> None:
    kind, rest = argv[0], argv[1:]
    makers: dict[str, Any] = {
        "comparison": comparison,
        "latency": lambda r: latency(r[0]),
        "warm": lambda r: warm(r[0]),
        "targets": targets,
        "summary": summary,
        "issue17": issue17,
        "targets-against": targets_against,
        "targets-seeds": targets_seeds,
        "warm-arms": warm_arms,
        "pairs": pairs,
        "pairs-compare": pairs_compare,
        "llm": llm,
    }
    sys.stdout.write(makers[kind](rest))


if __name__ == "__main__":
    main(sys.argv[1:])

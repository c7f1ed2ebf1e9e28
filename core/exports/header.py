"""``header``: a C/C++ header with one ``#if``/``#elif`` block per GPU model and a default block.

Compile with ``-DKERNELFARM_TARGET_<GPU MODEL>`` (e.g. ``-DKERNELFARM_TARGET_NVIDIA_H100_80GB_HBM3``)
to get that GPU model's configs; without one the default block applies (the config that is best on
most of the recorded GPU models and problems). Every block defines the same macros, so code
compiles for any target:

- ``<KERNEL>_<PARAM>``: the config for the kernel's default problem (or the first recorded one);
- ``<KERNEL>_<PROBLEM TAG>_<PARAM>`` for each recorded problem, only when the kernel was measured on
  more than one problem (the problem differs). A GPU model without a measurement of that problem
  repeats its own unsuffixed value.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from kernelfarm.core.exports.model import BestEntry, BestExport

TARGET_PREFIX = "KERNELFARM_TARGET_"


def macro_name(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9]+", "_", part).strip("_").upper() for part in parts if part)


def problem_tag(problem_key: str) -> str:
    """``M=4096,N=4096`` → ``M4096_N4096``."""
    return macro_name(*(item.replace("=", "") for item in problem_key.split(",")))


def target_macro(gpu_model: str) -> str:
    return TARGET_PREFIX + macro_name(gpu_model)


def c_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write(export: BestExport) -> str:
    kernel = macro_name(export.kernel)
    guard = f"KERNELFARM_{kernel}_CONFIG_H"
    problems = list(dict.fromkeys(e.problem_key for e in export.entries))
    by_model: dict[str, dict[str, BestEntry]] = {}
    for entry in export.entries:
        by_model.setdefault(entry.gpu_model, {})[entry.problem_key] = entry
    default_key = _default_problem_key(export, problems)
    lines = [
        f"/* Best configs of {export.kernel} (version {export.kernel_version}, source {export.source_hash[:12]}),",
        f" * exported by kernelfarm on {export.generated_at.isoformat()}. Select a GPU model with",
        f" * -D{TARGET_PREFIX}<MODEL>; without one the default block applies. Generated: do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
    ]
    for index, (model, entries) in enumerate(sorted(by_model.items())):
        lines.append(f"{'#if' if index == 0 else '#elif'} defined({target_macro(model)})")
        own_default = (entries.get(default_key) if default_key else None) or next(iter(entries.values()))
        lines += _block(export, kernel, problems, own_default, entries)
    lines.append("#else" if by_model else "#if 1")
    common = _most_common_config(export)
    lines.append("/* default: the config that is best on most recorded GPU models and problems */")
    lines += [f"#define {macro_name(kernel, p)} {c_literal(v)}" for p, v in _ordered(export, common)]
    if len(problems) > 1:
        for key in problems:
            lines += [
                f"#define {macro_name(kernel, problem_tag(key), p)} {c_literal(v)}" for p, v in _ordered(export, common)
            ]
    lines += ["#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _block(
    export: BestExport, kernel: str, problems: list[str], own_default: BestEntry, entries: dict[str, BestEntry]
) -> list[str]:
    lines = [
        f"/* {own_default.gpu_name or own_default.gpu_model}: "
        f"{own_default.time_ms:.6g} ms for {own_default.problem_key} */"
    ]
    lines += [f"#define {macro_name(kernel, p)} {c_literal(v)}" for p, v in _ordered(export, own_default.config)]
    if len(problems) > 1:
        for key in problems:
            entry = entries.get(key, own_default)
            note = f"{entry.time_ms:.6g} ms" if key in entries else "not measured: this GPU model's default"
            lines.append(f"/* {key}: {note} */")
            lines += [
                f"#define {macro_name(kernel, problem_tag(key), p)} {c_literal(v)}"
                for p, v in _ordered(export, entry.config)
            ]
    return lines


def _ordered(export: BestExport, config: dict[str, Any]) -> list[tuple[str, Any]]:
    order = export.parameters or list(config)
    return [(name, config[name]) for name in order if name in config]


def _default_problem_key(export: BestExport, problems: list[str]) -> str | None:
    # The farm's key (it leaves out dimensions at their key default); built here only for older
    # exports that do not carry it.
    wanted = export.default_problem_key or ",".join(
        f"{name}={export.default_problem[name]}" for name in export.problem_params if name in export.default_problem
    )
    return wanted if wanted in problems else (problems[0] if problems else None)


def _most_common_config(export: BestExport) -> dict[str, Any]:
    if not export.entries:
        return {}
    counts = Counter(e.config_key for e in export.entries)
    winner = max(counts, key=lambda k: (counts[k], -[e.config_key for e in export.entries].index(k)))
    return next(e.config for e in export.entries if e.config_key == winner)

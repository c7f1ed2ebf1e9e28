"""`kernelfarm bench-strategies` on what an outside probe gave it: a --json destination that cannot take
the report (a folder, a path through a file, a full disk) was a traceback after the benchmark had run,
its report lost; an --option value of more digits than Python converts, or nested thousands deep, was a
traceback (ValueError, RecursionError) from the options parser. Now a destination known bad is a usage
error before anything runs, a write that fails is one line and exit 1 (the report is written
atomically: no half file), and an unreadable value a usage error naming the option.

Each runs the installed CLI (tests/cli/test_bad_arguments.py) on a small recorded landscape."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli.test_bad_arguments import kernelfarm, words

LANDSCAPE = Path(__file__).resolve().parents[2] / "kernels" / "recorded" / "pnpoly_RTX_3090.json.gz"
QUICK = ["--budget", "5", "--repeats", "1"]


def bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = kernelfarm(tmp_path, "bench-strategies", str(LANDSCAPE), *args, env={"COLUMNS": "200"})
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done


def test_a_destination_known_bad_is_refused_before_the_benchmark_runs(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("mine")
    for destination, says in (
        (tmp_path / "folder", f"Invalid value for --json: {tmp_path / 'folder'} is a folder"),
        (tmp_path / "file" / "x.json", f"cannot write {tmp_path / 'file' / 'x.json'}: {tmp_path / 'file'} is a file"),
        (tmp_path / "file" / "deeper" / "x.json", f"{tmp_path / 'file'} is a file, not a folder"),
    ):
        done = bench(tmp_path, "-s", "random", *QUICK, "--json", str(destination))
        assert done.returncode == 2 and says in words(done.stderr), done.stderr
        assert "random" not in done.stdout  # refused before: no table was printed
    assert (tmp_path / "file").read_text() == "mine"


def test_a_write_that_fails_is_one_line_after_the_tables(tmp_path: Path) -> None:
    done = bench(tmp_path, "-s", "random", *QUICK, "--json", "/dev/full")
    assert done.returncode == 1 and done.stderr == "error: cannot write /dev/full: No space left on device\n"
    assert "random" in done.stdout  # the tables were printed before


def test_the_report_is_written_atomically_into_folders_it_makes(tmp_path: Path) -> None:
    report = tmp_path / "new" / "folder" / "report.json"
    done = bench(tmp_path, "-s", "random", *QUICK, "--json", str(report))
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["settings"]["budget"] == 5
    assert [p.name for p in report.parent.iterdir()] == ["report.json"]  # no temporary file left


def test_an_option_value_no_strategy_can_take_is_a_usage_error(tmp_path: Path) -> None:
    for value, says in (
        ("1" * 5000, "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("[" * 5000, "nested too deeply"),
    ):
        done = bench(tmp_path, "-s", "bayes", *QUICK, "-o", f"bayes.n_init={value}")
        said = words(done.stderr)
        assert done.returncode == 2 and "Invalid value for --option: 'bayes.n_init=" in said, done.stderr
        assert says in said and len(done.stderr) < 2000, done.stderr  # the value is quoted, not whole


def test_a_bare_word_and_json_values_are_still_read(tmp_path: Path) -> None:
    done = bench(tmp_path, "-s", "bayes", *QUICK, "-o", "bayes.n_init=2", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["settings"]["options"] == {"bayes": {"n_init": 2}}

"""The two passes' attribution: timed events onto the recorded inference's operators, by order and by name;
and, on the CPU, the real torch.profiler: the timed pass's rows are the recorded pass's operators."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.model_profiler.attribution import BY_NAME, BY_ORDER, RecordedEvent, TimedEvent, attribute

MM = ("aten::mm", "[[64, 64], [64, 1024]]")
ADDMM = ("aten::addmm", "[[256], [64, 64], [64, 256]]")
GELU = ("aten::gelu", "[[2, 32, 256]]")
# One inference: the LM head's GEMM and the MLP's GEMM launch the same kernel name; GELU its own.
RECORDED = [
    RecordedEvent("gemm_kernel", 3.0, ADDMM),
    RecordedEvent("elementwise", 1.0, GELU),
    RecordedEvent("gemm_kernel", 9.0, MM),
]


def timed_inference(scale: float, start: float) -> list[TimedEvent]:
    """One inference's three events on the device's clock: 2, 1 and 6 µs (x scale), with 1 µs gaps."""
    events, t = [], start
    for name, us in (("gemm_kernel", 2.0 * scale), ("elementwise", 1.0 * scale), ("gemm_kernel", 6.0 * scale)):
        events.append(TimedEvent(name, us, t, t + us))
        t += us + 1.0
    return events


def test_by_order_gives_each_operator_its_own_kernels_times() -> None:
    # two sessions of one warm-up (10x slower: must be dropped) and two timed inferences
    sessions = [
        timed_inference(10, 0) + timed_inference(1, 100) + timed_inference(1, 200),
        timed_inference(10, 1000) + timed_inference(1, 1100) + timed_inference(1, 1200),
    ]
    result = attribute(sessions, inferences=2, skip=1, recorded=RECORDED)
    assert result.method == BY_ORDER
    # the same kernel name, told apart by its place in the sequence: 2 µs to the MLP, 6 µs to the LM head
    assert result.per_owner_us == {ADDMM: pytest.approx(2.0), GELU: pytest.approx(1.0), MM: pytest.approx(6.0)}
    assert result.busy_us == pytest.approx(9.0)
    assert result.calls_per_event == {"gemm_kernel": 2, "elementwise": 1}
    assert result.spans_us == [pytest.approx(11.0)] * 4  # 9 µs busy + two 1 µs gaps, per timed inference
    shares = [us / result.busy_us for us in result.per_owner_us.values()]
    assert math.isclose(sum(shares), 1.0)


def test_a_sequence_that_differs_falls_back_to_names_split_by_the_recorded_times() -> None:
    other = [TimedEvent("gemm_kernel", 8.0), TimedEvent("elementwise", 1.0), TimedEvent("extra_kernel", 3.0)]
    result = attribute([other], inferences=1, skip=0, recorded=RECORDED)
    assert result.method == BY_NAME
    # gemm_kernel's 8 µs split 3:9 between the MLP and the LM head, as in the recorded inference
    assert result.per_owner_us[ADDMM] == pytest.approx(2.0)
    assert result.per_owner_us[MM] == pytest.approx(6.0)
    assert result.per_owner_us[GELU] == pytest.approx(1.0)
    # a kernel the recorded inference never launched is a row of its own, not lost from the total
    assert result.per_owner_us[("extra_kernel", "[]")] == pytest.approx(3.0)
    assert sum(result.per_owner_us.values()) == pytest.approx(result.busy_us) == pytest.approx(12.0)


def test_a_renamed_kernel_in_one_session_is_not_taken_by_order() -> None:
    swapped = timed_inference(1, 0)
    swapped[1] = TimedEvent("other_elementwise", 1.0)
    result = attribute([timed_inference(1, 0), swapped], inferences=1, skip=0, recorded=RECORDED)
    assert result.method == BY_NAME


def test_nothing_to_attribute_is_an_error() -> None:
    with pytest.raises(ValueError):
        attribute([], inferences=1, skip=0, recorded=RECORDED)


class FakeKinetoEvent:
    """The few methods of torch's _KinetoEvent the GPU extraction reads (no GPU on the CPU runners)."""

    def __init__(self, name: str, device: str, start: int, end: int, corr: int, linked: int = 0,
                 shapes: list[list[int]] | None = None) -> None:  # fmt: skip
        self._name, self._device, self._start, self._end = name, device, start, end
        self._corr, self._linked, self._shapes = corr, linked, shapes or []

    def name(self) -> str:
        return self._name

    def device_type(self) -> str:
        return f"DeviceType.{self._device}"

    def start_ns(self) -> int:
        return self._start

    def end_ns(self) -> int:
        return self._end

    def correlation_id(self) -> int:
        return self._corr

    def linked_correlation_id(self) -> int:
        return self._linked

    def shapes(self) -> list[list[int]]:
        return self._shapes


class FakeProfile:
    def __init__(self, events: list[FakeKinetoEvent]) -> None:
        results = type("Results", (), {"events": lambda _self: events})()
        self.profiler = type("Profiler", (), {"kineto_results": results})()


def test_gpu_extraction_links_each_kernel_to_the_innermost_operator_that_launched_it() -> None:
    from kernelfarm.model_profiler.capture import _recorded_kernels, _timed_kernels

    events = [
        # aten::linear (corr 1) wraps aten::addmm (corr 2), whose runtime call (linked 2) launched a kernel
        FakeKinetoEvent("aten::linear", "CPU", 0, 50_000, 1, shapes=[[4, 8], [16, 8], [16]]),
        FakeKinetoEvent("aten::addmm", "CPU", 1_000, 40_000, 2, shapes=[[16], [4, 8], [8, 16]]),
        FakeKinetoEvent("cudaLaunchKernel", "CPU", 2_000, 3_000, 900, linked=2),
        FakeKinetoEvent("gemm_kernel", "CUDA", 60_000, 62_000, 900, linked=2),
        # a compiled graph's range launches a fused kernel itself
        FakeKinetoEvent("## Call CompiledFxGraph abc ##", "CPU", 70_000, 80_000, 3),
        FakeKinetoEvent("triton_poi_fused_0", "CUDA", 90_000, 91_000, 901, linked=3),
        # listed out of order: the extraction sorts by the device's start time
        FakeKinetoEvent("Memset (Device)", "CUDA", 59_000, 59_500, 902, linked=2),
    ]
    recorded, ops = _recorded_kernels(FakeProfile(events))
    addmm = ("aten::addmm", "[[16], [4, 8], [8, 16]]")
    assert [(e.name, e.owner) for e in recorded] == [
        ("Memset (Device)", addmm),
        ("gemm_kernel", addmm),
        ("triton_poi_fused_0", ("## Call CompiledFxGraph abc ##", "[]")),
    ]
    assert recorded[1].us == pytest.approx(2.0)
    assert ops[addmm].calls == 1 and ops[addmm].shapes == [[16], [4, 8], [8, 16]]
    assert ops[("aten::linear", "[[4, 8], [16, 8], [16]]")].calls == 1  # counted, though it owns no kernel
    timed = _timed_kernels(FakeProfile(events))
    assert [e.name for e in timed] == ["Memset (Device)", "gemm_kernel", "triton_poi_fused_0"]
    assert timed[1].start_us == pytest.approx(60.0) and timed[1].end_us == pytest.approx(62.0)


def test_real_profiler_on_the_cpu_rows_are_the_recorded_operators_with_the_timed_pass_times(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the real profiler's CPU test needs the `profile` extra (torch)")
    import torch

    from kernelfarm.model_profiler.analysis import analyse
    from kernelfarm.model_profiler.capture import ROUNDS, capture, paired_overhead
    from kernelfarm.model_profiler.models import ModelUnderTest
    from kernelfarm.worker.measuring.roofline import Ceilings

    class TwoLayers(torch.nn.Module):
        """Two Linear layers of different widths around a ReLU: the shapes tell the GEMMs' rows apart."""

        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = torch.nn.Linear(32, 96), torch.nn.Linear(96, 16)

        def forward(self, x: Any) -> Any:
            return self.down(torch.relu(self.up(x)))

    torch.manual_seed(0)
    mut = ModelUnderTest("two-layers", TwoLayers().eval(), {"x": torch.randn(64, 32)}, "float32", "cpu")
    cap = capture(mut, warmup=1, iterations=3, trace_path=tmp_path / "trace.json")
    assert cap.timing is not None and cap.timing.attribution == BY_ORDER
    assert cap.timing.timed_pass == "operators without shapes" and cap.timing.rounds == ROUNDS
    assert len(cap.timing.profiled_runs_ms) == 3 * ROUNDS and len(cap.latency_runs_ms) == 3 * (ROUNDS + 1)
    addmm = {tuple(map(tuple, row.input_shapes)): row for row in cap.rows if row.name == "aten::addmm"}
    # each Linear's GEMM is its own row with its own shapes and one call per inference
    assert set(addmm) == {((96,), (64, 32), (32, 96), (), ()), ((16,), (64, 96), (96, 16), (), ())}
    assert all(row.calls == 1 and row.self_us > 0 for row in addmm.values())
    assert [row for row in cap.rows if row.name == "aten::relu"], cap.rows
    ceilings = Ceilings(dram_bytes_per_s=20e9, fp32_flops=100e9, tensor_flops=100e9, how="given by the test")
    report = analyse(cap, ceilings, model="two-layers", dtype="float32", batch=64, seq=1)
    assert math.isclose(sum(op.share for op in report.operators), 1.0, rel_tol=1e-9)
    # the overhead figure: each timed session against the unprofiled blocks around it (paired_overhead)
    assert report.timing is not None and report.latency_ms > 0 and report.profiled_ms > 0
    paired = paired_overhead(cap.latency_runs_ms, cap.timing.profiled_runs_ms, 3)
    assert paired is not None and report.profiling_overhead == pytest.approx(paired)
    assert report.timing["profiled_overhead"] == report.profiling_overhead
    assert report.timing["pooled_overhead"] == pytest.approx(report.profiled_ms / report.latency_ms - 1)
    assert report.accounted_ms == pytest.approx(cap.total_self_us / 1e3)


def test_the_overhead_pairs_each_session_with_the_blocks_around_it() -> None:
    from kernelfarm.model_profiler.capture import paired_overhead

    def blocks(*medians: float) -> list[float]:  # blocks of 2 inferences
        return [m for m in medians for _ in range(2)]

    # Every session costs 5 % over its neighbours; the host slows from 10 to 15 ms per inference during the
    # fourth session and stays slow. The pooled medians (unprofiled 10 ms, profiled 13.1 ms) say +31 %.
    unprofiled = blocks(10, 10, 10, 10, 15, 15, 15)
    profiled = blocks(10.5, 10.5, 10.5, 15.75, 15.75, 15.75)
    assert paired_overhead(unprofiled, profiled, 2) == pytest.approx(0.05)
    assert paired_overhead(blocks(10, 10, 10), blocks(10.5, 10.5), 2) == pytest.approx(0.05)
    assert paired_overhead([10.0] * 3, [10.5] * 2, 2) is None  # not U P U blocks of 2

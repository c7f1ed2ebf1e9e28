"""The longest problem key and config key a kernel can make are bounded by the columns that store them
(core/key_lengths.py): an upload is refused when a key of it could be longer, and the bound is the real
longest key, so an upload whose longest key just fits is accepted. tests/api/test_key_lengths.py stores
such keys in PostgreSQL, and sends jobs of versions stored before the check."""

from __future__ import annotations

import pytest

from kernelfarm.core.key_lengths import CONFIG_KEY_BYTES, CONFIG_KEY_LENGTH, PROBLEM_KEY_LENGTH
from kernelfarm.core.space import Parameter, SearchSpace
from kernelfarm.kernels.manifest.build import build_spec
from kernelfarm.kernels.manifest.bundle import InvalidManifest, check_bundle
from kernelfarm.kernels.registry import all_kernels
from kernelfarm.kernels.spec import ProblemParam, longest_problem_key
from tests.kernels.manifests import (
    longest_config,
    longest_problem,
    user_manifest,
    user_uploads,
    with_config_key_of,
    with_problem_key_of,
)


def test_a_problem_key_that_just_fits_is_accepted_and_one_character_more_is_not() -> None:
    fits = with_problem_key_of(user_manifest(), PROBLEM_KEY_LENGTH)
    spec = build_spec(check_bundle(fits, user_uploads()), 1)
    problem = spec.normalize_problem(longest_problem(fits))
    assert len(spec.problem_key(problem)) == PROBLEM_KEY_LENGTH == longest_problem_key(spec.problem_params)
    with pytest.raises(InvalidManifest) as refused:
        check_bundle(with_problem_key_of(user_manifest(), PROBLEM_KEY_LENGTH + 1), user_uploads())
    assert str(refused.value).startswith(f"manifest.problem: a problem's key (name=value of each problem parameter, "
                                         f"comma-joined) can be {PROBLEM_KEY_LENGTH + 1} characters long")  # fmt: skip


def test_a_config_key_that_just_fits_is_accepted_and_one_character_more_is_not() -> None:
    fits = with_config_key_of(user_manifest(), CONFIG_KEY_LENGTH)
    spec = build_spec(check_bundle(fits, user_uploads()), 1)
    assert len(spec.space.key(longest_config(fits))) == CONFIG_KEY_LENGTH == spec.space.longest_key_length
    with pytest.raises(InvalidManifest) as refused:
        check_bundle(with_config_key_of(user_manifest(), CONFIG_KEY_LENGTH + 1), user_uploads())
    message = str(refused.value)
    assert message.startswith(f"manifest.tune_params: a config's key (its values, comma-joined) can be "
                              f"{CONFIG_KEY_LENGTH + 1} characters long"), message  # fmt: skip
    assert "'variant'" in message, message


def test_a_config_key_is_bounded_in_bytes_too() -> None:
    """Three bytes of UTF-8 a character: 900 of them fit the column's 1024 characters, not the index."""
    refused = with_config_key_of(user_manifest(), 900, letter="\u4e2d")
    with pytest.raises(InvalidManifest, match=f"bytes of UTF-8, more than the {CONFIG_KEY_BYTES}"):
        check_bundle(refused, user_uploads())
    fits = with_config_key_of(user_manifest(), 800, letter="\u4e2d")
    assert check_bundle(fits, user_uploads()).name == "user-axpb"


@pytest.mark.parametrize(
    ("param", "longest"),
    [
        (ProblemParam("n", minimum=-100000, maximum=5), 7),  # "-100000" is longer than "5"
        (ProblemParam("n", minimum=1, maximum=1 << 20), 7),
        (ProblemParam("n", choices=(3, 5, 1024)), 4),
        (ProblemParam("dtype", kind="str", choices=("f16", "bf16")), 4),
        (ProblemParam("layout", kind="str"), 64),  # any string problem value: PROBLEM_TEXT's 64 at most
    ],
)
def test_the_longest_value_of_a_problem_parameter(param: ProblemParam, longest: int) -> None:
    assert param.longest_text == longest


def test_the_longest_config_key_counts_values_and_commas_not_names() -> None:
    space = SearchSpace((Parameter("block_size_x", (16, 256)), Parameter("variant", ("a", "bcd")),
                         Parameter("t", (0.5, 1.25))))  # fmt: skip
    assert space.key({"block_size_x": 256, "variant": "bcd", "t": 1.25}) == "256,bcd,1.25"
    assert space.longest_key_length == len("256,bcd,1.25")


@pytest.mark.parametrize("name", sorted(all_kernels()))
def test_every_catalogue_kernels_keys_fit(name: str) -> None:
    assert all_kernels()[name].key_length_refusal() is None

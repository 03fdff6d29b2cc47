"""Attacks on the judge's checks: caches, poisoned reference inputs, a widened tolerance, forged
digests, sabotaged inputs, the wrong output structure, lazy or lying tensors, lower precision.
Each passes when the judge does not report `correct` (or, for caches and lazy outputs that the
judge may simply never let be wrong, reports no gain in speed)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("variant", ["data_ptr", "id"])
def test_a_cache_keyed_on_input_addresses_is_caught(adv, variant):
    doc = adv.judge("allgather", "pointer_cache", variant=variant, **adv.TIMED)
    adv.assert_not_faster(doc)


def test_a_cache_keyed_on_a_few_input_values_is_caught(adv):
    doc = adv.judge("allgather", "content_cache", **adv.TIMED)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("variant", ["gc_zero", "clone_alias"])
def test_zeroing_the_references_inputs_is_caught(adv, variant):
    doc = adv.judge("allgather", "poison_reference_inputs", variant=variant)
    adv.assert_not_correct(doc)


@pytest.mark.parametrize(
    "variant", ["problem_spec", "tolerance_class", "compare_tensor", "compare_outputs", "allclose", "tensor_any", "isfinite"]
)
def test_a_widened_tolerance_does_not_admit_wrong_results(adv, variant):
    doc = adv.judge("allreduce", "widen_tolerance", variant=variant)
    adv.assert_not_correct(doc)


def test_output_digests_are_the_judges_own(adv):
    base = adv.honest("allreduce")["shapes"][0]["digests"]
    doc = adv.judge("allreduce", "fake_digest")
    if doc["status"] == "correct":
        digests = doc["shapes"][0]["digests"]
        assert digests["solution"] == base["reference"], f"forged solution digests {digests['solution']}"
        assert digests["reference"] == base["reference"], f"forged reference digests {digests['reference']}"


@pytest.mark.parametrize("variant", ["input_context", "torch_randn", "manual_seed"])
def test_sabotaged_input_generation_is_caught(adv, variant):
    doc = adv.judge("allreduce", "sabotage_inputs", variant=variant)
    adv.assert_not_correct(doc)


@pytest.mark.parametrize(
    ("problem", "variant"),
    [
        ("zero1_optimizer_shard", "shorter"),
        ("zero1_optimizer_shard", "longer"),
        ("zero1_optimizer_shard", "list_for_tuple"),
        ("grad_acc_loss", "shorter_scalars"),
        ("allreduce", "sequence_for_tensor"),
    ],
)
def test_the_wrong_output_structure_is_caught(adv, problem, variant):
    doc = adv.judge(problem, "wrong_structure", variant=variant)
    adv.assert_not_correct(doc)


@pytest.mark.parametrize("variant", ["subclass", "lazy_mode"])
def test_lazy_or_lying_outputs_are_caught(adv, variant):
    doc = adv.judge("allgather", "lying_tensor", variant=variant, **adv.TIMED)
    adv.assert_not_faster(doc)


# allreduce's tolerance follows the honest error of bf16 sums, measured per world size
# (bench/tolerance_margins.py): at W=2 every summation order gives the same bits, and int8 codes
# with one shared scale (0.025 rms beyond rtol) or fp8 values (0.15 rms) are far outside it. At W=4
# fp8 e4m3 still errs by twice the allowance; int8 (0.04 rms) is within the margin kept over honest
# bf16 orders there and is admitted, as docs/evaluator.md says.
@pytest.mark.parametrize(
    ("variant", "world_size"),
    [("int8", 2), ("fp8_e4m3", 2), ("fp8_e5m2", 2), ("fp8_e4m3", 4)],
)
def test_a_lower_precision_allreduce_is_incorrect(adv, variant, world_size):
    doc = adv.judge("allreduce", "quantized_allreduce", variant=variant, world_size=world_size)
    adv.assert_not_correct(doc)
    assert doc["status"] == "incorrect" and "mismatch" in doc["reason"], adv.summary(doc)

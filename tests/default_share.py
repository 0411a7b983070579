"""The default suite's share of the long sweeps: README's test command keeps a fixed share of
each sweep below and the rest of its cases are marked slow, so CI's slow step (`-m slow`)
runs them; the default and slow runs together hold every case, under the same test ids.

A sweep's share is every Nth case in collection order, plus the first case of any value of
a `cover` argument that those would leave out (each dtype, mode or op keeps a case). It is
the same on every run: nothing is drawn at random. The sweeps are the ones that made the
default suite long on a busy 2-core machine (each case compiles kernels: seconds each)."""
from __future__ import annotations

import collections

import pytest

# "file::test function" -> (every Nth case stays in the default run, argument names each
# of whose values keeps at least one case there).
SHARES = {
    # Compiled kernels against eager, op by op (the overload-name checks compile nothing: whole).
    "tests/test_ops_correctness.py::test_opinfo_sample": (10, ()),
    "tests/test_ops_correctness.py::test_op": (10, ()),
    "tests/test_ops_correctness.py::test_inplace": (3, ()),
    "tests/test_ops_correctness.py::test_out": (3, ()),
    "tests/test_promotion.py::test_result_matches_eager_miss_and_hits": (10, ("mode",)),
    "tests/test_conformance_fixes.py::test_floor_divide_one_value": (8, ("divisor", "mode")),
    "tests/test_conformance_fixes.py::test_floor_divide_tensor": (5, ("name", "dtype", "mode")),
    "tests/test_conformance_fixes.py::test_nextafter": (6, ("mode",)),
    "tests/test_conformance_fixes.py::test_logit_with_eps": (6, ("mode",)),
    "tests/test_conformance_fixes.py::test_i0_is_eagers_at_infinities": (6, ("mode",)),
    "tests/test_inplace_out_forms.py::test_inplace_forms_are_compiled_kernels": (8, ("mode",)),
    "tests/test_inplace_out_forms.py::test_resized_outs_are_written_by_the_kernel": (8, ("mode",)),
    "tests/test_inplace_out_forms.py::test_bad_calls_raise_eagers_errors": (8, ("mode",)),
    # (every 5th: none of the four recurrences, whose OpInfo samples take 10 s of CPU each;
    # their degrees and loop bounds are the default run's other sweeps)
    "tests/test_special_decompositions.py::test_matches_eager_on_opinfo_samples": (5, ()),
    "tests/test_special_decompositions.py::test_polynomial_degrees_and_edges": (8, ("dtype",)),
    "tests/test_special_decompositions.py::test_recurrence_polynomials_every_degree": (6, ("dtype",)),
    "tests/test_special_decompositions.py::test_unary_edge_values": (6, ("dtype",)),
    "tests/test_decompositions.py::test_max_pool2d_through_eagercs_decomposition_is_atens": (6, ()),
    "tests/test_decompositions.py::test_upsample_compiles_through_its_decomposition": (3, ("align_corners",)),
    "tests/test_decompositions.py::test_cpu_softmax_through_eagercs_decomposition_matches_eager": (4, ()),
    "tests/test_decompositions.py::test_calls_inductor_computes_wrongly_run_eagers_kernel": (2, ()),
    "tests/test_device_generators.py::test_device_generator_gives_cpu_eagers_numbers": (8, ()),
    "tests/test_device_extern_shims.py::test_flash_attention_runs_on_device_tensors": (8, ("dtype",)),
    "tests/test_unboxed_mm.py::test_mm_typed_key_is_the_boxed_key": (4, ("device",)),
    "tests/test_unboxed_mm.py::test_addmm_typed_key_is_the_boxed_key": (4, ("device",)),
    "tests/test_argument_kinds.py::test_argument_kind_compiles_and_matches": (6, ()),
    "tests/test_accelerator_decompositions.py::test_decomposition_matches_eager_on_opinfo_samples": (6, ()),
    "tests/test_reliability.py::test_bad_input_raises_what_eager_raises": (6, ("mode",)),
    "tests/test_reliability.py::test_overlapping_writes_eager_accepts_give_eager_results": (2, ("mode",)),
    "tests/test_device_semantics.py::test_random_ops_are_reproducible": (6, ("seed_fn",)),
    "tests/test_device_semantics.py::test_ops_no_kernel_can_serve_run_on_aliases": (6, ()),
    "tests/test_device_ops.py::test_op_family_matches_cpu": (3, ()),
    "tests/test_wrapped_numbers.py::test_override_mode_compiles_scalar_overloads": (3, ()),
    "tests/test_device_runtime.py::test_same_dtype_copies_broadcast_and_check_overlap_as_cpu": (2, ()),
    "tests/test_unboxed_convolution.py::test_typed_key_is_the_boxed_key": (2, ()),
    "tests/test_capture_numpy.py::test_numpy_on_tensor_data_is_one_graph": (3, ("backend",)),
    "tests/test_device_autocast.py::test_autocast_casts_as_cuda_does": (2, ()),
    "tests/test_torch_compile_device.py::test_compiled_function_on_eagerc_matches_cpu": (2, ()),
    # The same check in a fresh process per case: one first use, one command.
    "tests/test_import_side_effects.py::test_the_device_is_available_from_its_first_use": (3, ()),
    "tests/test_first_hour.py::test_help_has_no_rst_markup": (2, ()),
    # Capture's training graphs through Inductor (backend None, 10-24 s a case on a busy
    # 2-core machine): the eager backend's case stays; tests/test_capture_training.py's
    # and tests/test_capture_second_order.py's other tests keep Inductor's.
    "tests/test_capture_training.py::test_max_pool_training": (2, ()),
    "tests/test_capture_training.py::test_batchnorm_train_mode_updates_running_stats": (2, ()),
    "tests/test_capture_second_order.py::test_gradient_penalty_through_a_captured_mlp": (2, ()),
    # The fused RNN cells: a kernel cache per compile mode is shared by the file's tests;
    # each sweep keeps both modes and both cells.
    "tests/test_device_rnn_cells.py::test_cell_forward_and_backward": (3, ("compile_mode", "cls")),
    "tests/test_device_rnn_cells.py::test_lstm_cell_other_dtypes": (2, ()),
    "tests/test_device_rnn_cells.py::test_recurrent_layers": (3, ("cls",)),
    # One case per mode or model in the default run, the others in the slow step (each
    # case 40-60 s there: a subprocess, or a model's compiles).
    "tests/test_kernel_traps.py::test_integer_division_by_zero_survives": (2, ()),
    "tests/test_device_side_errors.py::test_bad_index_into_compiled_kernel_raises_eagers_error": (2, ()),
    "tests/test_device_conv_training.py::test_training_is_right_while_kernels_compile_in_the_background": (2, ()),
    "tests/test_device_conv_training.py::test_training_is_right_when_every_compile_fails": (3, ()),
    "tests/test_capture_dynamic.py::test_transformer_sequence_lengths_one_record": (4, ()),
    "tests/test_kernel_behaviour.py::test_a_miss_updates_batch_norm_running_stats_once": (2, ()),
    "tests/test_wrapper_allocations.py::test_directly_allocated_outputs_are_eagers": (2, ()),
}


def mark_the_rest_slow(items) -> None:
    """Adds the slow mark to each collected case of a sweep in SHARES outside its share."""
    sweeps = collections.defaultdict(list)
    modules = {}
    for item in items:
        if not hasattr(item, "callspec"):  # only parametrized functions are sweeps
            continue
        path = item.nodeid.split("::", 1)[0]
        modules[path] = item.module
        key = f"{path}::{item.originalname}"
        if key in SHARES and item.get_closest_marker("slow") is None:
            sweeps[key].append(item)
    for key in SHARES:  # a renamed sweep would silently run whole again: say so instead
        path, name = key.split("::")
        if path in modules and not hasattr(modules[path], name):
            raise pytest.UsageError(f"tests/default_share.py names {key}, which {path} does not define")
    for key, cases in sweeps.items():
        every, cover = SHARES[key]
        kept = set(range(0, len(cases), every))
        covered = {_value(cases[i], arg) for i in kept for arg in cover}
        for i, item in enumerate(cases):
            values = {_value(item, arg) for arg in cover}
            if not values <= covered:
                kept.add(i)
                covered |= values
        for i, item in enumerate(cases):
            if i not in kept:
                item.add_marker(pytest.mark.slow)


def _value(item, arg):
    """(argument, its value in this case), hashable (a list argument by its repr)."""
    value = item.callspec.params[arg]
    try:
        hash(value)
    except TypeError:
        value = repr(value)
    return arg, value

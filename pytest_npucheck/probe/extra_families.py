"""The extra probe families (ids ``x.*``), in build order, and :func:`build_extra_probes`.

Each topic module (``models_op_context``, ``models_layout``, ``models_pool_transposes``,
``models_rnn_layout``, ``models_sdpa_mask``, ``models_rmsnorm_masks``, ``models_attention_limits``,
``models_norm_limits``, ``models_rejections``, ``models_space_to_depth``, ``models_einsum_equations``,
``models_tile_broadcast``, ``models_kv_repeat_paths``, ``models_int_layout``, ``models_gathernd_reshape``,
``models_int_arith``, ``models_norm_bias``, ``models_pattern_branches``, ``models_reshape_planes``,
``models_pow_exponents``, ``models_noop_slices``, ``models_attention_rewrites``, ``models_constant_defaults``,
``models_pad_axes``, ``models_and_const``, ``models_mask_broadcast``, ``models_gemm_scales``, ``models_vision_heads``, ``models_dual_heads``, ``models_rel_pos_tile``,
``models_reshape_heads``)
lists its
families in ``FAMILIES``; the order here is
the order the probes are built in, which fixes the random constants each one draws (:mod:`.builder`).
A new family goes at the end of its topic module's list, a new topic module at the end of this one.

Results: ``probes/rknn/<version>/<soc>.extra.results.json`` (``npucheck probe rknn --extra``).
"""

from __future__ import annotations

from typing import Callable, Iterable

from pytest_npucheck.probe import (
    models_and_const,
    models_attention_limits,
    models_attention_rewrites,
    models_constant_defaults,
    models_einsum_equations,
    models_gemm_scales,
    models_int_arith,
    models_int_layout,
    models_gathernd_reshape,
    models_kv_repeat_paths,
    models_layout,
    models_mask_broadcast,
    models_norm_bias,
    models_noop_slices,
    models_norm_limits,
    models_op_context,
    models_pad_axes,
    models_pattern_branches,
    models_pool_transposes,
    models_pow_exponents,
    models_rank5_broadcast,
    models_rejections,
    models_reshape_heads,
    models_reshape_planes,
    models_rmsnorm_masks,
    models_rnn_layout,
    models_sdpa_head_broadcast,
    models_sdpa_mask,
    models_seq_map_reshape,
    models_space_to_depth,
    models_tile_broadcast,
    models_vision_heads,
    models_dual_heads,
    models_rel_pos_tile,
    models_window_partition,
    models_heads_split,
    models_int_layout_readers,
    models_batch_fold_reshape,
    models_rank6_merge,
    models_einsum_relpos5,
    models_block_mask,
    models_mul_gemm,
    models_squeeze_nd,
    models_scatter_updates,
    models_gather_ids,
    models_token_unroll,
    models_slice_pairs,
    models_kv_repeat_inputs,
    models_split_concat,
    models_int_unsqueeze_cast,
    models_conv1d_pad,
)
from pytest_npucheck.probe.builder import Collector, Probe, reset_rng

__all__ = ["FAMILIES", "build_extra_probes"]

FAMILIES: list[Callable[[Collector], None]] = [
    *models_op_context.FAMILIES,
    *models_layout.FAMILIES,
    *models_pool_transposes.FAMILIES,
    *models_rnn_layout.FAMILIES,
    *models_sdpa_mask.FAMILIES,
    *models_rmsnorm_masks.FAMILIES,
    *models_attention_limits.FAMILIES,
    *models_norm_limits.FAMILIES,
    *models_rejections.FAMILIES,
    *models_space_to_depth.FAMILIES,
    *models_einsum_equations.FAMILIES,
    *models_tile_broadcast.FAMILIES,
    *models_kv_repeat_paths.FAMILIES,
    *models_int_layout.FAMILIES,
    *models_gathernd_reshape.FAMILIES,
    *models_int_arith.FAMILIES,
    *models_norm_bias.FAMILIES,
    *models_pattern_branches.FAMILIES,
    *models_reshape_planes.FAMILIES,
    *models_pow_exponents.FAMILIES,
    *models_noop_slices.FAMILIES,
    *models_attention_rewrites.FAMILIES,
    *models_constant_defaults.FAMILIES,
    *models_pad_axes.FAMILIES,
    *models_and_const.FAMILIES,
    *models_mask_broadcast.FAMILIES,
    *models_gemm_scales.FAMILIES,
    *models_vision_heads.FAMILIES,
    *models_dual_heads.FAMILIES,
    *models_rel_pos_tile.FAMILIES,
    *models_reshape_heads.FAMILIES,
    *models_sdpa_head_broadcast.FAMILIES,
    *models_seq_map_reshape.FAMILIES,
    *models_rank5_broadcast.FAMILIES,
    *models_window_partition.FAMILIES,
    *models_heads_split.FAMILIES,
    *models_int_layout_readers.FAMILIES,
    *models_batch_fold_reshape.FAMILIES,
    *models_rank6_merge.FAMILIES,
    *models_einsum_relpos5.FAMILIES,
    *models_block_mask.FAMILIES,
    *models_mul_gemm.FAMILIES,
    *models_squeeze_nd.FAMILIES,
    *models_scatter_updates.FAMILIES,
    *models_gather_ids.FAMILIES,
    *models_token_unroll.FAMILIES,
    *models_slice_pairs.FAMILIES,
    *models_kv_repeat_inputs.FAMILIES,
    *models_split_concat.FAMILIES,
    *models_int_unsqueeze_cast.FAMILIES,
    *models_conv1d_pad.FAMILIES,
]


def build_extra_probes(select: Iterable[str] | None = None) -> list[Probe]:
    """Build every extra probe (optionally only ids starting with one of ``select``; the others
    are never built; the random constants are drawn afresh for each call)."""
    reset_rng()
    c = Collector(select)
    for fam in FAMILIES:
        fam(c)
    return c.probes

// host.flash's kernel, shared with its planted-bug variants (sdpa_planted.cpp).
#pragma once

#include <optional>

#include "families/sdpa/sdpa.hpp"
#include "numerics/tensor.hpp"

namespace opcts::host_sdpa {

/// Deliberate bugs of the planted impls (families/sdpa/sdpa.hpp; none for host.flash itself).
using Plant = sdpa::PlantedBug;

/// Runs the problem (forward: O, lse; backward: dQ, dK, dV) with the flash numerics of
/// sdpa_flash.cpp; throws opcts::InvalidArgument for a broken contract. `unrounded`: the outputs
/// stored in fp32 before their rounding to the output dtype (O; dQ, dK, dV, dbias) — what a plant
/// changes, without the rounding's own flips (sdpa_blind_spot.cpp).
TensorMap flash_run(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded = false);

/// How the packed runners use the dense kernel: `align` in place of Sk − Sq for the
/// bottom-right alignment when given (the varlen_max_alignment plant); only keys
/// [key_begin, key_end) (a split of split-KV; key_end < 0: all); the outputs in fp32, unrounded (a
/// split's partial result: flash_run's `unrounded`); the sinks left out (a split's: the combine
/// adds them once).
struct DenseOptions {
  std::optional<int64_t> align;
  int64_t key_begin = 0, key_end = -1;
  bool unrounded = false;
  bool without_sinks = false;
  int64_t key_tile = 0;       // the forward's key tile; 0: host.flash's (64), or the batch_variant_tiles plant's
  bool normalised_p = false;  // the forward's P as cuDNN's fp8 graph rounds it (flash_run_normalised_p)
};

/// A dense problem (BHSD or BSHD) under `opt`; the varlen and paged runners' kernel.
TensorMap flash_run_dense(const sdpa::Problem& p, const TensorMap& in, Plant plant, const DenseOptions& opt);

/// A dense fp8-q, k, v forward (BHSD or BSHD) with cuDNN's fp8 SDPA arithmetic
/// (host.normalised_p_fp8, sdpa_normalised_p.cpp): each row's softmax first, m and l over all its
/// keys in fp32; then P = e/l times sdpa::kFp8ScaleS rounded to Q's fp8 type (e4m3fn or e5m2) into
/// an fp32 P·V, O = acc / scale_s times v's descale; lse = m + log l. Throws opcts::InvalidArgument
/// for another problem (naming the field) or a broken contract.
TensorMap flash_run_normalised_p(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded = false);

/// A paged problem (sdpa_flash_paged.cpp): cu_seqlens_q, block_table and seqused_k read from the
/// inputs (checked: InvalidArgument naming the one that is malformed or out of range), each
/// sequence's keys gathered from its pages and run as split-KV (kPagedSplitKeys keys a split,
/// combined by their logsumexps).
TensorMap flash_run_paged(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded = false);

/// A varlen problem (sdpa_flash_varlen.cpp): cu_seqlens_q and cu_seqlens_k read from the
/// inputs (checked: opcts::InvalidArgument naming the one that is malformed), each sequence run
/// by flash_run_dense on its rows.
TensorMap flash_run_varlen(const sdpa::Problem& p, const TensorMap& in, Plant plant, bool unrounded = false);

}  // namespace opcts::host_sdpa

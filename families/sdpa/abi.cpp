// The sdpa problem as the plugin ABI's opcts_sdpa_params (include/opcts/plugin.h).
#include "core/abi_impl.hpp"
#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

std::vector<unsigned char> abi_params(const Problem& p) {
  opcts_sdpa_params c{};
  c.struct_size = sizeof c;
  c.dtype = abi_dtype(p.dtype);
  c.batch = p.batch;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.seq_q = p.seq_q;
  c.seq_k = p.seq_k;
  c.head_dim = p.head_dim;
  c.head_dim_v = p.head_dim_v;
  c.scale = p.effective_scale();
  c.mask = p.mask == Mask::causal_upper_left    ? OPCTS_SDPA_CAUSAL_UPPER_LEFT
           : p.mask == Mask::causal_lower_right ? OPCTS_SDPA_CAUSAL_LOWER_RIGHT
                                                : OPCTS_SDPA_MASK_NONE;
  c.window_left = p.window_left;
  c.window_right = p.window_right;
  c.softcap = p.softcap;
  c.attn_mask = p.mask_tensor == MaskTensor::boolean    ? OPCTS_SDPA_ATTN_MASK_BOOL
                : p.mask_tensor == MaskTensor::additive ? OPCTS_SDPA_ATTN_MASK_ADDITIVE
                                                        : OPCTS_SDPA_ATTN_MASK_NONE;
  c.mask_per_batch = p.mask_per_batch;
  c.mask_per_head = p.mask_per_head;
  c.layout = p.layout == Layout::bshd ? OPCTS_SDPA_BSHD : OPCTS_SDPA_BHSD;
  c.direction = p.direction == Direction::backward ? OPCTS_SDPA_BACKWARD : OPCTS_SDPA_FORWARD;
  return abi_bytes(c);
}

}  // namespace opcts::sdpa

// aten.sdpa_flash, aten.sdpa_efficient, aten.sdpa_cudnn, aten.sdpa_math: PyTorch's four SDPA
// backends, each selected explicitly through its private operator (what
// torch.nn.functional.scaled_dot_product_attention dispatches to under sdpa_kernel(...)),
// forward with logsumexp and backward through the backend's own backward operator (math:
// autograd over its composite).
//
//   flash      aten::_flash_attention_forward / _flash_attention_backward ([B, S, H, D] views):
//              the entry torch.nn.attention.bias.causal_lower_right uses; is_causal there is
//              FlashAttention-2's bottom-right alignment, windows are window_size_left/right.
//   efficient  aten::_efficient_attention_forward / _backward: custom_mask_type 1 (top-left)
//              or 2 (bottom-right, causal_lower_right's), attn_mask as an additive bias padded
//              to 16 columns and expanded, as sdpa's preprocess_mask does.
//   cudnn      aten::_scaled_dot_product_cudnn_attention / _backward.
//   math       aten::_scaled_dot_product_attention_math; lower-right causal and windows as the
//              mask PyTorch materialises for them (additive, as sdpa hands math every mask); its lse (math returns
//              none) is at::logsumexp over the fp32 scores math forms (PyTorch ≥ 2.5 computes math in fp32).
//
// Conventions translated, not judged: FlashAttention-2 writes lse = +inf for a row that sees no
// key (so that exp(s − lse) = 0 in its backward); the ABI spells that row -inf. The translation is
// applied to every backend's lse (a row that sees a key never has lse +inf, so only the empty
// rows' spelling can change). Boolean masks are turned into additive ones, 0 / -inf — the
// problem's definition: sdpa does the same for efficient and math (convert_boolean_attn_mask), but
// its cuDNN path fills with a finite value (convert_boolean_attn_mask_cudnn), so aten.sdpa_cudnn's
// boolean-mask cases judge cuDNN under -inf, not what sdpa hands it. What PyTorch does not offer,
// or sdpa never sends to a backend, is a SKIP naming the version (softcap everywhere; lower-right
// causal on cudnn; windows outside flash; GQA on efficient; zero-length sequences on the fused ones).
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <limits>

#include "aten_common.hpp"

namespace opcts_aten {
namespace {

enum class Backend { flash, efficient, cudnn, math };
const Backend kFlash = Backend::flash, kEfficient = Backend::efficient, kCudnn = Backend::cudnn, kMath = Backend::math;

Backend backend_of(const void* data) { return *static_cast<const Backend*>(data); }

const opcts_sdpa_params& params_of(const void* p) { return *static_cast<const opcts_sdpa_params*>(p); }

bool half_type(opcts_dtype t) { return is(t, OPCTS_DL_FLOAT, 16) || is(t, OPCTS_DL_BFLOAT, 16); }

int32_t supports(const void* data, const void* params, const opcts_arch*, char* reason, size_t size) {
  const Backend b = backend_of(data);
  const opcts_sdpa_params& p = params_of(params);
  const std::string v = "PyTorch " + torch_version();
  if (p.softcap != 0) return skip(reason, size, v + "'s SDPA operators take no softcap");
  const bool windowed = p.window_left != -1 || p.window_right != -1;
  if (b != Backend::math && (p.seq_q == 0 || p.seq_k == 0))
    return skip(reason, size,
                v + "'s sdpa sends zero-length sequences to math, never to a fused kernel "
                    "(check_nonzero_sequence_lengths_dense)");
  switch (b) {
    case Backend::flash:
      if (!half_type(p.dtype)) return skip(reason, size, v + "'s flash attention takes fp16 and bf16 only");
      if (p.head_dim != p.head_dim_v)
        return skip(reason, size, v + "'s flash attention needs one head dim for q, k and v");
      if (p.head_dim % 8 != 0 || p.head_dim > 256)
        return skip(reason, size,
                    v + "'s flash attention takes head dims that are multiples of 8 up to 256 (sdpa pads others)");
      if (p.attn_mask != OPCTS_SDPA_ATTN_MASK_NONE)
        return skip(reason, size, v + "'s flash attention takes no attn_mask");
      if (p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT && p.seq_q != p.seq_k)
        return skip(reason, size,
                    v + "'s sdpa refuses flash for is_causal with seq_q != seq_k (its causal is bottom-right aligned; "
                        "use causal_lower_right)");
      if (windowed && !has("aten::_flash_attention_forward", "", "window_size_left"))
        return skip(reason, size, v + "'s _flash_attention_forward has no window_size_left");
      return 1;
    case Backend::efficient:
      if (p.heads_q != p.heads_kv)
        return skip(reason, size, v + "'s memory-efficient attention takes no GQA (sdpa falls back to math)");
      if (windowed) return skip(reason, size, v + "'s sdpa offers no sliding window on the memory-efficient backend");
      return 1;
    case Backend::cudnn:
      if (!half_type(p.dtype)) return skip(reason, size, v + "'s cuDNN attention takes fp16 and bf16 only");
      if (p.mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT)
        return skip(reason, size, v + "'s cuDNN attention has no lower-right causal (sdpa skips it)");
      if (windowed) return skip(reason, size, v + "'s cuDNN attention operator takes no window");
      return 1;
    case Backend::math: return 1;
  }
  return 1;
}

int32_t deterministic(const void* data, const void* params) {
  // Forward passes are one-pass reductions per row; the fused backwards accumulate dQ (flash,
  // cudnn) or split keys (efficient) with atomics. math's backward is matmuls.
  return params_of(params).direction == OPCTS_SDPA_FORWARD || backend_of(data) == Backend::math;
}

// An input or output in the logical [B, H, S, D] order, whatever its stored layout.
at::Tensor bhsd(const opcts_tensor& t, const opcts_sdpa_params& p, int device) {
  at::Tensor x = wrap(t, device);
  return p.layout == OPCTS_SDPA_BSHD ? x.transpose(1, 2) : x;
}

// The boolean [Sq, Sk] visibility of the causal alignment and the window (families/sdpa/sdpa.hpp's
// first_key / last_key), for the backends that take them as a mask.
at::Tensor structure_mask(const opcts_sdpa_params& p, int device) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(at::Device(at::kCUDA, device));
  const at::Tensor i = at::arange(p.seq_q, opts).unsqueeze(1), j = at::arange(p.seq_k, opts).unsqueeze(0);
  const int64_t shift = p.seq_k - p.seq_q;
  at::Tensor keep = at::ones({p.seq_q, p.seq_k}, opts.dtype(at::kBool));
  if (p.window_left >= 0) keep = keep & (j >= i + shift - p.window_left);
  if (p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT) keep = keep & (j <= i);
  if (p.mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT) keep = keep & (j <= i + shift);
  if (p.window_right >= 0) keep = keep & (j <= i + shift + p.window_right);
  return keep;
}

// The user's attn_mask as an additive bias in the dtype (bool: 0 where attended, -inf elsewhere,
// sdpa's convert_boolean_attn_mask; its cuDNN path uses a finite fill instead: file comment).
at::Tensor additive(const at::Tensor& mask, at::ScalarType dtype) {
  if (mask.scalar_type() != at::kBool) return mask;
  return at::zeros(mask.sizes(), mask.options().dtype(dtype))
      .masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
}

// lse as [B, H, Sq] whatever a backend's shape ([B, H, Sq] padded to 32 or 128 rows, or [B, H,
// Sq, 1]), +inf rows (FlashAttention-2's spelling of a row with no key) as -inf, for every backend.
at::Tensor lse_rows(at::Tensor lse, const opcts_sdpa_params& p) {
  if (lse.dim() == 4) lse = lse.squeeze(-1);
  lse = lse.narrow(2, 0, p.seq_q).to(at::kFloat);
  const double inf = std::numeric_limits<double>::infinity();
  return lse.masked_fill(lse == inf, -inf);
}

struct Io {
  at::Tensor q, k, v, mask;  // logical BHSD; mask undefined when none
};

Io inputs(const opcts_run_args* args, const opcts_sdpa_params& p) {
  Io io;
  io.q = bhsd(need(args, "q"), p, args->device);
  io.k = bhsd(need(args, "k"), p, args->device);
  io.v = bhsd(need(args, "v"), p, args->device);
  if (p.attn_mask != OPCTS_SDPA_ATTN_MASK_NONE) io.mask = wrap(need(args, "attn_mask"), args->device);
  return io;
}

void store(const opcts_run_args* args, const opcts_sdpa_params& p, const char* name, const at::Tensor& value_bhsd) {
  bhsd(need(args, name), p, args->device).copy_(value_bhsd);
}

void store_lse(const opcts_run_args* args, const opcts_sdpa_params& p, const at::Tensor& lse) {
  wrap(need(args, "lse"), args->device).copy_(lse_rows(lse, p));
}

c10::IValue none() { return c10::IValue(); }

// A fused backend's forward outputs into O and lse — `bshd`: its O is [B, S, H, D] (flash,
// efficient), else [B, H, S, D] (cudnn). True when the problem is a forward (its run is done).
bool stored_forward(const opcts_run_args* args, const opcts_sdpa_params& p, const at::Tensor& out,
                    const at::Tensor& lse, bool bshd) {
  if (p.direction != OPCTS_SDPA_FORWARD) return false;
  store(args, p, "O", bshd ? out.transpose(1, 2) : out);
  store_lse(args, p, lse);
  return true;
}

// A backward operator's first three outputs into dQ, dK, dV (`bshd` as above).
void store_grads(const opcts_run_args* args, const opcts_sdpa_params& p, const std::vector<c10::IValue>& g, bool bshd) {
  const char* names[] = {"dQ", "dK", "dV"};
  for (size_t i = 0; i < 3; ++i) {
    const at::Tensor t = g.at(i).toTensor();
    store(args, p, names[i], bshd ? t.transpose(1, 2) : t);
  }
}

// The window as FlashAttention-2's window_size_left/right, when the problem has one.
void add_window(NamedArgs& a, const opcts_sdpa_params& p) {
  if (p.window_left == -1 && p.window_right == -1) return;
  a.emplace_back("window_size_left", p.window_left);
  a.emplace_back("window_size_right", p.window_right);
}

// ---- flash --------------------------------------------------------------------------------

void run_flash(const opcts_run_args* args, const opcts_sdpa_params& p) {
  const Io io = inputs(args, p);
  const at::Tensor q = io.q.transpose(1, 2), k = io.k.transpose(1, 2), v = io.v.transpose(1, 2);  // [B, S, H, D]
  const bool causal = p.mask != OPCTS_SDPA_MASK_NONE;
  NamedArgs fwd = {
      {"query", q},       {"key", k},         {"value", v},       {"cum_seq_q", none()}, {"cum_seq_k", none()},
      {"max_q", p.seq_q}, {"max_k", p.seq_k}, {"dropout_p", 0.0}, {"is_causal", causal}, {"return_debug_mask", false},
      {"scale", p.scale}};
  add_window(fwd, p);
  const auto r = call("aten::_flash_attention_forward", "", fwd);
  const at::Tensor out = r.at(0).toTensor(), lse = r.at(1).toTensor();
  if (stored_forward(args, p, out, lse, true)) return;
  const at::Tensor dout = bhsd(need(args, "dO"), p, args->device).transpose(1, 2);
  NamedArgs bwd = {{"grad_out", dout},
                   {"query", q},
                   {"key", k},
                   {"value", v},
                   {"out", out},
                   {"logsumexp", lse},
                   {"cum_seq_q", at::Tensor()},
                   {"cum_seq_k", at::Tensor()},
                   {"max_q", p.seq_q},
                   {"max_k", p.seq_k},
                   {"dropout_p", 0.0},
                   {"is_causal", causal},
                   {"rng_state", r.at(2).toTensor()},
                   {"unused", r.at(3).toTensor()},
                   {"scale", p.scale}};
  add_window(bwd, p);
  const auto g = call("aten::_flash_attention_backward", "", bwd);
  store_grads(args, p, g, true);
}

// ---- efficient ----------------------------------------------------------------------------

// sdpa's preprocess_mask: the bias expanded to [B, H, Sq, Sk] over storage whose rows are padded
// to a multiple of 16 elements (the kernel's alignment).
at::Tensor efficient_bias(const Io& io, const opcts_sdpa_params& p, at::ScalarType dtype) {
  if (!io.mask.defined()) return at::Tensor();
  at::Tensor bias = additive(io.mask, dtype);
  if (p.seq_k % 16 != 0) bias = at::pad(bias, {0, 16 - p.seq_k % 16}).narrow(-1, 0, p.seq_k);
  return bias.expand({p.batch, p.heads_q, p.seq_q, p.seq_k});
}

void run_efficient(const opcts_run_args* args, const opcts_sdpa_params& p) {
  const Io io = inputs(args, p);
  const at::Tensor q = io.q.transpose(1, 2), k = io.k.transpose(1, 2), v = io.v.transpose(1, 2);
  const at::Tensor bias = efficient_bias(io, p, io.q.scalar_type());
  const int64_t mask_type = p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT    ? 1
                            : p.mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT ? 2
                                                                      : 0;
  const c10::IValue bias_arg = bias.defined() ? c10::IValue(bias) : none();
  const auto r = call("aten::_efficient_attention_forward", "",
                      {{"query", q},
                       {"key", k},
                       {"value", v},
                       {"bias", bias_arg},
                       {"cu_seqlens_q", none()},
                       {"cu_seqlens_k", none()},
                       {"max_seqlen_q", none()},
                       {"max_seqlen_k", none()},
                       {"dropout_p", 0.0},
                       {"custom_mask_type", mask_type},
                       {"compute_log_sumexp", true},
                       {"scale", p.scale}});
  const at::Tensor out = r.at(0).toTensor(), lse = r.at(1).toTensor();
  if (stored_forward(args, p, out, lse, true)) return;
  const at::Tensor dout = bhsd(need(args, "dO"), p, args->device).transpose(1, 2);
  const auto g = call("aten::_efficient_attention_backward", "",
                      {{"grad_out_", dout},
                       {"query", q},
                       {"key", k},
                       {"value", v},
                       {"bias", bias_arg},
                       {"out", out},
                       {"cu_seqlens_q", none()},
                       {"cu_seqlens_k", none()},
                       {"max_seqlen_q", p.seq_q},
                       {"max_seqlen_k", p.seq_k},
                       {"logsumexp", lse},
                       {"dropout_p", 0.0},
                       {"philox_seed", r.at(2).toTensor()},
                       {"philox_offset", r.at(3).toTensor()},
                       {"custom_mask_type", mask_type},
                       {"bias_requires_grad", false},
                       {"scale", p.scale}});
  store_grads(args, p, g, true);
}

// ---- cudnn --------------------------------------------------------------------------------

void run_cudnn(const opcts_run_args* args, const opcts_sdpa_params& p) {
  const Io io = inputs(args, p);
  const at::Tensor bias = io.mask.defined() ? additive(io.mask, io.q.scalar_type()) : at::Tensor();
  const c10::IValue bias_arg = bias.defined() ? c10::IValue(bias) : none();
  const bool causal = p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT;
  const auto r = call("aten::_scaled_dot_product_cudnn_attention", "",
                      {{"query", io.q},
                       {"key", io.k},
                       {"value", io.v},
                       {"attn_bias", bias_arg},
                       {"compute_log_sumexp", true},
                       {"dropout_p", 0.0},
                       {"is_causal", causal},
                       {"return_debug_mask", false},
                       {"scale", p.scale}});
  const at::Tensor out = r.at(0).toTensor(), lse = r.at(1).toTensor();
  if (stored_forward(args, p, out, lse, false)) return;
  const at::Tensor dout = bhsd(need(args, "dO"), p, args->device);
  const auto g = call("aten::_scaled_dot_product_cudnn_attention_backward", "",
                      {{"grad_out", dout},
                       {"query", io.q},
                       {"key", io.k},
                       {"value", io.v},
                       {"out", out},
                       {"logsumexp", lse},
                       {"philox_seed", r.at(6).toTensor()},
                       {"philox_offset", r.at(7).toTensor()},
                       {"attn_bias", bias.defined() ? bias : at::Tensor()},
                       {"cum_seq_q", r.at(2).toTensor()},
                       {"cum_seq_k", r.at(3).toTensor()},
                       {"max_q", p.seq_q},
                       {"max_k", p.seq_k},
                       {"dropout_p", 0.0},
                       {"is_causal", causal},
                       {"scale", p.scale}});
  store_grads(args, p, g, false);
}

// ---- math ---------------------------------------------------------------------------------

void run_math(const opcts_run_args* args, const opcts_sdpa_params& p) {
  // The window is the adapter's own argument here (math has none; the adapter builds its mask),
  // so the adapter checks it: FlashAttention-2's convention, -1 unbounded, nothing lower.
  if (p.window_left < -1) throw Refusal(OPCTS_INVALID_ARGUMENT, "window_left", "window_left < -1 (-1 is unbounded)");
  if (p.window_right < -1) throw Refusal(OPCTS_INVALID_ARGUMENT, "window_right", "window_right < -1 (-1 is unbounded)");
  Io io = inputs(args, p);
  const bool structured = p.mask == OPCTS_SDPA_CAUSAL_LOWER_RIGHT || p.window_left != -1 || p.window_right != -1 ||
                          (p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT && io.mask.defined());
  // Upper-left causal alone is math's is_causal; everything else one mask, as CausalBias builds.
  const bool is_causal = p.mask == OPCTS_SDPA_CAUSAL_UPPER_LEFT && !structured;
  // PyTorch's sdpa turns a boolean mask into an additive one (convert_boolean_attn_mask) before
  // it calls the math op, which adds whatever mask it is given to the scores.
  at::Tensor mask = io.mask.defined() ? additive(io.mask, io.q.scalar_type()) : at::Tensor();
  if (structured) {
    const at::Tensor keep = structure_mask(p, args->device);
    mask = mask.defined() ? mask.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity())
                          : additive(keep, io.q.scalar_type());
  }
  const bool backward = p.direction == OPCTS_SDPA_BACKWARD;
  if (backward) {
    io.q.requires_grad_(true);
    io.k.requires_grad_(true);
    io.v.requires_grad_(true);
  }
  const c10::IValue mask_arg = mask.defined() ? c10::IValue(mask) : none();
  NamedArgs a = {{"query", io.q},          {"key", io.k},      {"value", io.v},
                 {"attn_mask", mask_arg},  {"dropout_p", 0.0}, {"is_causal", is_causal},
                 {"dropout_mask", none()}, {"scale", p.scale}};
  if (p.heads_q != p.heads_kv) a.emplace_back("enable_gqa", true);
  const auto r = call("aten::_scaled_dot_product_attention_math", "", a);
  const at::Tensor out = r.at(0).toTensor();
  if (!backward) {
    store(args, p, "O", out);
    // The lse of the scores math forms, in fp32 (math returns none).
    const int64_t group = p.heads_q / p.heads_kv;
    const at::Tensor kx = group > 1 ? io.k.repeat_interleave(group, 1) : io.k;
    at::Tensor s = at::matmul(io.q.to(at::kFloat), kx.to(at::kFloat).transpose(-2, -1)) * p.scale;
    if (mask.defined()) s = s + mask.to(at::kFloat);
    if (is_causal)
      s = s.masked_fill(structure_mask(p, args->device).logical_not(), -std::numeric_limits<double>::infinity());
    store_lse(args, p, at::logsumexp(s, -1));
    return;
  }
  const at::Tensor dout = bhsd(need(args, "dO"), p, args->device);
  const auto g = torch::autograd::grad({out}, {io.q, io.k, io.v}, {dout});
  store(args, p, "dQ", g.at(0));
  store(args, p, "dK", g.at(1));
  store(args, p, "dV", g.at(2));
}

// Refusals PyTorch words for the arguments opcts's negative cases break (families/sdpa/sdpa.hpp).
const std::initializer_list<Phrase> kPhrases = {{"must divide", "heads_kv"},
                                                {"divisible by", "heads_kv"},
                                                {"must be a factor of", "heads_kv"},
                                                {"window_size_left", "window_left"},
                                                {"window_size_right", "window_right"}};

opcts_status run(const void* data, const opcts_run_args* args, opcts_report* report) {
  const opcts_sdpa_params& p = params_of(args->params);
  return guarded_run(args, report, kPhrases, [&] {
    switch (backend_of(data)) {
      case Backend::flash: return run_flash(args, p);
      case Backend::efficient: return run_efficient(args, p);
      case Backend::cudnn: return run_cudnn(args, p);
      case Backend::math: return run_math(args, p);
    }
  });
}

}  // namespace

std::vector<ImplSpec> sdpa_impls() {
  return {{"sdpa", "aten.sdpa_flash", supports, run, deterministic, &kFlash},
          {"sdpa", "aten.sdpa_efficient", supports, run, deterministic, &kEfficient},
          {"sdpa", "aten.sdpa_cudnn", supports, run, deterministic, &kCudnn},
          {"sdpa", "aten.sdpa_math", supports, run, deterministic, &kMath}};
}

}  // namespace opcts_aten

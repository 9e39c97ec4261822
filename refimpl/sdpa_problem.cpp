// SDPA problem: masks, validation and the stable id in both directions.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "refimpl/sdpa.hpp"

namespace opcts::sdpa {

std::string_view to_string(Mask m) {
  switch (m) {
    case Mask::none: return "none";
    case Mask::causal_upper_left: return "causal_upper_left";
    case Mask::causal_lower_right: return "causal_lower_right";
  }
  return "?";
}

Mask parse_mask(std::string_view s) {
  if (s == "none") return Mask::none;
  if (s == "causal_upper_left") return Mask::causal_upper_left;
  if (s == "causal_lower_right") return Mask::causal_lower_right;
  throw std::invalid_argument("unknown mask '" + std::string(s) +
                              "' (expected none, causal_upper_left or causal_lower_right)");
}

double Problem::effective_scale() const {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

bool Problem::visible(int64_t i, int64_t j) const {
  switch (mask) {
    case Mask::none: return true;
    case Mask::causal_upper_left: return j <= i;
    case Mask::causal_lower_right: return j <= i + seq_k - seq_q;
  }
  return true;
}

int64_t Problem::keys_of_row(int64_t i) const {
  int64_t last = seq_k - 1;  // the last visible key
  if (mask == Mask::causal_upper_left) last = std::min(last, i);
  if (mask == Mask::causal_lower_right) last = std::min(last, i + seq_k - seq_q);
  return std::max<int64_t>(0, last + 1);
}

void Problem::validate() const {
  auto nonneg = [](const char* name, int64_t v) {
    if (v < 0) throw std::invalid_argument(std::string(name) + " must be >= 0, got " + std::to_string(v));
  };
  nonneg("batch", batch);
  nonneg("seq.q", seq_q);
  nonneg("seq.k", seq_k);
  if (heads_q <= 0 || heads_kv <= 0) throw std::invalid_argument("heads.q and heads.kv must be > 0");
  if (heads_q % heads_kv != 0)
    throw std::invalid_argument("heads.q (" + std::to_string(heads_q) + ") must be a multiple of heads.kv (" +
                                std::to_string(heads_kv) + ") for GQA");
  if (head_dim <= 0) throw std::invalid_argument("head_dim must be > 0, got " + std::to_string(head_dim));
  if (dtype == DType::fp64) throw std::invalid_argument("dtype fp64 is not an SDPA input type (fp16, bf16, fp32)");
  if (scale && !std::isfinite(*scale)) throw std::invalid_argument("scale must be finite");
}

namespace {

std::string_view mask_token(Mask m) {
  switch (m) {
    case Mask::none: return "nomask";
    case Mask::causal_upper_left: return "causal_ul";
    case Mask::causal_lower_right: return "causal_lr";
  }
  return "?";
}

// Shortest round-trip decimal of x with '.'→'p' and '-'→'m'.
std::string scale_token(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  std::string s(buf, r.ptr);
  std::replace(s.begin(), s.end(), '.', 'p');
  std::replace(s.begin(), s.end(), '-', 'm');
  return s;
}

double parse_scale_token(std::string s) {
  std::replace(s.begin(), s.end(), 'p', '.');
  std::replace(s.begin(), s.end(), 'm', '-');
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) throw std::invalid_argument("bad scale token");
  return v;
}

int64_t parse_int_after(std::string_view tok, std::string_view prefix) {
  if (tok.substr(0, prefix.size()) != prefix) throw std::invalid_argument("expected '" + std::string(prefix) + "N'");
  int64_t v = 0;
  const char* b = tok.data() + prefix.size();
  const char* e = tok.data() + tok.size();
  auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || r.ptr != e || b == e) throw std::invalid_argument("expected '" + std::string(prefix) + "N'");
  return v;
}

}  // namespace

std::string problem_id(const Problem& p) {
  std::string id = std::string(name(p.dtype)) + "_b" + std::to_string(p.batch) + "_hq" + std::to_string(p.heads_q) +
                   "_hkv" + std::to_string(p.heads_kv) + "_sq" + std::to_string(p.seq_q) + "_sk" +
                   std::to_string(p.seq_k) + "_d" + std::to_string(p.head_dim) + "_" +
                   std::string(mask_token(p.mask));
  if (p.scale) id += "_scale" + scale_token(*p.scale);
  return id;
}

Problem parse_problem_id(std::string_view id) {
  std::vector<std::string> tok;
  size_t start = 0;
  while (start <= id.size()) {
    size_t end = id.find('_', start);
    if (end == std::string_view::npos) end = id.size();
    tok.emplace_back(id.substr(start, end - start));
    start = end + 1;
  }
  // The mask tokens contain an underscore: "causal_ul" / "causal_lr".
  std::vector<std::string> t;
  for (size_t i = 0; i < tok.size(); ++i) {
    if (tok[i] == "causal" && i + 1 < tok.size()) {
      t.push_back("causal_" + tok[i + 1]);
      ++i;
    } else {
      t.push_back(tok[i]);
    }
  }
  if (t.size() < 8 || t.size() > 9)
    throw std::invalid_argument("sdpa id '" + std::string(id) + "': expected DTYPE_bN_hqN_hkvN_sqN_skN_dN_MASK[_scaleX]");
  Problem p;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("sdpa id '" + std::string(id) + "': token '" + t[i] + "': " + why);
  };
  try {
    p.dtype = parse_dtype(t[i]);
    ++i;
    p.batch = parse_int_after(t[i], "b"), ++i;
    p.heads_q = parse_int_after(t[i], "hq"), ++i;
    p.heads_kv = parse_int_after(t[i], "hkv"), ++i;
    p.seq_q = parse_int_after(t[i], "sq"), ++i;
    p.seq_k = parse_int_after(t[i], "sk"), ++i;
    p.head_dim = parse_int_after(t[i], "d"), ++i;
    if (t[i] == "nomask") p.mask = Mask::none;
    else if (t[i] == "causal_ul") p.mask = Mask::causal_upper_left;
    else if (t[i] == "causal_lr") p.mask = Mask::causal_lower_right;
    else fail("expected nomask, causal_ul or causal_lr");
    ++i;
    if (i < t.size()) {
      if (t[i].rfind("scale", 0) != 0) fail("expected scaleX");
      p.scale = parse_scale_token(t[i].substr(5));
    }
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind("sdpa id", 0) == 0) throw;
    fail(e.what());
  }
  p.validate();
  return p;
}

std::vector<int64_t> q_shape(const Problem& p) { return {p.batch, p.heads_q, p.seq_q, p.head_dim}; }
std::vector<int64_t> kv_shape(const Problem& p) { return {p.batch, p.heads_kv, p.seq_k, p.head_dim}; }
std::vector<int64_t> lse_shape(const Problem& p) { return {p.batch, p.heads_q, p.seq_q}; }

}  // namespace opcts::sdpa

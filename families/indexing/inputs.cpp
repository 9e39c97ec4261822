// The indexing families' inputs: index tensors of each distribution, value fills scaled to the dtype, random finite
// codes for index_select.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "families/indexing/codes.hpp"
#include "families/indexing/indexing.hpp"
#include "numerics/normal_codes.hpp"
#include "numerics/rng.hpp"

namespace opcts::indexing {

namespace {

// Philox streams of the inputs (seed = the case's seed).
enum Stream : uint32_t { kIndex = 0, kRoute, kSelf, kSrc, kCodes };

double u01(uint32_t r) { return (static_cast<double>(r) + 0.5) * 0x1p-32; }  // (0, 1)
double u01_53(uint32_t hi, uint32_t lo) {                                    // (0, 1) with 53 random bits
  return (static_cast<double>(((static_cast<uint64_t>(hi) << 32 | lo) >> 11)) + 0.5) * 0x1p-53;
}

// The columns of the index: (o, k) pairs for scatter_add (element (o, j, k) at (o·m + j)·inner
// + k), one column of m otherwise.
struct Columns {
  int64_t count, m, inner;
  bool per_element;
  int64_t at(int64_t c, int64_t j) const {
    if (!per_element) return j;
    const int64_t o = c / inner, k = c % inner;
    return (o * m + j) * inner + k;
  }
};

Columns columns_of(const Problem& p) {
  if (p.op == Op::scatter_add) return {p.outer * p.inner, p.m, p.inner, true};
  return {1, p.m, 1, false};
}

// Zipf's law over n ranks: the cumulative weights of 1/(r + 1), for inverse-CDF sampling.
std::vector<double> zipf_cdf(int64_t n) {
  std::vector<double> c(static_cast<size_t>(n));
  double acc = 0;
  for (int64_t r = 0; r < n; ++r) c[static_cast<size_t>(r)] = acc += 1.0 / static_cast<double>(r + 1);
  for (double& x : c) x /= acc;
  return c;
}

// The bijection rank → index of zipf: r → (a·r + b) mod n with a coprime to n, so hot
// destinations are spread over the tensor rather than packed at its start.
int64_t zipf_map(int64_t r, int64_t n) {
  int64_t a = 40503;  // odd, and stepped until coprime with n
  while (std::gcd(a, n) != 1) a += 2;
  return static_cast<int64_t>((static_cast<unsigned __int128>(a) * static_cast<uint64_t>(r) + 12345u) %
                              static_cast<uint64_t>(n));
}

// routed: n tokens × k slots, each slot a distinct expert drawn with weight (e + 1)^-kExpertSkew;
// the (token, slot) pairs in expert order, tokens ascending within an expert (the dispatch
// permutation); the index lists their tokens.
std::vector<int64_t> routed_index(int64_t n, int64_t k, uint64_t seed) {
  std::vector<double> cdf(kRoutedExperts);
  double acc = 0;
  for (int64_t e = 0; e < kRoutedExperts; ++e)
    cdf[static_cast<size_t>(e)] = acc += std::pow(static_cast<double>(e + 1), -kExpertSkew);
  for (double& x : cdf) x /= acc;
  std::vector<int64_t> expert(static_cast<size_t>(n * k));
#pragma omp parallel for schedule(static) if (n > 4096)
  for (int64_t t = 0; t < n; ++t) {
    uint64_t draw = 0;
    for (int64_t s = 0; s < k; ++s) {
      for (;;) {
        const double u = u01(random_block(seed, kRoute, static_cast<uint64_t>(t) * 4096 + draw++)[0]);
        const auto e = static_cast<int64_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        const auto* first = &expert[static_cast<size_t>(t * k)];
        if (std::find(first, first + s, e) == first + s) {
          expert[static_cast<size_t>(t * k + s)] = e;
          break;
        }
      }
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(n * k));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return expert[static_cast<size_t>(a)] < expert[static_cast<size_t>(b)];
  });
  for (auto& o : order) o /= k;  // the token of each pair
  return order;
}

// f(e, lane 0 of Philox block e of `stream`) for e < total (for_each_block_run: in parallel).
template <class F>
void for_each_draw(uint64_t seed, uint32_t stream, int64_t total, F f) {
  for_each_block_run(seed, stream, total, [&](int64_t e0, int64_t count, const uint32_t* bits) {
    for (int64_t e = e0; e < e0 + count; ++e) f(e, bits[4 * (e - e0)]);
  });
}

// The most adds any element takes (per column: the largest bucket). scatter_add's columns
// (o, k) are counted kTile adjacent k at a time, so each step reads kTile adjacent index
// elements rather than one element a row of `inner` apart.
int64_t max_adds(const Problem& p, const std::vector<int64_t>& idx) {
  if (p.op == Op::index_select || idx.empty()) return 0;
  const Columns cols = columns_of(p);
  constexpr int64_t kTile = 16;
  const int64_t tiles_per_row = cols.per_element ? (cols.inner + kTile - 1) / kTile : 1;
  const int64_t tiles = cols.per_element ? p.outer * tiles_per_row : 1;
  int64_t best = 0;
#pragma omp parallel if (tiles > 1 && static_cast <int64_t>(idx.size()) > (1 << 16))
  {
    std::vector<int64_t> count(static_cast<size_t>((cols.per_element ? std::min(kTile, cols.inner) : 1) * p.n));
    int64_t mine = 0;
#pragma omp for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t o = tile / tiles_per_row, k0 = (tile % tiles_per_row) * kTile;
      const int64_t width = cols.per_element ? std::min(kTile, cols.inner - k0) : 1;
      std::fill(count.begin(), count.begin() + width * p.n, 0);
      for (int64_t j = 0; j < cols.m; ++j) {
        const int64_t at = cols.per_element ? (o * cols.m + j) * cols.inner + k0 : j;
        for (int64_t t = 0; t < width; ++t)
          mine = std::max(mine, ++count[static_cast<size_t>(t * p.n + idx[static_cast<size_t>(at + t)])]);
      }
    }
#pragma omp critical
    best = std::max(best, mine);
  }
  return best;
}

// A value fill: how element e of a stream is drawn (from Philox block e of the stream; 16-bit
// normal fills are made in the code domain by fill_normal instead, see fill_values).
struct Values {
  DType dtype;
  Fill fill;
  double sigma = 1;   // floats: scale of normal and positive fills
  double range = 1;   // integers: R
  bool zero = false;  // ones fill of self: 0 (fill_values writes zero and ones fills itself)
  double from_block(const uint32_t* r) const {
    if (dtype == DType::int32 || dtype == DType::int64) {
      const uint64_t bits = (static_cast<uint64_t>(r[0]) << 32) | r[1];
      const auto span = static_cast<uint64_t>(range);
      return fill == Fill::positive
                 ? static_cast<double>(1 + bits % span)
                 : static_cast<double>(static_cast<int64_t>(bits % (2 * span + 1)) - static_cast<int64_t>(span));
    }
    // fp64 draws use 64 random bits per uniform, so its values fill all 53 bits (fp32-valued
    // terms would sum exactly in double, in every order); the others are drawn in fp32.
    const bool wide = dtype == DType::fp64;
    const double ua = wide ? u01_53(r[0], r[1]) : u01(r[0]), ub = wide ? u01_53(r[2], r[3]) : u01(r[1]);
    const double x =
        fill == Fill::positive ? sigma * ua : sigma * std::sqrt(-2 * std::log(ua)) * std::cos(6.283185307179586 * ub);
    return wide ? x : static_cast<float>(x);  // Box-Muller for normal fills
  }
};

Values values_for(const Problem& p, int64_t adds) {
  Values v{p.dtype, p.fill};
  if (p.dtype == DType::fp16 && p.fill != Fill::ones) {
    // |self| + Σ|src| <= (adds + 1)·max|x| with max|x| below 6σ for normal draws (P > 1 − 2e-9
    // each) and σ for positive ones: keep it under 2^13, far from fp16's 65504.
    const double reach = static_cast<double>(adds + 1) * (p.fill == Fill::normal ? 6.0 : 1.0);
    v.sigma = std::min(1.0, std::exp2(std::floor(std::log2(8192.0 / reach))));
  }
  if (p.dtype == DType::int32 || p.dtype == DType::int64) {
    const double cap = p.dtype == DType::int32 ? 1 << 20 : 0x1p40;
    const double limit = p.dtype == DType::int32 ? 2147483647.0 : 0x1p53;  // no sum leaves int32, or 2^53
    v.range = std::max(1.0, std::min(cap, std::floor(limit / static_cast<double>(adds + 1))));
  }
  return v;
}

// fp32 and fp64 normals in the code domain: element e's bf16 code is RN(σ·z)'s, drawn with its
// exact probability (numerics/normal_codes.hpp) from lane 0 of its Philox block's half (fp32: block
// e / 2, lanes 2·(e % 2) and 2·(e % 2) + 1; fp64: block e, lanes 0–2); then the bits below
// bf16's, 16 (fp32) or 45 (fp64), are drawn uniformly around it: the value is one of the codes
// within half a bf16 spacing of that bf16 value, each equally likely. Box-Muller's log and cos per
// element were 40% of scatter_add's and index_add's input time (perf, 2026-12-03); this is an
// integer table walk. The distribution is the normal's at bf16 resolution, uniform below it.
void fill_normal_wide(HostTensor& t, uint64_t seed, uint32_t stream, double sigma) {
  const NormalCodeSampler& sampler = normal_code_sampler(DType::bf16, sigma);
  const int64_t n = t.numel();
  if (t.dtype() == DType::fp32) {
    auto* out = reinterpret_cast<uint32_t*>(t.data());
    for_each_block_run(seed, stream, (n + 1) / 2, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
      const int64_t e0 = 2 * b0, count = std::min(2 * nb, n - e0);
      for (int64_t j = 0; j < count; ++j) {
        const uint32_t code = sampler.from_bits(bits[2 * j]), mag = code & 0x7FFF;
        const uint32_t low = bits[2 * j + 1] & 0xFFFF;
        out[e0 + j] = (code & 0x8000) << 16 | (mag ? (mag << 16) - 0x8000 + low : 0);
      }
    });
    return;
  }
  auto* out = reinterpret_cast<uint64_t*>(t.data());
  for_each_block_run(seed, stream, n, [&](int64_t b0, int64_t nb, const uint32_t* bits) {
    for (int64_t j = 0; j < nb; ++j) {
      const uint32_t* r = bits + 4 * j;
      const uint16_t code = sampler.from_bits(r[0]);
      const uint64_t v = std::bit_cast<uint64_t>(static_cast<double>(bf16_to_float(code)));
      const uint64_t mag = v & 0x7FFFFFFFFFFFFFFFull,
                     low = (static_cast<uint64_t>(r[1]) << 32 | r[2]) & ((uint64_t{1} << 45) - 1);
      out[b0 + j] = (v & ~0x7FFFFFFFFFFFFFFFull) | (mag ? mag - (uint64_t{1} << 44) + low : 0);
    }
  });
}

void fill_values(HostTensor& t, const Values& v, uint64_t seed, uint32_t stream) {
  // bf16 and fp16 normals: codes of RN(σ·z) drawn with their exact probabilities (numerics/rng.hpp),
  // ten times faster than Box-Muller, which was most of these families' input time.
  if (!v.zero && v.fill == Fill::normal && (t.dtype() == DType::bf16 || t.dtype() == DType::fp16))
    return fill_normal(t, seed, stream, v.sigma);
  if (!v.zero && v.fill == Fill::normal && (t.dtype() == DType::fp32 || t.dtype() == DType::fp64))
    return fill_normal_wide(t, seed, stream, v.sigma);
  if (v.zero) return;          // HostTensor's storage starts at +0 in every dtype
  if (v.fill == Fill::ones) {  // no random bits: the value 1 in the dtype, element by element
    const int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t e = 0; e < n; ++e) store(t, e, 1.0);
    return;
  }
  for_each_block_run(seed, stream, t.numel(), [&](int64_t e0, int64_t count, const uint32_t* bits) {
    for (int64_t e = e0; e < e0 + count; ++e) store(t, e, v.from_block(bits + 4 * (e - e0)));  // block e: element e
  });
}

// Random finite codes: every bit pattern of the dtype but Inf and NaN (an all-ones exponent
// loses its top bit); int64 keeps |x| < 2^53 (its low 53 bits, sign-extended from its top bit)
// so that its values compare exactly as doubles.
void fill_codes(HostTensor& t, uint64_t seed) {
  const int64_t n = t.numel();
  std::byte* out = t.data();
  // An all-ones exponent field `exp` loses its top bit `top`.
  const auto finite = [](auto exp, auto top) {
    return [=](auto x) { return (x & exp) == exp ? static_cast<decltype(x)>(x ^ top) : x; };
  };
  switch (t.dtype()) {
    case DType::fp16:
      return fill_block_codes(reinterpret_cast<uint16_t*>(out), n, seed, kCodes,
                              finite(uint16_t{0x7C00}, uint16_t{0x4000}));
    case DType::bf16:
      return fill_block_codes(reinterpret_cast<uint16_t*>(out), n, seed, kCodes,
                              finite(uint16_t{0x7F80}, uint16_t{0x4000}));
    case DType::fp32:
      return fill_block_codes(reinterpret_cast<uint32_t*>(out), n, seed, kCodes, finite(0x7F800000u, 0x40000000u));
    case DType::fp64:
      return fill_block_codes(reinterpret_cast<uint64_t*>(out), n, seed, kCodes,
                              finite(uint64_t{0x7FF0000000000000}, uint64_t{0x4000000000000000}));
    case DType::int64:
      return fill_block_codes(reinterpret_cast<uint64_t*>(out), n, seed, kCodes, [](uint64_t x) {
        return (x & 0x001FFFFFFFFFFFFFull) | (x >> 63 ? 0xFFE0000000000000ull : 0);
      });
    case DType::int32:
      return fill_block_codes(reinterpret_cast<uint32_t*>(out), n, seed, kCodes, [](uint32_t x) { return x; });
    default: throw std::invalid_argument(std::string("fill_codes: no code fill for ") + std::string(name(t.dtype())));
  }
}

// Plants the negative case's bad value at the middle element of the index.
void plant_bad_index(const Problem& p, std::vector<int64_t>& idx) {
  if (p.bad_index == BadIndex::none || idx.empty()) return;
  int64_t& at = idx[idx.size() / 2];
  switch (p.bad_index) {
    case BadIndex::none: break;
    case BadIndex::past_end: at = p.n; break;
    case BadIndex::negative: at = -1; break;
    case BadIndex::wraps32: at = (int64_t{1} << 32) + (at % p.n); break;
  }
}

HostTensor index_tensor(const Problem& p, const std::vector<int64_t>& idx) {
  const std::vector<int64_t> shape =
      p.op == Op::scatter_add ? std::vector<int64_t>{p.outer, p.m, p.inner} : std::vector<int64_t>{p.m};
  HostTensor t(p.index_dtype, shape);
  const int64_t n = t.numel();
  if (p.index_dtype == DType::int32) {
    auto* d = reinterpret_cast<int32_t*>(t.data());
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(idx[static_cast<size_t>(i)]);
  } else if (n) {
    std::memcpy(t.data(), idx.data(), static_cast<size_t>(n) * 8);
  }
  return t;
}

}  // namespace

std::vector<int64_t> index_values(const Problem& p, uint64_t seed) {
  const Columns cols = columns_of(p);
  std::vector<int64_t> idx(static_cast<size_t>(p.index_numel()));
  if (idx.empty()) return idx;
  const int64_t n = p.n, total = static_cast<int64_t>(idx.size());
  switch (p.dist) {
    case Dist::uniform:
    case Dist::sorted:
      for_each_draw(seed, kIndex, total, [&](int64_t e, uint32_t bits) {
        idx[static_cast<size_t>(e)] =
            std::min<int64_t>(n - 1, static_cast<int64_t>(u01(bits) * static_cast<double>(n)));
      });
      if (p.dist == Dist::sorted) {
#pragma omp parallel for schedule(dynamic) if (cols.count > 1)
        for (int64_t c = 0; c < cols.count; ++c) {
          std::vector<int64_t> col(static_cast<size_t>(cols.m));
          for (int64_t j = 0; j < cols.m; ++j) col[static_cast<size_t>(j)] = idx[static_cast<size_t>(cols.at(c, j))];
          std::sort(col.begin(), col.end());
          for (int64_t j = 0; j < cols.m; ++j) idx[static_cast<size_t>(cols.at(c, j))] = col[static_cast<size_t>(j)];
        }
      }
      break;
    case Dist::all_first: std::fill(idx.begin(), idx.end(), 0); break;
    case Dist::all_last: std::fill(idx.begin(), idx.end(), n - 1); break;
    case Dist::zipf: {
      const std::vector<double> cdf = zipf_cdf(n);
      for_each_draw(seed, kIndex, total, [&](int64_t e, uint32_t bits) {
        const auto r = std::min<int64_t>(n - 1, std::lower_bound(cdf.begin(), cdf.end(), u01(bits)) - cdf.begin());
        idx[static_cast<size_t>(e)] = zipf_map(r, n);
      });
      break;
    }
    case Dist::routed:
    case Dist::strided: {
      std::vector<int64_t> col;
      if (p.dist == Dist::routed) {
        col = routed_index(n, p.m / n, seed);
      } else {
        const int64_t step = std::max<int64_t>(1, n / std::max<int64_t>(1, p.m));
        col.resize(static_cast<size_t>(p.m));
        for (int64_t j = 0; j < p.m; ++j)
          col[static_cast<size_t>(j)] =
              n - 1 -
              static_cast<int64_t>((static_cast<unsigned __int128>(j) * static_cast<uint64_t>(step)) %
                                   static_cast<uint64_t>(n));
      }
#pragma omp parallel for schedule(static) if (total > (1 << 16))
      for (int64_t c = 0; c < cols.count; ++c)
        for (int64_t j = 0; j < cols.m; ++j) idx[static_cast<size_t>(cols.at(c, j))] = col[static_cast<size_t>(j)];
      break;
    }
  }
  return idx;
}

TensorMap make_inputs(const Problem& p, uint64_t seed) {
  std::vector<int64_t> idx = index_values(p, seed);
  const int64_t adds = max_adds(p, idx);
  plant_bad_index(p, idx);
  TensorMap in;
  in.emplace("index", index_tensor(p, idx));
  const std::vector<int64_t> self_shape{p.outer, p.n, p.inner};
  if (p.op == Op::index_select) {
    HostTensor& input = in.emplace("input", HostTensor(p.dtype, self_shape)).first->second;
    fill_codes(input, seed);
    return in;
  }
  const Values v = values_for(p, adds);
  Values self_v = v;
  self_v.zero = p.fill == Fill::ones;
  fill_values(in.emplace("self", HostTensor(p.dtype, self_shape)).first->second, self_v, seed, kSelf);
  fill_values(in.emplace(p.op == Op::scatter_add ? "src" : "source", HostTensor(p.dtype, {p.outer, p.m, p.inner}))
                  .first->second,
              v, seed, kSrc);
  return in;
}

}  // namespace opcts::indexing

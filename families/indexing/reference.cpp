// The indexing families' reference: exact sums per element (double-double, integers exactly) with each accumulation
// model's bound, and the exact gather.
//
// The terms landing on each element are found by bucketing the index: one bucket list per
// column (o, k) of scatter_add's per-element index, one for index_add's 1-D index shared by all
// (o, k). Within an element the terms are summed in index order with TwoSum (double-double), so
// the stored value (the nearest double of the sum) is exact whenever the sum is representable
// and otherwise within the error families/indexing/bound.cpp adds to every bound. Each element's
// allowance under every model is added to its destination row's (out[o, r, :]) in index order,
// by the one thread finishing that row, so the conservation intervals never depend on the
// thread count.
#include <algorithm>
#include <cmath>

#include "core/threads.hpp"
#include "families/indexing/codes.hpp"
#include "families/indexing/indexing.hpp"
#include "numerics/double_double.hpp"

namespace opcts::indexing {

namespace {

// The buckets of one index column: for each destination r in [0, n), the positions j (in
// order) whose index is r.
struct Buckets {
  std::vector<int64_t> start, list;
  template <class IndexAt>
  void build(int64_t n, int64_t m, IndexAt index_at) {
    start.assign(static_cast<size_t>(n + 1), 0);
    list.resize(static_cast<size_t>(m));
    for (int64_t j = 0; j < m; ++j) {
      const int64_t r = index_at(j);
      if (r >= 0 && r < n) ++start[static_cast<size_t>(r + 1)];
    }
    for (int64_t r = 0; r < n; ++r) start[static_cast<size_t>(r + 1)] += start[static_cast<size_t>(r)];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t j = 0; j < m; ++j) {
      const int64_t r = index_at(j);
      if (r >= 0 && r < n) list[static_cast<size_t>(fill[static_cast<size_t>(r)]++)] = j;
    }
  }
  int64_t begin(int64_t r) const { return start[static_cast<size_t>(r)]; }
  int64_t end(int64_t r) const { return start[static_cast<size_t>(r + 1)]; }
};

// The accumulating families' outputs: exact values, filled with self, then each element with
// terms finished by `finish`, which also adds it to its group (destination row (o, r): the
// `inner` consecutive elements out[o, r, :]) under every model. A group's elements must be
// finished in index order by one thread at a time, so that its sums never depend on the
// thread count.
class Accumulator {
 public:
  Accumulator(const Problem& p, const HostTensor& self)
      : p_(p), group_(std::max<int64_t>(p.inner, 1)), exact_(static_cast<size_t>(p.out_numel())) {
    const int64_t n = p.out_numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t e = 0; e < n; ++e) exact_[static_cast<size_t>(e)] = load(self, e);
    if (p.integer()) return;
    for (auto& b : above_) b.assign(static_cast<size_t>(n), 0.0);
    // Only one-signed fills stall (families/indexing/bound.cpp): the normal fill's sides are kept equal.
    if (p.fill != Fill::normal)
      for (auto& b : below_) b.assign(static_cast<size_t>(n), 0.0);
    for (auto& g : groups_) g.assign(static_cast<size_t>((n + group_ - 1) / group_), GroupBound{});
  }

  // `positions`: each term's position t in the flattened [outer, m, inner] terms (warp32's groups).
  void finish(int64_t e, const std::vector<double>& terms, const std::vector<int64_t>& positions) {
    if (terms.empty()) return;
    const double s0 = exact_[static_cast<size_t>(e)];
    if (p_.integer()) {  // terms and sums stay below 2^53 (the fills' ranges): exact in int64
      auto acc = static_cast<int64_t>(s0);
      for (double t : terms) acc += static_cast<int64_t>(t);
      exact_[static_cast<size_t>(e)] = static_cast<double>(acc);
      return;
    }
    DoubleDouble acc;
    acc.add(s0);
    for (double t : terms) acc.add(t);
    const double x = acc.value();
    exact_[static_cast<size_t>(e)] = x;
    const auto b = model_bounds(ElementSums{p_.dtype, s0, terms.data(), static_cast<int64_t>(terms.size()), x,
                                            p_.fill == Fill::normal, positions.data()});
    for (size_t k = 0; k < b.size(); ++k) {
      // Without a side of its own (the normal fill, where only warp32's one-signed group sums
      // may give a floor), `bound` holds the wider side for both.
      if (below_[k].empty()) above_[k][static_cast<size_t>(e)] = std::max(b[k].above, b[k].below);
      else above_[k][static_cast<size_t>(e)] = b[k].above, below_[k][static_cast<size_t>(e)] = b[k].below;
      groups_[k][static_cast<size_t>(e / group_)].add(b[k], x, p_.dtype);
    }
  }

  References take() {
    References r;
    if (!p_.integer()) {
      for (Accumulation a : all_accumulations()) {
        const auto k = static_cast<size_t>(a);
        r.conservation[bound_key(a)] = conservation(groups_[k]);
        // A side of its own only where some element's differs (never under `once`).
        if (!below_[k].empty() && below_[k] != above_[k]) r.bound_below[bound_key(a)] = std::move(below_[k]);
        r.bound[bound_key(a)] = std::move(above_[k]);
      }
    }
    r.exact["out"] = std::move(exact_);
    return r;
  }

 private:
  // One model's conservation check from its groups: each group's exact sum (double-double over
  // its elements in order) and interval, then the whole output's from the groups in order.
  Conservation conservation(std::vector<GroupBound>& groups) const {
    Conservation c;
    c.group = group_;
    const auto count = static_cast<int64_t>(groups.size());
    c.sum.resize(groups.size());
    c.below.resize(groups.size());
    c.above.resize(groups.size());
    const int64_t n = static_cast<int64_t>(exact_.size());
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t g = 0; g < count; ++g) {
      DoubleDouble sum;
      double abs_sum = 0;
      for (int64_t e = g * group_; e < std::min(n, (g + 1) * group_); ++e) {
        sum.add(exact_[static_cast<size_t>(e)]);
        abs_sum += std::fabs(exact_[static_cast<size_t>(e)]);
      }
      GroupBound& gb = groups[static_cast<size_t>(g)];
      gb.abs_sum = abs_sum;
      c.sum[static_cast<size_t>(g)] = sum.value();
      c.below[static_cast<size_t>(g)] = gb.below();
      c.above[static_cast<size_t>(g)] = gb.above();
    }
    DoubleDouble total;
    GroupBound all;
    for (int64_t g = 0; g < count; ++g) {
      total.add(c.sum[static_cast<size_t>(g)]);
      all.merge(groups[static_cast<size_t>(g)]);
    }
    c.total_sum = total.value();
    c.total_below = all.below();
    c.total_above = all.above();
    return c;
  }

  const Problem& p_;
  int64_t group_;
  std::vector<double> exact_;
  std::array<std::vector<double>, 4> above_, below_;
  std::array<std::vector<GroupBound>, 4> groups_;
};

References scatter_add_reference(const Problem& p, const TensorMap& in) {
  const HostTensor &index = in.at("index"), &src = in.at("src");
  Accumulator acc(p, in.at("self"));
  std::vector<double> terms;
  std::vector<int64_t> positions;
  if (p.inner > 1) {
    // A destination row's inner elements come from `inner` index columns: each column's
    // buckets are built for a chunk of columns at a time, then the rows are finished in
    // parallel, each row's elements in column order (the Accumulator's group order).
    constexpr int64_t kColumnsPerChunk = 256;
    std::vector<Buckets> cols(static_cast<size_t>(std::min(p.inner, kColumnsPerChunk)));
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t k0 = 0; k0 < p.inner; k0 += kColumnsPerChunk) {
        const int64_t k1 = std::min(p.inner, k0 + kColumnsPerChunk);
#pragma omp parallel for schedule(dynamic) if (p.m * (k1 - k0) > 4096)
        for (int64_t k = k0; k < k1; ++k)
          cols[static_cast<size_t>(k - k0)].build(
              p.n, p.m, [&](int64_t j) { return load_index(index, (o * p.m + j) * p.inner + k); });
#pragma omp parallel for schedule(dynamic, 16) firstprivate(terms, positions) if (p.n * (k1 - k0) > 4096)
        for (int64_t r = 0; r < p.n; ++r) {
          for (int64_t k = k0; k < k1; ++k) {
            const Buckets& b = cols[static_cast<size_t>(k - k0)];
            terms.clear();
            positions.clear();
            for (int64_t i = b.begin(r); i < b.end(r); ++i) {
              const int64_t t = (o * p.m + b.list[static_cast<size_t>(i)]) * p.inner + k;
              terms.push_back(load(src, t));
              positions.push_back(t);
            }
            acc.finish((o * p.n + r) * p.inner + k, terms, positions);
          }
        }
      }
    }
    return acc.take();
  }
  // inner = 1: every element is its own group. Many columns: one per thread; few (a 1-D
  // scatter): one at a time, its destinations split.
  const int64_t columns = p.outer;
  const bool by_column = columns >= 4 * max_threads();
  Buckets shared;
#pragma omp parallel for schedule(dynamic) firstprivate(shared, terms, positions) if (by_column)
  for (int64_t o = 0; o < columns; ++o) {
    auto at = [&](int64_t j) { return o * p.m + j; };
    shared.build(p.n, p.m, [&](int64_t j) { return load_index(index, at(j)); });
#pragma omp parallel for schedule(dynamic, 64) firstprivate(terms, positions) if (!by_column && p.m > 4096)
    for (int64_t r = 0; r < p.n; ++r) {
      terms.clear();
      positions.clear();
      for (int64_t b = shared.begin(r); b < shared.end(r); ++b) {
        const int64_t t = at(shared.list[static_cast<size_t>(b)]);
        terms.push_back(load(src, t));
        positions.push_back(t);
      }
      acc.finish(o * p.n + r, terms, positions);
    }
  }
  return acc.take();
}

References index_add_reference(const Problem& p, const TensorMap& in) {
  const HostTensor &index = in.at("index"), &source = in.at("source");
  Accumulator acc(p, in.at("self"));
  Buckets rows;
  rows.build(p.n, p.m, [&](int64_t j) { return load_index(index, j); });
  std::vector<double> terms;
  std::vector<int64_t> positions;
  // One destination row (a group) per iteration, its elements in order.
#pragma omp parallel for schedule(dynamic, 16) firstprivate(terms, positions) if (p.outer * p.n * p.inner > 4096)
  for (int64_t or_ = 0; or_ < p.outer * p.n; ++or_) {
    const int64_t o = or_ / p.n, r = or_ % p.n;
    if (rows.begin(r) == rows.end(r)) continue;
    for (int64_t k = 0; k < p.inner; ++k) {
      terms.clear();
      positions.clear();
      for (int64_t b = rows.begin(r); b < rows.end(r); ++b) {
        const int64_t t = (o * p.m + rows.list[static_cast<size_t>(b)]) * p.inner + k;
        terms.push_back(p.alpha * load(source, t));
        positions.push_back(t);
      }
      acc.finish(or_ * p.inner + k, terms, positions);
    }
  }
  return acc.take();
}

References index_select_reference(const Problem& p, const TensorMap& in) {
  const HostTensor &index = in.at("index"), &input = in.at("input");
  std::vector<double> out(static_cast<size_t>(p.out_numel()));
#pragma omp parallel for schedule(static) if (p.out_numel() > (1 << 16))
  for (int64_t oj = 0; oj < p.outer * p.m; ++oj) {
    const int64_t o = oj / std::max<int64_t>(1, p.m), row = load_index(index, oj % std::max<int64_t>(1, p.m));
    if (row < 0 || row >= p.n) continue;  // negative cases are refused before any reference is made
    for (int64_t k = 0; k < p.inner; ++k)
      out[static_cast<size_t>(oj * p.inner + k)] = load(input, (o * p.n + row) * p.inner + k);
  }
  References r;
  r.exact["out"] = std::move(out);
  return r;
}

}  // namespace

References reference(const Problem& p, const TensorMap& inputs) {
  switch (p.op) {
    case Op::scatter_add: return scatter_add_reference(p, inputs);
    case Op::index_add: return index_add_reference(p, inputs);
    case Op::index_select: return index_select_reference(p, inputs);
  }
  return {};
}

}  // namespace opcts::indexing

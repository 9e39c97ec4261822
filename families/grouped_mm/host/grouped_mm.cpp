// host.grouped: grouped GEMMs on the CPU through the plugin ABI's host backend, reading the offsets it is handed; plus
// five planted bugs.
//
// Why an ABI row and not a plain Impl: the host backend hands the output poisoned (0xFF bytes)
// between guard bands, exactly as the CUDA backend does, so "rows past the last offset are left
// untouched" and "no store past the output" are judged on this impl as on a GPU kernel
// (core/abi_impl.cpp). The impl learns the groups from `offs` alone and checks every argument
// itself (file comment of families/grouped_mm/grouped_mm.hpp), naming "K", "N", "offs", "a_scale" or
// "b_scale"; its addressing (offsets to row ranges, the swizzled scale layout) is its own.
// Arithmetic: codes decoded to fp32 (bf16, e4m3fn and e4m3fnuz are exact there; an mxfp8 code times its
// 2^e scale too), an fp32 GEMM per group (Eigen), rowwise scales applied to the fp32 result
// (two fp32 multiplications), one rounding to bf16 — inside the default IEEE fp32 model.
//
// Planted (must FAIL; each runs only the problems that show its bug, planted_bug_cannot_show):
//   host.grouped_stale_empty_group   2d_2d: a group of zero K writes the previous group's
//                                    accumulator instead of zeros (the main loop skipped, the
//                                    registers not cleared)
//   host.grouped_tail_overwritten    rows (columns) past the last offset written with zeros
//   host.grouped_offs_as_starts      offs[g] read as group g's start, offs[g+1] (the extent for
//                                    the last group) as its end
//   host.grouped_next_group_scales   group g reads group g + 1's B scales
//   host.grouped_spill_past_n        every row's stores run on to the next multiple of 16
//                                    columns (zeros into the next row, group or guard band)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include <Eigen/Dense>

#include "core/abi_impl.hpp"
#include "families/grouped_mm/grouped_mm.hpp"
#include "gpu/host/host_impls.hpp"
#include "numerics/dtype.hpp"

namespace opcts {

namespace {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using grouped_mm::Mode;
using grouped_mm::PlantedBug;
using grouped_mm::Recipe;

struct Refusal {
  std::string argument, why;
};

const opcts_tensor* find(const opcts_run_args* a, const char* name) {
  for (int32_t i = 0; i < a->n_tensors; ++i)
    if (std::strcmp(a->tensors[i].name, name) == 0) return &a->tensors[i];
  return nullptr;
}

int64_t numel(const opcts_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; t && i < t->ndim; ++i) n *= t->shape[i];
  return t ? n : 0;
}

void refuse_unless(bool ok, const char* argument, const std::string& why) {
  if (!ok) throw Refusal{argument, "host.grouped: " + why};
}

// Byte offset of scale (r, c) of an [rows, cols] block in cuBLAS's swizzled 128x4 tiles.
int64_t swizzled(int64_t r, int64_t c, int64_t cols) {
  const int64_t tiles_per_row = (cols + 3) / 4;
  return ((r / 128) * tiles_per_row + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}
int64_t up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// One group as this impl sees it: the row range of the split dimension, and the block shape.
struct Block {
  int64_t start = 0, end = 0;
};

class Grouped {
 public:
  Grouped(const opcts_grouped_mm_params& c, const opcts_run_args* a, PlantedBug bug, bool planted)
      : c_(c),
        mode_(from_abi<Mode>(c.mode, "mode")),
        recipe_(from_abi<Recipe>(c.recipe, "recipe")),
        a_(find(a, "a")),
        b_(find(a, "b")),
        offs_(find(a, "offs")),
        as_(find(a, "a_scale")),
        bs_(find(a, "b_scale")),
        out_(find(a, "out")),
        bug_(bug),
        planted_(planted) {}

  void run() {
    check();
    const int64_t G = c_.groups;
    std::vector<Block> blocks(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) blocks[static_cast<size_t>(g)] = block(g);
    scale_base('a', blocks, a_base_);
    scale_base('b', blocks, b_base_);
    MatF prev;
    for (int64_t g = 0; g < G; ++g) {
      const Block& bl = blocks[static_cast<size_t>(g)];
      MatF r = product(g, bl);
      if (is(PlantedBug::stale_empty_group) && depth(bl) == 0 && prev.size() > 0) r = prev;
      store(g, bl, r);
      if (depth(bl) > 0) prev = r;
    }
    if (is(PlantedBug::tail_overwritten)) overwrite_tail();
    if (is(PlantedBug::spill_past_n))
      for (int64_t g = 0; g < G; ++g) spill(g, blocks[static_cast<size_t>(g)]);
  }

 private:
  bool is(PlantedBug b) const { return planted_ && bug_ == b; }
  bool split_k() const { return mode_ == Mode::m2d_2d; }
  bool rowwise() const { return recipe_ == Recipe::rowwise || recipe_ == Recipe::rowwise_fnuz; }
  bool two_d_a() const { return mode_ == Mode::m2d_3d || mode_ == Mode::m2d_2d; }
  int64_t extent() const { return mode_ == Mode::m2d_3d ? c_.m : mode_ == Mode::m2d_2d ? c_.k : c_.n; }
  int64_t rows(const Block& b) const { return mode_ == Mode::m2d_3d ? b.end - b.start : c_.m; }
  int64_t cols(const Block& b) const { return mode_ == Mode::m3d_2d ? b.end - b.start : c_.n; }
  int64_t depth(const Block& b) const { return split_k() ? b.end - b.start : c_.k; }
  int64_t offs(int64_t g) const { return static_cast<const int32_t*>(offs_->data)[g]; }

  void check() const {
    const bool fp8 = recipe_ != Recipe::bf16, mx = recipe_ == Recipe::mxfp8;
    const int64_t G = c_.groups, km = mx ? 32 : fp8 ? 16 : 1, nm = fp8 ? 16 : 1;
    refuse_unless(split_k() || c_.k % km == 0, "K",
                  "K = " + std::to_string(c_.k) + " is not a multiple of " + std::to_string(km));
    refuse_unless(mode_ == Mode::m3d_2d || c_.n % nm == 0, "N",
                  "N = " + std::to_string(c_.n) + " is not a multiple of 16");
    if (mode_ == Mode::m3d_3d) return check_scales();
    refuse_unless(offs_ && offs_->ndim == 1 && offs_->dtype.code == OPCTS_DL_INT && offs_->dtype.bits == 32, "offs",
                  "offs must be a 1-D int32 tensor");
    refuse_unless(offs_->shape[0] == G, "offs",
                  "offs holds " + std::to_string(offs_->shape[0]) + " offsets for " + std::to_string(G) + " groups");
    const int64_t align = mx ? 32 : fp8 && split_k() ? 16 : 1;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t prev = g ? offs(g - 1) : 0;
      refuse_unless(offs(g) >= prev, "offs", "offs decreases at group " + std::to_string(g));
      refuse_unless(offs(g) <= extent(), "offs",
                    "offs[" + std::to_string(g) + "] = " + std::to_string(offs(g)) + " lies past the extent " +
                        std::to_string(extent()));
      refuse_unless(offs(g) % align == 0, "offs",
                    "offs[" + std::to_string(g) + "] is not a multiple of " + std::to_string(align));
    }
    check_scales();
  }

  void check_scales() const {
    if (recipe_ == Recipe::bf16) return;
    const int64_t G = c_.groups;
    int64_t want_a = 0, want_b = 0;
    if (rowwise()) {
      want_a = mode_ == Mode::m2d_3d ? c_.m : G * c_.m;
      want_b = mode_ == Mode::m3d_2d ? c_.n : G * c_.n;
    } else {
      want_a = mx_count('a');
      want_b = mx_count('b');
    }
    refuse_unless(numel(as_) == want_a, "scale_a",
                  "expected " + std::to_string(want_a) + " A scales, got " + std::to_string(numel(as_)));
    refuse_unless(numel(bs_) == want_b, "scale_b",
                  "expected " + std::to_string(want_b) + " B scales, got " + std::to_string(numel(bs_)));
  }

  // Group g's range along the split dimension: [offs[g-1], offs[g]) (3d_3d: none).
  Block true_block(int64_t g) const {
    if (mode_ == Mode::m3d_3d) return {0, 0};
    return {g ? offs(g - 1) : 0, offs(g)};
  }
  Block block(int64_t g) const {
    if (is(PlantedBug::offs_as_starts) && mode_ != Mode::m3d_3d)
      return {offs(g), g + 1 < c_.groups ? offs(g + 1) : extent()};
    return true_block(g);
  }

  // The mxfp8 placement (families/grouped_mm/grouped_mm.hpp's table, torchao's): the operand split along its
  // rows (A of 2d_3d, B of 3d_2d), along K (2d_2d), or 3-D.
  bool row_split(char which) const {
    return (which == 'a' && mode_ == Mode::m2d_3d) || (which == 'b' && mode_ == Mode::m3d_2d);
  }
  int64_t mx_rows(char which) const { return which == 'a' ? c_.m : c_.n; }  // K-split and 3-D operands
  int64_t mx_width() const { return c_.k / 32 + 4 * c_.groups; }
  int64_t mx_count(char which) const {
    if (split_k()) return up(mx_rows(which), 128) * mx_width();
    const int64_t cp = up(c_.k / 32, 4);
    return row_split(which) ? (extent() + 128 * c_.groups) * cp : c_.groups * up(mx_rows(which), 128) * cp;
  }
  // Where group g's scales start: an element (3-D, row-split) or a slab column (K-split).
  void scale_base(char which, const std::vector<Block>& blocks, std::vector<int64_t>& base) const {
    base.assign(blocks.size() + 1, 0);
    for (size_t g = 0; g < blocks.size(); ++g) {
      const Block& b = blocks[g];
      const int64_t r = which == 'a' ? rows(b) : cols(b);
      base[g + 1] = base[g] + (split_k() ? up(depth(b) / 32, 4) : up(r, 128) * up(c_.k / 32, 4));
    }
  }
  int64_t mx_index(int64_t base, int64_t r, int64_t c, int64_t cols) const {
    const int64_t f = swizzled(r, c, cols);
    if (!split_k()) return base + f;
    const int64_t cg = up(cols, 4);
    return f / cg * mx_width() + base + f % cg;
  }

  float value(const opcts_tensor* t, int64_t i) const {
    if (recipe_ == Recipe::bf16) return bf16_bits_to_fp32(static_cast<const uint16_t*>(t->data)[i]);
    const DType code = recipe_ == Recipe::rowwise_fnuz ? DType::e4m3fnuz : DType::e4m3fn;
    return static_cast<float>(decode(code, static_cast<const uint8_t*>(t->data)[i]));
  }

  // Operand `which` of group g as fp32 [rows, depth]; mxfp8 codes times their 2^e scales (exact).
  MatF operand(char which, int64_t g, const Block& bl) const {
    const opcts_tensor* t = which == 'a' ? a_ : b_;
    const int64_t R = which == 'a' ? rows(bl) : cols(bl), D = depth(bl), ld = t->shape[t->ndim - 1];
    // Where row 0 of the group's operand starts and where its K starts.
    int64_t row0 = 0, k0 = split_k() ? bl.start : 0;
    if (which == 'a') row0 = two_d_a() ? (mode_ == Mode::m2d_3d ? bl.start : 0) : g * c_.m;
    else row0 = mode_ == Mode::m3d_2d ? bl.start : split_k() ? 0 : g * c_.n;
    const int64_t sg = which == 'b' && is(PlantedBug::next_group_scales) ? std::min(g + 1, c_.groups - 1) : g;
    const int64_t base = (which == 'a' ? a_base_ : b_base_)[static_cast<size_t>(sg)];
    const auto* sc =
        static_cast<const uint8_t*>((which == 'a' ? as_ : bs_) ? (which == 'a' ? as_ : bs_)->data : nullptr);
    MatF x(R, D);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < D; ++k) {
        float v = value(t, (row0 + r) * ld + k0 + k);
        if (recipe_ == Recipe::mxfp8) v = std::ldexp(v, static_cast<int>(sc[mx_index(base, r, k / 32, D / 32)]) - 127);
        x(r, k) = v;
      }
    return x;
  }

  // Rowwise scale of row r of operand `which` in group g (per row of a 2-D operand spanning the
  // groups, else per group).
  float row_scale(char which, int64_t g, const Block& bl, int64_t r) const {
    const auto* s = static_cast<const float*>((which == 'a' ? as_ : bs_)->data);
    if (which == 'a') return s[mode_ == Mode::m2d_3d ? bl.start + r : g * c_.m + r];
    if (mode_ == Mode::m3d_2d) return s[bl.start + r];
    return s[(is(PlantedBug::next_group_scales) ? std::min(g + 1, c_.groups - 1) : g) * c_.n + r];
  }

  MatF product(int64_t g, const Block& bl) const {
    const int64_t R = rows(bl), C = cols(bl);
    if (R <= 0 || C <= 0) return MatF(std::max<int64_t>(R, 0), std::max<int64_t>(C, 0));
    MatF r = depth(bl) == 0 ? MatF::Zero(R, C) : MatF(operand('a', g, bl) * operand('b', g, bl).transpose());
    if (rowwise())
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) r(i, j) = r(i, j) * row_scale('a', g, bl, i) * row_scale('b', g, bl, j);
    return r;
  }

  // Element offset of the group's output block and its row stride.
  int64_t out0(int64_t g, const Block& bl) const {
    switch (mode_) {
      case Mode::m2d_3d: return bl.start * c_.n;
      case Mode::m3d_2d: return bl.start;
      default: return g * c_.m * c_.n;
    }
  }
  int64_t ld() const { return c_.n; }  // out is [.., n] row-major in every mode

  void store(int64_t g, const Block& bl, const MatF& r) const {
    auto* o = static_cast<uint16_t*>(out_->data);
    for (int64_t i = 0; i < r.rows(); ++i)
      for (int64_t j = 0; j < r.cols(); ++j) o[out0(g, bl) + i * ld() + j] = fp32_to_bf16_bits(r(i, j));
  }

  void overwrite_tail() const {
    auto* o = static_cast<uint16_t*>(out_->data);
    const int64_t last = offs(c_.groups - 1);
    if (mode_ == Mode::m2d_3d) std::fill(o + last * c_.n, o + c_.m * c_.n, uint16_t{0});
    if (mode_ == Mode::m3d_2d)
      for (int64_t i = 0; i < c_.m; ++i) std::fill(o + i * c_.n + last, o + (i + 1) * c_.n, uint16_t{0});
  }

  // Zeros into the columns from the block's width up to the next multiple of the tile; the
  // output's allocation has guard bytes after it, so the last row's spill lands there.
  void spill(int64_t g, const Block& bl) const {
    auto* o = static_cast<uint16_t*>(out_->data);
    const int64_t C = cols(bl),
                  pad = (C + grouped_mm::kPlantedNTile - 1) / grouped_mm::kPlantedNTile * grouped_mm::kPlantedNTile;
    for (int64_t i = 0; C > 0 && i < rows(bl); ++i)
      for (int64_t j = C; j < pad; ++j) o[out0(g, bl) + i * ld() + j] = 0;
  }

  opcts_grouped_mm_params c_;
  Mode mode_;  // c_'s mode and recipe, checked
  Recipe recipe_;
  const opcts_tensor *a_, *b_, *offs_, *as_, *bs_, *out_;
  PlantedBug bug_;
  bool planted_;
  std::vector<int64_t> a_base_, b_base_;
};

// impl_data of a row: its bug (ignored unless planted).
struct RowData {
  PlantedBug bug;
  bool planted;
};

// Every mode and recipe of include/opcts/plugin.h (as of OPCTS_GROUPED_ROWWISE_FNUZ); a later one is refused.
int32_t supports_known_recipes(const void*, const void* params, const opcts_arch*, char* reason, size_t size) {
  const auto* c = static_cast<const opcts_grouped_mm_params*>(params);
  try {
    from_abi<Mode>(c->mode, "mode");
    from_abi<Recipe>(c->recipe, "recipe");
  } catch (const AbiValueError& e) {
    std::snprintf(reason, size, "host.grouped: %s", e.what());
    return 0;
  }
  return 1;
}

opcts_status run_row(const void* impl, const opcts_run_args* a, opcts_report* report) {
  const auto* row = static_cast<const RowData*>(impl);
  try {
    Grouped(*static_cast<const opcts_grouped_mm_params*>(a->params), a, row->bug, row->planted).run();
  } catch (const Refusal& r) {
    std::snprintf(report->argument, sizeof report->argument, "%s", r.argument.c_str());
    std::snprintf(report->message, sizeof report->message, "%s", r.why.c_str());
    return OPCTS_INVALID_ARGUMENT;
  } catch (const AbiValueError& e) {
    std::snprintf(report->argument, sizeof report->argument, "%s", e.field.c_str());
    std::snprintf(report->message, sizeof report->message, "%s", e.what());
    return OPCTS_INVALID_ARGUMENT;
  }
  return OPCTS_OK;
}

}  // namespace

void register_host_grouped_mm(Registry& reg) {
  static const RowData kCorrect{PlantedBug::stale_empty_group, false};
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (PlantedBug b : grouped_mm::planted_bugs())
      v.push_back("host.grouped_" + std::string(grouped_mm::to_string(b)));
    return v;
  }();
  static const std::vector<RowData> planted = [] {
    std::vector<RowData> v;
    for (PlantedBug b : grouped_mm::planted_bugs()) v.push_back({b, true});
    return v;
  }();
  auto desc = [](const char* name, const RowData* data) {
    opcts_impl_desc d{};
    d.struct_size = sizeof d;
    d.family = "grouped_mm";
    d.name = name;
    d.backend = "host";
    d.planted = data->planted;
    d.supports = supports_known_recipes;
    d.run = run_row;
    d.impl_data = data;
    return d;
  };
  reg.add(std::make_unique<AbiImpl>(desc("host.grouped", &kCorrect), &host_abi_backend()));
  for (size_t i = 0; i < planted.size(); ++i) {
    auto impl = std::make_unique<AbiImpl>(desc(names[i].c_str(), &planted[i]), &host_abi_backend());
    const PlantedBug bug = planted[i].bug;
    impl->set_cannot_show(
        [bug](const Problem& p) { return grouped_mm::planted_bug_cannot_show(p.as<grouped_mm::Problem>(), bug); });
    reg.add(std::move(impl));
  }
}

}  // namespace opcts

// The sdpa problem's field table: YAML keys, id tokens and their order (sdpa.hpp, problem_id).
#include <algorithm>
#include <array>
#include <tuple>

#include "families/sdpa/sdpa.hpp"

namespace opcts::sdpa {

namespace {

using kit::Field;

// Reads the keys of a sub-map, refusing any other (a typo must not pass silently).
void check_subkeys(const YAML::Node& v, std::initializer_list<const char*> keys) {
  for (const auto& kv : v) {
    const auto k = kv.first.as<std::string>();
    bool ok = false;
    std::string list;
    for (const char* a : keys) {
      ok = ok || k == a;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    if (!ok) throw std::invalid_argument("unknown key '" + k + "' (expected " + list + ")");
  }
}

// `heads: 12` or `heads: {q: 32, kv: 8}`, likewise `seq: {q, k}`; the id spells both halves.
Field<Problem> pair_field(const char* key, int64_t Problem::*first, int64_t Problem::*second, const char* a,
                          const char* b, const char* id_a, const char* id_b) {
  Field<Problem> f;
  f.key = key;
  f.doc = std::string("N or {") + a + ": N, " + b + ": N}";
  f.id = std::string(id_a) + "N_" + id_b + "N";
  f.required = true;
  f.read = [=](Problem& p, const YAML::Node& m) {
    const YAML::Node v = m[key];
    if (v.IsScalar()) {
      p.*first = p.*second = kit::field_as_value<int64_t>(v);
      return;
    }
    if (!v.IsMap() || !v[a] || !v[b])
      throw std::invalid_argument(std::string("expected N or {") + a + ": N, " + b + ": N}");
    check_subkeys(v, {a, b});
    p.*first = kit::field_as_value<int64_t>(v[a], a);
    p.*second = kit::field_as_value<int64_t>(v[b], b);
  };
  f.write = [=](const Problem& p, std::vector<std::string>& t) {
    t.push_back(id_a + kit::int_token(p.*first));
    t.push_back(id_b + kit::int_token(p.*second));
  };
  f.scan = [=](Problem& p, kit::IdReader& in) {
    for (const auto& [prefix, member] : {std::pair{id_a, first}, std::pair{id_b, second}}) {
      const auto n = in.take_prefixed(prefix);
      if (!n) throw std::invalid_argument("token '" + in.peek() + "': expected " + prefix + "N");
      p.*member = kit::parse_int_token(*n);
    }
  };
  return f;
}

// Varlen lengths in an id: the lengths joined by 'x', a run of one length written LrN (N
// times): [1, 1, 1, 512] is "1r3x512". A single length is just L; no sequence at all is 0r0.
std::string lengths_token(const std::vector<int64_t>& lens) {
  if (lens.empty()) return "0r0";
  std::string out;
  for (size_t i = 0; i < lens.size();) {
    size_t j = i;
    while (j < lens.size() && lens[j] == lens[i]) ++j;
    if (!out.empty()) out += 'x';
    out += kit::int_token(lens[i]);
    if (j - i > 1) out += "r" + std::to_string(j - i);
    i = j;
  }
  return out;
}

// One element "L" or "LrN" (YAML list items may use it too) appended to `lens`.
void append_lengths(std::string_view t, std::vector<int64_t>& lens) {
  const size_t r = t.find('r');
  const int64_t len = kit::parse_int_token(t.substr(0, r));
  int64_t count = 1;
  if (r != std::string_view::npos) {
    count = kit::parse_int_token(t.substr(r + 1));
    if (count < 0 || count > (int64_t{1} << 24))
      throw std::invalid_argument("'" + std::string(t) + "': a run LrN needs 0 <= N <= 2^24");
  }
  lens.insert(lens.end(), static_cast<size_t>(count), len);
}

std::vector<int64_t> parse_lengths_token(std::string_view t) {
  std::vector<int64_t> lens;
  for (size_t i = 0; i <= t.size();) {
    const size_t x = std::min(t.find('x', i), t.size());
    append_lengths(t.substr(i, x - i), lens);
    i = x + 1;
  }
  return lens;
}

int64_t largest(const std::vector<int64_t>& lens) {
  return lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
}

// `seq: N`, `{q: N, k: N}`, or for layout varlen `{q: [lengths], k: [lengths]}` (an item may
// be "LrN", N sequences of length L): the lists set batch and the largest lengths set seq.q and
// seq.k. The id spells a varlen problem's lengths in sqL..._skL... (lengths_token).
Field<Problem> seq_field() {
  Field<Problem> f = pair_field("seq", &Problem::seq_q, &Problem::seq_k, "q", "k", "sq", "sk");
  f.doc =
      "N or {q: N, k: N}; varlen and paged: {q: [L, ...], k: [L, ...]} (an item LrN repeats L N times; the id "
      "lists the lengths as LxL..., LrN)";
  f.id = "sqN_skN";
  const auto dense_read = f.read;
  f.read = [dense_read](Problem& p, const YAML::Node& m) {
    const YAML::Node v = m["seq"];
    if (!v.IsMap() || !v["q"] || !v["q"].IsSequence()) return dense_read(p, m);
    check_subkeys(v, {"q", "k"});
    if (!v["k"] || !v["k"].IsSequence())
      throw std::invalid_argument("expected {q: [lengths], k: [lengths]}: both lists, one length per sequence");
    for (const auto& [key, lens] : {std::pair{"q", &p.seqlens_q}, std::pair{"k", &p.seqlens_k}}) {
      lens->clear();
      for (const auto& item : v[key]) append_lengths(kit::field_as_scalar(item, key), *lens);
    }
    if (p.seqlens_q.size() != p.seqlens_k.size())
      throw std::invalid_argument("q lists " + std::to_string(p.seqlens_q.size()) + " sequences, k lists " +
                                  std::to_string(p.seqlens_k.size()));
    const int64_t n = static_cast<int64_t>(p.seqlens_q.size());
    if (m["batch"] && kit::field_as_value<int64_t>(m["batch"], "batch") != n)
      throw std::invalid_argument("batch: " + kit::field_as_scalar(m["batch"], "batch") +
                                  " given, but the lists hold " + std::to_string(n) + " sequences (leave batch out)");
    p.batch = n;
    p.seq_q = largest(p.seqlens_q);
    p.seq_k = largest(p.seqlens_k);
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.push_back("sq" + (p.packed() ? lengths_token(p.seqlens_q) : kit::int_token(p.seq_q)));
    t.push_back("sk" + (p.packed() ? lengths_token(p.seqlens_k) : kit::int_token(p.seq_k)));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    for (const auto& [prefix, member, lens] :
         {std::tuple{"sq", &Problem::seq_q, &p.seqlens_q}, std::tuple{"sk", &Problem::seq_k, &p.seqlens_k}}) {
      const auto n = in.take_prefixed(prefix);
      if (!n) throw std::invalid_argument("token '" + in.peek() + "': expected " + std::string(prefix) + "N");
      // Read as lengths; a dense problem's one length moves to seq when the layout is read.
      *lens = parse_lengths_token(*n);
      p.*member = largest(*lens);
    }
  };
  return f;
}

// `layout: bhsd | bshd | varlen | paged`. A dense layout drops the lengths the id's seq tokens
// left; varlen or paged given scalar lengths makes every one of the batch's sequences that long.
Field<Problem> layout_field() {
  Field<Problem> f = kit::enum_choice<Problem>("layout", &Problem::layout);
  auto settle = [](Problem& p) {
    if (!p.packed()) {
      if (p.seqlens_q.size() > 1 || p.seqlens_k.size() > 1)
        throw std::invalid_argument("seq: lists of lengths need layout: varlen or paged");
      p.seqlens_q.clear();
      p.seqlens_k.clear();
    } else if (p.seqlens_q.empty() && p.seqlens_k.empty() && p.batch > 0) {
      p.seqlens_q.assign(static_cast<size_t>(p.batch), p.seq_q);
      p.seqlens_k.assign(static_cast<size_t>(p.batch), p.seq_k);
    } else if (p.seqlens_q.size() == 1 && p.batch != 1) {  // an id's single length: every sequence's
      p.seqlens_q.assign(static_cast<size_t>(std::max<int64_t>(p.batch, 0)), p.seq_q);
      p.seqlens_k.assign(static_cast<size_t>(std::max<int64_t>(p.batch, 0)), p.seq_k);
    }
  };
  const auto read = f.read;
  f.read = [read, settle](Problem& p, const YAML::Node& m) {
    read(p, m);
    settle(p);
  };
  const auto scan = f.scan;
  f.scan = [scan, settle](Problem& p, kit::IdReader& in) {
    scan(p, in);
    settle(p);
  };
  return f;
}

// `head_dim: 128` (Dqk = Dv) or `{qk: 192, v: 128}`; the id is dD, or dDvDV when they differ.
Field<Problem> head_dim_field() {
  Field<Problem> f = pair_field("head_dim", &Problem::head_dim, &Problem::head_dim_v, "qk", "v", "d", "v");
  f.id = "dD[vDV]";
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    t.push_back("d" + kit::int_token(p.head_dim) +
                (p.head_dim_v != p.head_dim ? "v" + kit::int_token(p.head_dim_v) : ""));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    const auto d = in.take_prefixed("d");
    if (!d) throw std::invalid_argument("token '" + in.peek() + "': expected dD or dDvDV");
    const size_t v = d->find('v');
    p.head_dim = kit::parse_int_token(d->substr(0, v));
    p.head_dim_v = v == std::string::npos ? p.head_dim : kit::parse_int_token(d->substr(v + 1));
  };
  return f;
}

// An optional number written as <prefix><number> when set (scale) or non-zero (softcap).
Field<Problem> scale_field() {
  Field<Problem> f;
  f.key = "scale";
  f.doc = "X (default 1/sqrt(head_dim))";
  f.id = "[scaleX]";
  f.read = [](Problem& p, const YAML::Node& m) {
    if (const YAML::Node v = m["scale"]) p.scale = kit::field_as_value<double>(v);
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.scale) t.push_back("scale" + kit::num_token(*p.scale));
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (const auto v = in.take_prefixed("scale")) p.scale = kit::parse_num_token(*v);
  };
  return f;
}

Field<Problem> softcap_field() {
  return kit::num_when<Problem>("softcap", &Problem::softcap, "cap", "C", "C >= 0 (0 = off; s = C·tanh(s/C))",
                                [](const Problem& p) { return p.softcap != 0; });
}

// Two integers, `KEY: {A: x, B: y}` (or none), written PREFIXxXy with each as an id number: the
// window (winLxR, either side may be left out: -1) and the block mask (blkQxK, both needed).
// `unset`: the value of a side not given, and of both when the field is off.
Field<Problem> int_pair_field(const std::string& key, const std::string& doc, const std::string& prefix,
                              const std::string& spelled, std::array<std::string, 2> names, int64_t Problem::*a,
                              int64_t Problem::*b, int64_t unset, bool both) {
  Field<Problem> f;
  f.key = key;
  f.doc = doc;
  f.id = "[" + prefix + spelled + "]";
  f.read = [=](Problem& p, const YAML::Node& m) {
    const YAML::Node w = m[key];
    if (!w || (w.IsScalar() && w.Scalar() == "none")) return;
    const std::string form = "{" + names[0] + ": N, " + names[1] + ": N}";
    if (!w.IsMap()) throw std::invalid_argument("expected " + form + " or none");
    check_subkeys(w, {names[0].c_str(), names[1].c_str()});
    if (both && (!w[names[0]] || !w[names[1]])) throw std::invalid_argument("needs both of " + form);
    if (w[names[0]]) p.*a = kit::field_as_value<int64_t>(w[names[0]], names[0]);
    if (w[names[1]]) p.*b = kit::field_as_value<int64_t>(w[names[1]], names[1]);
  };
  f.write = [=](const Problem& p, std::vector<std::string>& t) {
    if (p.*a != unset || p.*b != unset) t.push_back(prefix + kit::int_token(p.*a) + "x" + kit::int_token(p.*b));
  };
  f.scan = [=](Problem& p, kit::IdReader& in) {
    const auto w = in.take_prefixed(prefix);
    if (!w) return;
    const size_t x = w->find('x');
    if (x == std::string::npos)
      throw std::invalid_argument("token '" + prefix + *w + "': expected " + prefix + spelled);
    p.*a = kit::parse_int_token(w->substr(0, x));
    p.*b = kit::parse_int_token(w->substr(x + 1));
  };
  return f;
}

Field<Problem> window_field() {
  return int_pair_field("window", "{left: L, right: R} (-1 = unbounded, either may be left out) or none", "win", "LxR",
                        {"left", "right"}, &Problem::window_left, &Problem::window_right, -1, false);
}

// `attn_mask: bool | additive | none` or `{kind, per_batch, per_head}`; id bmask/amask + b, h.
Field<Problem> attn_mask_field() {
  Field<Problem> f;
  f.key = "attn_mask";
  f.doc = "none | bool | additive, or {kind: bool | additive, per_batch: B, per_head: B, per_query: B}";
  f.id = "[bmask|amask][b][h][k]";
  auto kind = [](const std::string& k) {
    if (k == "boolean") return MaskTensor::boolean;  // an alias of its name, bool
    for (const auto& n : kMaskTensorNames)
      if (k == n.yaml) return n.value;
    throw std::invalid_argument("unknown kind '" + k + "' (expected none, bool or additive)");
  };
  f.read = [kind](Problem& p, const YAML::Node& m) {
    const YAML::Node v = m["attn_mask"];
    if (!v) return;
    if (v.IsScalar()) {
      p.mask_tensor = kind(v.Scalar());
      return;
    }
    if (!v.IsMap()) throw std::invalid_argument("expected none, bool, additive or {kind, per_batch, per_head}");
    check_subkeys(v, {"kind", "per_batch", "per_head", "per_query"});
    if (!v["kind"]) throw std::invalid_argument("missing 'kind' (bool or additive)");
    p.mask_tensor = kind(kit::field_as_scalar(v["kind"], "kind"));
    if (v["per_batch"]) p.mask_per_batch = kit::field_as_value<bool>(v["per_batch"], "per_batch");
    if (v["per_head"]) p.mask_per_head = kit::field_as_value<bool>(v["per_head"], "per_head");
    if (v["per_query"]) p.mask_per_query = kit::field_as_value<bool>(v["per_query"], "per_query");
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.mask_tensor == MaskTensor::none) return;
    std::string s(enum_id(p.mask_tensor));
    if (p.mask_per_batch) s += 'b';
    if (p.mask_per_head) s += 'h';
    if (!p.mask_per_query) s += 'k';
    t.push_back(s);
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    for (const auto& [k, yaml, prefix] : kMaskTensorNames) {
      const std::string& t = in.peek();
      if (prefix.empty() || t.rfind(prefix, 0) != 0) continue;
      std::string flags = t.substr(5);
      const bool keys_only = !flags.empty() && flags.back() == 'k';
      if (keys_only) flags.pop_back();
      if (flags != "" && flags != "b" && flags != "h" && flags != "bh")
        throw std::invalid_argument("token '" + t +
                                    "': expected bmask or amask with an optional b, h or bh, then an optional k");
      p.mask_tensor = k;
      p.mask_per_batch = flags.find('b') != std::string::npos;
      p.mask_per_head = flags.find('h') != std::string::npos;
      p.mask_per_query = !keys_only;
      in.take("the attn_mask");
      return;
    }
  };
  return f;
}

// `block_mask: {q: Q, k: K}`: block-sparse attention in blocks of Q query rows and K keys; id blkQxK.
Field<Problem> block_mask_field() {
  return int_pair_field(
      "block_mask", "{q: Q, k: K}: block-sparse attention, blocks of Q query rows and K keys (block_kept's pattern)",
      "blk", "QxK", {"q", "k"}, &Problem::block_q, &Problem::block_k, 0, true);
}

// `fp8: {tensors: qkv | kv, format: e4m3fn | e5m2, descale: per_tensor | per_head, out: e4m3fn,
// out_scale: N}` (tensors required) or `none`; id fp8qkv / fp8kv, then e5m2 for that format, h for
// per_head, o for the fp8 output and its o_scale after it where it is not kFp8OutScale (o400).
Field<Problem> fp8_field() {
  Field<Problem> f;
  f.key = "fp8";
  f.doc =
      "none or {tensors: qkv | kv, format: e4m3fn | e5m2 (default e4m3fn), descale: per_tensor | per_head, out: "
      "e4m3fn (O as fp8 with o_scale; default: the dtype), out_scale: o_scale, a positive integer (default 40)}";
  f.id = "[fp8qkv|fp8kv][e5m2][h][o[N]]";
  f.read = [](Problem& p, const YAML::Node& m) {
    const YAML::Node v = m["fp8"];
    if (!v || (v.IsScalar() && v.Scalar() == "none")) return;
    const std::string form = "{tensors: qkv | kv, format: e4m3fn | e5m2, descale: per_tensor | per_head}";
    if (!v.IsMap()) throw std::invalid_argument("expected none or " + form);
    check_subkeys(v, {"tensors", "format", "descale", "out", "out_scale"});
    if (!v["tensors"]) throw std::invalid_argument("missing 'tensors' (qkv or kv)");
    const std::string t = kit::field_as_scalar(v["tensors"], "tensors");
    if (t != "qkv" && t != "kv") throw std::invalid_argument("tensors: expected qkv or kv, got '" + t + "'");
    p.fp8 = t == "qkv" ? Fp8::qkv : Fp8::kv;
    if (v["format"]) {
      const std::string fmt = kit::field_as_scalar(v["format"], "format");
      try {
        p.fp8_format = parse_dtype(fmt);
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument("format: expected e4m3fn or e5m2, got '" + fmt + "'");
      }
    }
    if (v["descale"]) {
      const std::string d = kit::field_as_scalar(v["descale"], "descale");
      if (d != "per_tensor" && d != "per_head")
        throw std::invalid_argument("descale: expected per_tensor or per_head, got '" + d + "'");
      p.descale = d == "per_head" ? Descale::per_head : Descale::per_tensor;
    }
    if (v["out"]) {
      const std::string o = kit::field_as_scalar(v["out"], "out");
      if (o != "e4m3fn") throw std::invalid_argument("out: expected e4m3fn, got '" + o + "'");
      p.fp8_out = true;
    }
    if (v["out_scale"]) {
      if (!p.fp8_out) throw std::invalid_argument("out_scale: the scale of an fp8 output (out: e4m3fn)");
      const std::string n = kit::field_as_scalar(v["out_scale"], "out_scale");
      if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos || std::stoll(n) < 1)
        throw std::invalid_argument("out_scale: expected a positive integer, got '" + n + "'");
      p.fp8_out_scale = std::stoll(n);
    }
  };
  f.write = [](const Problem& p, std::vector<std::string>& t) {
    if (p.fp8 == Fp8::none) return;
    std::string s(enum_id(p.fp8));
    if (p.fp8_format != DType::e4m3fn) s += name(p.fp8_format);
    if (p.descale == Descale::per_head) s += 'h';
    if (p.fp8_out) s += 'o';
    if (p.fp8_out && p.fp8_out_scale != static_cast<int64_t>(kFp8OutScale)) s += std::to_string(p.fp8_out_scale);
    t.push_back(s);
  };
  f.scan = [](Problem& p, kit::IdReader& in) {
    if (in.done()) return;
    const std::string t = in.peek();
    for (const Fp8 k : {Fp8::qkv, Fp8::kv}) {
      const std::string prefix(enum_id(k));
      if (t.rfind(prefix, 0) != 0) continue;
      std::string r = t.substr(prefix.size());
      p.fp8 = k;
      // o, or o<N> with N the o_scale (never the default's digits: one id per problem).
      const size_t digits = r.find_last_not_of("0123456789");
      if (digits != std::string::npos && r[digits] == 'o' && digits + 1 < r.size()) {
        const std::string n = r.substr(digits + 1);
        if (n.size() > 9 || n[0] == '0' || std::stoll(n) == static_cast<int64_t>(kFp8OutScale))
          throw std::invalid_argument("token '" + t +
                                      "': an o_scale is written oN, N without leading zeros, and the default 40 as o");
        p.fp8_out_scale = std::stoll(n);
        r.resize(digits + 1);
      }
      if (!r.empty() && r.back() == 'o') p.fp8_out = true, r.pop_back();
      if (!r.empty() && r.back() == 'h') p.descale = Descale::per_head, r.pop_back();
      if (r == "e5m2") p.fp8_format = DType::e5m2;
      else if (!r.empty()) throw std::invalid_argument("token '" + t + "': expected " + prefix + "[e5m2][h][o[N]]");
      in.take("fp8");
      return;
    }
  };
  return f;
}

// `corrupt: block_table | seqused_k | cu_seqlens_q | cu_seqlens_k` (a packed problem's negative
// case, written into its index inputs); the id spells it corrupt_<name>.
Field<Problem> corrupt_field() {
  std::vector<kit::Choice<Corrupt>> choices{{Corrupt::none, "none", ""}};
  for (size_t i = 1; i < kCorruptNames.size(); ++i)
    choices.push_back(
        {static_cast<Corrupt>(i), std::string(kCorruptNames[i]), "corrupt_" + std::string(kCorruptNames[i])});
  return kit::choice<Problem, Corrupt>("corrupt", &Problem::corrupt, std::move(choices));
}

// A YAML-only row: the refusal a negative case expects is checked against the argument
// contract after validation (the table's check_yaml), so the id need not carry it.
Field<Problem> expect_field() {
  Field<Problem> f;
  f.key = "expect_error";
  f.doc =
      "the argument impls must refuse (heads_kv, window_left, window_right, softcap, or what corrupt names): a "
      "negative case";
  f.read = [](Problem&, const YAML::Node& m) {
    if (const YAML::Node v = m["expect_error"]) kit::field_as_scalar(v);
  };
  return f;
}

void check_expect_error(const Problem& p, const YAML::Node& m) {
  const std::string expect = m["expect_error"] ? kit::field_as_scalar(m["expect_error"]) : "";
  const auto v = contract_violation(p);
  if (v && expect != v->argument)
    throw std::invalid_argument("the problem breaks the argument contract (" + v->why +
                                "): it needs expect_error: " + v->argument);
  if (!v && !expect.empty())
    throw std::invalid_argument("expect_error: " + expect + " given, but the problem is valid");
}

}  // namespace

const kit::FieldTable<Problem>& fields() {
  static const kit::FieldTable<Problem> table(
      "sdpa",
      {kit::dtype_bare<Problem>("dtype", &Problem::dtype, "bf16 | fp16 | fp32"),
       kit::int_always<Problem>("batch", &Problem::batch, "b", "N (default 1)", false),
       pair_field("heads", &Problem::heads_q, &Problem::heads_kv, "q", "kv", "hq", "hkv"),
       seq_field(),
       head_dim_field(),
       kit::enum_choice<Problem>("mask", &Problem::mask),
       scale_field(),
       window_field(),
       kit::int_unless<Problem, int64_t>("chunk", &Problem::chunk, 0, "chunk",
                                         "C keys a chunk: chunked-local attention (Llama 4, FlashAttention 3's "
                                         "attention_chunk; 0 = off)"),
       kit::flag<Problem>("sinks", &Problem::sinks, "sink"),
       kit::enum_choice<Problem>("alibi", &Problem::alibi),
       softcap_field(),
       attn_mask_field(),
       kit::flag<Problem>("dbias", &Problem::dbias, "dbias"),
       block_mask_field(),
       fp8_field(),
       kit::flag<Problem>("poison_masked", &Problem::poison_masked, "poison"),
       layout_field(),
       kit::int_unless<Problem, int64_t>("page_size", &Problem::page_size, 0, "page",
                                         "N tokens per page of the KV cache (layout paged)"),
       kit::enum_choice<Problem>("kv_layout", &Problem::kv_layout),
       kit::int_unless<Problem, int64_t>("shared_prefix", &Problem::shared_prefix, 0, "prefix",
                                         "N keys at the start of every sequence on shared pages (layout paged; "
                                         "a multiple of page_size)"),
       kit::int_unless<Problem, int64_t>("pad_k", &Problem::pad_k, 0, "padk",
                                         "N padding rows after each sequence's keys in K and V (layout varlen; "
                                         "seqused_k gives the keys in use)"),
       kit::enum_choice<Problem>("direction", &Problem::direction),
       corrupt_field(),
       expect_field()},
      [](const Problem& p) { p.validate(); }, check_expect_error);
  return table;
}

}  // namespace opcts::sdpa

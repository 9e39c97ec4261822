// The id tokenizer and number tokens of the family kit.
#include "core/fields.hpp"

#include <charconv>

namespace opcts::kit {

IdReader::IdReader(std::string_view id) {
  for (size_t s = 0; s <= id.size();) {
    size_t e = id.find('_', s);
    if (e == std::string_view::npos) e = id.size();
    tokens_.emplace_back(id.substr(s, e - s));
    s = e + 1;
  }
}

const std::string& IdReader::peek() const {
  static const std::string none;
  return done() ? none : tokens_[pos_];
}

std::string IdReader::take(std::string_view what) {
  if (done()) throw std::invalid_argument("ends before " + std::string(what));
  return tokens_[pos_++];
}

bool IdReader::take_seq(std::string_view name) {
  size_t p = pos_;
  for (size_t s = 0; s <= name.size();) {
    size_t e = name.find('_', s);
    if (e == std::string_view::npos) e = name.size();
    if (p >= tokens_.size() || tokens_[p] != name.substr(s, e - s)) return false;
    ++p;
    s = e + 1;
  }
  pos_ = p;
  return true;
}

std::optional<std::string> IdReader::take_prefixed(std::string_view prefix) {
  if (done()) return std::nullopt;
  const std::string& t = tokens_[pos_];
  if (t.size() <= prefix.size() || t.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  ++pos_;
  return t.substr(prefix.size());
}

std::string IdReader::take_rest() {
  std::string s;
  while (!done()) s += (s.empty() ? "" : "_") + tokens_[pos_++];
  return s;
}

std::string num_token(double x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  std::string s;
  for (const char* c = buf; c != r.ptr; ++c) {
    if (*c == '.') s += 'p';
    else if (*c == '-') s += 'm';
    else if (*c != '+') s += *c;
  }
  return s;
}

double parse_num_token(std::string_view t) {
  if (t.find_first_of(".-+") != std::string_view::npos)
    throw std::invalid_argument("'" + std::string(t) + "' is not a number token (digits, 'p' for '.', 'm' for '-')");
  std::string s;
  for (char c : t) s += c == 'p' ? '.' : c == 'm' ? '-' : c;
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw std::invalid_argument("'" + std::string(t) + "' is not a number token (digits, 'p' for '.', 'm' for '-')");
  return v;
}

std::string int_token(int64_t v) {
  std::string s = std::to_string(v);
  if (v < 0) s[0] = 'm';
  return s;
}

int64_t parse_int_token(std::string_view t) {
  const bool neg = !t.empty() && t[0] == 'm';
  const std::string_view digits = neg ? t.substr(1) : t;
  int64_t v = 0;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || digits[0] == '-' || digits[0] == '+' || r.ec != std::errc() ||
      r.ptr != digits.data() + digits.size())
    throw std::invalid_argument("'" + std::string(t) + "' is not an integer token (digits, 'm' for '-')");
  return neg ? -v : v;
}

}  // namespace opcts::kit

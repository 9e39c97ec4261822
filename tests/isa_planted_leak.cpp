// A planted per-level object for tests/check_isa_objects.cmake: beside a function in the base
// level's namespace it instantiates std::vector<double>, whose members are weak symbols outside
// that namespace, which the linker may share with any other object's copies (compiled for
// another level). The check must refuse it (WILL_FAIL).
#include <vector>

template class std::vector<double>;

namespace opcts::ref::isa::base {

double planted_leak(const std::vector<double>& v) { return v.empty() ? 0.0 : v.front(); }

}  // namespace opcts::ref::isa::base

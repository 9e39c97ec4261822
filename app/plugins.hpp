// Loading plugins (include/opcts/plugin.h) into a registry: dlopen, the ABI version, registration.
#pragma once

#include <string>
#include <vector>

#include "core/abi_impl.hpp"
#include "core/family.hpp"

namespace opcts {

/// The backend that runs ABI impls of one backend name in this build: host memory for "host",
/// device memory for "cuda" when CUDA is built; null with the reason otherwise.
struct BackendChoice {
  const AbiBackend* backend = nullptr;
  std::string missing;  // why there is none ("this opcts was built without CUDA ...")
};
BackendChoice abi_backend_for(const std::string& backend);

/// Registers the impls of the plugin at `path` into `reg`. A plugin is all or nothing: one that
/// cannot be opened, lacks the entry point, refuses the ABI version, or adds an impl that is
/// malformed, of an unknown family or backend, or named like another impl adds nothing, and
/// the returned message names the plugin and every reason ("" on success).
/// A path ending in ".py" or a name "py:package.module" is a Python module: the Python plugin
/// host (plugins/python, python_host_library()) imports it, once per process, and registers
/// its `@opcts.impl` functions under the same checks; an import that raises is such a reason,
/// with the traceback's last lines.
std::string load_plugin(Registry& reg, const std::string& path);

/// Whether `path` names a Python module (".py" file or "py:" prefix) rather than a library.
bool is_python_plugin(const std::string& path);

/// The Python plugin host's library: OPCTS_PYTHON_HOST, else libopcts_python.so beside this
/// program (a build tree's bin/) or in the install's lib/opcts/.
std::string python_host_library();

}  // namespace opcts

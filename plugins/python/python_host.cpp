// The Python plugin host (libopcts_python.so): an embedded CPython that imports a module of
// `@opcts.impl` functions (python/opcts/) and registers them through the plugin ABI
// (include/opcts/plugin.h), so that `opcts run --plugin my_kernels.py` (or `py:package.module`)
// judges them like a C plugin's impls. app/plugins.cpp loads this library for a `.py` path or a
// `py:` name and calls opcts_python_plugin_init; every process that loads plugins (the probes,
// each worker) starts the interpreter and imports the module once, never per case.
//
// The C++ side only moves bytes: a case's parameter struct as `bytes`, each tensor as a tuple
// (name, pointer, DLPack code and bits, shape, strides, packing, is_output, and a writable
// memoryview over host memory), the stream as an integer. python/opcts/_host.py turns them into
// the problem object and numpy views (or DLPack-capable device tensors), calls the impl, and
// maps what it raised onto the ABI's statuses.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "opcts/plugin.h"

#ifndef OPCTS_PYTHON_EXECUTABLE
#define OPCTS_PYTHON_EXECUTABLE ""
#endif
#ifndef OPCTS_PYTHON_PKG_FROM_LIB
#define OPCTS_PYTHON_PKG_FROM_LIB "../../share/opcts/python"
#endif

namespace {

namespace fs = std::filesystem;

// What one registered impl needs in the callbacks: its index in _host's table.
struct PyImpl {
  long index = 0;
  std::string family, name, backend;
  std::vector<std::string> caps;
  std::vector<const char*> cap_ptrs;
};

std::deque<PyImpl> g_impls;  // stable addresses: impl_data points into it
PyObject* g_host = nullptr;  // the opcts._host module
PyObject* g_run = nullptr;
PyObject* g_supports = nullptr;
PyObject* g_deterministic = nullptr;
PyObject* g_invariance = nullptr;
PyObject* g_tactics = nullptr;
std::string g_init_error;  // why the interpreter could not start (sticky for the process)

void copy_text(char* dst, size_t size, const std::string& s) {
  if (!dst || size == 0) return;
  const size_t n = std::min(size - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

// The last `size - 1` bytes of `s`, marked as cut: a traceback's end is what matters.
std::string tail(const std::string& s, size_t size) {
  if (s.size() < size) return s;
  return "..." + s.substr(s.size() - (size - 4));
}

std::string utf8(PyObject* o) {
  if (!o) return "";
  if (PyUnicode_Check(o)) {
    const char* c = PyUnicode_AsUTF8(o);
    if (c) return c;
    PyErr_Clear();
    return "";
  }
  PyObject* s = PyObject_Str(o);
  std::string out = s ? utf8(s) : "";
  Py_XDECREF(s);
  if (!s) PyErr_Clear();
  return out;
}

// The pending Python exception as one line (for errors _host.py could not catch itself).
std::string take_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject* type_name = type ? PyObject_GetAttrString(type, "__name__") : nullptr;
  std::string msg = type_name ? utf8(type_name) : "error";
  Py_XDECREF(type_name);
  if (value) msg += ": " + utf8(value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg;
}

// This library's folder, from which the opcts Python package is found (build tree and install).
fs::path own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) && info.dli_fname) return fs::path(info.dli_fname).parent_path();
  return {};
}

// The folder holding the `opcts` package: OPCTS_PYTHON_PATH, else share/opcts/python from this
// library's folder (bin/ of a build tree; lib/opcts/ of an install: OPCTS_PYTHON_PKG_FROM_LIB).
std::string package_dir() {
  if (const char* env = std::getenv("OPCTS_PYTHON_PATH"); env && *env) return env;
  const fs::path dir = own_dir();
  for (const fs::path& p : {dir / ".." / "share" / "opcts" / "python", dir / OPCTS_PYTHON_PKG_FROM_LIB}) {
    std::error_code ec;
    if (fs::exists(p / "opcts" / "__init__.py", ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

// Starts the interpreter once per process. Python's extension modules (numpy's) expect
// libpython's symbols in the global namespace, which a library opened RTLD_LOCAL does not give:
// libpython is promoted to RTLD_GLOBAL first. The interpreter is the one this library was built
// against (OPCTS_PYTHON_EXECUTABLE, or OPCTS_PYTHON at run time: a virtual environment's python
// brings its site-packages); Python's signal handlers are not installed (the worker's are kept).
bool start_interpreter() {
  static bool tried = false;
  if (tried) return g_init_error.empty();
  tried = true;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&Py_InitializeFromConfig), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  const bool was_running = Py_IsInitialized();
  if (!was_running) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    const char* env_exe = std::getenv("OPCTS_PYTHON");
    const std::string exe = env_exe && *env_exe ? env_exe : OPCTS_PYTHON_EXECUTABLE;
    PyStatus st = PyStatus_Ok();
    if (!exe.empty()) st = PyConfig_SetBytesString(&config, &config.program_name, exe.c_str());
    if (!PyStatus_Exception(st)) {
      static char arg0[] = "opcts";
      char* argv[] = {arg0, nullptr};
      st = PyConfig_SetBytesArgv(&config, 1, argv);
    }
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
      g_init_error = std::string("cannot start the Python interpreter: ") + (st.err_msg ? st.err_msg : "unknown error");
      return false;
    }
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  const std::string dir = package_dir();
  if (!dir.empty()) {
    PyObject* path = PySys_GetObject("path");  // borrowed
    PyObject* d = PyUnicode_FromString(dir.c_str());
    if (path && d) PyList_Insert(path, 0, d);
    Py_XDECREF(d);
  }
  g_host = PyImport_ImportModule("opcts._host");
  if (!g_host) {
    g_init_error = "cannot import the opcts Python package (python/opcts; looked in '" + dir +
                   "', set OPCTS_PYTHON_PATH to the folder holding it): " + take_error();
  } else {
    g_run = PyObject_GetAttrString(g_host, "run");
    g_supports = PyObject_GetAttrString(g_host, "supports");
    g_deterministic = PyObject_GetAttrString(g_host, "deterministic");
    g_invariance = PyObject_GetAttrString(g_host, "invariance");
    g_tactics = PyObject_GetAttrString(g_host, "tactics");
    if (!g_run || !g_supports || !g_deterministic || !g_invariance || !g_tactics)
      g_init_error = "opcts._host lacks its entry points: " + take_error();
  }
  PyGILState_Release(gil);
  // The thread that started Python holds its GIL until it lets go: every callback takes it
  // with PyGILState_Ensure, from whichever thread opcts calls.
  if (!was_running) PyEval_SaveThread();
  return g_init_error.empty();
}

PyObject* params_bytes(const void* params) {
  if (!params) return PyBytes_FromStringAndSize("", 0);
  uint32_t size = 0;
  std::memcpy(&size, params, sizeof size);  // every parameter struct starts with its size
  return PyBytes_FromStringAndSize(static_cast<const char*>(params), size);
}

PyObject* arch_tuple(const opcts_arch* a) {
  if (!a) Py_RETURN_NONE;
  PyObject* caps = PyTuple_New(a->n_caps > 0 ? a->n_caps : 0);
  for (int32_t i = 0; i < a->n_caps; ++i) PyTuple_SET_ITEM(caps, i, PyUnicode_FromString(a->caps[i]));
  return Py_BuildValue("(ssiiiiN)", a->name ? a->name : "", a->backend ? a->backend : "", a->compute_major,
                       a->compute_minor, a->warp_size, a->smem_per_block_kib, caps);
}

// Bytes a host tensor spans from its data pointer: the last element's offset plus one, in
// elements (strides may leave gaps), then in bytes (two 4-bit codes a byte).
Py_ssize_t span_bytes(const opcts_tensor& t) {
  int64_t last = 0;
  for (int32_t d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return 0;
    last += (t.shape[d] - 1) * t.strides[d];
  }
  const int64_t elems = last + 1;
  if (t.dtype.bits == 4) return static_cast<Py_ssize_t>((elems + 1) / 2);
  const int64_t size = t.dtype.bits <= 8 ? 1 : t.dtype.bits / 8;
  return static_cast<Py_ssize_t>(elems * size);
}

PyObject* tensor_tuple(const opcts_tensor& t, bool host) {
  PyObject* shape = PyTuple_New(t.ndim);
  PyObject* strides = PyTuple_New(t.ndim);
  for (int32_t d = 0; d < t.ndim; ++d) {
    PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(t.shape[d]));
    PyTuple_SET_ITEM(strides, d, PyLong_FromLongLong(t.strides[d]));
  }
  PyObject* view = nullptr;
  if (host && t.data) view = PyMemoryView_FromMemory(static_cast<char*>(t.data), span_bytes(t), PyBUF_WRITE);
  else {
    view = Py_None;
    Py_INCREF(view);
  }
  return Py_BuildValue("(sKiiNNiiN)", t.name ? t.name : "",
                       static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(t.data)), t.dtype.code, t.dtype.bits,
                       shape, strides, t.packing, t.is_output, view);
}

int32_t py_supports(const void* impl_data, const void* params, const opcts_arch* arch, char* reason,
                    size_t reason_size) {
  const auto* impl = static_cast<const PyImpl*>(impl_data);
  PyGILState_STATE gil = PyGILState_Ensure();
  int32_t ok = 0;
  PyObject* r = PyObject_CallFunction(g_supports, "lNN", impl->index, params_bytes(params), arch_tuple(arch));
  if (!r) {
    copy_text(reason, reason_size, "supports() failed inside the Python host: " + take_error());
  } else if (r == Py_None) {
    ok = 1;
  } else {
    copy_text(reason, reason_size, tail(utf8(r), reason_size));
  }
  Py_XDECREF(r);
  PyGILState_Release(gil);
  return ok;
}

// g_host's fn(index, params) for the impl, under the GIL, its result read by `read`; `fallback`
// where the call raises (the error cleared: the ABI's callbacks have no error status).
template <class T, class Read>
T ask_host(PyObject* fn, const void* impl_data, const void* params, T fallback, Read read) {
  const auto* impl = static_cast<const PyImpl*>(impl_data);
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* r = PyObject_CallFunction(fn, "lN", impl->index, params_bytes(params));
  T out = r ? read(r) : fallback;
  if (PyErr_Occurred()) PyErr_Clear(), out = fallback;
  Py_XDECREF(r);
  PyGILState_Release(gil);
  return out;
}

int32_t py_deterministic(const void* impl_data, const void* params) {
  return ask_host<int32_t>(g_deterministic, impl_data, params, 1,
                           [](PyObject* r) { return PyObject_IsTrue(r) == 1 ? 1 : 0; });
}

uint32_t py_invariance(const void* impl_data, const void* params) {
  return ask_host<uint32_t>(g_invariance, impl_data, params, 0,
                            [](PyObject* r) { return static_cast<uint32_t>(PyLong_AsUnsignedLong(r)); });
}

// The impl's tactics function through _host.tactics: the names '\n'-separated, their count, or -1
// with what it raised in `names` (the case is an ERROR quoting it).
int32_t py_list_tactics(const void* impl_data, const void* params, char* names, size_t names_size) {
  const auto* impl = static_cast<const PyImpl*>(impl_data);
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* r = PyObject_CallFunction(g_tactics, "lN", impl->index, params_bytes(params));
  std::string text, why;
  if (!r) why = "its tactics function raised " + take_error();
  else if (!PyUnicode_Check(r)) why = "the Python host's tactics gave no string";
  else text = utf8(r);
  if (PyErr_Occurred()) why = "its tactics gave names that are not text: " + take_error();
  Py_XDECREF(r);
  PyGILState_Release(gil);
  if (why.empty() && text.size() + 1 > names_size)
    why = "its tactics' names take " + std::to_string(text.size() + 1) + " bytes, more than the " +
          std::to_string(names_size) + " the ABI hands";
  if (!why.empty()) {
    copy_text(names, names_size, tail(why, 400));
    return -1;
  }
  copy_text(names, names_size, text);
  return text.empty() ? 0 : static_cast<int32_t>(std::count(text.begin(), text.end(), '\n') + 1);
}

opcts_status py_run(const void* impl_data, const opcts_run_args* args, opcts_report* report) {
  const auto* impl = static_cast<const PyImpl*>(impl_data);
  PyGILState_STATE gil = PyGILState_Ensure();
  const bool host = impl->backend == "host";  // host memory: numpy views over it
  PyObject* tensors = PyTuple_New(args->n_tensors);
  for (int32_t i = 0; i < args->n_tensors; ++i) PyTuple_SET_ITEM(tensors, i, tensor_tuple(args->tensors[i], host));
  const char* tactic =
      args->struct_size >= offsetof(opcts_run_args, tactic) + sizeof args->tactic ? args->tactic : nullptr;
  PyObject* r = PyObject_CallFunction(g_run, "lNNKiNz", impl->index, params_bytes(args->params), tensors,
                                      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(args->stream)),
                                      args->device, arch_tuple(args->arch), tactic);
  opcts_status status = OPCTS_OK;
  if (!r) {
    status = OPCTS_INTERNAL;
    copy_text(report->message, sizeof report->message, tail("the Python host failed: " + take_error(), 512));
  } else if (r != Py_None) {
    // (status, argument, message) from _host.run's mapping of what the impl raised.
    long code = OPCTS_INTERNAL;
    PyObject *arg = nullptr, *msg = nullptr;
    if (PyArg_ParseTuple(r, "lOO", &code, &arg, &msg)) {
      status = static_cast<opcts_status>(code);
      copy_text(report->argument, sizeof report->argument, utf8(arg));
      copy_text(report->message, sizeof report->message, tail(utf8(msg), sizeof report->message));
    } else {
      status = OPCTS_INTERNAL;
      copy_text(report->message, sizeof report->message,
                "the Python host returned a malformed status: " + take_error());
    }
  }
  Py_XDECREF(r);
  PyGILState_Release(gil);
  return status;
}

}  // namespace

extern "C" {

/// Starts the interpreter (once per process), imports `spec` (a .py path or "py:package.module")
/// and adds its impls through `registrar`. Returns 0, or non-zero with the reason in `error`
/// (an import's exception with its traceback's last lines, an impl the registrar refused).
__attribute__((visibility("default"))) int32_t opcts_python_plugin_init(const char* spec, uint32_t abi_version,
                                                                        const opcts_registrar* registrar, char* error,
                                                                        size_t error_size) {
  if (abi_version != OPCTS_PLUGIN_ABI_VERSION) {
    copy_text(error, error_size,
              "the Python host speaks ABI version " + std::to_string(OPCTS_PLUGIN_ABI_VERSION) + ", not " +
                  std::to_string(abi_version));
    return 1;
  }
  if (!start_interpreter()) {
    copy_text(error, error_size, g_init_error);
    return 1;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  std::string why;
  PyObject* load = PyObject_GetAttrString(g_host, "load");
  PyObject* r = load ? PyObject_CallFunction(load, "s", spec) : nullptr;
  Py_XDECREF(load);
  if (!r) {
    why = "the Python host failed: " + take_error();
  } else if (PyUnicode_Check(r)) {
    why = utf8(r);  // the import's error, traceback included
  } else {
    // A list of (index, family, name, backend, caps, planted, deterministic_known, abi_minor,
    // invariance_known, tactics_known) tuples.
    const Py_ssize_t n = PyList_Check(r) ? PyList_Size(r) : 0;
    for (Py_ssize_t i = 0; i < n; ++i) {
      long index = 0, abi_minor = 0;
      int planted = 0, det_callback = 0, inv_callback = 0, tac_callback = 0;
      const char *family = nullptr, *name = nullptr, *backend = nullptr;
      PyObject* caps = nullptr;
      if (!PyArg_ParseTuple(PyList_GetItem(r, i), "lsssOpplpp", &index, &family, &name, &backend, &caps, &planted,
                            &det_callback, &abi_minor, &inv_callback, &tac_callback)) {
        why = "the Python host returned a malformed impl: " + take_error();
        break;
      }
      PyImpl& impl = g_impls.emplace_back();
      impl.index = index;
      impl.family = family;
      impl.name = name;
      impl.backend = backend;
      for (Py_ssize_t c = 0; caps && PySequence_Check(caps) && c < PySequence_Size(caps); ++c) {
        PyObject* item = PySequence_GetItem(caps, c);
        impl.caps.push_back(utf8(item));
        Py_XDECREF(item);
      }
      for (const auto& c : impl.caps) impl.cap_ptrs.push_back(c.c_str());
      opcts_impl_desc d{};
      d.struct_size = sizeof d;
      d.family = impl.family.c_str();
      d.name = impl.name.c_str();
      d.backend = impl.backend.c_str();
      d.caps = impl.cap_ptrs.empty() ? nullptr : impl.cap_ptrs.data();
      d.n_caps = static_cast<int32_t>(impl.cap_ptrs.size());
      d.planted = planted;
      d.abi_minor = static_cast<uint32_t>(abi_minor);
      d.supports = py_supports;
      d.run = py_run;
      d.deterministic = det_callback ? py_deterministic : nullptr;
      d.invariance = inv_callback ? py_invariance : nullptr;
      d.list_tactics = tac_callback ? py_list_tactics : nullptr;
      d.impl_data = &impl;
      char reg_error[512] = {0};
      if (registrar->add_impl(registrar->ctx, &d, reg_error, sizeof reg_error) != 0) {
        why = reg_error;
        break;
      }
    }
  }
  Py_XDECREF(r);
  PyGILState_Release(gil);
  if (!why.empty()) {
    copy_text(error, error_size, why);
    return 1;
  }
  return 0;
}

}  // extern "C"

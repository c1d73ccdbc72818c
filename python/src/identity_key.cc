// tilefuse._tilefuse.identity_key: the identities and version counters of a call's weights as
// one bytes object, the key under which the torch backend finds the graph compiled with those
// weights folded in. Built in Python, the key of GPT-2 small's 148 weights (id and _version
// each, then a tuple's hash) took ~50 us of a decode step's host time, a fifth of its budget.
#include <Python.h>

#include <cstdint>
#include <string>

#include "bindings.h"

namespace tilefuse::python {

void BindIdentityKey(nb::module_& m) {
  m.def(
      "identity_key",
      [](nb::handle args, nb::handle positions) -> nb::bytes {
        PyObject* list = args.ptr();
        PyObject* indices = positions.ptr();
        if (!PyList_Check(list) || !PyTuple_Check(indices)) throw nb::type_error("identity_key takes a list and a tuple of positions");
        static PyObject* const version_name = PyUnicode_InternFromString("_version");
        const Py_ssize_t count = PyTuple_GET_SIZE(indices);
        std::string key(static_cast<size_t>(count) * 2 * sizeof(int64_t), '\0');
        int64_t* out = reinterpret_cast<int64_t*>(key.data());
        for (Py_ssize_t i = 0; i < count; ++i) {
          const Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(indices, i));
          if (at < 0 || at >= PyList_GET_SIZE(list)) throw nb::index_error("identity_key: a position past the arguments");
          PyObject* value = PyList_GET_ITEM(list, at);
          int64_t version = 0;
          // Inference tensors have no version counter (PyTorch raises): they cannot change in place.
          if (PyObject* v = PyObject_GetAttr(value, version_name)) {
            version = PyLong_AsLongLong(v);
            Py_DECREF(v);
          }
          if (PyErr_Occurred()) PyErr_Clear();
          out[2 * i] = static_cast<int64_t>(reinterpret_cast<intptr_t>(value));  // id()
          out[2 * i + 1] = version;
        }
        return nb::bytes(key.data(), key.size());
      },
      nb::arg("args"), nb::arg("positions"),
      "The ids and version counters of args[p] for p in positions, as bytes (a dict key): equal while the same "
      "objects, unchanged in place, are given");
}

}  // namespace tilefuse::python

// _DictVersions: "has any of these dicts changed?" in one call, for eagerc.capture's
// static guard fast path (eagerc/capture/records.py). CPython stamps a dict with a new
// version tag on every change; a guard that resolved module state through a set of dicts
// can skip re-resolving it while all their tags are the ones it saw. Reading the tag
// directly costs about a nanosecond per dict (a model's guard watches hundreds).
#include <Python.h>
#include <pybind11/pybind11.h>

#include <vector>

namespace py = pybind11;

namespace eagerc {

// The field exists (deprecated from 3.12) up to 3.13; later versions take the Python path.
#if PY_VERSION_HEX < 0x030E0000
namespace {

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
uint64_t version_of(PyObject* d) { return reinterpret_cast<PyDictObject*>(d)->ma_version_tag; }
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

class DictVersions {
 public:
  explicit DictVersions(const py::list& dicts) {
    for (const py::handle& h : dicts) {
      // Subclasses share the layout (OrderedDict: a reorder alone keeps the tag, as in Dynamo).
      if (!PyDict_Check(h.ptr())) throw py::type_error("_DictVersions takes dicts");
      dicts_.push_back(py::reinterpret_borrow<py::object>(h));
      versions_.push_back(version_of(h.ptr()));
      sizes_.push_back(PyDict_GET_SIZE(h.ptr()));
    }
  }

  bool unchanged() const {
    for (size_t i = 0; i < dicts_.size(); ++i) {
      PyObject* d = dicts_[i].ptr();
      if (version_of(d) != versions_[i] || PyDict_GET_SIZE(d) != sizes_[i]) return false;
    }
    return true;
  }

 private:
  std::vector<py::object> dicts_;  // strong references: an id is never reused meanwhile
  std::vector<uint64_t> versions_;
  std::vector<Py_ssize_t> sizes_;
};

}  // namespace

void init_dict_versions_bindings(py::module& m) {
  py::class_<DictVersions>(m, "_DictVersions")
      .def(py::init<const py::list&>())
      .def("__call__", &DictVersions::unchanged);
}
#else
void init_dict_versions_bindings(py::module&) {}
#endif

}  // namespace eagerc

// C++ exceptions -> Python exceptions, by class.
#include <new>
#include <stdexcept>

#include "kael/core/error.h"
#include "tensor_object.h"

namespace kael::python {

void translate_exception() {
  try {
    throw;
  } catch (const PythonError&) {
    // the Python exception is already set
  } catch (const kael::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const kael::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const kael::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const kael::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "kael: unknown C++ exception");
  }
}

}  // namespace kael::python

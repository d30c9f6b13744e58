// The binding of kael_distributed (kael/distributed/process_group.h): the _dist_* functions that
// kael/distributed/ calls. Process groups and works are capsules owning a shared_ptr. Built
// with MPI (KAEL_HAS_MPI) it binds the process group; without, only _dist_is_available (False).
#include <Python.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "guard.h"
#include "kael/autograd/autograd.h"
#include "kael/ops/view.h"
#include "tensor_object.h"

#ifdef KAEL_HAS_MPI
#include "kael/distributed/process_group.h"
#endif

namespace kael::python {

namespace {

#define KAEL_DIST_FN(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&f))

PyObject* py_dist_is_available(PyObject*, PyObject*) {
#ifdef KAEL_HAS_MPI
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}

#ifdef KAEL_HAS_MPI
using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::Work;

constexpr const char* kGroupCapsule = "kael.distributed.ProcessGroup";
constexpr const char* kWorkCapsule = "kael.distributed.Work";

void group_capsule_destructor(PyObject* capsule) {
  auto* pg = static_cast<std::shared_ptr<ProcessGroup>*>(PyCapsule_GetPointer(capsule, kGroupCapsule));
  if (pg == nullptr) return;
  {
    GilRelease release(true);  // the communication thread may need the GIL to drop a tensor
    (*pg)->shutdown();
  }
  delete pg;
}

void work_capsule_destructor(PyObject* capsule) {
  auto* w = static_cast<std::shared_ptr<Work>*>(PyCapsule_GetPointer(capsule, kWorkCapsule));
  delete w;
}

PyObject* wrap_group(std::shared_ptr<ProcessGroup> pg) {
  if (!pg) Py_RETURN_NONE;
  auto* owned = new std::shared_ptr<ProcessGroup>(std::move(pg));
  PyObject* capsule = PyCapsule_New(owned, kGroupCapsule, &group_capsule_destructor);
  if (capsule == nullptr) delete owned;
  return capsule;
}

PyObject* wrap_work(std::shared_ptr<Work> w) {
  auto* owned = new std::shared_ptr<Work>(std::move(w));
  PyObject* capsule = PyCapsule_New(owned, kWorkCapsule, &work_capsule_destructor);
  if (capsule == nullptr) delete owned;
  return capsule;
}

ProcessGroup* group_of(const char* fn, PyObject* o) {
  if (!PyCapsule_IsValid(o, kGroupCapsule)) {
    PyErr_Format(PyExc_TypeError, "%s(): expected a process group, got %s", fn, Py_TYPE(o)->tp_name);
    return nullptr;
  }
  return static_cast<std::shared_ptr<ProcessGroup>*>(PyCapsule_GetPointer(o, kGroupCapsule))->get();
}

Work* work_of(const char* fn, PyObject* o) {
  if (!PyCapsule_IsValid(o, kWorkCapsule)) {
    PyErr_Format(PyExc_TypeError, "%s(): expected a work object, got %s", fn, Py_TYPE(o)->tp_name);
    return nullptr;
  }
  return static_cast<std::shared_ptr<Work>*>(PyCapsule_GetPointer(o, kWorkCapsule))->get();
}

// A tensor argument; None gives an undefined tensor when `optional`.
bool tensor_arg(const char* fn, PyObject* o, bool optional, Tensor& out) {
  if (optional && o == Py_None) return true;
  if (!is_tensor(o)) {
    PyErr_Format(PyExc_TypeError, "%s(): expected a Tensor, got %s", fn, Py_TYPE(o)->tp_name);
    return false;
  }
  // The work reads and writes through an alias (a view of its own over the same storage, made
  // without grad): the collective runs without the GIL, and `t.data = ...` on the caller's
  // tensor by another thread then swaps that tensor's storage, never the memory MPI is using,
  // which the alias keeps alive.
  const Tensor t = tensor_of(o);
  PyObject* none = guarded([&] {
    autograd::NoGradGuard no_grad;
    out = kael::view(t, t.sizes());
  });
  Py_XDECREF(none);
  return none != nullptr;
}

bool op_arg(const char* fn, int op, ReduceOp& out) {
  if (op < 0 || op > 4) {
    PyErr_Format(PyExc_ValueError, "%s(): unknown ReduceOp %d", fn, op);
    return false;
  }
  out = static_cast<ReduceOp>(op);
  return true;
}

bool splits_arg(const char* fn, PyObject* o, std::vector<std::int64_t>& out) {
  if (o == Py_None) return true;
  PyObject* seq = PySequence_Fast(o, "split sizes must be a sequence of ints");
  if (seq == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_TypeError, "%s(): split sizes must be ints", fn);
      return false;
    }
    out.push_back(v);
  }
  Py_DECREF(seq);
  return true;
}

// _dist_init(timeout_ms, check, /) -> the world group
PyObject* py_dist_init(PyObject*, PyObject* args) {
  long long timeout_ms = 0;
  int check = 1;
  if (!PyArg_ParseTuple(args, "Lp:_dist_init", &timeout_ms, &check)) return nullptr;
  if (timeout_ms <= 0) {
    PyErr_Format(PyExc_ValueError, "init_process_group(): timeout must be positive, got %lld ms", timeout_ms);
    return nullptr;
  }
  std::shared_ptr<ProcessGroup> pg;
  PyObject* r = guarded(
      [&] {
        distributed::init_mpi();
        pg = ProcessGroup::world(std::chrono::milliseconds(timeout_ms), check != 0);
      },
      gil::Released{});
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  return wrap_group(std::move(pg));
}

PyObject* py_dist_group_info(PyObject*, PyObject* arg) {
  ProcessGroup* pg = group_of("_dist_group_info", arg);
  if (pg == nullptr) return nullptr;
  return Py_BuildValue("(iiLO)", pg->rank(), pg->size(), static_cast<long long>(pg->timeout().count()),
                       pg->check() ? Py_True : Py_False);
}

PyObject* py_dist_world(PyObject*, PyObject*) {
  return guarded([&]() -> PyObject* {
    if (!distributed::mpi_initialized()) Py_RETURN_NONE;
    return Py_BuildValue("(ii)", distributed::world_rank(), distributed::world_size());
  });
}

PyObject* py_dist_set_check(PyObject*, PyObject* args) {
  PyObject* g;
  int on;
  if (!PyArg_ParseTuple(args, "Op:_dist_set_check", &g, &on)) return nullptr;
  ProcessGroup* pg = group_of("_dist_set_check", g);
  if (pg == nullptr) return nullptr;
  pg->set_check(on != 0);
  Py_RETURN_NONE;
}

PyObject* py_dist_broken(PyObject*, PyObject* arg) {
  ProcessGroup* pg = group_of("_dist_broken", arg);
  if (pg == nullptr) return nullptr;
  const std::string b = pg->broken();
  return PyUnicode_FromStringAndSize(b.data(), static_cast<Py_ssize_t>(b.size()));
}

PyObject* py_dist_new_group(PyObject*, PyObject* args) {
  PyObject* g;
  PyObject* ranks_obj;
  if (!PyArg_ParseTuple(args, "OO:_dist_new_group", &g, &ranks_obj)) return nullptr;
  ProcessGroup* pg = group_of("_dist_new_group", g);
  if (pg == nullptr) return nullptr;
  std::vector<std::int64_t> r64;
  if (!splits_arg("new_group", ranks_obj, r64)) return nullptr;
  std::vector<int> ranks(r64.begin(), r64.end());
  std::shared_ptr<ProcessGroup> sub;
  PyObject* r = guarded([&] { sub = pg->split(ranks); }, gil::Released{});
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  return wrap_group(std::move(sub));
}

// Enqueuing takes the GIL-holding path: it only checks arguments and queues the work.
template <typename F>
PyObject* issue(F&& body) {
  std::shared_ptr<Work> w;
  PyObject* r = guarded([&] { w = body(); });
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  return wrap_work(std::move(w));
}

PyObject* py_dist_all_reduce(PyObject*, PyObject* args) {
  PyObject *g, *t_obj;
  int op_i;
  if (!PyArg_ParseTuple(args, "OOi:_dist_all_reduce", &g, &t_obj, &op_i)) return nullptr;
  ProcessGroup* pg = group_of("all_reduce", g);
  Tensor t;
  ReduceOp op;
  if (pg == nullptr || !tensor_arg("all_reduce", t_obj, false, t) || !op_arg("all_reduce", op_i, op)) return nullptr;
  return issue([&] { return pg->allreduce(t, op); });
}

PyObject* py_dist_broadcast(PyObject*, PyObject* args) {
  PyObject *g, *t_obj;
  int root;
  if (!PyArg_ParseTuple(args, "OOi:_dist_broadcast", &g, &t_obj, &root)) return nullptr;
  ProcessGroup* pg = group_of("broadcast", g);
  Tensor t;
  if (pg == nullptr || !tensor_arg("broadcast", t_obj, false, t)) return nullptr;
  return issue([&] { return pg->broadcast(t, root); });
}

PyObject* py_dist_reduce(PyObject*, PyObject* args) {
  PyObject *g, *t_obj;
  int root, op_i;
  if (!PyArg_ParseTuple(args, "OOii:_dist_reduce", &g, &t_obj, &root, &op_i)) return nullptr;
  ProcessGroup* pg = group_of("reduce", g);
  Tensor t;
  ReduceOp op;
  if (pg == nullptr || !tensor_arg("reduce", t_obj, false, t) || !op_arg("reduce", op_i, op)) return nullptr;
  return issue([&] { return pg->reduce(t, root, op); });
}

PyObject* py_dist_all_gather(PyObject*, PyObject* args) {
  PyObject *g, *o_obj, *i_obj;
  if (!PyArg_ParseTuple(args, "OOO:_dist_all_gather", &g, &o_obj, &i_obj)) return nullptr;
  ProcessGroup* pg = group_of("all_gather_into_tensor", g);
  Tensor out, in;
  if (pg == nullptr || !tensor_arg("all_gather_into_tensor", o_obj, false, out) ||
      !tensor_arg("all_gather_into_tensor", i_obj, false, in))
    return nullptr;
  return issue([&] { return pg->allgather(out, in); });
}

PyObject* py_dist_reduce_scatter(PyObject*, PyObject* args) {
  PyObject *g, *o_obj, *i_obj;
  int op_i;
  if (!PyArg_ParseTuple(args, "OOOi:_dist_reduce_scatter", &g, &o_obj, &i_obj, &op_i)) return nullptr;
  ProcessGroup* pg = group_of("reduce_scatter_tensor", g);
  Tensor out, in;
  ReduceOp op;
  if (pg == nullptr || !tensor_arg("reduce_scatter_tensor", o_obj, false, out) ||
      !tensor_arg("reduce_scatter_tensor", i_obj, false, in) || !op_arg("reduce_scatter_tensor", op_i, op))
    return nullptr;
  return issue([&] { return pg->reduce_scatter(out, in, op); });
}

PyObject* py_dist_gather(PyObject*, PyObject* args) {
  PyObject *g, *o_obj, *i_obj;
  int root;
  if (!PyArg_ParseTuple(args, "OOOi:_dist_gather", &g, &o_obj, &i_obj, &root)) return nullptr;
  ProcessGroup* pg = group_of("gather", g);
  Tensor out, in;
  if (pg == nullptr || !tensor_arg("gather", o_obj, true, out) || !tensor_arg("gather", i_obj, false, in)) return nullptr;
  return issue([&] { return pg->gather(out, in, root); });
}

PyObject* py_dist_scatter(PyObject*, PyObject* args) {
  PyObject *g, *o_obj, *i_obj;
  int root;
  if (!PyArg_ParseTuple(args, "OOOi:_dist_scatter", &g, &o_obj, &i_obj, &root)) return nullptr;
  ProcessGroup* pg = group_of("scatter", g);
  Tensor out, in;
  if (pg == nullptr || !tensor_arg("scatter", o_obj, false, out) || !tensor_arg("scatter", i_obj, true, in)) return nullptr;
  return issue([&] { return pg->scatter(out, in, root); });
}

PyObject* py_dist_all_to_all(PyObject*, PyObject* args) {
  PyObject *g, *o_obj, *i_obj, *os_obj, *is_obj;
  if (!PyArg_ParseTuple(args, "OOOOO:_dist_all_to_all", &g, &o_obj, &i_obj, &os_obj, &is_obj)) return nullptr;
  ProcessGroup* pg = group_of("all_to_all_single", g);
  Tensor out, in;
  std::vector<std::int64_t> os, is;
  if (pg == nullptr || !tensor_arg("all_to_all_single", o_obj, false, out) ||
      !tensor_arg("all_to_all_single", i_obj, false, in) || !splits_arg("all_to_all_single", os_obj, os) ||
      !splits_arg("all_to_all_single", is_obj, is))
    return nullptr;
  return issue([&] { return pg->alltoall(out, in, os, is); });
}

PyObject* py_dist_barrier(PyObject*, PyObject* arg) {
  ProcessGroup* pg = group_of("barrier", arg);
  if (pg == nullptr) return nullptr;
  return issue([&] { return pg->barrier(); });
}

PyObject* py_dist_send(PyObject*, PyObject* args) {
  PyObject *g, *t_obj;
  int peer, tag;
  if (!PyArg_ParseTuple(args, "OOii:_dist_send", &g, &t_obj, &peer, &tag)) return nullptr;
  ProcessGroup* pg = group_of("send", g);
  Tensor t;
  if (pg == nullptr || !tensor_arg("send", t_obj, false, t)) return nullptr;
  return issue([&] { return pg->send(t, peer, tag); });
}

PyObject* py_dist_recv(PyObject*, PyObject* args) {
  PyObject *g, *t_obj;
  int peer, tag;
  if (!PyArg_ParseTuple(args, "OOii:_dist_recv", &g, &t_obj, &peer, &tag)) return nullptr;
  ProcessGroup* pg = group_of("recv", g);
  Tensor t;
  if (pg == nullptr || !tensor_arg("recv", t_obj, false, t)) return nullptr;
  return issue([&] { return pg->recv(t, peer, tag); });
}

// _dist_wait(work, /) -> the source rank (recv) or -1; the GIL is released while waiting.
PyObject* py_dist_wait(PyObject*, PyObject* arg) {
  Work* w = work_of("wait", arg);
  if (w == nullptr) return nullptr;
  PyObject* r = guarded([&] { w->wait(); }, gil::Released{});
  if (r == nullptr) return nullptr;
  Py_DECREF(r);
  return PyLong_FromLong(w->source_rank());
}

PyObject* py_dist_is_completed(PyObject*, PyObject* arg) {
  Work* w = work_of("is_completed", arg);
  if (w == nullptr) return nullptr;
  return guarded([&]() -> PyObject* { return PyBool_FromLong(w->is_completed()); });
}

PyObject* py_dist_shutdown(PyObject*, PyObject* arg) {
  ProcessGroup* pg = group_of("destroy_process_group", arg);
  if (pg == nullptr) return nullptr;
  return guarded([&] { pg->shutdown(); }, gil::Released{});
}

PyObject* py_dist_finalize(PyObject*, PyObject*) {
  return guarded([&] { distributed::finalize_mpi(); }, gil::Released{});
}

PyObject* py_dist_abort(PyObject*, PyObject* arg) {
  const long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred()) return nullptr;
  PyEval_SaveThread();  // never returns: MPI_Abort ends the process
  distributed::abort_job(static_cast<int>(code));
}
#endif

}  // namespace

void append_distributed_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_dist_is_available", py_dist_is_available, METH_NOARGS,
                 "_dist_is_available()\n--\n\nWhether kael was built with MPI (kael.distributed)."});
#ifdef KAEL_HAS_MPI
  const auto add = [&](const char* name, PyCFunction f, int flags, const char* doc) {
    out.push_back({name, f, flags, doc});
  };
  add("_dist_init", KAEL_DIST_FN(py_dist_init), METH_VARARGS,
      "_dist_init(timeout_ms, check, /)\n--\n\nMPI_Init_thread and the world process group.");
  add("_dist_group_info", KAEL_DIST_FN(py_dist_group_info), METH_O,
      "_dist_group_info(group, /)\n--\n\n(rank, size, timeout_ms, check) of a process group.");
  add("_dist_world", KAEL_DIST_FN(py_dist_world), METH_NOARGS,
      "_dist_world()\n--\n\n(rank, size) in MPI_COMM_WORLD, or None before MPI is initialized.");
  add("_dist_set_check", KAEL_DIST_FN(py_dist_set_check), METH_VARARGS,
      "_dist_set_check(group, on, /)\n--\n\nTurns the agreement check of a group on or off.");
  add("_dist_broken", KAEL_DIST_FN(py_dist_broken), METH_O,
      "_dist_broken(group, /)\n--\n\nThe error that broke the group, or ''.");
  add("_dist_new_group", KAEL_DIST_FN(py_dist_new_group), METH_VARARGS,
      "_dist_new_group(group, ranks, /)\n--\n\nThe sub-group of ranks (None off it).");
  add("_dist_all_reduce", KAEL_DIST_FN(py_dist_all_reduce), METH_VARARGS,
      "_dist_all_reduce(group, tensor, op, /)\n--\n\nall_reduce of tensor in place; a work object.");
  add("_dist_broadcast", KAEL_DIST_FN(py_dist_broadcast), METH_VARARGS,
      "_dist_broadcast(group, tensor, root, /)\n--\n\nbroadcast of tensor from root; a work object.");
  add("_dist_reduce", KAEL_DIST_FN(py_dist_reduce), METH_VARARGS,
      "_dist_reduce(group, tensor, root, op, /)\n--\n\nreduce of tensor onto root; a work object.");
  add("_dist_all_gather", KAEL_DIST_FN(py_dist_all_gather), METH_VARARGS,
      "_dist_all_gather(group, out, input, /)\n--\n\nEvery rank's input into out; a work object.");
  add("_dist_reduce_scatter", KAEL_DIST_FN(py_dist_reduce_scatter), METH_VARARGS,
      "_dist_reduce_scatter(group, out, input, op, /)\n--\n\n"
      "The reduction of input, scattered into out; a work object.");
  add("_dist_gather", KAEL_DIST_FN(py_dist_gather), METH_VARARGS,
      "_dist_gather(group, out, input, root, /)\n--\n\nEvery rank's input into root's out; a work object.");
  add("_dist_scatter", KAEL_DIST_FN(py_dist_scatter), METH_VARARGS,
      "_dist_scatter(group, out, input, root, /)\n--\n\nroot's input scattered into out; a work object.");
  add("_dist_all_to_all", KAEL_DIST_FN(py_dist_all_to_all), METH_VARARGS,
      "_dist_all_to_all(group, out, input, out_splits, in_splits, /)\n--\n\nall_to_all_single; a work object.");
  add("_dist_barrier", KAEL_DIST_FN(py_dist_barrier), METH_O,
      "_dist_barrier(group, /)\n--\n\nA barrier; a work object.");
  add("_dist_send", KAEL_DIST_FN(py_dist_send), METH_VARARGS,
      "_dist_send(group, tensor, dst, tag, /)\n--\n\nSends tensor to dst; a work object.");
  add("_dist_recv", KAEL_DIST_FN(py_dist_recv), METH_VARARGS,
      "_dist_recv(group, tensor, src, tag, /)\n--\n\nReceives into tensor from src (-1: any); a work object.");
  add("_dist_wait", KAEL_DIST_FN(py_dist_wait), METH_O, "_dist_wait(work, /)\n--\n\nWaits (GIL released).");
  add("_dist_is_completed", KAEL_DIST_FN(py_dist_is_completed), METH_O,
      "_dist_is_completed(work, /)\n--\n\nWhether the work has completed.");
  add("_dist_shutdown", KAEL_DIST_FN(py_dist_shutdown), METH_O,
      "_dist_shutdown(group, /)\n--\n\nStops the group's communication thread.");
  add("_dist_finalize", KAEL_DIST_FN(py_dist_finalize), METH_NOARGS, "_dist_finalize()\n--\n\nMPI_Finalize.");
  add("_dist_abort", KAEL_DIST_FN(py_dist_abort), METH_O, "_dist_abort(code, /)\n--\n\nMPI_Abort: ends the job.");
#endif
}

}  // namespace kael::python

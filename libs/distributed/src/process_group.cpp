// kael.distributed's MPI process group: Notes [The communication thread], [Timeouts] and
// [Agreement check] in kael/distributed/process_group.h.
#include "kael/distributed/process_group.h"

// MPI's C API only: Open MPI's and MPICH's mpi.h otherwise pull in their deprecated C++ bindings,
// whose symbols live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>

#include "kael/core/error.h"
#include "kael/core/half.h"
#include "kael/core/scalar_type.h"

namespace kael::distributed {

namespace {

// MPI_THREAD_MULTIPLE lets each group's thread call MPI on its own; below it every MPI call
// takes this lock (torch's ProcessGroupMPI does the same).
std::mutex g_mpi_mutex;
int g_thread_level = -1;

class MpiLock {
 public:
  MpiLock() : lock_(g_mpi_mutex, std::defer_lock) {
    if (g_thread_level < MPI_THREAD_MULTIPLE) lock_.lock();
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

MPI_Comm comm_of(std::uintptr_t c) { return reinterpret_cast<MPI_Comm>(c); }
std::uintptr_t stored(MPI_Comm c) { return reinterpret_cast<std::uintptr_t>(c); }
MPI_Request request_of(std::uintptr_t r) { return reinterpret_cast<MPI_Request>(r); }

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

void mpi_check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw Error(std::string(what) + " failed: " + mpi_error_string(code));
}

MPI_Datatype mpi_type(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return MPI_C_BOOL;
    case ScalarType::UInt8: return MPI_UINT8_T;
    case ScalarType::Int8: return MPI_INT8_T;
    case ScalarType::Int16: return MPI_INT16_T;
    case ScalarType::Int32: return MPI_INT32_T;
    case ScalarType::Int64: return MPI_INT64_T;
    case ScalarType::Float16:
    case ScalarType::BFloat16: return MPI_UINT16_T;  // moved as bits, reduced by our own MPI_Ops
    case ScalarType::Float32: return MPI_FLOAT;
    case ScalarType::Float64: return MPI_DOUBLE;
  }
  throw Error("kael.distributed: unsupported dtype");
}

// The reductions MPI lacks: float16 and bfloat16, in float32 per pair of operands (as NCCL
// reduces them, rounding after each step).
template <typename H, int Op>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = static_cast<float>(a[i]);
    const float y = static_cast<float>(b[i]);
    float r;
    if constexpr (Op == 0) r = x + y;
    else if constexpr (Op == 1) r = x * y;
    else if constexpr (Op == 2) r = (x < y || x != x) ? x : y;  // NaN propagates, as torch.minimum
    else r = (x > y || x != x) ? x : y;
    b[i] = H(r);
  }
}

MPI_Op g_half_ops[2][4];  // [float16, bfloat16][sum, prod, min, max]
bool g_half_ops_made = false;

void make_half_ops() {
  if (g_half_ops_made) return;
  MPI_Op_create(&half_reduce<Half, 0>, 1, &g_half_ops[0][0]);
  MPI_Op_create(&half_reduce<Half, 1>, 1, &g_half_ops[0][1]);
  MPI_Op_create(&half_reduce<Half, 2>, 1, &g_half_ops[0][2]);
  MPI_Op_create(&half_reduce<Half, 3>, 1, &g_half_ops[0][3]);
  MPI_Op_create(&half_reduce<BFloat16, 0>, 1, &g_half_ops[1][0]);
  MPI_Op_create(&half_reduce<BFloat16, 1>, 1, &g_half_ops[1][1]);
  MPI_Op_create(&half_reduce<BFloat16, 2>, 1, &g_half_ops[1][2]);
  MPI_Op_create(&half_reduce<BFloat16, 3>, 1, &g_half_ops[1][3]);
  g_half_ops_made = true;
}

// The MPI_Op of `op` on dtype t; ValueError for AVG on integral and bool tensors.
MPI_Op mpi_op(const char* name, ReduceOp op, ScalarType t) {
  KAEL_CHECK_VALUE(op != ReduceOp::Avg || is_floating(t),
                   name << ": ReduceOp.AVG needs a floating dtype, got " << dtype_name(t));
  if (t == ScalarType::Bool) {
    return (op == ReduceOp::Sum || op == ReduceOp::Max) ? MPI_LOR : MPI_LAND;
  }
  if (is_reduced_floating(t)) {
    const int which = t == ScalarType::Float16 ? 0 : 1;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: return g_half_ops[which][0];
      case ReduceOp::Product: return g_half_ops[which][1];
      case ReduceOp::Min: return g_half_ops[which][2];
      case ReduceOp::Max: return g_half_ops[which][3];
    }
  }
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  throw ValueError(std::string(name) + ": unknown reduce op");
}

// AVG = SUM, then this division of the result by the group size.
void divide(void* data, std::int64_t n, ScalarType t, int size) {
  switch (t) {
    case ScalarType::Float32: {
      float* p = static_cast<float*>(data);
      for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(size);
      break;
    }
    case ScalarType::Float64: {
      double* p = static_cast<double*>(data);
      for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<double>(size);
      break;
    }
    case ScalarType::Float16: {
      Half* p = static_cast<Half*>(data);
      for (std::int64_t i = 0; i < n; ++i) p[i] = Half(static_cast<float>(p[i]) / static_cast<float>(size));
      break;
    }
    case ScalarType::BFloat16: {
      BFloat16* p = static_cast<BFloat16*>(data);
      for (std::int64_t i = 0; i < n; ++i) p[i] = BFloat16(static_cast<float>(p[i]) / static_cast<float>(size));
      break;
    }
    default: break;
  }
}

int count_of(const char* name, const Tensor& t) {
  KAEL_CHECK_VALUE(t.numel() <= INT_MAX, name << ": a tensor of " << t.numel() << " elements is more than MPI's "
                                              << INT_MAX << " per call");
  return static_cast<int>(t.numel());
}

void check_tensor(const char* name, const Tensor& t) {
  KAEL_CHECK_VALUE(t.defined(), name << ": the tensor is undefined");
  KAEL_CHECK_VALUE(t.is_contiguous(), name << ": tensors must be contiguous");
}

std::string describe(const std::int64_t* d) {
  std::ostringstream s;
  s << (d[1] >= 0 && d[1] < kNumScalarTypes ? dtype_name(static_cast<ScalarType>(d[1])) : "?") << " [";
  const std::int64_t ndim = d[5];
  for (std::int64_t i = 0; i < std::min<std::int64_t>(ndim, 6); ++i) s << (i ? ", " : "") << d[6 + i];
  if (ndim > 6) s << ", ...";
  s << "]";
  return s.str();
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "SUM";
    case ReduceOp::Avg: return "AVG";
    case ReduceOp::Product: return "PRODUCT";
    case ReduceOp::Min: return "MIN";
    case ReduceOp::Max: return "MAX";
  }
  return "?";
}

void init_mpi() {
  MpiLock lock;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    g_thread_level = provided;
  } else if (g_thread_level < 0) {
    MPI_Query_thread(&g_thread_level);
  }
  KAEL_CHECK(g_thread_level >= MPI_THREAD_SERIALIZED,
             "init_process_group: the MPI library provides thread level " << g_thread_level
                                                                          << ", below MPI_THREAD_SERIALIZED");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  make_half_ops();
}

bool mpi_initialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void finalize_mpi() {
  if (!mpi_initialized()) return;
  MPI_Finalize();
}

void abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

int thread_level() { return g_thread_level; }

// ---------------------------------------------------------------- Work

void Work::finish(std::string error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

bool Work::is_completed() {
  if (p2p_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return true;
    MpiLock mpi;
    MPI_Request r = request_of(request_);
    int flag = 0;
    MPI_Status status;
    const int rc = MPI_Test(&r, &flag, &status);
    request_ = reinterpret_cast<std::uintptr_t>(r);
    if (rc != MPI_SUCCESS) {
      done_ = true;
      error_ = name_ + ": " + mpi_error_string(rc);
    } else if (flag) {
      done_ = true;
      source_ = status.MPI_SOURCE;
      keep_alive_.clear();
    }
    return done_;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Work::wait() {
  auto group = group_.lock();
  const auto timeout = group ? group->timeout() : std::chrono::milliseconds(0);
  if (p2p_) {
    // Poll the request (MPI progresses it inside MPI_Test), backing off to 1 ms sleeps.
    int spins = 0;
    while (!is_completed()) {
      if (group) {
        const auto now = std::chrono::steady_clock::now();
        if (now - started_ > timeout) {
          const std::string why = name_ + ": timed out after " + std::to_string(timeout.count()) +
                                  " ms (Note [Timeouts]: the peer never matched it)";
          group->mark_broken(why);
          throw Error(why);
        }
      }
      if (++spins < 1000) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } else {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      if (cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return done_; })) break;
      if (!group) continue;
      lock.unlock();
      // Note [Timeouts]: the collective running now, or the one this work waits behind.
      std::string why = group->broken();
      if (why.empty()) {
        std::shared_ptr<Work> running;
        {
          std::lock_guard<std::mutex> glock(group->mutex_);
          running = group->running_;
        }
        if (running) {
          std::chrono::steady_clock::time_point started;
          {
            std::lock_guard<std::mutex> wlock(running->mutex_);
            started = running->started_;
          }
          if (std::chrono::steady_clock::now() - started > timeout) {
            why = running->name_ + ": timed out after " + std::to_string(timeout.count()) +
                  " ms: not every rank of the group (rank " + std::to_string(group->rank()) + " of " +
                  std::to_string(group->size()) +
                  ") joined it; the others may have failed, skipped it or called a different collective";
            group->mark_broken(why);
          }
        }
      }
      lock.lock();
      if (done_) break;
      if (!why.empty()) throw Error(why);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) throw Error(error_);
}

// ---------------------------------------------------------------- ProcessGroup

std::shared_ptr<ProcessGroup> ProcessGroup::world(std::chrono::milliseconds timeout, bool check) {
  KAEL_CHECK(mpi_initialized(), "init_process_group: MPI is not initialized");
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup());
  MPI_Comm dup;
  {
    MpiLock lock;
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "init_process_group: MPI_Comm_dup");
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Comm_rank(dup, &pg->rank_);
    MPI_Comm_size(dup, &pg->size_);
  }
  pg->comm_ = stored(dup);
  pg->timeout_ = timeout;
  pg->check_ = check;
  pg->start();
  return pg;
}

ProcessGroup::~ProcessGroup() { shutdown(); }

void ProcessGroup::start() {
  thread_ = std::thread([this] { loop(); });
}

std::string ProcessGroup::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void ProcessGroup::mark_broken(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.empty()) broken_ = why;
}

void ProcessGroup::throw_if_broken(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  KAEL_CHECK(!shut_down_, name << ": the process group was destroyed");
  if (!broken_.empty()) throw Error(name + ": the process group is broken by an earlier error: " + broken_);
}

void ProcessGroup::loop() {
  for (;;) {
    std::shared_ptr<Work> w;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      w = std::move(queue_.front());
      queue_.pop_front();
      running_ = w;
      {
        std::lock_guard<std::mutex> wlock(w->mutex_);
        w->started_ = std::chrono::steady_clock::now();
      }
    }
    std::string error;
    try {
      w->run_();
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.reset();
    }
    w->run_ = nullptr;
    w->keep_alive_.clear();
    w->finish(std::move(error));
  }
}

std::shared_ptr<Work> ProcessGroup::enqueue(std::string name, std::vector<Tensor> tensors, std::function<void()> body) {
  throw_if_broken(name);
  auto w = std::make_shared<Work>();
  w->name_ = std::move(name);
  w->run_ = std::move(body);
  w->keep_alive_ = std::move(tensors);
  w->group_ = weak_from_this();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(w);
  }
  cv_.notify_one();
  return w;
}

void ProcessGroup::agree(const char* name, const Tensor* t, int root, int op, std::int64_t extra) {
  if (!check_) return;
  constexpr int kLen = 12;
  std::int64_t mine[kLen] = {};
  mine[0] = static_cast<std::int64_t>(std::hash<std::string_view>{}(name) & 0x7fffffffffffLL);
  mine[1] = t ? static_cast<std::int64_t>(t->dtype()) : -1;
  mine[2] = root;
  mine[3] = op;
  mine[4] = extra;
  if (t) {
    const auto sizes = t->sizes();
    mine[5] = static_cast<std::int64_t>(sizes.size());
    for (std::size_t i = 0; i < std::min<std::size_t>(sizes.size(), 6); ++i) mine[6 + i] = sizes[i];
  }
  std::vector<std::int64_t> all(static_cast<std::size_t>(kLen) * size_);
  {
    MpiLock lock;
    mpi_check(MPI_Allgather(mine, kLen, MPI_INT64_T, all.data(), kLen, MPI_INT64_T, comm_of(comm_)),
              (std::string(name) + ": the agreement check's MPI_Allgather").c_str());
  }
  bool same = true;
  for (int r = 1; r < size_ && same; ++r) same = std::equal(all.begin(), all.begin() + kLen, all.begin() + r * kLen);
  if (same) return;
  std::ostringstream s;
  s << name << ": the ranks of the group disagree (Note [Agreement check]; KAEL_DISTRIBUTED_CHECK=0 turns the check off):";
  for (int r = 0; r < size_; ++r) {
    const std::int64_t* d = all.data() + static_cast<std::size_t>(r) * kLen;
    s << "\n  rank " << r << ": ";
    if (d[0] != mine[0]) {
      s << "called a different collective";
      continue;
    }
    if (d[1] >= 0) s << describe(d);
    if (d[2] >= 0) s << " root=" << d[2];
    if (d[3] >= 0) s << " op=" << reduce_op_name(static_cast<ReduceOp>(d[3]));
    if (d[4] >= 0) s << " n=" << d[4];
  }
  throw Error(s.str());
}

std::shared_ptr<Work> ProcessGroup::allreduce(const Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t);
  const int n = count_of("all_reduce", t);
  const MPI_Op mop = mpi_op("all_reduce", op, t.dtype());
  return enqueue("all_reduce", {t}, [this, t, n, mop, op] {
    agree("all_reduce", &t, -1, static_cast<int>(op), -1);
    MpiLock lock;
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), n, mpi_type(t.dtype()), mop, comm_of(comm_)),
              "all_reduce: MPI_Allreduce");
    if (op == ReduceOp::Avg) divide(t.data_ptr(), n, t.dtype(), size_);
  });
}

std::shared_ptr<Work> ProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t);
  KAEL_CHECK_VALUE(root >= 0 && root < size_, "broadcast: src " << root << " is not a rank of a group of " << size_);
  const int n = count_of("broadcast", t);
  return enqueue("broadcast", {t}, [this, t, n, root] {
    agree("broadcast", &t, root, -1, -1);
    MpiLock lock;
    mpi_check(MPI_Bcast(t.data_ptr(), n, mpi_type(t.dtype()), root, comm_of(comm_)), "broadcast: MPI_Bcast");
  });
}

std::shared_ptr<Work> ProcessGroup::reduce(const Tensor& t, int root, ReduceOp op) {
  check_tensor("reduce", t);
  KAEL_CHECK_VALUE(root >= 0 && root < size_, "reduce: dst " << root << " is not a rank of a group of " << size_);
  const int n = count_of("reduce", t);
  const MPI_Op mop = mpi_op("reduce", op, t.dtype());
  return enqueue("reduce", {t}, [this, t, n, root, mop, op] {
    agree("reduce", &t, root, static_cast<int>(op), -1);
    MpiLock lock;
    void* buf = t.data_ptr();
    if (rank_ == root) {
      mpi_check(MPI_Reduce(MPI_IN_PLACE, buf, n, mpi_type(t.dtype()), mop, root, comm_of(comm_)), "reduce: MPI_Reduce");
      if (op == ReduceOp::Avg) divide(buf, n, t.dtype(), size_);
    } else {
      mpi_check(MPI_Reduce(buf, nullptr, n, mpi_type(t.dtype()), mop, root, comm_of(comm_)), "reduce: MPI_Reduce");
    }
  });
}

std::shared_ptr<Work> ProcessGroup::allgather(const Tensor& out, const Tensor& in) {
  check_tensor("all_gather_into_tensor", out);
  check_tensor("all_gather_into_tensor", in);
  KAEL_CHECK_VALUE(out.dtype() == in.dtype(), "all_gather_into_tensor: output dtype " << dtype_name(out.dtype())
                                                   << " differs from input dtype " << dtype_name(in.dtype()));
  KAEL_CHECK_VALUE(out.numel() == in.numel() * size_, "all_gather_into_tensor: output has " << out.numel()
                       << " elements, expected world size " << size_ << " x input's " << in.numel());
  const int n = count_of("all_gather_into_tensor", in);
  count_of("all_gather_into_tensor", out);
  return enqueue("all_gather", {out, in}, [this, out, in, n] {
    agree("all_gather", &in, -1, -1, -1);
    MpiLock lock;
    const MPI_Datatype ty = mpi_type(in.dtype());
    mpi_check(MPI_Allgather(in.data_ptr(), n, ty, out.data_ptr(), n, ty, comm_of(comm_)), "all_gather: MPI_Allgather");
  });
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op) {
  check_tensor("reduce_scatter_tensor", out);
  check_tensor("reduce_scatter_tensor", in);
  KAEL_CHECK_VALUE(out.dtype() == in.dtype(), "reduce_scatter_tensor: output dtype " << dtype_name(out.dtype())
                                                  << " differs from input dtype " << dtype_name(in.dtype()));
  KAEL_CHECK_VALUE(in.numel() == out.numel() * size_, "reduce_scatter_tensor: input has " << in.numel()
                       << " elements, expected world size " << size_ << " x output's " << out.numel());
  const int n = count_of("reduce_scatter_tensor", out);
  count_of("reduce_scatter_tensor", in);
  const MPI_Op mop = mpi_op("reduce_scatter_tensor", op, in.dtype());
  return enqueue("reduce_scatter", {out, in}, [this, out, in, n, mop, op] {
    agree("reduce_scatter", &out, -1, static_cast<int>(op), -1);
    MpiLock lock;
    mpi_check(MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(), n, mpi_type(in.dtype()), mop, comm_of(comm_)),
              "reduce_scatter: MPI_Reduce_scatter_block");
    if (op == ReduceOp::Avg) divide(out.data_ptr(), n, out.dtype(), size_);
  });
}

std::shared_ptr<Work> ProcessGroup::gather(const Tensor& out, const Tensor& in, int root) {
  check_tensor("gather", in);
  KAEL_CHECK_VALUE(root >= 0 && root < size_, "gather: dst " << root << " is not a rank of a group of " << size_);
  const int n = count_of("gather", in);
  if (rank_ == root) {
    check_tensor("gather", out);
    KAEL_CHECK_VALUE(out.dtype() == in.dtype(), "gather: output dtype " << dtype_name(out.dtype())
                                                    << " differs from input dtype " << dtype_name(in.dtype()));
    KAEL_CHECK_VALUE(out.numel() == in.numel() * size_, "gather: output has " << out.numel()
                         << " elements, expected world size " << size_ << " x input's " << in.numel());
  }
  std::vector<Tensor> keep{in};
  if (rank_ == root) keep.push_back(out);
  return enqueue("gather", std::move(keep), [this, out, in, n, root] {
    agree("gather", &in, root, -1, -1);
    MpiLock lock;
    const MPI_Datatype ty = mpi_type(in.dtype());
    mpi_check(MPI_Gather(in.data_ptr(), n, ty, rank_ == root ? out.data_ptr() : nullptr, n, ty, root, comm_of(comm_)),
              "gather: MPI_Gather");
  });
}

std::shared_ptr<Work> ProcessGroup::scatter(const Tensor& out, const Tensor& in, int root) {
  check_tensor("scatter", out);
  KAEL_CHECK_VALUE(root >= 0 && root < size_, "scatter: src " << root << " is not a rank of a group of " << size_);
  const int n = count_of("scatter", out);
  if (rank_ == root) {
    check_tensor("scatter", in);
    KAEL_CHECK_VALUE(out.dtype() == in.dtype(), "scatter: output dtype " << dtype_name(out.dtype())
                                                    << " differs from input dtype " << dtype_name(in.dtype()));
    KAEL_CHECK_VALUE(in.numel() == out.numel() * size_, "scatter: input has " << in.numel()
                         << " elements, expected world size " << size_ << " x output's " << out.numel());
  }
  std::vector<Tensor> keep{out};
  if (rank_ == root) keep.push_back(in);
  return enqueue("scatter", std::move(keep), [this, out, in, n, root] {
    agree("scatter", &out, root, -1, -1);
    MpiLock lock;
    const MPI_Datatype ty = mpi_type(out.dtype());
    mpi_check(MPI_Scatter(rank_ == root ? in.data_ptr() : nullptr, n, ty, out.data_ptr(), n, ty, root, comm_of(comm_)),
              "scatter: MPI_Scatter");
  });
}

std::shared_ptr<Work> ProcessGroup::alltoall(const Tensor& out, const Tensor& in,
                                             const std::vector<std::int64_t>& out_splits,
                                             const std::vector<std::int64_t>& in_splits) {
  check_tensor("all_to_all_single", out);
  check_tensor("all_to_all_single", in);
  KAEL_CHECK_VALUE(out.dtype() == in.dtype(), "all_to_all_single: output dtype " << dtype_name(out.dtype())
                                                  << " differs from input dtype " << dtype_name(in.dtype()));
  // Counts and displacements in elements; the splits are rows of dim 0.
  auto layout = [&](const Tensor& t, const std::vector<std::int64_t>& splits, const char* which) {
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    const std::int64_t rows = t.sizes().empty() ? 1 : t.sizes()[0];
    const std::int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<std::int64_t> s = splits;
    if (s.empty()) {
      KAEL_CHECK_VALUE(rows % size_ == 0, "all_to_all_single: " << which << " dim 0 (" << rows
                                                                << ") is not divisible by world size " << size_);
      s.assign(static_cast<std::size_t>(size_), rows / size_);
    }
    KAEL_CHECK_VALUE(static_cast<int>(s.size()) == size_,
                     "all_to_all_single: " << which << "_split_sizes has " << s.size() << " entries, world size is " << size_);
    std::int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      KAEL_CHECK_VALUE(s[r] >= 0, "all_to_all_single: negative split size " << s[r]);
      KAEL_CHECK_VALUE(total * row <= INT_MAX && s[r] * row <= INT_MAX, "all_to_all_single: too many elements for MPI");
      displs[r] = static_cast<int>(total * row);
      counts[r] = static_cast<int>(s[r] * row);
      total += s[r];
    }
    KAEL_CHECK_VALUE(total == rows, "all_to_all_single: " << which << "_split_sizes sum to " << total
                                                          << ", the tensor's dim 0 is " << rows);
    return std::make_pair(counts, displs);
  };
  auto [out_counts, out_displs] = layout(out, out_splits, "output");
  auto [in_counts, in_displs] = layout(in, in_splits, "input");
  return enqueue("all_to_all", {out, in}, [this, out, in, oc = out_counts, od = out_displs, ic = in_counts,
                                           id = in_displs] {
    agree("all_to_all", nullptr, -1, -1, static_cast<std::int64_t>(in.dtype()));
    MpiLock lock;
    const MPI_Datatype ty = mpi_type(in.dtype());
    mpi_check(MPI_Alltoallv(in.data_ptr(), ic.data(), id.data(), ty, out.data_ptr(), oc.data(), od.data(), ty,
                            comm_of(comm_)),
              "all_to_all: MPI_Alltoallv");
  });
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  return enqueue("barrier", {}, [this] {
    agree("barrier", nullptr, -1, -1, -1);
    MpiLock lock;
    mpi_check(MPI_Barrier(comm_of(comm_)), "barrier: MPI_Barrier");
  });
}

std::shared_ptr<Work> ProcessGroup::post_p2p(std::string name, const Tensor& t, bool is_send, int peer, int tag) {
  check_tensor(name.c_str(), t);
  throw_if_broken(name);
  KAEL_CHECK_VALUE((peer >= 0 && peer < size_) || (!is_send && peer == -1),
                   name << ": peer rank " << peer << " is not a rank of a group of " << size_);
  KAEL_CHECK_VALUE(tag >= 0, name << ": tag must be >= 0, got " << tag);
  const int n = count_of(name.c_str(), t);
  auto w = std::make_shared<Work>();
  w->p2p_ = true;
  w->name_ = std::move(name);
  w->keep_alive_ = {t};
  w->group_ = weak_from_this();
  w->started_ = std::chrono::steady_clock::now();
  MPI_Request r;
  {
    MpiLock lock;
    const int rc = is_send ? MPI_Isend(t.data_ptr(), n, mpi_type(t.dtype()), peer, tag, comm_of(comm_), &r)
                           : MPI_Irecv(t.data_ptr(), n, mpi_type(t.dtype()), peer < 0 ? MPI_ANY_SOURCE : peer, tag,
                                       comm_of(comm_), &r);
    mpi_check(rc, is_send ? "send: MPI_Isend" : "recv: MPI_Irecv");
  }
  w->request_ = reinterpret_cast<std::uintptr_t>(r);
  return w;
}

std::shared_ptr<Work> ProcessGroup::send(const Tensor& t, int dst, int tag) { return post_p2p("send", t, true, dst, tag); }
std::shared_ptr<Work> ProcessGroup::recv(const Tensor& t, int src, int tag) { return post_p2p("recv", t, false, src, tag); }

std::shared_ptr<ProcessGroup> ProcessGroup::split(const std::vector<int>& ranks) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    KAEL_CHECK_VALUE(ranks[i] >= 0 && ranks[i] < size_, "new_group: rank " << ranks[i] << " is not in a group of " << size_);
    KAEL_CHECK_VALUE(i == 0 || ranks[i] > ranks[i - 1], "new_group: ranks must be sorted and distinct");
  }
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = it != ranks.end();
  const int color = member ? 0 : MPI_UNDEFINED;
  const int key = member ? static_cast<int>(it - ranks.begin()) : 0;
  auto made = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  auto w = enqueue("new_group", {}, [this, color, key, made, n = static_cast<std::int64_t>(ranks.size())] {
    agree("new_group", nullptr, -1, -1, n);
    MpiLock lock;
    mpi_check(MPI_Comm_split(comm_of(comm_), color, key, made.get()), "new_group: MPI_Comm_split");
  });
  w->wait();
  if (!member) return nullptr;
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup());
  {
    MpiLock lock;
    MPI_Comm_set_errhandler(*made, MPI_ERRORS_RETURN);
    MPI_Comm_rank(*made, &pg->rank_);
    MPI_Comm_size(*made, &pg->size_);
  }
  pg->comm_ = stored(*made);
  pg->timeout_ = timeout_;
  pg->check_ = check_;
  pg->start();
  return pg;
}

void ProcessGroup::shutdown() {
  std::deque<std::shared_ptr<Work>> dropped;
  bool broken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
    broken = !broken_.empty();
    if (broken) dropped.swap(queue_);
  }
  for (auto& w : dropped) w->finish("the process group was destroyed after an error: " + broken_);
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (broken) {
    // Note [Timeouts]: the thread may be blocked in MPI for good; it keeps the group alive.
    static auto* leaked = new std::vector<std::shared_ptr<ProcessGroup>>();
    if (auto self = weak_from_this().lock()) leaked->push_back(std::move(self));
    thread_.detach();
    return;
  }
  thread_.join();
  if (mpi_initialized()) {
    MpiLock lock;
    MPI_Comm c = comm_of(comm_);
    MPI_Comm_free(&c);
  }
}

}  // namespace kael::distributed

#pragma once
// kael.distributed's process group on MPI (docs/distributed.md).
//
// Note [The communication thread]
// Each ProcessGroup owns an MPI communicator (a duplicate of its parent's, so user MPI traffic
// never matches ours) and one communication thread. A collective is a Work queued to that
// thread, which runs the works one at a time in issue order with blocking MPI calls (the
// tuned algorithms of the MPI library, not the slower non-blocking schedules); the caller
// gets the Work back at once and waits on it (the binding releases the GIL while it waits).
// Point-to-point send/recv are posted by the caller as MPI_Isend/MPI_Irecv (as torch's
// ProcessGroupMPI: queued behind each other on one thread, a send and a recv of two ranks
// would deadlock) and their Work tests the request.
//
// Note [Timeouts]
// MPI has no cancellable collective. A waiter that sees the group's running collective older
// than the group's timeout marks the group broken: that wait and every later one (and every
// later call) throws an Error naming the collective and the timeout. The communication thread
// stays blocked inside MPI, so a broken group cannot be finalized: abort_job() (MPI_Abort)
// ends the job, which kael.distributed does when the process exits or an exception escapes.
//
// Note [Agreement check]
// With `check` on, every collective first gathers a small descriptor (the collective, dtype,
// shape, root, reduce op) from all ranks; when they differ, every rank's Work fails with the
// same message naming what each rank passed, instead of MPI reading past a buffer or hanging.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kael/core/tensor.h"

namespace kael::distributed {

enum class ReduceOp : int { Sum = 0, Avg = 1, Product = 2, Min = 3, Max = 4 };
const char* reduce_op_name(ReduceOp op);

// MPI_Init_thread (MPI_THREAD_MULTIPLE when the library has it, MPI_THREAD_SERIALIZED at least,
// else an Error) unless MPI is initialized already; idempotent.
void init_mpi();
bool mpi_initialized();
// MPI_Finalize when initialized and not finalized (every group must be shut down first).
void finalize_mpi();
// MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job.
[[noreturn]] void abort_job(int code);
// The world rank and size (init_mpi() first).
int world_rank();
int world_size();
// The level MPI_Init_thread provided (MPI_THREAD_*).
int thread_level();

class ProcessGroup;

class Work {
 public:
  // Whether the work finished (successfully or not); never blocks.
  bool is_completed();
  // Blocks until the work finished; throws its Error (a failed check, a timeout, an MPI error).
  void wait();
  // For recv: the rank the message came from (after wait()).
  int source_rank() const { return source_; }
  const std::string& name() const { return name_; }

 private:
  friend class ProcessGroup;
  void finish(std::string error);
  bool p2p_ = false;
  std::string name_;
  std::function<void()> run_;        // the collective's body, on the communication thread
  std::vector<Tensor> keep_alive_;   // the tensors the MPI call reads or writes
  std::weak_ptr<ProcessGroup> group_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
  std::chrono::steady_clock::time_point started_{};  // collective: when it began to run; p2p: posted
  bool started_set_ = false;
  std::uintptr_t request_ = 0;  // p2p: the MPI_Request, stored as an integer (no MPI header here)
  int source_ = -1;
};

class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  // The group of all ranks (a duplicate of MPI_COMM_WORLD). init_mpi() first.
  static std::shared_ptr<ProcessGroup> world(std::chrono::milliseconds timeout, bool check);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool check() const { return check_; }
  void set_check(bool on) { check_ = on; }
  // The error that broke the group (Note [Timeouts]); empty when it is healthy.
  std::string broken() const;

  // The sub-group of `ranks` (ranks of this group, sorted, distinct); collective over this
  // group (every rank calls it, as torch's new_group). nullptr on the ranks not in it.
  std::shared_ptr<ProcessGroup> split(const std::vector<int>& ranks);

  // Collectives: contiguous CPU tensors, lengths and roots checked by the caller (Python) and
  // again here where a wrong value would make MPI read or write out of bounds.
  std::shared_ptr<Work> allreduce(const Tensor& t, ReduceOp op);
  std::shared_ptr<Work> broadcast(const Tensor& t, int root);
  std::shared_ptr<Work> reduce(const Tensor& t, int root, ReduceOp op);
  std::shared_ptr<Work> allgather(const Tensor& out, const Tensor& in);             // out: size * in
  std::shared_ptr<Work> reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op);  // in: size * out
  std::shared_ptr<Work> gather(const Tensor& out, const Tensor& in, int root);      // out on root only
  std::shared_ptr<Work> scatter(const Tensor& out, const Tensor& in, int root);     // in on root only
  std::shared_ptr<Work> alltoall(const Tensor& out, const Tensor& in, const std::vector<std::int64_t>& out_splits,
                                 const std::vector<std::int64_t>& in_splits);
  std::shared_ptr<Work> barrier();
  std::shared_ptr<Work> send(const Tensor& t, int dst, int tag);
  std::shared_ptr<Work> recv(const Tensor& t, int src, int tag);  // src -1: any source

  // Stops the communication thread after the queued works (when the group is healthy) and
  // frees the communicator. Idempotent.
  void shutdown();

 private:
  friend class Work;
  ProcessGroup() = default;
  void start();
  void loop();
  std::shared_ptr<Work> enqueue(std::string name, std::vector<Tensor> tensors, std::function<void()> body);
  std::shared_ptr<Work> post_p2p(std::string name, const Tensor& t, bool is_send, int peer, int tag);
  // Note [Agreement check]: throws Error on every rank when the descriptors differ.
  void agree(const char* name, const Tensor* t, int root, int op, std::int64_t extra);
  void mark_broken(const std::string& why);
  void throw_if_broken(const std::string& name) const;

  std::uintptr_t comm_ = 0;  // MPI_Comm
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{300000};
  bool check_ = true;
  mutable std::mutex mutex_;
  std::condition_variable cv_;  // the communication thread waits for work on it
  std::deque<std::shared_ptr<Work>> queue_;
  std::shared_ptr<Work> running_;
  std::string broken_;
  bool stop_ = false;
  bool shut_down_ = false;
  std::thread thread_;
};

}  // namespace kael::distributed

// Tests of kael_distributed's process group (kael/distributed/process_group.h) in one process:
// MPI's singleton start, a world of one rank. The collectives between ranks are tested under
// mpirun from Python (test/python/distributed/); these check the C++ API on its own: every
// dtype through all_reduce, the half-precision MPI_Ops, AVG, works in issue order, a send to
// oneself, sub-groups, and the checks that keep MPI from reading out of bounds.
// Compiled only when kael is built with MPI (the library's header is then on the include path).
#if __has_include("kael/distributed/process_group.h")
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/half.h"
#include "kael/distributed/process_group.h"
#include "kael/ops/full.h"

namespace {

using kael::ScalarType;
using kael::Tensor;
using kael::distributed::ProcessGroup;
using kael::distributed::ReduceOp;

Tensor filled(std::int64_t n, const kael::Scalar& v, ScalarType t) {
  const std::vector<std::int64_t> size{n};
  return kael::full(size, v, t);
}

// Element i of a contiguous tensor, as a double.
double at(const Tensor& t, std::int64_t i) {
  const void* p = t.data_ptr();
  switch (t.dtype()) {
    case ScalarType::Bool: return static_cast<const bool*>(p)[i];
    case ScalarType::UInt8: return static_cast<const std::uint8_t*>(p)[i];
    case ScalarType::Int8: return static_cast<const std::int8_t*>(p)[i];
    case ScalarType::Int16: return static_cast<const std::int16_t*>(p)[i];
    case ScalarType::Int32: return static_cast<const std::int32_t*>(p)[i];
    case ScalarType::Int64: return static_cast<double>(static_cast<const std::int64_t*>(p)[i]);
    case ScalarType::Float16: return static_cast<float>(static_cast<const kael::Half*>(p)[i]);
    case ScalarType::BFloat16: return static_cast<float>(static_cast<const kael::BFloat16*>(p)[i]);
    case ScalarType::Float32: return static_cast<const float*>(p)[i];
    case ScalarType::Float64: return static_cast<const double*>(p)[i];
  }
  return 0;
}

std::shared_ptr<ProcessGroup> world() {
  static std::shared_ptr<ProcessGroup> pg = [] {
    kael::distributed::init_mpi();
    return ProcessGroup::world(std::chrono::milliseconds(2000), true);
  }();
  return pg;
}

TEST(Distributed, SingletonWorld) {
  auto pg = world();
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  EXPECT_GE(kael::distributed::thread_level(), 2);  // MPI_THREAD_SERIALIZED or better
}

TEST(Distributed, AllReduceEveryDtypeAndOp) {
  auto pg = world();
  for (ScalarType t : {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32,
                       ScalarType::Int64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32,
                       ScalarType::Float64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
      if (op == ReduceOp::Avg && !kael::is_floating(t)) {
        EXPECT_THROW(pg->allreduce(filled(4, 1, t), op), kael::ValueError) << kael::dtype_name(t);
        continue;
      }
      Tensor x = filled(4, 1, t);
      pg->allreduce(x, op)->wait();  // one rank: every reduction is the identity
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(at(x, i), 1.0) << kael::dtype_name(t) << " " << kael::distributed::reduce_op_name(op);
    }
  }
}

TEST(Distributed, WorksCompleteInIssueOrder) {
  auto pg = world();
  std::vector<std::shared_ptr<kael::distributed::Work>> works;
  std::vector<Tensor> ts;
  for (int i = 0; i < 50; ++i) {
    ts.push_back(filled(1000, i, ScalarType::Float32));
    works.push_back(pg->allreduce(ts.back(), ReduceOp::Sum));
  }
  works.back()->wait();
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(at(ts[static_cast<std::size_t>(i)], 999), i);
}

TEST(Distributed, SendToSelf) {
  auto pg = world();
  Tensor a = filled(3, 7, ScalarType::Int64);
  Tensor b = filled(3, 0, ScalarType::Int64);
  auto r = pg->recv(b, -1, 5);
  auto s = pg->send(a, 0, 5);
  s->wait();
  r->wait();
  EXPECT_EQ(r->source_rank(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(at(b, i), 7.0);
}

TEST(Distributed, BoundsAreChecked) {
  auto pg = world();
  Tensor in = filled(2, 1, ScalarType::Float32);
  EXPECT_THROW(pg->allgather(filled(3, 0, ScalarType::Float32), in), kael::ValueError);
  EXPECT_THROW(pg->allgather(filled(2, 0, ScalarType::Float64), in), kael::ValueError);
  EXPECT_THROW(pg->reduce_scatter(filled(3, 0, ScalarType::Float32), in, ReduceOp::Sum), kael::ValueError);
  EXPECT_THROW(pg->broadcast(in, 1), kael::ValueError);
  EXPECT_THROW(pg->send(in, 3, 0), kael::ValueError);
  EXPECT_THROW(pg->send(in, 0, -1), kael::ValueError);
  EXPECT_THROW(pg->alltoall(in, in, {3}, {2}), kael::ValueError);
  EXPECT_THROW(pg->split({1}), kael::ValueError);
}

TEST(Distributed, SubGroupAndBarrier) {
  auto pg = world();
  auto sub = pg->split({0});
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  sub->barrier()->wait();
  Tensor x = filled(2, 3, ScalarType::Float32);
  sub->allreduce(x, ReduceOp::Avg)->wait();
  EXPECT_EQ(at(x, 1), 3.0);
  sub->shutdown();
  EXPECT_THROW(sub->barrier(), kael::Error);
}

}  // namespace
#endif

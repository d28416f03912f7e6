#include "dplace/placers/pipeline/ideals.h"

#include <gtest/gtest.h>

#include <set>

#include "dplace/core/limited_child.h"
#include "dplace/placers/pipeline/test_problems.h"

namespace dplace {
namespace {

using testing_pipeline::add_node;
using testing_pipeline::add_tensor;
using testing_pipeline::make_problem;

UnitDag dag_of(int n, const std::vector<std::pair<uint32_t, uint32_t>>& edges) {
  PipelineProblem p = make_problem(1, 0);
  for (int i = 0; i < n; ++i) add_node(p, 1, 1);
  for (const auto& [a, b] : edges) add_tensor(p, a, {b}, 0);
  return build_unit_dag(p);
}

std::vector<uint32_t> members(const IdealLattice& lat, uint32_t id) {
  std::vector<uint32_t> out;
  for (uint32_t u = 0; u < lat.num_units(); ++u) {
    if (lat.contains(id, u)) out.push_back(u);
  }
  return out;
}

TEST(IdealLatticeTest, ChainHasOneIdealPerPrefix) {
  const UnitDag dag = dag_of(5, {{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  const auto lat = IdealLattice::build(dag, 1000);
  ASSERT_TRUE(lat.has_value());
  EXPECT_EQ(lat->size(), 6u);
}

// The enumeration's depth is the largest ideal's size. It recursed once per unit and overflowed a
// 1 MiB stack on gnmt8 (exit 139); a 20,000-unit chain under a 512 KiB stack now completes.
TEST(IdealLatticeTest, ALongChainNeedsNoDeepStack) {
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (uint32_t u = 0; u + 1 < 20000; ++u) edges.emplace_back(u, u + 1);
  const UnitDag dag = dag_of(20000, edges);
  const int status = limited_child::exit_status_in_child([&] {
    if (!limited_child::set_soft_limit(RLIMIT_STACK, 512 * 1024)) return 2;
    const auto lat = IdealLattice::build(dag, 100000);
    return lat.has_value() && lat->size() == 20001u ? 0 : 1;
  });
  ASSERT_LT(status, 128) << "killed by signal " << status - 128;
  EXPECT_EQ(status, 0);
}

TEST(IdealLatticeTest, AntichainHasEverySubset) {
  const UnitDag dag = dag_of(6, {});
  const auto lat = IdealLattice::build(dag, 1000);
  ASSERT_TRUE(lat.has_value());
  EXPECT_EQ(lat->size(), 64u);
}

TEST(IdealLatticeTest, DiamondHasSixIdeals) {
  // 0 -> {1, 2} -> 3: {}, {0}, {0,1}, {0,2}, {0,1,2}, all.
  const UnitDag dag = dag_of(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  const auto lat = IdealLattice::build(dag, 1000);
  ASSERT_TRUE(lat.has_value());
  EXPECT_EQ(lat->size(), 6u);
}

TEST(IdealLatticeTest, IdealsAreDistinctDownsetsOrderedBySizeAndFoundByHash) {
  // Two chains of 3 joined at the end, plus a free unit: (4 * 4) * 2 + ... counted by brute force.
  const UnitDag dag = dag_of(8, {{0, 1}, {1, 2}, {3, 4}, {4, 5}, {2, 6}, {5, 6}});
  const auto lat = IdealLattice::build(dag, 100000);
  ASSERT_TRUE(lat.has_value());
  // Brute force over all 2^8 subsets.
  size_t expected = 0;
  for (uint32_t mask = 0; mask < 256; ++mask) {
    bool closed = true;
    for (uint32_t v = 0; v < 8; ++v) {
      if (!((mask >> v) & 1)) continue;
      for (uint32_t u : dag.pred[v]) closed = closed && ((mask >> u) & 1);
    }
    expected += closed;
  }
  EXPECT_EQ(lat->size(), expected);
  std::set<std::vector<uint32_t>> seen;
  for (uint32_t id = 0; id < lat->size(); ++id) {
    const auto m = members(*lat, id);
    EXPECT_TRUE(seen.insert(m).second) << "ideal enumerated twice";
    EXPECT_EQ(lat->cardinality(id), m.size());
    if (id > 0) {
      EXPECT_GE(lat->cardinality(id), lat->cardinality(id - 1));
    }
    for (uint32_t v : m) {
      for (uint32_t u : dag.pred[v]) EXPECT_TRUE(lat->contains(id, u));
    }
    EXPECT_EQ(lat->find(lat->hash(id)), id);
    // Addable units: exactly the units outside whose predecessors are all inside.
    std::set<uint32_t> addable(lat->addable(id).begin(), lat->addable(id).end());
    for (uint32_t v = 0; v < 8; ++v) {
      bool ready = !lat->contains(id, v);
      for (uint32_t u : dag.pred[v]) ready = ready && lat->contains(id, u);
      EXPECT_EQ(addable.count(v), ready ? 1u : 0u);
    }
  }
  EXPECT_EQ(lat->cardinality(0), 0u);
  EXPECT_EQ(lat->cardinality(lat->full_id()), 8u);
  // Hash of I + v is hash(I) ^ key(v).
  const uint32_t empty = 0;
  const uint32_t with0 = lat->find(lat->hash(empty) ^ lat->unit_key(0));
  ASSERT_NE(with0, IdealLattice::kNone);
  EXPECT_EQ(members(*lat, with0), std::vector<uint32_t>{0});
  // {1} alone is not an ideal.
  EXPECT_EQ(lat->find(lat->hash(empty) ^ lat->unit_key(1)), IdealLattice::kNone);
}

TEST(IdealLatticeTest, WeightsSumOverTheIdeal) {
  const UnitDag dag = dag_of(3, {{0, 1}});
  const auto lat = IdealLattice::build(dag, 100, {1.0, 10.0, 100.0});
  ASSERT_TRUE(lat.has_value());
  for (uint32_t id = 0; id < lat->size(); ++id) {
    double expected = 0;
    for (uint32_t u : members(*lat, id)) expected += std::vector<double>{1.0, 10.0, 100.0}[u];
    EXPECT_DOUBLE_EQ(lat->weight(id), expected);
  }
}

TEST(IdealLatticeTest, StopsAtTheLimit) {
  const UnitDag dag = dag_of(12, {});
  EXPECT_FALSE(IdealLattice::build(dag, 4095).has_value());
  EXPECT_TRUE(IdealLattice::build(dag, 4096).has_value());
}

}  // namespace
}  // namespace dplace

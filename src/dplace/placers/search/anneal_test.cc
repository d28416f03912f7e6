#include "dplace/placers/search/anneal.h"

#include <gtest/gtest.h>

#include "dplace/core/error.h"
#include "dplace/placers/common/test_cases.h"

namespace dplace::testing {
namespace {

// Few evaluations keep the test fast; the cases are small enough for them.
const std::map<std::string, std::string> kShort = {{"evaluations", "300"}};

TEST(AnnealPlacerTest, ReachesTheOptimumOfEverySmallCase) {
  for (auto make : {two_chains_case, memory_tight_case, colocation_case, cpu_only_case}) {
    const auto c = make();
    const PlacerRun run = run_placer(*c, "anneal", {.params = kShort});
    EXPECT_TRUE(run.sim.feasible) << c->graph().name();
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
  }
}

TEST(AnnealPlacerTest, StartsFromTheBestCheapPlacement) {
  auto c = two_chains_case();  // single-gpu 6 s, m-etf 3 s
  const PlacerRun run = run_placer(*c, "anneal", {.params = kShort});
  EXPECT_NE(run.result.note.find("started from m-etf (3 s)"), std::string::npos) << run.result.note;
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);
}

// What each start candidate that applies to the case gives (ConfigError: it does not apply).
struct StartRun {
  std::string name;
  PlacerRun run;
};
std::vector<StartRun> start_runs(const PlacerCase& c) {
  std::vector<StartRun> runs;
  for (const std::string& name : anneal_start_candidates()) {
    if (name == "expert") continue;  // the cases have none
    try {
      runs.push_back({name, run_placer(c, name)});
    } catch (const ConfigError&) {
    }
  }
  return runs;
}

// The candidates from the fastest that fits to the slowest, OOM ones last; equal ones in the
// candidates' order.
std::vector<StartRun> ranked_start_runs(const PlacerCase& c) {
  std::vector<StartRun> runs = start_runs(c);
  std::stable_sort(runs.begin(), runs.end(), [](const StartRun& a, const StartRun& b) {
    return std::make_pair(!a.run.sim.feasible, a.run.sim.step_time_s) <
           std::make_pair(!b.run.sim.feasible, b.run.sim.step_time_s);
  });
  return runs;
}

const auto kStartCases = {two_chains_case, memory_tight_case, oversubscribed_gpu_with_cpu_case,
                          colocation_case, cpu_only_case};

// With no moves the result is the start: the fastest candidate that fits (the first of equal
// ones), or the fastest one when none fits.
TEST(AnnealPlacerTest, StartsFromTheFastestCandidateThatFits) {
  for (auto make : kStartCases) {
    const auto c = make();
    const std::vector<StartRun> runs = ranked_start_runs(*c);
    ASSERT_FALSE(runs.empty()) << c->graph().name();
    const StartRun* best = &runs[0];
    const PlacerRun run = run_placer(*c, "anneal", {.params = {{"evaluations", "0"}}});
    EXPECT_EQ(run.sim.feasible, best->run.sim.feasible) << c->graph().name();
    EXPECT_DOUBLE_EQ(run.sim.step_time_s, best->run.sim.step_time_s) << c->graph().name();
    EXPECT_NE(run.result.note.find("started from " + best->name + " ("), std::string::npos)
        << c->graph().name() << ": " << run.result.note;
  }
}

// starts=2 (the default) keeps the better of the search from the least-cost start at --seed and
// the one from the next at --seed + 1000, and does not depend on the threads.
TEST(AnnealPlacerTest, TwoStartsKeepTheBetterOfTheTwoSearches) {
  for (auto make : kStartCases) {
    const auto c = make();
    const std::vector<StartRun> runs = ranked_start_runs(*c);
    ASSERT_GE(runs.size(), 2u) << c->graph().name();
    const std::string evaluations = "20";
    const PlacerRun first = run_placer(
        *c, "anneal", {.params = {{"evaluations", evaluations}, {"start", runs[0].name}}});
    const PlacerRun second = run_placer(
        *c, "anneal",
        {.params = {{"evaluations", evaluations}, {"start", runs[1].name}}, .seed = 1001});
    const PlacerRun& better = std::make_pair(!second.sim.feasible, second.sim.step_time_s) <
                                      std::make_pair(!first.sim.feasible, first.sim.step_time_s)
                                  ? second
                                  : first;
    // Each single-start run counts its candidate's placer, its start's simulation and its moves;
    // the other candidates are placed and simulated too.
    int64_t evaluations_of_both = first.result.evaluations + second.result.evaluations;
    for (size_t i = 2; i < runs.size(); ++i)
      evaluations_of_both += runs[i].run.result.evaluations + 1;
    for (const std::string threads : {"1", "2"}) {
      const PlacerRun both = run_placer(
          *c, "anneal", {.params = {{"evaluations", evaluations}, {"threads", threads}}});
      EXPECT_EQ(both.result.placement, better.result.placement) << c->graph().name();
      EXPECT_EQ(both.result.evaluations, evaluations_of_both) << c->graph().name();
      EXPECT_NE(both.result.note.find("2 searches, from the 2 least-cost starts"),
                std::string::npos)
          << both.result.note;
    }
  }
}

// --param start=NAME takes any candidate; with no moves the result is that candidate's placement.
TEST(AnnealPlacerTest, AnyCandidateCanBeTheNamedStart) {
  auto c = two_chains_case();
  for (const StartRun& r : start_runs(*c)) {
    const PlacerRun run =
        run_placer(*c, "anneal", {.params = {{"evaluations", "0"}, {"start", r.name}}});
    EXPECT_EQ(run.result.placement, r.run.result.placement) << r.name;
    EXPECT_NE(run.result.note.find("started from " + r.name + " ("), std::string::npos)
        << run.result.note;
  }
}

TEST(AnnealPlacerTest, MovesFromAllOnOneGpuToTheOptimum) {
  for (auto make : {two_chains_case, colocation_case}) {
    const auto c = make();
    std::map<std::string, std::string> params = kShort;
    params["start"] = "single-gpu";
    const PlacerRun run = run_placer(*c, "anneal", {.params = params});
    EXPECT_NE(run.result.note.find("started from single-gpu"), std::string::npos);
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-5)
        << c->graph().name() << ": " << describe(*c, run.result.placement);
  }
}

TEST(AnnealPlacerTest, LeavesAnOomStartForAPlacementThatFits) {
  auto c = memory_tight_case();
  const PlacerRun run =
      run_placer(*c, "anneal", {.params = {{"evaluations", "300"}, {"start", "single-gpu"}}});
  EXPECT_TRUE(run.sim.feasible) << describe(*c, run.result.placement);
  EXPECT_TRUE(run.result.infeasible_reason.empty());
  EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9);
}

// The OOM start's penalised cost is below every fitting start's. It used to be searched first,
// and a fitting move from it, costlier than its penalised cost, was rejected and never recorded:
// anneal returned the OOM placement. Fitting starts now rank first, and the best is taken over
// every simulated placement, so even a search from the OOM start returns one that fits.
TEST(AnnealPlacerTest, ReturnsAFittingPlacementWhenTheCheapestStartIsOom) {
  auto c = oom_cheap_start_case();
  for (const std::map<std::string, std::string>& params :
       {kShort,
        std::map<std::string, std::string>{{"evaluations", "300"}, {"start", "single-gpu"}}}) {
    const PlacerRun run = run_placer(*c, "anneal", {.params = params});
    EXPECT_TRUE(run.sim.feasible) << describe(*c, run.result.placement);
    EXPECT_TRUE(run.result.infeasible_reason.empty()) << run.result.infeasible_reason;
    EXPECT_NEAR(run.sim.step_time_s, c->optimum_s(), 1e-9) << describe(*c, run.result.placement);
  }
  // The note gives the start's step time (not its penalised cost) and says it is OOM.
  const PlacerRun from_oom =
      run_placer(*c, "anneal", {.params = {{"evaluations", "0"}, {"start", "single-gpu"}}});
  EXPECT_NE(from_oom.result.note.find("started from single-gpu (4 s, OOM)"), std::string::npos)
      << from_oom.result.note;
}

TEST(AnnealPlacerTest, ExpertStartWithoutAnExpertIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"start", "expert"}}}), ConfigError);
}

TEST(AnnealPlacerTest, SameSeedSamePlacementAndCount) {
  auto c = colocation_case();
  const PlacerRun a = run_placer(*c, "anneal", {.params = kShort, .seed = 42});
  const PlacerRun b = run_placer(*c, "anneal", {.params = kShort, .seed = 42});
  EXPECT_EQ(a.result.placement, b.result.placement);
  EXPECT_EQ(a.result.evaluations, b.result.evaluations);
  EXPECT_EQ(a.result.note, b.result.note);
}

TEST(AnnealPlacerTest, RunsTheRequestedNumberOfEvaluations) {
  auto c = two_chains_case();
  const PlacerRun run = run_placer(*c, "anneal", {.params = {{"evaluations", "50"}}});
  // The candidates' own evaluations, one simulation per start, 50 moves from each of two starts.
  int64_t expected = 2 * 50;
  for (const StartRun& r : start_runs(*c)) expected += r.run.result.evaluations + 1;
  EXPECT_EQ(run.result.evaluations, expected);
  EXPECT_NE(run.result.note.find("50 moves"), std::string::npos) << run.result.note;
}

// rounds=N: the first wave's two searches start from single-gpu, one reaches the optimum, the
// second wave finds nothing faster and ends the run: four rounds of 50 moves, the same result with
// one thread as with two, and never worse than the single search.
TEST(AnnealPlacerTest, RoundsGoOnFromTheBestUntilAWaveFindsNothing) {
  auto c = two_chains_case();
  std::map<std::string, std::string> params = {{"evaluations", "50"}, {"start", "single-gpu"}};
  const PlacerRun single = run_placer(*c, "anneal", {.params = params});
  params["rounds"] = "8";
  params["threads"] = "1";
  const PlacerRun one = run_placer(*c, "anneal", {.params = params});
  params["threads"] = "2";
  const PlacerRun two = run_placer(*c, "anneal", {.params = params});
  EXPECT_NEAR(one.sim.step_time_s, c->optimum_s(), 1e-9);
  EXPECT_LE(one.sim.step_time_s, single.sim.step_time_s);
  EXPECT_NE(one.result.note.find("4 rounds of 50 moves in waves of two (t_start 0.0001 and 0.001)"),
            std::string::npos)
      << one.result.note;
  // single-gpu's memory check, the start's simulation, four rounds' moves.
  EXPECT_EQ(one.result.evaluations, 1 + 1 + 4 * 50);
  EXPECT_EQ(two.result.placement, one.result.placement);
  EXPECT_EQ(two.result.note, one.result.note);
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"rounds", "0"}}}), ConfigError);
}

TEST(AnnealPlacerTest, BudgetIsACapThatTheNoteReports) {
  auto c = two_chains_case();
  const PlacerRun run =
      run_placer(*c, "anneal", {.params = {{"evaluations", "100000000"}}, .budget_seconds = 0.05});
  EXPECT_NE(run.result.note.find("stopped by --budget-seconds"), std::string::npos)
      << run.result.note;
  EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);
}

// Both searches, from the two least-cost starts, stop at their first move (or before their first
// round): the note says so for each, since the one that lost might have won with its moves.
TEST(AnnealPlacerTest, EverySearchTheBudgetStoppedIsReported) {
  auto c = two_chains_case();
  for (const char* rounds : {"1", "2"}) {
    const PlacerRun run = run_placer(
        *c, "anneal",
        {.params = {{"evaluations", "100000000"}, {"rounds", rounds}}, .budget_seconds = 1e-9});
    const std::string& note = run.result.note;
    EXPECT_NE(note.find(std::string(rounds) == "1" ? "stopped by --budget-seconds"
                                                   : "rounds cut by --budget-seconds"),
              std::string::npos)
        << note;
    EXPECT_NE(note.find("(cut short)"), std::string::npos) << note;
    EXPECT_DOUBLE_EQ(run.sim.step_time_s, 3.0);  // m-etf's start, the optimum
  }
}

// The start placers may take half the budget: m-etf (which honours a deadline) is given an equal
// share of it, and the candidates left after the half are not run once the two starts the
// searches use exist. With no budget to speak of, m-etf is stopped at its 64th op, heft (next,
// and needed for a second start) runs, the rest do not.
TEST(AnnealPlacerTest, StartPlacersKeepToHalfTheBudget) {
  auto c = wide_case(100);
  const PlacerRun run = run_placer(*c, "anneal", {.budget_seconds = 1e-9});
  EXPECT_NE(run.result.note.find("start candidates dropped for time (starts may take half of "
                                 "--budget-seconds): m-etf, heft, m-topo, mincut, metis, "
                                 "round-robin, single-cpu"),
            std::string::npos)
      << run.result.note;
  // single-gpu (built first, it may take the whole budget) and scotch, which does not stop
  // part-way, are the two starts.
  EXPECT_NE(run.result.note.find("started from scotch"), std::string::npos) << run.result.note;
  EXPECT_NE(run.result.note.find("from single-gpu"), std::string::npos) << run.result.note;
  // Both ended past their share, and the note says so with their times (scotch cannot be
  // stopped, so on large clusters it ran seconds past a small budget without a word).
  EXPECT_NE(run.result.note.find("; start candidates that ran past their share of "
                                 "--budget-seconds: single-gpu ("),
            std::string::npos)
      << run.result.note;
  EXPECT_NE(run.result.note.find(" s), scotch ("), std::string::npos) << run.result.note;
  // With the default budget every candidate is built and none is dropped or late.
  const std::string note =
      run_placer(*c, "anneal", {.params = {{"evaluations", "100"}}}).result.note;
  EXPECT_EQ(note.find("dropped"), std::string::npos) << note;
  EXPECT_EQ(note.find("ran past"), std::string::npos) << note;
}

TEST(AnnealPlacerTest, UnknownParamIsAConfigError) {
  auto c = two_chains_case();
  EXPECT_THROW(run_placer(*c, "anneal", {.params = {{"iterations", "5"}}}), ConfigError);
}

TEST(AnnealPlacerTest, DefaultEvaluationsShrinkWithGraphSizeWithinBounds) {
  auto c = two_chains_case();
  EXPECT_EQ(default_anneal_evaluations(c->graph()), 20000);
  GraphBuilder b("big", "test");
  OpId prev = OpId::invalid();
  for (int i = 0; i < 20000; ++i) {
    Op op;
    op.name = "op" + std::to_string(i);
    if (prev.valid()) op.inputs = {{prev, 0}};
    prev = b.add_op(std::move(op));
  }
  const Graph big = std::move(b).build();
  EXPECT_EQ(default_anneal_evaluations(big), 2500);  // 1e8 / (20000 ops + 19999 edges)
}

// anneal_from with no annealing moves, so that only its whole-device moves act.
PlaceResult relabel_only(const PlacerCase& c, const Placement& start) {
  return anneal_from(case_request(c), "given", start, AnnealOptions{.evaluations = 0});
}

// All on the CPU (21.5 s) and no single move out of it pays: the merge of the CPU's groups onto
// the GPU takes everything but the CPU-only load there, the optimum.
TEST(AnnealFromTest, MergesADeviceOntoAnother) {
  auto c = cpu_only_case();
  const PlaceResult r = relabel_only(*c, single_device_placement(c->graph(), c->device("/cpu:0")));
  EXPECT_NEAR(c->simulator().run(r.placement).step_time_s, c->optimum_s(), 1e-12)
      << describe(*c, r.placement);
  EXPECT_EQ(r.placement[c->op("load")], c->device("/cpu:0"));
  EXPECT_EQ(r.note.find("whole-device moves: /cpu:0 onto /gpu:0 (21.5 s to 2.601 s); "), 0u)
      << r.note;
}

// Heavy on the CPU and light on the GPU (10 s): the swap (1 s) beats both merges (1.2 s, 10.8 s).
TEST(AnnealFromTest, SwapsTwoDevices) {
  auto c = heavy_light_case();
  Placement start = single_device_placement(c->graph(), c->device("/cpu:0"));
  start.device_of_op[c->op("light").value()] = c->device("/gpu:0");
  const PlaceResult r = relabel_only(*c, start);
  EXPECT_DOUBLE_EQ(c->simulator().run(r.placement).step_time_s, c->optimum_s());
  EXPECT_NE(r.note.find("/cpu:0 with /gpu:0"), std::string::npos) << r.note;
}

// One chain per GPU is the optimum: the three whole-device moves (a merge either way, the swap)
// are simulated and none is taken, since the swap only ties.
TEST(AnnealFromTest, KeepsAStartThatNoWholeDeviceMoveBeats) {
  auto c = two_chains_case();
  Placement start = single_device_placement(c->graph(), c->device("/gpu:0"));
  for (const char* op : {"b0", "b1", "b2"}) {
    start.device_of_op[c->op(op).value()] = c->device("/gpu:1");
  }
  const PlaceResult r = relabel_only(*c, start);
  EXPECT_EQ(r.placement, start);
  EXPECT_EQ(r.note.find("whole-device moves: none 1% faster; "), 0u) << r.note;
  EXPECT_EQ(r.evaluations, 1 + 3);  // the start and the three moves
}

// With 20 GB of parameters heavy does not fit on the 16-GB GPU: the swap (1 s) and the merge onto
// the GPU (1.2 s) are faster but out of memory, the merge onto the CPU (10.8 s) fits but is
// slower, so the start (10 s), which fits, stays.
TEST(AnnealFromTest, NeverTakesAMoveThatRunsOutOfMemory) {
  auto c = heavy_light_case(20);
  Placement start = single_device_placement(c->graph(), c->device("/cpu:0"));
  start.device_of_op[c->op("light").value()] = c->device("/gpu:0");
  const PlaceResult r = relabel_only(*c, start);
  EXPECT_EQ(r.placement, start) << describe(*c, r.placement);
  EXPECT_TRUE(r.infeasible_reason.empty()) << r.infeasible_reason;
  EXPECT_EQ(r.note.find("whole-device moves: none 1% faster; "), 0u) << r.note;
  EXPECT_EQ(r.evaluations, 1 + 3);
}

}  // namespace
}  // namespace dplace::testing

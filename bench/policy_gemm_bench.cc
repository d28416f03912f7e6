// How fast the BLAS runs the rl policy's per-decision products (bench/RESULTS.md, "RL placer",
// "How close to the machine the policy runs").
//
// The decoder of src/dplace/placers/rl/policy.cc, at each step, multiplies the `rows` distinct
// rows of a chunk (samples that chose different devices so far) by five matrices, with hidden
// width H = 64 over G groups and D devices (row-major, rows x K times K x N):
//   recurrent  rows x H    times H x 4H
//   scores     rows x H    times H x G    (attention against the encoder's keys)
//   context    rows x G    times G x H
//   combine    rows x 2H   times 2H x H
//   output     rows x H    times H x D
// BM_DecoderStep/<rows>/<groups>: one step's five products per iteration through sgemm_ (the
// BLAS that LibTorch links, OpenBLAS on Debian), called the way policy.cc calls it. Counters:
// GFLOP_per_s (2 flops per multiply-add) and decisions_per_s (rows per second). The backward pass
// does about twice these products, batched over all steps. BM_LargeProduct/<size>: the reference.
// Run with OPENBLAS_NUM_THREADS=1, as the policy's chunks run one per worker thread.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <vector>

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c, const int* ldc);

namespace {

constexpr int kHidden = 64;
constexpr int kDevices = 5;  // paper-k80x4: a CPU and four GPUs

// Row-major product of one decoder step, rows x k times k x n, added to `out`.
struct Product {
  int k = 0;
  int n = 0;
  std::vector<float> left, right, out;
};

void multiply(int rows, Product& p) {
  // Column-major BLAS: out^T (n x rows) = right^T (n x k) left^T (k x rows).
  const float one = 1.0f;
  sgemm_("N", "N", &p.n, &rows, &p.k, &one, p.right.data(), &p.n, p.left.data(), &p.k, &one,
         p.out.data(), &p.n);
}

void BM_DecoderStep(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const int groups = static_cast<int>(state.range(1));
  const int shapes[][2] = {{kHidden, 4 * kHidden},
                           {kHidden, groups},
                           {groups, kHidden},
                           {2 * kHidden, kHidden},
                           {kHidden, kDevices}};
  std::vector<Product> products;
  double multiply_adds = 0;
  for (const auto& [k, n] : shapes) {
    Product p{.k = k,
              .n = n,
              .left = std::vector<float>(static_cast<size_t>(rows) * k, 0.01f),
              .right = std::vector<float>(static_cast<size_t>(k) * n, 0.02f),
              .out = std::vector<float>(static_cast<size_t>(rows) * n, 0.0f)};
    products.push_back(std::move(p));
    multiply_adds += double(rows) * k * n;
  }
  for (auto _ : state) {
    for (Product& p : products) multiply(rows, p);
    benchmark::ClobberMemory();
  }
  const double steps = double(state.iterations());
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(2 * multiply_adds * steps / 1e9, benchmark::Counter::kIsRate);
  state.counters["decisions_per_s"] =
      benchmark::Counter(double(rows) * steps, benchmark::Counter::kIsRate);
}

// The same BLAS on one large square product (size x size times size x size): what a core reaches
// when the matrices are big enough, the reference for GFLOP_per_s above.
void BM_LargeProduct(benchmark::State& state) {
  const int size = static_cast<int>(state.range(0));
  Product p{.k = size,
            .n = size,
            .left = std::vector<float>(static_cast<size_t>(size) * size, 0.01f),
            .right = std::vector<float>(static_cast<size_t>(size) * size, 0.02f),
            .out = std::vector<float>(static_cast<size_t>(size) * size, 0.0f)};
  for (auto _ : state) {
    multiply(size, p);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      2.0 * size * size * size * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_LargeProduct)->Arg(1024)->ArgName("size");

BENCHMARK(BM_DecoderStep)->ArgsProduct({{1, 4, 8, 16}, {32, 256}})->ArgNames({"rows", "groups"});

}  // namespace

BENCHMARK_MAIN();

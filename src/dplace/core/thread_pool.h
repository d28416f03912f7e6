// A fixed-size pool of worker threads for data-parallel loops (evaluating many placements of one
// graph at once). Deterministic by construction: parallel_for(n, fn) calls fn(i, worker) exactly
// once per i, and callers write results into slot i, so the outcome never depends on scheduling.
//
// Thread safety: parallel_for may be called from one thread at a time. fn must be safe to call
// concurrently for distinct i; `worker` in [0, size()) identifies the calling worker so that fn can
// use per-worker scratch state (e.g. one simulator workspace per worker).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dplace {

class ThreadPool {
 public:
  // num_threads == 0 means std::thread::hardware_concurrency(). The calling thread also works, so
  // a pool of size 1 starts no extra thread. Throws std::system_error "cannot start worker thread
  // K of N: <reason>" when the system refuses a thread; the workers started are stopped first.
  explicit ThreadPool(size_t num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return num_workers_; }

  // Runs fn(i, worker) for every i in [0, n) and returns when all calls have returned. If a call
  // throws, the first exception (lowest i) is rethrown here after the loop finishes.
  void parallel_for(size_t n, const std::function<void(size_t index, size_t worker)>& fn);

 private:
  void worker_loop(size_t worker);
  void stop_and_join();  // tells the started workers to return and waits for them
  void run_items(size_t worker);

  size_t num_workers_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  size_t next_ = 0;
  size_t active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace dplace

#include "dplace/core/thread_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <system_error>

namespace dplace {

ThreadPool::ThreadPool(size_t num_threads) {
  if (num_threads == 0) num_threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  num_workers_ = num_threads;
  try {
    for (size_t w = 1; w < num_workers_; ++w) threads_.emplace_back([this, w] { worker_loop(w); });
  } catch (const std::system_error& e) {
    // The workers started so far must stop before the members go: the destructor does not run
    // for a constructor that throws, and destroying the condition variable they waited on hung
    // the process (a thread limit, or address space for 216 of 256 stacks).
    stop_and_join();
    throw std::system_error(e.code(), fmt::format("cannot start worker thread {} of {}",
                                                  threads_.size() + 1, num_workers_ - 1));
  } catch (...) {  // std::bad_alloc from the vector or the thread's state
    stop_and_join();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_and_join(); }

void ThreadPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::run_items(size_t worker) {
  while (true) {
    size_t i;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= n_) return;
      i = next_++;
    }
    try {
      (*fn_)(i, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[i] = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop(size_t worker) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    run_items(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --active_;
    }
    work_done_.notify_all();
  }
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    errors_.assign(n, nullptr);
    ++generation_;
  }
  work_ready_.notify_all();
  run_items(0);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [&] { return active_ == 0 && next_ >= n_; });
    fn_ = nullptr;
  }
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace dplace

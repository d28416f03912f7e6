// Import-time harness for the ONNX reader (bench/RESULTS.md, section "Import").
//
//   import_bench inline IN.onnx OUT.onnx
//       Writes a copy of IN whose external initializers (data file absent) are stored inline with
//       filler bytes of their true size: the weightless ResNet-50 fixture becomes a ~100 MB model.
//   import_bench import FILE [--dim name=value ...] [--repeat N]
//       Times read_onnx_file N times (default 5) and prints one CSV row:
//       file,file_bytes,mode,ops,param_bytes,min_s,median_s,peak_rss_bytes
//   import_bench load FILE [--dim name=value ...] [--repeat N]
//       The same row for load_graph_file, the reader behind every command's GRAPH argument (any
//       format by its content: dplace.graph/1 JSON, ONNX, PipeDream, dnn-partitioning).
//   import_bench protobuf FILE [--repeat N]
//       The same row for a plain full protobuf parse of the file (ModelProto::ParseFromIstream),
//       the reference point: what reading every weight into memory costs.
// Each mode is meant to run in its own process, so peak_rss_bytes (getrusage ru_maxrss) is that
// of the measured work alone plus the program's start-up.
#include <onnx/onnx_pb.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/io/importers.h"
#include "dplace/io/onnx_common.h"

namespace {

namespace ox = ::ONNX_NAMESPACE;

int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int make_inline(const std::string& in_path, const std::string& out_path) {
  ox::ModelProto model;
  std::ifstream in(in_path, std::ios::binary);
  if (!model.ParseFromIstream(&in)) {
    std::cerr << in_path << ": not a model\n";
    return 2;
  }
  int64_t inlined = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != ox::TensorProto_DataLocation_EXTERNAL) continue;
    const int64_t bytes =
        dplace::onnx_detail::TensorInfo{t.data_type(), {t.dims().begin(), t.dims().end()}}.bytes();
    t.clear_external_data();
    t.set_data_location(ox::TensorProto_DataLocation_DEFAULT);
    t.set_raw_data(std::string(static_cast<size_t>(bytes), '\x3c'));
    inlined += bytes;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (!model.SerializeToOstream(&out)) {
    std::cerr << out_path << ": cannot write\n";
    return 2;
  }
  std::cerr << "inlined " << inlined << " weight bytes into " << out_path << "\n";
  return 0;
}

struct Timing {
  double min_s = 0;
  double median_s = 0;
};

template <typename F>
Timing time_runs(int repeat, F&& run) {
  std::vector<double> seconds;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), seconds[seconds.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "inline") return make_inline(argv[2], argv[3]);
  if (argc < 3) {
    std::cerr << "usage: import_bench inline IN OUT | import FILE [--dim k=v]... [--repeat N] | "
                 "load FILE [--dim k=v]... [--repeat N] | protobuf FILE [--repeat N]\n";
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  dplace::ImportOptions options;
  int repeat = 5;
  for (int i = 3; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--repeat") {
      repeat = std::max(1, std::atoi(value.c_str()));
    } else if (flag == "--dim" && value.find('=') != std::string::npos) {
      options.dims[value.substr(0, value.find('='))] =
          std::atoll(value.substr(value.find('=') + 1).c_str());
    }
  }
  size_t ops = 0;
  int64_t param_bytes = 0;
  Timing timing;
  try {
    if (mode == "import") {
      timing = time_runs(repeat, [&] {
        dplace::LoadedGraph loaded = dplace::read_onnx_file(path, options);
        ops = loaded.graph.num_ops();
        param_bytes = loaded.graph.total_param_bytes();
      });
    } else if (mode == "load") {
      timing = time_runs(repeat, [&] {
        dplace::LoadedGraph loaded = dplace::load_graph_file(path, options);
        ops = loaded.graph.num_ops();
        param_bytes = loaded.graph.total_param_bytes();
      });
    } else if (mode == "protobuf") {
      timing = time_runs(repeat, [&] {
        ox::ModelProto model;
        std::ifstream in(path, std::ios::binary);
        if (!model.ParseFromIstream(&in)) throw dplace::FormatError(path + ": parse failed");
        ops = static_cast<size_t>(model.graph().node_size());
      });
    } else {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
  } catch (const dplace::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  std::printf("%s,%ju,%s,%zu,%lld,%.6f,%.6f,%lld\n", std::filesystem::path(path).filename().c_str(),
              static_cast<uintmax_t>(std::filesystem::file_size(path)), mode.c_str(), ops,
              static_cast<long long>(param_bytes), timing.min_s, timing.median_s,
              static_cast<long long>(peak_rss_bytes()));
  return 0;
}

// dlprof_example_pipeline: a data-loading pipeline with worker processes and a
// training loop, annotated for dlprof, with scenarios whose bottleneck is
// known. See examples/README.md.
//
// It prints what it measured itself; the last line is machine-readable:
//   summary: scenario=io-bound steps=40 wait_fraction=0.71 median_step_s=0.061 ...
#include <malloc.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>

#include "examples/pipeline/dataset.h"
#include "examples/pipeline/model.h"
#include "examples/pipeline/reading_service.h"
#include "examples/pipeline/scenario.h"
#include "examples/pipeline/stages.h"
#include "examples/pipeline/trainer.h"

namespace po = boost::program_options;
using namespace dlprof_example;

namespace {

constexpr const char* kDefaultScenario = "decode-bound";

// 0 success, 1 the run failed, 2 bad command line.
enum ExitCode { kOk = 0, kFailed = 1, kUsage = 2 };

std::string Fixed(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Returns false (after printing why) if the options cannot work.
bool Validate(const Options& o) {
  std::string problem;
  if (o.workers < 0 || o.workers > 64)
    problem = "--workers must be 0..64";
  else if (o.prefetch < 0)
    problem = "--prefetch must be >= 0";
  else if (o.prefetch == 0 && o.workers > 0)
    problem = "--prefetch must be >= 1 with workers";
  else if (o.worker_prefetch < 1)
    problem = "--worker-prefetch must be >= 1";
  else if (o.batch_size < 1)
    problem = "--batch-size must be >= 1";
  else if (o.steps < 1)
    problem = "--steps must be >= 1";
  else if (o.image_size < 8 || o.image_size > 1024)
    problem = "--image-size must be 8..1024";
  else if (o.decode_scale != 1 && o.decode_scale != 2 && o.decode_scale != 4 && o.decode_scale != 8)
    problem = "--decode-scale must be 1, 2, 4 or 8";
  else if (o.receive_ms < 0 || o.receive_ms > 10000)
    problem = "--receive-ms must be 0..10000";
  else if (o.storage_mbps < 0 || o.slow_worker_mbps < 0)
    problem = "bandwidths must be >= 0";
  else if (o.model_width < 1 || o.model_layers < 1)
    problem = "--model-width and --model-layers must be >= 1";
  else if (o.images < 1 || o.image_px < 16)
    problem = "--images must be >= 1 and --image-px >= 16";
  else if (o.warmup_steps < 0)
    problem = "--warmup-steps must be >= 0";
  if (problem.empty()) return true;
  std::cerr << "dlprof_example_pipeline: " << problem << "\n";
  return false;
}

void PrintTable(const Options& o, const std::vector<ProcessReport>& processes) {
  std::printf("  %-10s %-10s %8s %8s %8s\n", "stage", "where", "wall s", "cpu s", "off-cpu");
  for (int s = 0; s < kStageCount; ++s) {
    for (const char* role : {"main", "worker"}) {
      double wall = 0, cpu = 0;
      int64_t calls = 0;
      for (const ProcessReport& p : processes) {
        if (p.role != role) continue;
        wall += p.times.wall_s[s];
        cpu += p.times.cpu_s[s];
        calls += p.times.calls[s];
      }
      if (calls == 0) continue;
      const double off = wall > 0 ? std::max(0.0, 1 - cpu / wall) : 0;
      std::printf("  %-10s %-10s %8.3f %8.3f %7.0f%%\n", StageName(s),
                  std::string(role) == "main" ? "main" : (o.workers > 1 ? "workers" : "worker"),
                  wall, cpu, 100 * off);
    }
  }
}

void PrintMachineLines(const std::vector<ProcessReport>& processes) {
  for (const ProcessReport& p : processes) {
    std::printf(
        "process: role=%s worker=%d pid=%d batches=%lld exit=%s\n", p.role.c_str(), p.worker,
        static_cast<int>(p.pid), static_cast<long long>(p.batches),
        p.exit.find(' ') == std::string::npos ? p.exit.c_str() : ("\"" + p.exit + "\"").c_str());
  }
  for (const ProcessReport& p : processes) {
    for (int s = 0; s < kStageCount; ++s) {
      if (p.times.calls[s] == 0) continue;
      std::printf("stage: name=%s role=%s worker=%d calls=%lld wall_s=%s cpu_s=%s\n", StageName(s),
                  p.role.c_str(), p.worker, static_cast<long long>(p.times.calls[s]),
                  Fixed(p.times.wall_s[s]).c_str(), Fixed(p.times.cpu_s[s]).c_str());
    }
  }
  for (const ProcessReport& p : processes) {
    if (!p.has_buffer) continue;
    const BufferStats& b = p.buffer;
    std::printf(
        "buffer: name=%s role=%s worker=%d capacity=%llu items=%llu mean_occupancy=%s "
        "empty_fraction=%s full_fraction=%s push_blocked_s=%s pop_blocked_s=%s\n",
        p.buffer_name.c_str(), p.role.c_str(), p.worker,
        static_cast<unsigned long long>(b.capacity), static_cast<unsigned long long>(b.items),
        Fixed(b.mean_occupancy).c_str(), Fixed(b.empty_fraction).c_str(),
        Fixed(b.full_fraction).c_str(), Fixed(b.push_blocked_s).c_str(),
        Fixed(b.pop_blocked_s).c_str());
  }
}

// Fills *o from the command line and the scenario. Returns -1 to go on, or
// the exit code (after --help, or a bad command line).
int ParseCommandLine(int argc, char** argv, Options* out) {
  Options& o = *out;
  po::options_description visible("Options");
  // No po defaults on scenario-dependent flags: a flag given on the command
  // line overrides the scenario, one left out takes the scenario's value.
  // clang-format off
  visible.add_options()
      ("help,h", "print this help and exit")
      ("scenario,s", po::value<std::string>(),
       "io-bound, decode-bound (default), model-bound, imbalanced, in-process")
      ("workers,w", po::value<int>(), "worker processes; 0 runs the pipeline in this process")
      ("prefetch", po::value<int>(),
       "main prefetch buffer, in batches (in-process: 0 = no prefetch thread)")
      ("worker-prefetch", po::value<int>(), "each worker's prefetch buffer, in batches")
      ("batch-size,b", po::value<int>(), "images per batch")
      ("steps,n", po::value<int64_t>(), "training steps")
      ("image-size", po::value<int>(), "augmented image size, pixels per side")
      ("decode-scale", po::value<int>(), "decode JPEGs at 1/N size: 1, 2, 4 or 8")
      ("storage-mbps", po::value<double>(),
       "emulated storage bandwidth per reader in MB/s (0: no throttling)")
      ("slow-worker", po::value<int>(), "this worker reads at --slow-worker-mbps (-1: none)")
      ("slow-worker-mbps", po::value<double>(), "bandwidth of the slow worker's storage")
      ("model-width", po::value<int>(), "hidden units per layer of the model")
      ("model-layers", po::value<int>(), "hidden layers of the model")
      ("warmup-steps", po::value<int>(), "first steps left out of steady_wait_fraction")
      ("receive-ms", po::value<double>(),
       "CPU the training loop spends receiving each batch inside its wait (unpacking)")
      ("data-dir", po::value<std::string>(&o.data_dir),
       "data set cache folder (default $XDG_CACHE_HOME/dlprof-example or "
       "~/.cache/dlprof-example)")
      ("images", po::value<int>(&o.images)->default_value(o.images), "images in the data set")
      ("image-px", po::value<int>(&o.image_px)->default_value(o.image_px),
       "size of the stored images, pixels per side")
      ("seed", po::value<uint64_t>(&o.seed)->default_value(o.seed),
       "shuffling and augmentation seed")
      ("generate-only", po::bool_switch(&o.generate_only),
       "make sure the data set exists, print where, and exit")
      ("step-log", po::bool_switch(&o.step_log), "print a 'step:' line per training step");
  po::options_description testing("Testing");
  testing.add_options()
      ("crash-worker", po::value<int>(&o.crash_worker)->default_value(-1),
       "this worker crashes after its first batch")
      ("worker-timeout", po::value<double>(&o.worker_timeout_s)->default_value(60),
       "seconds a worker may stay silent");
  // clang-format on
  po::options_description all;
  all.add(visible).add(testing);

  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "dlprof_example_pipeline: " << e.what() << "\n(see --help)\n";
    return kUsage;
  }
  if (vm.count("help")) {
    std::cout
        << "Usage: dlprof_example_pipeline [--scenario S] [options]\n\n"
           "A data-loading pipeline (read -> decode -> augment -> batch, in worker processes\n"
           "or in-process, behind prefetch buffers) feeding a training loop, annotated for\n"
           "dlprof. Generates its JPEG data set on first run. Scenarios:\n";
    for (const Scenario& s : Scenarios()) std::cout << "  " << s.name << ": " << s.summary << "\n";
    std::cout << "\n" << visible << "\n" << testing << "\n";
    return kOk;
  }

  o.scenario = vm.count("scenario") ? vm["scenario"].as<std::string>() : kDefaultScenario;
  const Scenario* scenario = FindScenario(o.scenario);
  if (!scenario) {
    std::cerr << "dlprof_example_pipeline: unknown scenario '" << o.scenario << "' (see --help)\n";
    return kUsage;
  }
  scenario->apply(&o);
  auto take = [&vm](const char* flag, auto* field) {
    if (vm.count(flag)) *field = vm[flag].as<std::remove_pointer_t<decltype(field)>>();
  };
  take("workers", &o.workers);
  take("prefetch", &o.prefetch);
  take("worker-prefetch", &o.worker_prefetch);
  take("batch-size", &o.batch_size);
  take("steps", &o.steps);
  take("image-size", &o.image_size);
  take("decode-scale", &o.decode_scale);
  take("storage-mbps", &o.storage_mbps);
  take("slow-worker", &o.slow_worker);
  take("slow-worker-mbps", &o.slow_worker_mbps);
  take("model-width", &o.model_width);
  take("model-layers", &o.model_layers);
  take("warmup-steps", &o.warmup_steps);
  take("receive-ms", &o.receive_ms);
  // --workers N on a scenario without workers: give them a buffer to fill.
  if (o.workers > 0 && o.prefetch == 0 && !vm.count("prefetch")) o.prefetch = 4;
  if (o.data_dir.empty()) o.data_dir = DefaultDataDir();
  return Validate(o) ? -1 : kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Batches are megabytes: keep freed memory in the heap instead of handing it
  // back to the kernel and faulting it in again for the next batch (the usual
  // tuning for data loaders; without it page faults dominate "batch").
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  Options o;
  if (const int code = ParseCommandLine(argc, argv, &o); code >= 0) return code;
  const Scenario* scenario = FindScenario(o.scenario);

  const double t_start = WallSeconds();
  Dataset dataset;
  DatasetSpec spec;
  spec.images = o.images;
  spec.size_px = o.image_px;
  try {
    dataset = EnsureDataset(o.data_dir, spec);
  } catch (const std::exception& e) {
    std::cerr << "dlprof_example_pipeline: data set: " << e.what() << "\n";
    return kFailed;
  }
  std::printf("dlprof example pipeline, scenario %s: %s\n", o.scenario.c_str(), scenario->summary);
  std::printf(
      "  data set: %d JPEG images %dx%d (%.1f MB) in %s%s\n", o.images, o.image_px, o.image_px,
      dataset.total_bytes / 1e6, dataset.dir.c_str(),
      dataset.generated ? (" [generated in " + Fixed(dataset.generate_s, 2) + " s]").c_str() : "");
  if (o.generate_only) {
    std::printf("dataset: images=%d bytes=%llu generated=%d generate_s=%s\n", o.images,
                static_cast<unsigned long long>(dataset.total_bytes), dataset.generated ? 1 : 0,
                Fixed(dataset.generate_s).c_str());
    return kOk;
  }

  ServiceOptions so;
  so.workers = o.workers;
  so.prefetch = o.prefetch;
  so.worker_prefetch = o.worker_prefetch;
  so.total_batches = o.steps;
  so.pipeline.batch_size = o.batch_size;
  so.pipeline.out_px = o.image_size;
  so.pipeline.decode_scale = o.decode_scale;
  so.pipeline.read_mbps = o.storage_mbps;
  so.pipeline.seed = o.seed;
  so.slow_worker = o.slow_worker;
  so.slow_worker_mbps = o.slow_worker_mbps;
  so.crash_worker = o.crash_worker;
  so.worker_timeout_s = o.worker_timeout_s;
  std::printf(
      "  pipeline: %s, prefetch %d%s, batch %d, images %dx%d, decode at 1/%d",
      o.workers == 0
          ? "in-process"
          : (std::to_string(o.workers) + " worker process" + (o.workers > 1 ? "es" : "")).c_str(),
      o.prefetch,
      o.workers > 0 ? (" + " + std::to_string(o.worker_prefetch) + " per worker").c_str() : "",
      o.batch_size, o.image_size, o.image_size, o.decode_scale);
  if (o.storage_mbps > 0) std::printf(", storage %.1f MB/s", o.storage_mbps);
  if (o.slow_worker >= 0)
    std::printf(", worker %d at %.1f MB/s", o.slow_worker, o.slow_worker_mbps);
  std::printf("\n  model: %d hidden layers x %d units\n", o.model_layers, o.model_width);

  ModelConfig mc;
  mc.width = o.model_width;
  mc.layers = o.model_layers;
  mc.seed = o.seed;
  TrainResult result;
  std::vector<ProcessReport> processes;
  bool service_ok = true;
  std::string service_error;
  try {
    // Workers first: a model built before fork() would be copy-on-write
    // shared with them, and its first update would fault in every page again.
    std::unique_ptr<ReadingService> service = o.workers == 0
                                                  ? MakeInProcessReadingService(dataset, so)
                                                  : MakeMultiprocessingReadingService(dataset, so);
    Model model(mc);
    result = Train(*service, model, o.steps, o.receive_ms);
    service_ok = service->Shutdown();
    service_error = service->error();
    processes = service->Report();
  } catch (const std::exception& e) {
    std::cerr << "dlprof_example_pipeline: " << e.what() << "\n";
    return kFailed;
  }
  if (!processes.empty()) processes[0].times.Add(result.times);
  const double wall = WallSeconds() - t_start;

  const size_t warmup =
      std::min<size_t>(static_cast<size_t>(o.warmup_steps), result.step_s.size() / 2);
  double train_s = 0, wait_s = 0;
  for (size_t i = 0; i < result.step_s.size(); ++i) {
    train_s += result.step_s[i];
    wait_s += result.wait_s[i];
  }
  const double wait_fraction = WaitFraction(result);
  const double median_step = Median(result.step_s);
  std::printf(
      "trained %zu steps in %.2f s: median step %.1f ms, waiting for data %.1f%% of step time "
      "(%s)\n",
      result.step_s.size(), train_s, 1e3 * median_step, 100 * wait_fraction,
      wait_fraction >= 0.2    ? "input-bound"
      : wait_fraction >= 0.05 ? "slightly input-bound"
                              : "not input-bound");
  PrintTable(o, processes);
  if (o.step_log) {
    for (size_t i = 0; i < result.step_s.size(); ++i) {
      std::printf("step: i=%zu step_s=%s wait_s=%s\n", i, Fixed(result.step_s[i], 6).c_str(),
                  Fixed(result.wait_s[i], 6).c_str());
    }
  }
  PrintMachineLines(processes);
  const bool ok = result.ok && service_ok;
  // The service's account (after reaping) includes what the loop saw.
  const std::string error = service_error.empty() ? result.error : service_error;
  std::printf(
      "summary: scenario=%s workers=%d prefetch=%d worker_prefetch=%d batch_size=%d steps=%zu "
      "wall_s=%s train_s=%s wait_s=%s wait_fraction=%s steady_wait_fraction=%s median_step_s=%s "
      "median_wait_s=%s first_loss=%s last_loss=%s status=%s\n",
      o.scenario.c_str(), o.workers, o.prefetch, o.worker_prefetch, o.batch_size,
      result.step_s.size(), Fixed(wall).c_str(), Fixed(train_s).c_str(), Fixed(wait_s).c_str(),
      Fixed(wait_fraction).c_str(), Fixed(WaitFraction(result, warmup)).c_str(),
      Fixed(median_step, 6).c_str(), Fixed(Median(result.wait_s), 6).c_str(),
      Fixed(result.first_loss, 6).c_str(), Fixed(result.last_loss, 6).c_str(),
      ok ? "ok" : "failed");
  std::fflush(stdout);
  if (!ok) {
    std::cerr << "dlprof_example_pipeline: " << (error.empty() ? "failed" : error) << "\n";
    return kFailed;
  }
  return kOk;
}

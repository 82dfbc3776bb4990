// SPDX-License-Identifier: MIT
#include "bench_report.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <ostream>
#include <set>
#include <tuple>

#include <palrt/pal/cpu.hpp>
#include <palrt/pal/process_barrier.hpp>

#include "common/json_string.hpp"

namespace palrt::bench {

using palrt::tools::json_string;

namespace {

// Metrics where a smaller value is better; a palrt/baseline ratio below 1 favours palrt.
bool lower_is_better(std::string_view metric) { return metric != "ops_per_s"; }

// Table cells: enough digits to compare, no more. Values are ns, counts or ratios.
std::string table_number(double v) {
  if (!std::isfinite(v)) return "-";
  const double mag = std::fabs(v);
  const int decimals = mag >= 100.0 ? 1 : mag >= 10.0 ? 2 : 3;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string table_ratio(double palrt, double baseline) {
  if (!std::isfinite(palrt) || !std::isfinite(baseline) || baseline == 0.0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2fx", palrt / baseline);
  return buf;
}

}  // namespace

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN or infinity
  char buf[64];
  // 9 significant digits: far beyond what a noisy measurement resolves, and short.
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9);
  if (ec != std::errc{}) return "null";
  return std::string(buf, end);
}

std::string cpu_clock_note(double wall_figure, double cpu_figure) {
  return "; by CPU clocks " + table_number(cpu_figure) + (is_disturbed(wall_figure, cpu_figure) ? ", DISTURBED" : "");
}

machine_info machine_info::collect() {
  machine_info m;
  m.nproc = palrt::pal::processor_count();
  utsname uts{};
  m.kernel = uname(&uts) == 0 ? uts.release : "unknown";
  if (const auto* state = palrt::pal::process_barrier_state_if_initialized()) {
    m.barrier_strategy = std::string(palrt::pal::to_string(state->strategy));
    m.barrier_forced = state->forced;
  } else {
    m.barrier_strategy = "none";
  }
  return m;
}

bench_report::bench_report(std::string component) : component_(std::move(component)) {}

void bench_report::add(bench_result result) {
  if (result.cpu_value && !result.disturbed) result.disturbed = is_disturbed(result.value, *result.cpu_value);
  results_.push_back(std::move(result));
}

void bench_report::describe_case(std::string case_name, std::string description) {
  case_descriptions_.emplace_back(std::move(case_name), std::move(description));
}

void bench_report::progress(std::string_view line) const {
  std::cerr << "palrt-bench " << component_ << ": " << line << '\n';
}

void bench_report::skipped(std::string_view variant, std::string_view reason) const {
  std::cerr << "palrt-bench " << component_ << ": skipped variant " << variant << ": " << reason << '\n';
}

void bench_report::print_table(std::ostream& out, const machine_info& machine) const {
  // Columns: palrt first, then the baselines in the order the component measured them.
  std::vector<std::string> variants;
  const auto has_variant = [&](std::string_view v) {
    return std::find(variants.begin(), variants.end(), v) != variants.end();
  };
  for (const auto& r : results_) {
    if (r.variant == palrt_variant && !has_variant(r.variant)) variants.insert(variants.begin(), r.variant);
  }
  for (const auto& r : results_) {
    if (!has_variant(r.variant)) variants.push_back(r.variant);
  }
  const bool have_palrt = has_variant(palrt_variant);
  std::vector<std::string> baselines;
  for (const auto& v : variants) {
    if (v != palrt_variant) baselines.push_back(v);
  }

  // Rows: one per (case, metric, threads), in the order measured.
  using row_key = std::tuple<std::string, std::string, int>;
  std::vector<row_key> rows;
  std::set<std::string> metrics;
  for (const auto& r : results_) {
    row_key key{r.case_name, r.metric, r.threads};
    if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
    metrics.insert(r.metric);
  }
  const auto result_of = [&](const row_key& key, std::string_view variant) -> const bench_result* {
    for (const auto& r : results_) {
      if (r.variant == variant && row_key{r.case_name, r.metric, r.threads} == key) return &r;
    }
    return nullptr;
  };
  const auto value_of = [&](const row_key& key, std::string_view variant) -> double {
    const bench_result* r = result_of(key, variant);
    return r ? r->value : NAN;
  };
  const auto cpu_value_of = [&](const row_key& key, std::string_view variant) -> double {
    const bench_result* r = result_of(key, variant);
    return r && r->cpu_value ? *r->cpu_value : NAN;
  };
  // A disturbed figure is marked `*`; every figure of a table with verdicts gets a one-column
  // suffix (`*` or a space), so that the digits stay aligned.
  std::size_t verdicts = 0, disturbed = 0;
  bool any_twin = false;
  for (const auto& r : results_) {
    verdicts += r.disturbed ? 1 : 0;
    disturbed += r.disturbed.value_or(false) ? 1 : 0;
    any_twin = any_twin || r.cpu_value.has_value();
  }
  const auto marked = [&](const row_key& key, std::string_view variant) {
    std::string cell = table_number(value_of(key, variant));
    if (verdicts == 0) return cell;
    const bench_result* r = result_of(key, variant);
    return cell + (r && r->disturbed.value_or(false) ? "*" : " ");
  };

  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header{"case", "metric", "threads"};
  header.insert(header.end(), variants.begin(), variants.end());
  if (have_palrt) {
    for (const auto& b : baselines) header.push_back("palrt/" + b);
  }
  cells.push_back(header);
  for (const auto& key : rows) {
    std::vector<std::string> line{std::get<0>(key), std::get<1>(key), std::to_string(std::get<2>(key))};
    for (const auto& v : variants) line.push_back(marked(key, v));
    if (have_palrt) {
      const double p = value_of(key, palrt_variant);
      for (const auto& b : baselines) line.push_back(table_ratio(p, value_of(key, b)));
    }
    cells.push_back(std::move(line));
    // The twins, on a line of their own under the figures, with their own ratios.
    bool has_twin = false;
    for (const auto& v : variants) has_twin = has_twin || std::isfinite(cpu_value_of(key, v));
    if (!has_twin) continue;
    std::vector<std::string> twins{"", "(cpu clocks)", std::to_string(std::get<2>(key))};
    for (const auto& v : variants) twins.push_back(table_number(cpu_value_of(key, v)) + (verdicts ? " " : ""));
    if (have_palrt) {
      const double p = cpu_value_of(key, palrt_variant);
      for (const auto& b : baselines) twins.push_back(table_ratio(p, cpu_value_of(key, b)));
    }
    cells.push_back(std::move(twins));
  }

  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& line : cells) {
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }

  out << "palrt-bench " << component_ << ": nproc " << machine.nproc << ", kernel " << machine.kernel
      << ", barrier strategy " << machine.barrier_strategy
      << (machine.barrier_forced ? " (forced by PALRT_BARRIER)" : "") << '\n';
  if (have_palrt && !baselines.empty()) {
    out << "ratio columns are palrt / baseline:";
    const char* sep = " ";
    for (const auto& m : metrics) {
      out << sep << "for " << m << (lower_is_better(m) ? " below" : " above") << " 1.00x means palrt is better";
      sep = "; ";
    }
    out << '\n';
  }
  out << '\n';
  for (const auto& line : cells) {
    for (std::size_t c = 0; c < line.size(); ++c) {
      const bool text_column = c < 2;  // case and metric read left-aligned, numbers right-aligned
      const std::size_t pad = width[c] - line[c].size();
      if (c > 0) out << "  ";
      if (!text_column) out << std::string(pad, ' ');
      out << line[c];
      if (text_column && c + 1 < line.size()) out << std::string(pad, ' ');
    }
    out << '\n';
  }
  if (verdicts != 0 || any_twin) {
    out << "\n(cpu clocks): the figure above it timed by the CPU clocks of the threads that ran it (their CPU "
           "time per CPU they occupied in place of the wall time). * disturbed: the two differ by more than "
        << disturbed_percent
        << "%: something else had the CPUs, or the variant waits by design (docs/BENCHMARKS.md, \"Disturbed "
           "runs\"); "
        << disturbed << " of " << verdicts << " figures disturbed.\n";
  }
  if (!case_descriptions_.empty()) out << '\n';
  for (const auto& [name, description] : case_descriptions_) out << name << ": " << description << '\n';
}

void bench_report::print_json(std::ostream& out, const machine_info& machine) const {
  out << "{\"component\": " << json_string(component_) << ",\n"
      << " \"machine\": {\"nproc\": " << machine.nproc << ", \"kernel\": " << json_string(machine.kernel)
      << ", \"barrier_strategy\": " << json_string(machine.barrier_strategy) << "},\n"
      << " \"results\": [";
  const char* sep = "\n  ";
  for (const auto& r : results_) {
    out << sep << "{\"case\": " << json_string(r.case_name) << ", \"variant\": " << json_string(r.variant)
        << ", \"threads\": " << r.threads << ", \"metric\": " << json_string(r.metric)
        << ", \"value\": " << json_number(r.value);
    if (r.cpu_value) out << ", \"cpu_value\": " << json_number(*r.cpu_value);
    if (r.disturbed) out << ", \"disturbed\": " << (*r.disturbed ? "true" : "false");
    out << '}';
    sep = ",\n  ";
  }
  out << "]}\n";
}

}  // namespace palrt::bench

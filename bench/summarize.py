#!/usr/bin/env python3
"""Turns the raw results of scripts/bench.sh into the BENCHMARKS.md tables.

    bench/summarize.py OUT_DIR        # writes OUT_DIR/table.md and prints it

Reads what bench/whole_process.sh wrote (runs.tsv, long.tsv, pipeline.tsv,
pipeline_baseline_summary.json, machine.txt) and the Google Benchmark JSON
files under OUT_DIR/micro/. Every figure is a median over the repetitions
found; nothing is asserted, numbers are only reported.
"""
import csv
import glob
import json
import os
import re
import statistics
import sys


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def iqr(values):
    values = sorted(v for v in values if v is not None)
    if len(values) < 4:
        return None
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def fmt(value, pattern="{:.2f}", missing="—"):
    return missing if value is None else pattern.format(value)


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


TOOL_NAMES = {
    "dlprof": "dlprof",
    "dlprof-fp": "dlprof (fp unwinder)",
    "dlprof-posix": "dlprof (POSIX timer)",
    "gperftools": "gperftools",
    "perf": "perf record -g",
}


def whole_process(out, lines):
    rows = read_tsv(os.path.join(out, "runs.tsv"))
    if not rows:
        lines.append("_No whole-process results._\n")
        return {}
    threads_list = sorted({int(r["threads"]) for r in rows})
    hz_list = sorted({int(r["hz"]) for r in rows if r["tool"] != "none"})
    tools = [t for t in TOOL_NAMES if any(r["tool"] == t for r in rows)]
    reps = len({r["rep"] for r in rows})

    base = {}
    for t in threads_list:
        runs = [r for r in rows if r["tool"] == "none" and int(r["threads"]) == t]
        cpu = [num(r["cpu_s"]) for r in runs]
        total = [num(r["time_cpu_s"]) for r in runs]
        base[t] = {
            "cpu": median(cpu),
            "total": median(total),
            "spread": (max(cpu) - min(cpu)) / median(cpu) if len(cpu) > 1 else None,
            "n": len(cpu),
            "thread_cpu": median([num(r["thread_cpu_s"]) for r in runs]),
            "other": median([num(r["cpu_s"]) - num(r["thread_cpu_s"]) for r in runs]),
            "iqr": iqr([c / median(cpu) for c in cpu]),
        }

    stats = {}
    for t in threads_list:
        for hz in hz_list:
            for tool in tools:
                runs = [r for r in rows if r["tool"] == tool and int(r["threads"]) == t and int(r["hz"]) == hz]
                if not runs:
                    continue
                b = base[t]
                s = {"n": len(runs)}
                ratios = [num(r["cpu_s"]) / b["cpu"] for r in runs]
                s["overhead"] = median(ratios)
                s["iqr"] = iqr(ratios)
                s["worker"] = median([num(r["thread_cpu_s"]) / b["thread_cpu"] for r in runs])
                s["other_ms"] = median([(num(r["cpu_s"]) - num(r["thread_cpu_s"]) - b["other"]) * 1e3 for r in runs])
                s["overhead_total"] = median([num(r["time_cpu_s"]) / b["total"] for r in runs])
                fid, wfid, bps, cost, cost_total, handler, report, drops = [], [], [], [], [], [], [], []
                for r in runs:
                    samples, weighted, cpu = num(r["samples"]), num(r["weighted"]), num(r["thread_cpu_s"])
                    if samples is not None and cpu:
                        fid.append(samples / (cpu * hz))
                    if weighted is not None and cpu:
                        wfid.append(weighted / (cpu * hz))
                    if samples:
                        if num(r["bytes"]) is not None:
                            bps.append(num(r["bytes"]) / samples)
                        cost.append((num(r["cpu_s"]) - b["cpu"]) / samples * 1e6)
                        cost_total.append((num(r["time_cpu_s"]) - b["total"]) / samples * 1e6)
                        if num(r["handler_ns"]) is not None:
                            handler.append(num(r["handler_ns"]) / samples / 1e3)
                    report.append(num(r["report_s"]))
                    drops.append(num(r["dropped"]))
                s.update(fidelity=median(fid), weighted=median(wfid), bytes=median(bps), cost=median(cost),
                         cost_total=median(cost_total), handler_us=median(handler), report=median(report),
                         dropped=median(drops))
                stats[(t, hz, tool)] = s

    main_tools = [t for t in ("dlprof", "gperftools", "perf") if t in tools]
    lines.append(f"Medians of {reps} repetitions per cell; runs alternated. "
                 "Overhead = profiled CPU time ÷ unprofiled (the workload's own getrusage); "
                 "fidelity = samples recorded ÷ (worker threads' CPU seconds × Hz).\n")
    head = "| threads | Hz | " + " | ".join(f"overhead {TOOL_NAMES[t]}" for t in main_tools) + " | " + \
           " | ".join(f"fidelity {TOOL_NAMES[t]}" for t in main_tools) + " |"
    lines.append(head)
    lines.append("|" + "---|" * (2 + 2 * len(main_tools)))
    for t in threads_list:
        for hz in hz_list:
            cells = [fmt(stats.get((t, hz, tool), {}).get("overhead"), "{:.3f}") for tool in main_tools]
            cells += [fmt(stats.get((t, hz, tool), {}).get("fidelity"), "{:.2f}") for tool in main_tools]
            lines.append(f"| {t} | {hz} | " + " | ".join(cells) + " |")
    lines.append("")

    lines.append("Per tool and configuration (medians; the interquartile range of the per-run overhead "
                 "in brackets):\n")
    lines.append("| threads | Hz | tool | overhead (process) | worker threads' CPU | other CPU ms | "
                 "incl. perf's own process | fidelity | weighted fidelity | CPU µs per sample | "
                 "handler µs per sample (wall clock) | bytes per sample | dropped | `dlprof report` s |")
    lines.append("|" + "---|" * 14)
    for t in threads_list:
        for hz in hz_list:
            for tool in tools:
                s = stats.get((t, hz, tool))
                if not s:
                    continue
                band = f" [{s['iqr'][0]:.3f}–{s['iqr'][1]:.3f}]" if s["iqr"] else ""
                lines.append(
                    f"| {t} | {hz} | {TOOL_NAMES[tool]} | {fmt(s['overhead'], '{:.3f}')}{band} | "
                    f"{fmt(s['worker'], '{:.3f}')} | {fmt(s['other_ms'], '{:+.0f}')} | "
                    f"{fmt(s['overhead_total'], '{:.3f}')} | {fmt(s['fidelity'])} | "
                    f"{fmt(s['weighted'] if tool.startswith('dlprof') else None)} | {fmt(s['cost'], '{:.1f}')} | "
                    f"{fmt(s['handler_us'], '{:.1f}')} | {fmt(s['bytes'], '{:.1f}')} | "
                    f"{fmt(s['dropped'], '{:.0f}')} | {fmt(s['report'], '{:.2f}')} |")
    lines.append("")
    def band(b):
        return f"IQR {100 * (b['iqr'][0] - 1):+.1f}% to {100 * (b['iqr'][1] - 1):+.1f}%, " if b["iqr"] else ""
    noise = ", ".join(f"{t} thread{'s' if t > 1 else ''}: {fmt(base[t]['cpu'], '{:.3f}')} s CPU, {band(base[t])}"
                      f"max − min {fmt(100 * base[t]['spread'] if base[t]['spread'] is not None else None, '{:.1f}')}% "
                      f"over {base[t]['n']} runs" for t in threads_list)
    lines.append(f"Unprofiled baseline, the noise floor of the overhead columns (CPU time of identical runs, "
                 f"relative to their median): {noise}.\n")

    floor_rows = read_tsv(os.path.join(out, "floor.tsv"))
    if floor_rows:
        lines.append("The floor (bench/timer_floor.cc): one thread, a bare timer signal to an empty handler, "
                     "no profiler. What every signal-based sampler pays per sample on this machine:\n")
        lines.append("| timer | Hz | CPU overhead | signals ÷ expected | CPU µs per signal |")
        lines.append("|---|---|---|---|---|")
        for hz in sorted({int(r["hz"]) for r in floor_rows}):
            none = median([num(r["cpu_s"]) for r in floor_rows if r["timer"] == "none"])
            for timer, label in (("perf", "perf task-clock (dlprof's default)"), ("posix", "POSIX CPU timer"),
                                 ("itimer", "setitimer (gperftools)")):
                runs = [r for r in floor_rows if r["timer"] == timer and int(r["hz"]) == hz]
                if not runs or not none:
                    continue
                ratio = median([num(r["cpu_s"]) / none for r in runs])
                rate = median([num(r["signals"]) / (num(r["cpu_s"]) * hz) for r in runs])
                cost = median([(num(r["cpu_s"]) - none) / num(r["signals"]) * 1e6 for r in runs if num(r["signals"])])
                lines.append(f"| {label} | {hz} | {fmt(ratio, '{:.3f}')} | {fmt(rate)} | {fmt(cost, '{:.1f}')} |")
        lines.append("")

    steady = read_tsv(os.path.join(out, "steady.tsv"))
    base = median([num(r["cpu_s"]) for r in steady if r["tool"] == "none"])
    base_threads = median([num(r["thread_cpu_s"]) for r in steady if r["tool"] == "none"])
    if base and base_threads:
        n = len([r for r in steady if r["tool"] == "none"])
        lines.append(f"**Steady state** (one thread, {fmt(base, '{:.1f}')} s of CPU unprofiled, "
                     f"{n} runs of each, alternated; medians):\n")
        lines.append("| Hz | overhead (process) | worker thread's CPU | other CPU ms per wall second | "
                     "fidelity | bytes per sample |")
        lines.append("|---|---|---|---|---|---|")
        base_other = median([(num(r["cpu_s"]) - num(r["thread_cpu_s"])) / num(r["wall_s"])
                             for r in steady if r["tool"] == "none"])
        for hz in (100, 1000):
            runs = [r for r in steady if r["tool"] == "dlprof" and int(r["hz"]) == hz]
            if not runs:
                continue
            other = median([(num(r["cpu_s"]) - num(r["thread_cpu_s"])) / num(r["wall_s"]) for r in runs])
            lines.append(
                f"| {hz} | {fmt(median([num(r['cpu_s']) / base for r in runs]), '{:.3f}')} "
                f"| {fmt(median([num(r['thread_cpu_s']) / base_threads for r in runs]), '{:.3f}')} "
                f"| {fmt((other - base_other) * 1e3 if other is not None else None, '{:+.1f}')} "
                f"| {fmt(median([num(r['samples']) / (num(r['thread_cpu_s']) * hz) for r in runs]))} "
                f"| {fmt(median([num(r['bytes']) / num(r['samples']) for r in runs if num(r['samples'])]), '{:.1f}')} |")
        lines.append("")

    long_rows = read_tsv(os.path.join(out, "long.tsv"))
    for r in long_rows:
        samples = num(r["samples"])
        cpu = num(r["thread_cpu_s"])
        if not samples:
            continue
        lines.append(
            f"Long run (dlprof, {r['threads']} thread, {r['hz']} Hz, {fmt(cpu, '{:.1f}')} s CPU): "
            f"{int(samples)} samples, fidelity {fmt(samples / (cpu * int(r['hz'])))}, "
            f"**{fmt(num(r['bytes']) / samples, '{:.1f}')} bytes per sample** on disk "
            f"({int(num(r['bytes']))} bytes), `dlprof report` {fmt(num(r['report_s']), '{:.2f}')} s.\n")
    return stats


def pipeline(out, lines):
    rows = read_tsv(os.path.join(out, "pipeline.tsv"))
    rows = [r for r in rows if num(r["median_step_s"]) is not None and r["status"] == "ok"]
    if not rows:
        lines.append("Example pipeline (`--scenario decode-bound`): TODO, the example did not build or run here.\n")
        return
    med = {m: median([num(r["median_step_s"]) for r in rows if r["mode"] == m])
           for m in ("none", "dlprof-100", "dlprof-1000")}
    n = len([r for r in rows if r["mode"] == "none"])
    lines.append("| example pipeline, decode-bound | median step | ratio to unprofiled |")
    lines.append("|---|---|---|")
    for m, label in (("none", "unprofiled"), ("dlprof-100", "dlprof 100 Hz"), ("dlprof-1000", "dlprof 1000 Hz")):
        ratio = med[m] / med["none"] if med[m] and med["none"] else None
        lines.append(f"| {label} | {fmt(med[m] * 1e3 if med[m] else None, '{:.1f}')} ms | {fmt(ratio, '{:.3f}')} |")
    lines.append(f"\n({n} runs of each, alternated.)")
    path = os.path.join(out, "pipeline_baseline_summary.json")
    if os.path.exists(path):
        with open(path) as f:
            j = json.load(f)
        steps, prof = j.get("steps", {}), j.get("profiler", {})
        lines.append(
            f" In-run distortion (`DLPROF_BASELINE_STEPS=60`, 100 Hz): unsampled median step "
            f"{fmt(num(steps.get('baseline_median_s')) and 1e3 * num(steps.get('baseline_median_s')), '{:.1f}')} ms, "
            f"sampled {fmt(num(steps.get('median_s')) and 1e3 * num(steps.get('median_s')), '{:.1f}')} ms, "
            f"distortion {fmt(num(prof.get('distortion')), '{:+.3f}')} (as `dlprof report` computes it).")
    lines.append("")


def load_bench_json(pattern):
    """{benchmark name: [run dicts]} over every file matching pattern."""
    out = {}
    for path in sorted(glob.glob(pattern)):
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            out.setdefault(b["name"], []).append(b)
    return out


def micro(out, lines):
    mdir = os.path.join(out, "micro")
    variants = [("static", "off", "linked (static), sampling off"),
                ("static", "light", "linked (static), sampling on, light 100 Hz"),
                ("static", "detailed", "linked (static), sampling on, detailed 1000 Hz"),
                ("so", "off", "libdlprof.so, sampling off"),
                ("so", "light", "libdlprof.so, sampling on, light 100 Hz")]
    data = {(link, mode): load_bench_json(os.path.join(mdir, f"annotation_{link}_{mode}_*.json"))
            for link, mode, _ in variants}
    names = [("BM_StageEnterExit", "stage enter+exit"), ("BM_StageScopeNested", "StageScope (nested)"),
             ("BM_BufferSetSize", "buffer set_size"), ("BM_StepBeginEnd", "step begin+end"),
             ("BM_WaitBeginEnd", "wait begin+end"), ("BM_Enabled", "dlprof_enabled()")]
    present = [(l, m, label) for l, m, label in variants if data[(l, m)]]
    if present:
        lines.append("Annotation cost, ns of thread CPU time per operation (median of runs; `enabled` checked "
                     "in every result):\n")
        lines.append("| operation | " + " | ".join(label for _, _, label in present) + " |")
        lines.append("|" + "---|" * (1 + len(present)))
        for bench, label in names:
            cells = []
            for link, mode, _ in present:
                runs = [b for name, bs in data[(link, mode)].items() if name.startswith(bench + "/") or name == bench
                        for b in bs]
                value = median([b.get("ns_per_op") for b in runs])
                enabled = {b.get("enabled") for b in runs}
                want = 0 if mode == "off" else 1
                ok = enabled == {want}
                cells.append(fmt(value, "{:.1f}") + ("" if ok else f" (**enabled={sorted(enabled)}**)"))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")

    unw = load_bench_json(os.path.join(mdir, "unwinder_*.json"))
    if unw:
        lines.append("Signal handler unwind cost per sample (bench/unwinder_bench.cc, warm caches, ns; "
                     "frames = pcs returned):\n")
        lines.append("| unwinder | depth 8 | depth 32 | depth 128 |")
        lines.append("|---|---|---|---|")
        for u in ("fp", "libunwind", "gperftools"):
            cells = []
            for d in (8, 32, 128):
                runs = [b for name, bs in unw.items() if re.match(rf"BM_Unwind/{u}/{d}(/|$)", name) for b in bs]
                t = median([b.get("real_time") for b in runs])
                fr = median([b.get("frames") for b in runs])
                cells.append(f"{fmt(t, '{:.0f}')} ({fmt(fr, '{:.0f}')} frames)")
            lines.append(f"| {u} | " + " | ".join(cells) + " |")
        lines.append("")

    pyw = load_bench_json(os.path.join(mdir, "python_walk_*.json"))
    if pyw:
        lines.append("Python frames (bench/python_walk_bench.cc, CPython 3.11, ns of CPU time; "
                     "per frame in parentheses):\n")
        lines.append("| operation | ns | frames |")
        lines.append("|---|---|---|")
        for name in sorted(pyw, key=lambda n: (n.split("/")[0], int(n.split("/")[1]) if
                                                n.split("/")[1].isdigit() else 0, n)):
            runs = pyw[name]
            t = median([b.get("cpu_time") for b in runs])
            pf = median([b.get("per_frame") for b in runs])
            fr = median([b.get("frames") for b in runs])
            lines.append(f"| {name} | {fmt(t, '{:.0f}')} ({fmt(pf and pf * 1e9, '{:.1f}')}) | {fmt(fr, '{:.0f}')} |")
        lines.append("")

    pipe = load_bench_json(os.path.join(mdir, "pipeline_*.json"))
    if pipe:
        lines.append("Offline and writer throughput (bench/pipeline_bench.cc, synthetic 32-frame samples, "
                     "thread CPU time):\n")
        lines.append("| stage | ns per sample | note |")
        lines.append("|---|---|---|")

        def row(prefix, label, note_fn=lambda b: ""):
            runs = [b for name, bs in pipe.items() if name.startswith(prefix) for b in bs]
            if not runs:
                return
            value = median([b.get("ns_per_sample") for b in runs])
            lines.append(f"| {label} | {fmt(value, '{:.0f}')} | {note_fn(runs[0])} |")

        row("BM_CollectorDrainFlush/unique_stacks:0", "writer: drain + encode + write (500 distinct stacks)",
            lambda b: f"{b.get('bytes_per_sample', 0):.1f} bytes/sample")
        row("BM_CollectorDrainFlush/unique_stacks:1", "writer: every stack new (worst case)",
            lambda b: f"{b.get('bytes_per_sample', 0):.1f} bytes/sample")
        runs = [b for name, bs in pipe.items() if name.startswith("BM_CollectorSnapshotTick") for b in bs]
        if runs:
            tick = median([b.get("ns_per_tick") for b in runs])
            lines.append(f"| writer: one 10 ms tick (one blocked thread, one buffer) | {fmt(tick, '{:.0f}')} per tick | "
                         f"100 ticks/s: {fmt(tick / 1e5, '{:.3f}')}% of a core per sampled thread |")
        row("BM_ReadDlprofFile", "read .dlprof (ReadDlprofFile)")
        row("BM_ReadGperftools", "read gperftools profile", lambda b: "equal stacks aggregated, as gperftools writes")
        row("BM_Symbolize", "symbolize (cold libdwfl, per sample)",
            lambda b: f"{int(b.get('locations', 0))} distinct locations, {int(b.get('samples', 0))} samples")
        row("BM_Analyze", "analysis")
        for name in sorted({n.split("/manual_time")[0] for n in pipe if n.startswith("BM_Render/")}):
            row(name, f"render {name.split('/', 1)[1]}", lambda b: f"{int(b.get('out_bytes', 0))} bytes")
        row("BM_ReportAll", "whole report (read + symbolize + analyse + every output)")
        lines.append("")


def main():
    if len(sys.argv) != 2:
        print("usage: bench/summarize.py OUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    lines = ["# dlprof benchmark results", ""]
    machine = os.path.join(out, "machine.txt")
    if os.path.exists(machine):
        lines.append("```")
        lines.extend(l.rstrip("\n") for l in open(machine) if not l.startswith("dlprof_backends"))
        lines.append("```\n")
    lines.append("## Whole process\n")
    whole_process(out, lines)
    lines.append("## Data-loading case\n")
    pipeline(out, lines)
    lines.append("## Micro\n")
    micro(out, lines)
    python_txt = os.path.join(out, "python.txt")
    if os.path.exists(python_txt):
        lines.append("## Python training run (bench/python_overhead.sh)\n")
        lines.append("```")
        lines.extend(l.rstrip("\n") for l in open(python_txt))
        lines.append("```\n")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
